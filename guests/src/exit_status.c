/* exit_status: exits via exit() with the status given in argv[1] (default 7). */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int status = argc > 1 ? atoi(argv[1]) : 7;
    printf("exiting with status %d\n", status);
    exit(status);
}
