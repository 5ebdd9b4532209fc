/* omp_nested_yes: a nested parallel region whose inner threads all write one variable of the
 * outer thread's.  Race: yes. */
#include <omp.h>
#include <stdio.h>

static int inner_hits[2];

int main(void)
{
    omp_set_max_active_levels(2);
#pragma omp parallel num_threads(2)
    {
        int outer = omp_get_thread_num();
#pragma omp parallel num_threads(2)
        inner_hits[outer] += 1; /* RACE: inner threads update their outer thread's slot */
    }
    printf("%d %d\n", inner_hits[0], inner_hits[1]);
    return 0;
}
