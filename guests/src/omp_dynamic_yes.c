/* omp_dynamic_yes: the anti-dependence of a parallel for handed out in chunks of one with a
 * dynamic schedule.  Race: yes. */
#include <stdio.h>

#define N 32
static int a[N + 1];

int main(void)
{
    for (int i = 0; i <= N; i++)
        a[i] = i;
#pragma omp parallel for schedule(dynamic, 1) num_threads(2)
    for (int i = 0; i < N; i++)
        a[i] = a[i + 1] * 2; /* RACE: a[i] from a[i + 1] */
    printf("%d\n", a[0]);
    return 0;
}
