/* omp_reduction_no: the same sum with reduction(+:sum); the result is read after the join.
 * Race: no. */
#include <stdio.h>

#define N 64
static int a[N];

int main(void)
{
    long sum = 0;
    double prod = 1;
    for (int i = 0; i < N; i++)
        a[i] = i;
#pragma omp parallel for num_threads(2) reduction(+ : sum) reduction(* : prod)
    for (int i = 0; i < N; i++) {
        sum += a[i];
        prod *= 1.0 + a[i] / 1000.0;
    }
    printf("%ld %f\n", sum, prod);
    return 0;
}
