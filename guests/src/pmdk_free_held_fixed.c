/* pmdk_free_held_fixed: pmdk_free_held with the value persisted before the reader goes (no
 * race); see pmdk_free_held.c. */
#define FIXED 1
#include "pmdk_free_held.c"
