/* ext_once_c11: ext_once_init.c with C11 call_once (<threads.h>) instead of pthread_once, built
 * -O0 -g and dynamic; the same source, built with USE_C11. */
#define USE_C11 1
#include "ext_once_init.c"
