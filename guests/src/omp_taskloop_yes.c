/* omp_taskloop_yes: a taskloop whose iterations accumulate into a shared variable.
 * Race: yes. */
#include <stdio.h>

#define N 32
static int a[N];
static long sum;

int main(void)
{
    for (int i = 0; i < N; i++)
        a[i] = i;
#pragma omp parallel num_threads(2)
#pragma omp single
#pragma omp taskloop grainsize(4)
    for (int i = 0; i < N; i++)
        sum += a[i]; /* RACE: sum += a[i] in every task */
    printf("%ld\n", sum);
    return 0;
}
