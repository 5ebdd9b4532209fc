/* pm_spinlock_fixed: pm_spinlock with recovery resetting the lock word on open (FIX marker in
 * pm_spinlock.c); every crash image recovers. */
#define RESET_LOCK_ON_OPEN 1
#include "pm_spinlock.c"
