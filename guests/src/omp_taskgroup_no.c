/* omp_taskgroup_no: a taskgroup waits for its tasks and their descendants before the creator
 * reads what they wrote.  Race: no. */
#include <stdio.h>

static int a, b, sum;

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
#pragma omp taskgroup
        {
#pragma omp task
            {
                a = 3;
#pragma omp task
                b = 4;
            }
        }
        sum = a + b;
    }
    printf("%d\n", sum);
    return 0;
}
