/* pr_fastfair_fixed: FIXED twin of pr_fastfair.c (the same program, built with FIXED=1).  An
 * insert moves right through a sibling link only under the leaf's lock, and the split persists
 * the link before it unlocks, so no insert reaches a new leaf through a link that is not durable.
 * Lock-free searches still read the link (they store nothing to PM).
 * Usage: as pr_fastfair. */
#define FIXED 1
#include "pr_fastfair.c"
