/* pi_dram_caslock_fixed: FIXED twin of pi_dram_caslock.c (the value is persisted before the
 * bucket's DRAM spinlock is released); the same source, built with FIXED. */
#define FIXED 1
#include "pi_dram_caslock.c"
