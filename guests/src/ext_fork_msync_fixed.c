/* ext_fork_msync_fixed: ext_fork_pool.c built with PERSIST_MSYNC FIXED (see there). */
#define PERSIST_MSYNC 1
#define FIXED 1
#include "ext_fork_pool.c"
