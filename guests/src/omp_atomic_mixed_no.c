/* omp_atomic_mixed_no: a counter set plainly before a barrier and updated with `omp atomic`
 * by every thread after it: the plain write is ordered before each atomic update.
 * Race: no. */
#include <omp.h>
#include <stdio.h>

static int hits;

int main(void)
{
#pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() == 1)
            hits = 100;
#pragma omp barrier
        for (int i = 0; i < 8; i++) {
#pragma omp atomic
            hits++;
        }
    }
    printf("%d\n", hits);
    return 0;
}
