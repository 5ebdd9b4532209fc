/* omp_simd_yes: a simd loop with a loop-carried dependence: the race is between vector lanes
 * of one thread, which no detector of threads sees (a documented miss).  Race: yes. */
#include <stdio.h>

#define N 64
static int a[N + 8];

int main(void)
{
    for (int i = 0; i < N + 8; i++)
        a[i] = i;
#pragma omp simd
    for (int i = 0; i < N; i++)
        a[i + 1] = a[i] + 1; /* RACE: lanes read what other lanes write */
    printf("%d\n", a[N]);
    return 0;
}
