/* pi_pm_mutex_fixed: FIXED twin of pi_pm_mutex.c (the value is persisted before the mutex
 * is unlocked); the same source, built with FIXED. */
#define FIXED 1
#include "pi_pm_mutex.c"
