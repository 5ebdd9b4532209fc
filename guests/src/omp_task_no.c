/* omp_task_no: two tasks that update different variables, and a taskwait before the creator
 * combines them.  Race: no. */
#include <stdio.h>

static int x, y, z;

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
#pragma omp task
        x += 1;
#pragma omp task
        y += 2;
#pragma omp taskwait
        z = x + y;
    }
    printf("%d\n", z);
    return 0;
}
