/* pmdk_fork_pool: ext_fork_pool.c built with PERSIST_PMEM (see there). */
#define PERSIST_PMEM 1
#include "ext_fork_pool.c"
