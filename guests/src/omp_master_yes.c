/* omp_master_yes: the master thread writes a value that the other threads read with no
 * barrier (master has none).  Race: yes. */
#include <omp.h>
#include <stdio.h>

static int init;
static int got[2];

int main(void)
{
#pragma omp parallel num_threads(2)
    {
#pragma omp master
        init = 7; /* RACE: master writes */
        got[omp_get_thread_num()] = init; /* RACE: others read */
    }
    printf("%d %d\n", got[0], got[1]);
    return 0;
}
