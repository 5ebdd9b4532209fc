/* pm_xchg_index_fixed: FIXED twin of pm_xchg_index.c (the entry counter is persisted before the
 * statistics mutex's unlock); the same source, built with FIXED. */
#define FIXED 1
#include "pm_xchg_index.c"
