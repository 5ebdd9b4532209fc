/* omp_sections_alone_no: sections in a team of one thread run one after another on it. The
 * team is of one by an `if` clause that is false at run time, then by omp_set_num_threads(1):
 * both sections update the same variable, in order.
 * Race: no. */
#include <omp.h>
#include <stdio.h>

static int steps;

static void two_sections(int parallel)
{
#pragma omp parallel sections if (parallel)
    {
#pragma omp section
        steps += 1;
#pragma omp section
        steps += 2;
    }
}

int main(int argc, char **argv)
{
    (void)argv;
    two_sections(argc > 5);
    omp_set_num_threads(1);
#pragma omp parallel sections
    {
#pragma omp section
        steps *= 3;
#pragma omp section
        steps -= 1;
    }
    printf("%d\n", steps);
    return 0;
}
