/* libtls_lib_a.so: a library that tls_dlopen.dyn loads with dlopen, with a thread-local variable
 * of its own (general-dynamic: each thread's copy is allocated at its first use). Built with
 * -DLIB_B as libtls_lib_b.so, whose variable has another name, so gdb tells them apart. */
#ifdef LIB_B
#define VAR lib_b_value
#define SET lib_b_set
#define GET lib_b_get
#else
#define VAR lib_a_value
#define SET lib_a_set
#define GET lib_a_get
#endif

__thread int VAR = 7;

void SET(int v)
{
    VAR = v;
}

int GET(void)
{
    return VAR;
}
