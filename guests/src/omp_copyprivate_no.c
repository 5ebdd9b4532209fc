/* omp_copyprivate_no: one thread reads a value in a single construct and copyprivate hands it
 * to every thread's private copy.  Race: no. */
#include <omp.h>
#include <stdio.h>

static int out[2];

int main(void)
{
#pragma omp parallel num_threads(2)
    {
        int v;
#pragma omp single copyprivate(v)
        v = 40 + 2;
        out[omp_get_thread_num()] = v;
    }
    printf("%d %d\n", out[0], out[1]);
    return 0;
}
