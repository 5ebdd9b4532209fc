/* ext_pm_rwlock_fixed: FIXED twin of ext_pm_rwlock.c (recovery resets the lock word). */
#define FIXED 1
#include "ext_pm_rwlock.c"
