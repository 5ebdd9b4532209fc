// ext_spin_hash_fixed: FIXED twin of ext_spin_hash.cpp (each slot persisted under its bucket's
// lock); the same source, built with FIXED.
#define FIXED 1
#include "ext_spin_hash.cpp"
