// ext_builtin_pub: ext_catomic_pub.c publishing through a plain global with gcc's
// __atomic_store_n/__atomic_load_n builtins (BUILTIN).
#define BUILTIN 1
#include "ext_catomic_pub.c"
