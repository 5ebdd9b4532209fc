/* pmdk_memcpy_batch_fixed: FIXED twin of pmdk_memcpy_batch.c (every batch drained). */
#define FIXED 1
#include "pmdk_memcpy_batch.c"
