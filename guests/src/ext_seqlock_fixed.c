/* ext_seqlock_fixed: FIXED twin of ext_seqlock.c (the record persisted while the sequence is
 * odd); the same source, built with FIXED. */
#define FIXED 1
#include "ext_seqlock.c"
