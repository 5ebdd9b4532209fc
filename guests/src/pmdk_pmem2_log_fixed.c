/* pmdk_pmem2_log_fixed: FIXED twin of pmdk_pmem2_log.c (each record flushed before the drain);
 * the same source, built with FIXED. */
#define FIXED 1
#include "pmdk_pmem2_log.c"
