/* ext_once_c11_fixed: FIXED twin of ext_once_c11.c (C11 call_once; the geometry persisted
 * inside the once routine); the same source, built with USE_C11 and FIXED. */
#define USE_C11 1
#define FIXED 1
#include "ext_once_init.c"
