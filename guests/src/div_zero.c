/* div_zero: integer division by zero.  The divisor is argc - 1 (0 when run
 * without arguments) so the compiler cannot fold it.  Natively: SIGFPE (exit
 * status 136 under a shell).  With one argument it divides by 1 and exits 0. */
#include <stdio.h>

int main(int argc, char **argv)
{
    volatile int dividend = 1000;
    int divisor = argc - 1;
    printf("dividing by %d\n", divisor);
    fflush(stdout);
    int q = dividend / divisor; /* DIVZERO */
    printf("quotient %d\n", q);
    return 0;
}
