/* pi_inline_caslock_fixed: FIXED twin of pi_inline_caslock.c (the value is persisted before the
 * bucket is unlocked); the same source, built with FIXED. */
#define FIXED 1
#include "pi_inline_caslock.c"
