/* hs_macro_release_fixed: FIXED twin of hs_macro_release.c (the helper persists its flag at
 * once); the same source, built with FIXED. */
#define FIXED 1
#include "hs_macro_release.c"
