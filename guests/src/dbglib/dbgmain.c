/* The program of the debug-file tests: calls into libdbgdemo.so, which stores through NULL. */

#include <stdio.h>

void dbg_fault(int *p);

int main(void)
{
    puts("calling the library");
    fflush(stdout);
    dbg_fault(NULL); /* MAIN CALL */
    puts("not reached");
    return 0;
}
