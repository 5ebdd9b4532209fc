// pi_cxx_atomic_fixed: FIXED twin of pi_cxx_atomic.cpp (persisted before the unlock); the same
// source, built with FIXED.
#define FIXED 1
#include "pi_cxx_atomic.cpp"
