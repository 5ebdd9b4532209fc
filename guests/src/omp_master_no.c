/* omp_master_no: the master thread's write followed by an explicit barrier.  Race: no. */
#include <omp.h>
#include <stdio.h>

static int init;
static int got[2];

int main(void)
{
#pragma omp parallel num_threads(2)
    {
#pragma omp master
        init = 7;
#pragma omp barrier
        got[omp_get_thread_num()] = init;
    }
    printf("%d %d\n", got[0], got[1]);
    return 0;
}
