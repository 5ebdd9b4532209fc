/* pr_ntroot_fixed: FIXED twin of pr_ntroot.c (the same program, built with FIXED=1).  The resize
 * creates the new table's buckets locked and unlocks them only after the helper that swaps the
 * root has fenced it, so a put that loads the root between its `movnti` and its `mfence` waits at
 * the bucket lock and inserts only once the table is reachable after a crash too.
 * Usage: as pr_ntroot. */
#define FIXED 1
#include "pr_ntroot.c"
