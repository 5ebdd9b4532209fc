/* pmdk_free_reuse_fixed: pmdk_free_reuse with the new life's value persisted before the unlock
 * (no race in any life of the node); see pmdk_free_reuse.c. */
#define FIXED 1
#include "pmdk_free_reuse.c"
