/* pmdk_pmem2_batch_fixed: FIXED twin of pmdk_pmem2_batch.c (every batch drained). */
#define USE_PMEM2 1
#define FIXED 1
#include "pmdk_memcpy_batch.c"
