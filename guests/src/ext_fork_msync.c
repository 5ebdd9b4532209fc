/* ext_fork_msync: ext_fork_pool.c built with PERSIST_MSYNC (see there). */
#define PERSIST_MSYNC 1
#include "ext_fork_pool.c"
