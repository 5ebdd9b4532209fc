/* stack_overflow: unbounded recursion with no handler: SIGSEGV (139) at the recursion. */
#pragma GCC diagnostic ignored "-Winfinite-recursion"
#include <stdio.h>

static int recurse(int n)
{
    volatile char pad[1024];
    pad[0] = (char)n; /* OVERFLOW */
    return recurse(n + 1) + pad[0];
}

int main(void)
{
    puts("recursing");
    fflush(stdout);
    return recurse(0);
}
