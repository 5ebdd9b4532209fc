/* pmdk_txlist_fixed: FIXED twin of pmdk_txlist.c (insert adds the count to its transaction); the
 * same source, built with FIXED. */
#define FIXED 1
#include "pmdk_txlist.c"
