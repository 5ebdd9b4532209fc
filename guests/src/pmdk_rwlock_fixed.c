/* pmdk_rwlock_fixed: FIXED twin of pmdk_rwlock.c (the record persisted before the unlock); the same source,
 * built with FIXED. */
#define FIXED 1
#include "pmdk_rwlock.c"
