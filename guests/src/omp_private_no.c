/* omp_private_no: the same loop with the temporary private.  Race: no. */
#include <stdio.h>

#define N 64
static int a[N], b[N];

int main(void)
{
    int tmp = 0;
    for (int i = 0; i < N; i++)
        b[i] = i;
#pragma omp parallel for num_threads(2) private(tmp)
    for (int i = 0; i < N; i++) {
        tmp = b[i] + 1;
        a[i] = tmp * tmp;
    }
    printf("%d\n", a[N - 1]);
    return 0;
}
