/* ext_nt_append_fixed: FIXED twin of ext_nt_append.c (one _mm_sfence per record); the same
 * source, built with FIXED. */
#define FIXED 1
#include "ext_nt_append.c"
