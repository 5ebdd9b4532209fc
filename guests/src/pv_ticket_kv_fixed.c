/* pv_ticket_kv_fixed: FIXED twin of pv_ticket_kv.c (the value is persisted before the
 * release); the same source, built with FIXED. */
#define FIXED 1
#include "pv_ticket_kv.c"
