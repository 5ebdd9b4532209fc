/* pr_server_forever_fixed: FIXED twin of pr_server_forever.c (the same program, built with FIXED=1):
 * the set thread persists each record before it signals, so the journal is derived only from
 * durable values.
 * Usage: as pr_server_forever. */
#define FIXED 1
#include "pr_server_forever.c"
