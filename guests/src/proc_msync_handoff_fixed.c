/* proc_msync_handoff_fixed: FIXED twin of proc_msync_handoff.c (the whole pool persisted before
 * the child exits). */
#define FIXED 1
#include "proc_msync_handoff.c"
