/* ext_msqueue_fixed: FIXED twin of ext_msqueue.c (the link persisted before the tail swing). */
#define FIXED 1
#include "ext_msqueue.c"
