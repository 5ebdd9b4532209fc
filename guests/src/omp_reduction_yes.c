/* omp_reduction_yes: a sum accumulated into a shared variable without a reduction clause.
 * Race: yes, the read-modify-write of sum. */
#include <stdio.h>

#define N 64
static int a[N];

int main(void)
{
    long sum = 0;
    for (int i = 0; i < N; i++)
        a[i] = i;
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < N; i++)
        sum += a[i]; /* RACE: sum += a[i] */
    printf("%ld\n", sum);
    return 0;
}
