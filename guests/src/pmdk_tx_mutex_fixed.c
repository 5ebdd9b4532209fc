/* pmdk_tx_mutex_fixed: FIXED twin of pmdk_tx_mutex.c (the total undo-logged too). */
#define FIXED 1
#include "pmdk_tx_mutex.c"
