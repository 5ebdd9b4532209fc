/* omp_threadprivate_no: a threadprivate counter, initialised from the master's copy with
 * copyin, updated by each thread on its own copy.  Race: no. */
#include <omp.h>
#include <stdio.h>

static int counter = 5;
#pragma omp threadprivate(counter)
static int result[2];

int main(void)
{
    counter = 10;
#pragma omp parallel num_threads(2) copyin(counter)
    {
        for (int i = 0; i < 4; i++)
            counter += i;
        result[omp_get_thread_num()] = counter;
    }
    printf("%d %d\n", result[0], result[1]);
    return 0;
}
