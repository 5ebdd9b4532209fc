/* ext_thread_ctr_fixed: FIXED twin of ext_thread_ctr.c (every worker flushes its counter). */
#define FIXED 1
#include "ext_thread_ctr.c"
