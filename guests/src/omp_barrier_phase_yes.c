/* omp_barrier_phase_yes: a value published by one thread after the barrier and read by the
 * other in the same phase.  Race: yes. */
#include <omp.h>
#include <stdio.h>

static int phase_val, got;

int main(void)
{
#pragma omp parallel num_threads(2)
    {
#pragma omp barrier
        if (omp_get_thread_num() == 1)
            phase_val = 9; /* RACE: written after the barrier */
        else
            got = phase_val; /* RACE: read after the same barrier */
    }
    printf("%d %d\n", phase_val, got);
    return 0;
}
