/* omp_taskwait_depend_yes: `taskwait depend(in: total)` waits only for the task that
 * produces `total`, not for a task without dependences: reading that task's variable after
 * it is a race.
 * Race: yes. */
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
        other = 7; /* RACE: written by a task the taskwait does not wait for */
#pragma omp taskwait depend(in: total)
        printf("total %d other %d\n", total, other); /* RACE: read after taskwait depend(in: total) */
#pragma omp taskwait
    }
    return 0;
}
