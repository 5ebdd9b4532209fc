/* omp_lastprivate_yes: the loop's "last value" kept in a shared variable instead of a
 * lastprivate one: every iteration writes it.  Race: yes. */
#include <stdio.h>

#define N 32
static int a[N];

int main(void)
{
    int last = 0;
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < N; i++) {
        a[i] = i;
        last = i; /* RACE: shared last written by every iteration */
    }
    printf("%d %d\n", last, a[N - 1]);
    return 0;
}
