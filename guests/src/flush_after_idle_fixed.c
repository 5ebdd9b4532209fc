/* flush_after_idle_fixed: FIXED twin of flush_after_idle.c (the second record persisted with the same
 * routine); the same source, built with FIXED. */
#define FIXED 1
#include "flush_after_idle.c"
