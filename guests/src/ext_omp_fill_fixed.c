/* ext_omp_fill_fixed: FIXED twin of ext_omp_fill.c (the loop keeps its implicit barrier). */
#define FIXED 1
#include "ext_omp_fill.c"
