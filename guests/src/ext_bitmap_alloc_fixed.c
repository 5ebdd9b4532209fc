/* ext_bitmap_alloc_fixed: FIXED twin of ext_bitmap_alloc.c (the block persisted before its bit). */
#define FIXED 1
#include "ext_bitmap_alloc.c"
