/* hs_irh_nolock_fixed: FIXED twin of hs_irh_nolock.c (main joins the writer before reading);
 * the same source, built with FIXED. */
#define FIXED 1
#include "hs_irh_nolock.c"
