/* pi_outparam_lock_fixed: FIXED twin of pi_outparam_lock.c (the value is persisted before
 * the node is unlocked); the same source, built with FIXED. */
#define FIXED 1
#include "pi_outparam_lock.c"
