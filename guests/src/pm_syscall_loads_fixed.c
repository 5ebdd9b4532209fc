#define FIXED
#include "pm_syscall_loads.c"
