/* ext_fork_pool_fixed: ext_fork_pool.c built with FIXED (see there). */
#define FIXED 1
#include "ext_fork_pool.c"
