/* pmdk_atomic_api_fixed: FIXED twin of pmdk_atomic_api.c (the stamp persisted). */
#define FIXED 1
#include "pmdk_atomic_api.c"
