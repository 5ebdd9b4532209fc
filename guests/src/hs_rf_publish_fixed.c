/* hs_rf_publish_fixed: FIXED twin of hs_rf_publish.c (A persists its node before publishing it);
 * the same source, built with FIXED. */
#define FIXED 1
#include "hs_rf_publish.c"
