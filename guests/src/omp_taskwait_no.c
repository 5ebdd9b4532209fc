/* omp_taskwait_no: a recursive sum whose subtasks are awaited before their results are
 * combined.  Race: no. */
#include <stdio.h>

static long fib(int n)
{
    long a, b;
    if (n < 2)
        return n;
#pragma omp task shared(a)
    a = fib(n - 1);
#pragma omp task shared(b)
    b = fib(n - 2);
#pragma omp taskwait
    return a + b;
}

int main(void)
{
    long r = 0;
#pragma omp parallel num_threads(2)
#pragma omp single
    r = fib(8);
    printf("%ld\n", r);
    return 0;
}
