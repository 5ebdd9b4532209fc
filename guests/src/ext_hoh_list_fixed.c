/* ext_hoh_list_fixed: FIXED twin of ext_hoh_list.c (the link persisted before the predecessor is unlocked). */
#define FIXED 1
#include "ext_hoh_list.c"
