/* hs_rmw_counter_fixed: FIXED twin of hs_rmw_counter.c (main reads the counter after joining
 * the workers); the same source, built with FIXED. */
#define FIXED 1
#include "hs_rmw_counter.c"
