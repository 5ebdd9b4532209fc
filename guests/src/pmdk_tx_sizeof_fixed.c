/* pmdk_tx_sizeof_fixed: FIXED twin of pmdk_tx_sizeof.c (the destination's whole account added);
 * the same source, built with FIXED. */
#define FIXED 1
#include "pmdk_tx_sizeof.c"
