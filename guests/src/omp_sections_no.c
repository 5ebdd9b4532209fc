/* omp_sections_no: two sections writing different variables, read after the join.
 * Race: no. */
#include <stdio.h>

static int left, right;

int main(void)
{
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
        left = 1;
#pragma omp section
        right = 2;
    }
    printf("%d\n", left + right);
    return 0;
}
