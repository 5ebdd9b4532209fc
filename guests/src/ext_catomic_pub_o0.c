// ext_catomic_pub_o0: ext_catomic_pub.c built -O0 -g, as research artifacts are (the pointer
// to the atomic goes through a frame slot of each access).
#include "ext_catomic_pub.c"
