/* pm_service_race_fixed: FIXED twin of pm_service_race.c (the counter is persisted inside the
 * critical section, so a reader under the same mutex never sees it before it is durable); the
 * same source, built with FIXED. */
#define FIXED 1
#include "pm_service_race.c"
