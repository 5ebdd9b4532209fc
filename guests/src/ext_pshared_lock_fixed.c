/* ext_pshared_lock_fixed: FIXED twin of ext_pshared_lock.c (the collector takes the mutex). */
#define FIXED 1
#include "ext_pshared_lock.c"
