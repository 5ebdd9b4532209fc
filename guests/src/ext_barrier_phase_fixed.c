/* ext_barrier_phase_fixed: FIXED twin of ext_barrier_phase.c; the same source, built with FIXED. */
#define FIXED 1
#include "ext_barrier_phase.c"
