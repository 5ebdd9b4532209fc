/* pmdk_treiber_fixed: FIXED twin of pmdk_treiber.c (the node is persisted before the CAS that
 * publishes it); the same source, built with FIXED. */
#define FIXED 1
#include "pmdk_treiber.c"
