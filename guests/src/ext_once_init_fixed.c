/* ext_once_init_fixed: FIXED twin of ext_once_init.c (the geometry persisted inside the once
 * routine); the same source, built with FIXED. */
#define FIXED 1
#include "ext_once_init.c"
