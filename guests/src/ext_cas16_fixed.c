/* ext_cas16_fixed: FIXED twin of ext_cas16.c; the same source, built with FIXED. */
#define FIXED 1
#include "ext_cas16.c"
