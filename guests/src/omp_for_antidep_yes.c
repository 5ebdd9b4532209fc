/* omp_for_antidep_yes: a parallel for whose iterations read the next element, which the other
 * thread's half of the iteration space writes (loop-carried anti-dependence).
 * Race: yes, the read of a[i + 1] against the write of a[i]. */
#include <stdio.h>

#define N 64
static int a[N + 1];

int main(void)
{
    for (int i = 0; i <= N; i++)
        a[i] = i;
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < N; i++)
        a[i] = a[i + 1] + 1; /* RACE: a[i] = a[i + 1] */
    printf("%d\n", a[0]);
    return 0;
}
