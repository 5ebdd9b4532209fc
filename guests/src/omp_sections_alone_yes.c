/* omp_sections_alone_yes: the same sections in a team of two (omp_set_num_threads(2) after a
 * region of one): two threads may run them at once.
 * Race: yes. */
#include <omp.h>
#include <stdio.h>

static int steps;

int main(void)
{
    omp_set_num_threads(1);
#pragma omp parallel sections
    {
#pragma omp section
        steps += 1;
#pragma omp section
        steps += 2;
    }
    omp_set_num_threads(2);
#pragma omp parallel sections
    {
#pragma omp section
        steps *= 3; /* RACE: first section */
#pragma omp section
        steps -= 1; /* RACE: second section */
    }
    printf("%d\n", steps);
    return 0;
}
