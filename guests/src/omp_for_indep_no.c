/* omp_for_indep_no: a parallel for whose iterations touch only their own elements; the result
 * is read after the region's join.  Race: no. */
#include <stdio.h>

#define N 64
static int a[N], b[N];

int main(void)
{
    for (int i = 0; i < N; i++)
        b[i] = i;
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < N; i++)
        a[i] = b[i] * 2;
    long s = 0;
    for (int i = 0; i < N; i++)
        s += a[i];
    printf("%ld\n", s);
    return 0;
}
