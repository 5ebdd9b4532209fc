/* omp_dynamic_no: a dynamic-schedule loop writing only its own elements, then a second
 * guided loop reading them after the first loop's barrier.  Race: no. */
#include <stdio.h>

#define N 32
static int a[N], b[N];

int main(void)
{
#pragma omp parallel num_threads(2)
    {
#pragma omp for schedule(dynamic, 2)
        for (int i = 0; i < N; i++)
            a[i] = i * i;
#pragma omp for schedule(guided)
        for (int i = 0; i < N; i++)
            b[i] = a[N - 1 - i];
    }
    printf("%d\n", b[0]);
    return 0;
}
