/* ext_tas_ring_fixed: FIXED twin of ext_tas_ring.c (slot and tail persisted before the spinlock
 * is released); the same source, built with FIXED. */
#define FIXED 1
#include "ext_tas_ring.c"
