/* privileged: executes `hlt`, which user mode may not: SIGSEGV (139) at the line marked
 * PRIVILEGED, natively and under ferrite (whose guest really runs at ring 0). */
#include <stdio.h>

__attribute__((noinline)) static void halt(void)
{
    __asm__ volatile("hlt"); /* PRIVILEGED */
}

int main(void)
{
    puts("about to halt");
    fflush(stdout);
    halt();
    puts("not reached");
    return 0;
}
