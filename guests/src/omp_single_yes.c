/* omp_single_yes: one thread initialises a value in a single construct with nowait; the other
 * reads it without waiting.  Race: yes. */
#include <omp.h>
#include <stdio.h>

static int value;
static int seen[2];

int main(void)
{
#pragma omp parallel num_threads(2)
    {
#pragma omp single nowait
        value = 42; /* RACE: single nowait writes */
        seen[omp_get_thread_num()] = value; /* RACE: read without the barrier */
    }
    printf("%d %d\n", seen[0], seen[1]);
    return 0;
}
