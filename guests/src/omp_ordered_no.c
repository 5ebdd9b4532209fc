/* omp_ordered_no: a prefix sum computed in an ordered region, iteration by iteration.
 * Race: no. */
#include <stdio.h>

#define N 32
static long prefix[N + 1];

int main(void)
{
#pragma omp parallel for ordered schedule(static, 1) num_threads(2)
    for (int i = 0; i < N; i++) {
        long v = (long)i * i;
#pragma omp ordered
        prefix[i + 1] = prefix[i] + v;
    }
    printf("%ld\n", prefix[N]);
    return 0;
}
