/* omp_barrier_yes: two phases of a stencil in one region, the first for-loop with nowait, so
 * the second phase reads neighbours the other thread may not have written.  Race: yes. */
#include <stdio.h>

#define N 64
static int a[N], b[N];

int main(void)
{
#pragma omp parallel num_threads(2)
    {
#pragma omp for nowait
        for (int i = 0; i < N; i++)
            a[i] = i; /* RACE: phase one writes */
#pragma omp for
        for (int i = 1; i < N - 1; i++)
            b[i] = a[N - 1 - i]; /* RACE: phase two reads another thread's part */
    }
    printf("%d\n", b[1]);
    return 0;
}
