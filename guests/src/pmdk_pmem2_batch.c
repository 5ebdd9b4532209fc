/* pmdk_pmem2_batch: pmdk_memcpy_batch.c through libpmem2 (the last partial batch not drained). */
#define USE_PMEM2 1
#include "pmdk_memcpy_batch.c"
