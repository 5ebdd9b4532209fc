/* omp_single_no: the same initialisation in a single construct with its implicit barrier.
 * Race: no. */
#include <omp.h>
#include <stdio.h>

static int value;
static int seen[2];

int main(void)
{
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        value = 42;
        seen[omp_get_thread_num()] = value;
    }
    printf("%d %d\n", seen[0], seen[1]);
    return 0;
}
