/* omp_taskgroup_yes: a task created after the taskgroup ends races with a task of the group's
 * outside: the child task of the group's task is not in the group's wait when it is created
 * outside.  Here the read after the group is of a variable a task outside the group writes.
 * Race: yes. */
#include <stdio.h>

static int inside, outside, sum;

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
#pragma omp task
        outside = 5; /* RACE: task outside the group */
#pragma omp taskgroup
        {
#pragma omp task
            inside = 3;
        }
        sum = inside + outside; /* RACE: read after the group, not after the other task */
    }
    printf("%d\n", sum);
    return 0;
}
