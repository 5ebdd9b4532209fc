/* pr_clht_fixed: FIXED twin of pr_clht.c (the same program, built with FIXED=1).  The resize
 * creates the new table's buckets locked and unlocks them only after the swapped root is
 * durable, so a put that loads the root before its persist waits at the bucket lock and inserts
 * only once the table is reachable after a crash too.
 * Usage: as pr_clht. */
#define FIXED 1
#include "pr_clht.c"
