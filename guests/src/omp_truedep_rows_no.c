/* omp_truedep_rows_no [N]: the race-free twin of omp_truedep_rows_yes: the same true dependence
 * over the first dimension, `b[i][j] = b[i - 1][j - 1]`, with the rows in order and each row's
 * columns shared among the threads (`omp for` inside one parallel region): the implicit barrier
 * at the end of each row's loop orders its writes before the next row's reads. Also the
 * memory-dense benchmark's race-free side (a barrier per row). Race: no. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 64;
    if (n < 2) {
        fprintf(stderr, "usage: omp_truedep_rows_no [N] (N >= 2)\n");
        return 2;
    }
    double *b = malloc(sizeof(double) * (size_t)n * (size_t)n);
    if (!b)
        return 1;
    int i, j;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            b[i * n + j] = 0.5 + i + j;
#pragma omp parallel private(i) num_threads(2)
    for (i = 1; i < n; i++) {
#pragma omp for
        for (j = 1; j < n; j++)
            b[i * n + j] = b[(i - 1) * n + j - 1];
    }
    printf("b[%d][%d]=%f\n", n / 2, n / 2, b[(n / 2) * n + n / 2]);
    free(b);
    return 0;
}
