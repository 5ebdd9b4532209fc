/* pmdk_tls_stage_fixed: FIXED twin of pmdk_tls_stage.c (pmem_persist of the record before the
 * count); the same source, built with FIXED. */
#define FIXED 1
#include "pmdk_tls_stage.c"
