/* pv_ledger_fixed: FIXED twin of pv_ledger.c; the same source, built with FIXED. */
#define FIXED 1
#include "pv_ledger.c"
