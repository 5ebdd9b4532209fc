/* omp_taskloop_no: a taskloop whose iterations write their own elements; the creator reads
 * them after the taskloop's implicit taskgroup.  Race: no. */
#include <stdio.h>

#define N 32
static int a[N];
static long sum;

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
#pragma omp taskloop grainsize(4)
        for (int i = 0; i < N; i++)
            a[i] = i * 3;
        for (int i = 0; i < N; i++)
            sum += a[i];
    }
    printf("%ld\n", sum);
    return 0;
}
