/* ext_cond_ring_fixed: FIXED twin of ext_cond_ring.c (the slot and the tail persisted under the
 * mutex, before the signal); the same source, built with FIXED. */
#define FIXED 1
#include "ext_cond_ring.c"
