/* pm_msync_unlock_fixed: FIXED twin of pm_msync_unlock.c (msync before the unlock). */
#define FIXED 1
#include "pm_msync_unlock.c"
