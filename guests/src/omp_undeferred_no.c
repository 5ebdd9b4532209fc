/* omp_undeferred_no: tasks with if(0) run before their creator continues, so the creator
 * reads their results without a taskwait.  Race: no. */
#include <stdio.h>

static int r[4], total;

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
        for (int i = 0; i < 4; i++) {
#pragma omp task if (0) firstprivate(i)
            r[i] = i * i;
            total += r[i];
        }
    }
    printf("%d\n", total);
    return 0;
}
