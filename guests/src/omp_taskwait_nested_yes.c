/* omp_taskwait_nested_yes: taskwait waits for children only, not grandchildren: the creator
 * reads what a grandchild task writes.  Race: yes. */
#include <stdio.h>

static int deep, copy;

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
#pragma omp task
        {
#pragma omp task
            deep = 11; /* RACE: grandchild writes */
        }
#pragma omp taskwait
        copy = deep; /* RACE: the creator reads after a taskwait for its child only */
    }
    printf("%d\n", copy);
    return 0;
}
