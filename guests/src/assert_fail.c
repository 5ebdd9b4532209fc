/* assert_fail: prints a line, then an assert fails.  Natively: SIGABRT
 * (exit status 134 under a shell); glibc prints the assertion message to
 * stderr ("assert_fail: src/assert_fail.c:LINE: main: Assertion `x == 42' failed."). */
#include <assert.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    volatile int x = argc + 40; /* 41 when run without arguments */
    printf("checking x\n");
    fflush(stdout);
    assert(x == 42); /* ASSERT */
    printf("assert passed (x == 42)\n");
    return 0;
}
