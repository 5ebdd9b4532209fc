/* omp_depend_chain_yes: tasks over an array, each depending on its own element only, while
 * each reads its left neighbour too.  Race: yes. */
#include <stdio.h>

#define N 8
static int a[N];

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
        for (int i = 1; i < N; i++) {
#pragma omp task depend(inout : a[i]) firstprivate(i)
            a[i] = a[i - 1] + i; /* RACE: reads the neighbour another task writes */
        }
    }
    printf("%d\n", a[N - 1]);
    return 0;
}
