/* omp_barrier_no: the same two phases with the for-loop's implicit barrier between them, and
 * an explicit barrier between two more.  Race: no. */
#include <omp.h>
#include <stdio.h>

#define N 64
static int a[N], b[N], c[2];

int main(void)
{
#pragma omp parallel num_threads(2)
    {
#pragma omp for
        for (int i = 0; i < N; i++)
            a[i] = i;
#pragma omp for
        for (int i = 1; i < N - 1; i++)
            b[i] = a[N - 1 - i];
        int me = omp_get_thread_num();
        c[me] = b[me + 1];
#pragma omp barrier
        b[me] = c[1 - me];
    }
    printf("%d %d\n", b[0], b[1]);
    return 0;
}
