/* null_deref: prints a line, flushes stdout, then stores through a NULL
 * pointer in poke().  Natively: SIGSEGV (exit status 139 under a shell). */
#include <stdio.h>

int *volatile target_ptr; /* zero-initialised; volatile so the compiler can't see it is NULL */

__attribute__((noinline)) void poke(int *p, int v)
{
    *p = v; /* FAULT */
}

int main(void)
{
    printf("about to dereference NULL\n");
    fflush(stdout);
    poke(target_ptr, 42);
    printf("survived (unexpected)\n");
    return 0;
}
