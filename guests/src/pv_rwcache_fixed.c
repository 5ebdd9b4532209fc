/* pv_rwcache_fixed: FIXED twin of pv_rwcache.c; the same source, built with FIXED. */
#define FIXED 1
#include "pv_rwcache.c"
