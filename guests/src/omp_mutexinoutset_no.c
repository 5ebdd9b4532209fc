/* omp_mutexinoutset_no: a producer (out) and a consumer (in) around two updaters with
 * depend(inout), all ordered by their dependences.  Race: no. */
#include <stdio.h>

static int acc, seen;

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
#pragma omp task depend(out : acc)
        acc = 1;
#pragma omp task depend(inout : acc)
        acc += 2;
#pragma omp task depend(inout : acc)
        acc += 3;
#pragma omp task depend(in : acc)
        seen = acc;
    }
    printf("%d %d\n", acc, seen);
    return 0;
}
