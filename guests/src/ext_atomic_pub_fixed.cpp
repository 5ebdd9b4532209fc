// ext_atomic_pub_fixed: FIXED twin of ext_atomic_pub.cpp; the same source, built with FIXED.
#define FIXED 1
#include "ext_atomic_pub.cpp"
