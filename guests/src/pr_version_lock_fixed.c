/* pr_version_lock_fixed: FIXED twin of pr_version_lock.c (the value persisted before the unlock);
 * the same source, built with FIXED. */
#define FIXED 1
#include "pr_version_lock.c"
