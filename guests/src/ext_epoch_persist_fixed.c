/* ext_epoch_persist_fixed: FIXED twin of ext_epoch_persist.c (the records fenced before the epoch header). */
#define FIXED 1
#include "ext_epoch_persist.c"
