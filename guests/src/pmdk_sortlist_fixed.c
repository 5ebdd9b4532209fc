/* pmdk_sortlist_fixed: FIXED twin of pmdk_sortlist.c; the same source, built with FIXED. */
#define FIXED 1
#include "pmdk_sortlist.c"
