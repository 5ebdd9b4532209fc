// ext_catomic_pub_o0_fixed: FIXED twin of ext_catomic_pub_o0.c, built -O0 -g.
#define FIXED 1
#include "ext_catomic_pub.c"
