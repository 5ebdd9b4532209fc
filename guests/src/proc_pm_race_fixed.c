/* proc_pm_race_fixed: FIXED twin of proc_pm_race.c (the value persisted before the fork); the
 * same source, built with FIXED. */
#define FIXED 1
#include "proc_pm_race.c"
