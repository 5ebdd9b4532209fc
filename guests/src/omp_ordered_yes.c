/* omp_ordered_yes: a loop whose running total is updated in an ordered region by one
 * statement and outside it by another.  Race: yes. */
#include <stdio.h>

#define N 32
static long total;

int main(void)
{
#pragma omp parallel for ordered schedule(static, 1) num_threads(2)
    for (int i = 0; i < N; i++) {
#pragma omp ordered
        total += i; /* RACE: inside ordered */
        total -= 1; /* RACE: outside ordered */
    }
    printf("%ld\n", total);
    return 0;
}
