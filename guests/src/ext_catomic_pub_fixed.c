// ext_catomic_pub_fixed: FIXED twin of ext_catomic_pub.c; the same source, built with FIXED.
#define FIXED 1
#include "ext_catomic_pub.c"
