/* omp_depend_chain_no: the same sweep with the neighbour in the depend clause: a chain.
 * Race: no. */
#include <stdio.h>

#define N 8
static int a[N];

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
        for (int i = 1; i < N; i++) {
#pragma omp task depend(in : a[i - 1]) depend(out : a[i]) firstprivate(i)
            a[i] = a[i - 1] + i;
        }
    }
    printf("%d\n", a[N - 1]);
    return 0;
}
