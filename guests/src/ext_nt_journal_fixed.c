/* ext_nt_journal_fixed: FIXED twin of ext_nt_journal.c (an sfence between the streamed record
 * and the tail that commits it); the same source, built with FIXED. */
#define FIXED 1
#include "ext_nt_journal.c"
