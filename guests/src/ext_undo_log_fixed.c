/* ext_undo_log_fixed: FIXED twin of ext_undo_log.c (the log entries persisted before the count
 * that makes them valid); the same source, built with FIXED. */
#define FIXED 1
#include "ext_undo_log.c"
