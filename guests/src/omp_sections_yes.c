/* omp_sections_yes: two sections that both write one variable.  Race: yes. */
#include <stdio.h>

static int shared_v;

int main(void)
{
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
        shared_v = 1; /* RACE: first section */
#pragma omp section
        shared_v = 2; /* RACE: second section */
    }
    printf("%d\n", shared_v);
    return 0;
}
