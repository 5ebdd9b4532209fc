/* vd_helper_persist_fixed: FIXED twin of vd_helper_persist.c (the builder persists the whole
 * segment, the helper's half too, before the reader may read it); the same source, built with
 * FIXED. */
#define FIXED 1
#include "vd_helper_persist.c"
