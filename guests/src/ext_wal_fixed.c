/* ext_wal_fixed: FIXED twin of ext_wal.c (each entry persisted before it is committed); the same
 * source, built with FIXED. */
#define FIXED 1
#include "ext_wal.c"
