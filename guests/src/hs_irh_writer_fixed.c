/* hs_irh_writer_fixed: FIXED twin of hs_irh_writer.c (persisted before the unlock); the same
 * source, built with FIXED. */
#define FIXED 1
#include "hs_irh_writer.c"
