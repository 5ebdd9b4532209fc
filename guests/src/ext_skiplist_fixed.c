/* ext_skiplist_fixed: FIXED twin of ext_skiplist.c (level 0 persisted before the upper levels). */
#define FIXED 1
#include "ext_skiplist.c"
