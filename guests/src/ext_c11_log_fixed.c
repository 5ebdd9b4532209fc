/* ext_c11_log_fixed: FIXED twin of ext_c11_log.c (the record persisted before its commit). */
#define FIXED 1
#include "ext_c11_log.c"
