/* omp_depend_no: a producer task (depend out), two consumers (depend in) and a final writer
 * (depend inout) chained by their dependences.  Race: no. */
#include <stdio.h>

static int v, r1, r2, done;

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
#pragma omp task depend(out : v)
        v = 5;
#pragma omp task depend(in : v)
        r1 = v + 1;
#pragma omp task depend(in : v)
        r2 = v + 2;
#pragma omp task depend(inout : v)
        v = v * 2;
#pragma omp taskwait
        done = v + r1 + r2;
    }
    printf("%d\n", done);
    return 0;
}
