// ext_builtin_pub_fixed: FIXED twin of ext_builtin_pub.c.
#define BUILTIN 1
#define FIXED 1
#include "ext_catomic_pub.c"
