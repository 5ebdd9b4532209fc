/* ext_shadow_cow_fixed: FIXED twin of ext_shadow_cow.c (the new node persisted before the root
 * swing); the same source, built with FIXED. */
#define FIXED 1
#include "ext_shadow_cow.c"
