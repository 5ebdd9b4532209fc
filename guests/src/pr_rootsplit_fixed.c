/* pr_rootsplit_fixed: FIXED twin of pr_rootsplit.c (the same program, built with FIXED=1).  A
 * root split keeps both leaves of the new root locked until the swapped root is durable, so a
 * descent that loads the root before its persist inserts only once the root survives a crash.
 * Usage: as pr_rootsplit. */
#define FIXED 1
#include "pr_rootsplit.c"
