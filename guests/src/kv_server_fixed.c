/* kv_server_fixed: FIXED twin of kv_server.c (`set` persists the bucket before unlocking it, so no
 * `get` can load an index a crash would lose); the same source, built with FIXED. */
#define FIXED 1
#include "kv_server.c"
