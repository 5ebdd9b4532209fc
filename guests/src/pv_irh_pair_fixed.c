/* pv_irh_pair_fixed: FIXED twin of pv_irh_pair.c; the same source, built with FIXED. */
#define FIXED 1
#include "pv_irh_pair.c"
