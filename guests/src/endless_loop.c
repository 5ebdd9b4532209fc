/* endless_loop: prints a line, then spins forever.  Used to test
 * instruction-budget hang detection; never terminates natively. */
#include <stdio.h>

volatile unsigned long counter;

int main(void)
{
    printf("spinning forever\n");
    fflush(stdout);
    for (;;) counter++; /* SPIN */
    return 0;
}
