/* omp_truedep_rows_yes [N]: DataRaceBench's shape of a true dependence over the first dimension
 * of a 2-D array: `b[i][j] = b[i - 1][j - 1]` with the outer loop (the rows) shared among the
 * threads, so a thread reads the row the other thread writes at the edge of their blocks (and
 * everywhere with the default N once iterations are dealt out). Doubles, -O0: every element is
 * a load and a store through memory, so it is also a benchmark of a race detector's cost on
 * memory-dense code (docs/performance.md: `omp_truedep_rows_yes 1000`, 10^6 elements).
 * Race: yes. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 64;
    if (n < 2) {
        fprintf(stderr, "usage: omp_truedep_rows_yes [N] (N >= 2)\n");
        return 2;
    }
    double *b = malloc(sizeof(double) * (size_t)n * (size_t)n);
    if (!b)
        return 1;
    int i, j;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            b[i * n + j] = 0.5 + i + j;
#pragma omp parallel for private(j) num_threads(2)
    for (i = 1; i < n; i++)
        for (j = 1; j < n; j++)
            b[i * n + j] = b[(i - 1) * n + j - 1]; /* RACE: row i - 1 is another iteration's */
    printf("b[%d][%d]=%f\n", n / 2, n / 2, b[(n / 2) * n + n / 2]);
    free(b);
    return 0;
}
