// ext_cv_ring_fixed: FIXED twin of ext_cv_ring.cpp; the same source, built with FIXED.
#define FIXED 1
#include "ext_cv_ring.cpp"
