/* omp_taskwait_depend_no: `taskwait depend(in: total)` (OpenMP 5.0, GOMP_taskwait_depend)
 * waits for the sibling task that produces `total`; the creator reads it afterwards, while a
 * second, unrelated task (no dependence) may still run and touches only its own variable.
 * Race: no. */
#include <omp.h>
#include <stdio.h>

int main(void)
{
    int total = 0, other = 0;
#pragma omp parallel num_threads(2)
#pragma omp single
    {
#pragma omp task depend(out: total) shared(total)
        for (int i = 1; i <= 16; i++)
            total += i;
#pragma omp task shared(other)
        other = 7;
#pragma omp taskwait depend(in: total)
        printf("total %d\n", total);
#pragma omp taskwait
        printf("other %d\n", other);
    }
    return 0;
}
