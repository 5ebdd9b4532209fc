/* omp_lastprivate_no: firstprivate and lastprivate copies: each thread works on its own copy,
 * the last iteration's value is copied back before the join.  Race: no. */
#include <stdio.h>

#define N 32
static int a[N];

int main(void)
{
    int base = 3, last = 0;
#pragma omp parallel for num_threads(2) firstprivate(base) lastprivate(last)
    for (int i = 0; i < N; i++) {
        base += 1;
        last = i + base;
        a[i] = last;
    }
    printf("%d %d\n", last, a[N - 1]);
    return 0;
}
