/* omp_nowait_no: two loops with the same static schedule and bounds, the first with nowait:
 * each thread reads in the second only the elements it wrote in the first.  Race: no. */
#include <stdio.h>

#define N 64
static int a[N], b[N];

int main(void)
{
#pragma omp parallel num_threads(2)
    {
#pragma omp for schedule(static) nowait
        for (int i = 0; i < N; i++)
            a[i] = i + 1;
#pragma omp for schedule(static)
        for (int i = 0; i < N; i++)
            b[i] = a[i] * 2;
    }
    printf("%d\n", b[N - 1]);
    return 0;
}
