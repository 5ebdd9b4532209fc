/* omp_task_onethread_no: omp_task_onethread_yes with a taskwait between the two tasks, which
 * orders them. Race: no. */
#include <stdio.h>

static int x;

int main(void)
{
#pragma omp parallel num_threads(1)
#pragma omp single
    {
#pragma omp task
        x += 1;
#pragma omp taskwait
#pragma omp task
        x += 2;
    }
    printf("%d\n", x);
    return 0;
}
