/* ext_rwlock_hits_fixed: FIXED twin of ext_rwlock_hits.c (hit counts bumped under the write
 * lock); the same source, built with FIXED. */
#define FIXED 1
#include "ext_rwlock_hits.c"
