/* omp_critical_yes: a counter updated inside a critical section by the loop and outside one
 * by a second update in the same region.  Race: yes, the unprotected update against the
 * protected one. */
#include <stdio.h>

static int count;

int main(void)
{
#pragma omp parallel num_threads(2)
    {
#pragma omp critical
        count += 1; /* RACE: update inside critical */
        count += 2; /* RACE: update outside critical */
    }
    printf("%d\n", count);
    return 0;
}
