// ext_shared_mutex_fixed: FIXED twin of ext_shared_mutex.cpp (each slot persisted inside the
// unique_lock's scope); the same source, built with FIXED.
#define FIXED 1
#include "ext_shared_mutex.cpp"
