/* omp_task_firstprivate_no: tasks created in a loop, each writing its own element with its
 * firstprivate index; the creator reads them after taskwait.  Race: no. */
#include <stdio.h>

#define N 8
static int a[N];

int main(void)
{
    long s = 0;
#pragma omp parallel num_threads(2)
#pragma omp single
    {
        for (int i = 0; i < N; i++) {
#pragma omp task firstprivate(i)
            a[i] = i + 1;
        }
#pragma omp taskwait
        for (int i = 0; i < N; i++)
            s += a[i];
    }
    printf("%ld\n", s);
    return 0;
}
