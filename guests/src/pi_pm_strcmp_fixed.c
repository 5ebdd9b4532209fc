/* pi_pm_strcmp_fixed: FIXED twin of pi_pm_strcmp.c (the value is persisted before the
 * record is unlocked); the same source, built with FIXED. */
#define FIXED 1
#include "pi_pm_strcmp.c"
