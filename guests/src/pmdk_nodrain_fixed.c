/* pmdk_nodrain_fixed: FIXED twin of pmdk_nodrain.c; the same source, built with FIXED. */
#define FIXED 1
#include "pmdk_nodrain.c"
