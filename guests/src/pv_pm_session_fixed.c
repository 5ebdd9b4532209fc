/* pv_pm_session_fixed: FIXED twin of pv_pm_session.c; the same source, built with FIXED. */
#define FIXED 1
#include "pv_pm_session.c"
