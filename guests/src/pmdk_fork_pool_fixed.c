/* pmdk_fork_pool_fixed: ext_fork_pool.c built with PERSIST_PMEM FIXED (see there). */
#define PERSIST_PMEM 1
#define FIXED 1
#include "ext_fork_pool.c"
