/* omp_nested_no: a nested parallel region whose inner threads each write their own slot;
 * the outer thread reads them after the inner join.  Race: no. */
#include <omp.h>
#include <stdio.h>

static int slot[2][2], total[2];

int main(void)
{
    omp_set_max_active_levels(2);
#pragma omp parallel num_threads(2)
    {
        int outer = omp_get_thread_num();
#pragma omp parallel num_threads(2)
        slot[outer][omp_get_thread_num()] = outer + 1;
        total[outer] = slot[outer][0] + slot[outer][1];
    }
    printf("%d %d\n", total[0], total[1]);
    return 0;
}
