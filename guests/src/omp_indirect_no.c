/* omp_indirect_no: the same update through an index array that is a permutation.
 * Race: no. */
#include <stdio.h>

#define N 16
static int idx[N];
static double x[N];

int main(void)
{
    for (int i = 0; i < N; i++)
        idx[i] = (i * 5) % N;
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < N; i++)
        x[idx[i]] += 1.0;
    printf("%f\n", x[0]);
    return 0;
}
