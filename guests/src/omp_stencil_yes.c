/* omp_stencil_yes [N [SWEEPS]]: an in-place five-point stencil over an N x N grid, its rows dealt to two
 * threads round-robin (`schedule(static, 1)`), so every row reads the rows above and below that the
 * other thread writes: a data race at every interior cell (about 1.5 N^2 occurrences per sweep).
 * Also a benchmark of a race detector's cost per race occurrence (issue 22, docs/performance.md:
 * `omp_stencil_yes 600`); the printed checksum is whatever the schedule made it.  Race: yes. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 32;
    int sweeps = argc > 2 ? atoi(argv[2]) : 1;
    if (n < 3 || sweeps < 1) {
        fprintf(stderr, "usage: omp_stencil_yes [N [SWEEPS]] (N >= 3)\n");
        return 2;
    }
    double *g = malloc(sizeof(double) * (size_t)n * (size_t)n);
    if (!g)
        return 1;
    for (int i = 0; i < n * n; i++)
        g[i] = (double)(i % 17);
    for (int s = 0; s < sweeps; s++) {
#pragma omp parallel for schedule(static, 1) num_threads(2)
        for (int i = 1; i < n - 1; i++)
            for (int j = 1; j < n - 1; j++)
                g[i * n + j] = 0.2 * (g[i * n + j] + g[(i - 1) * n + j] + g[(i + 1) * n + j] + g[i * n + j - 1] + g[i * n + j + 1]); /* RACE: neighbour rows */
    }
    double sum = 0;
    for (int i = 0; i < n * n; i++)
        sum += g[i];
    printf("%.3f\n", sum);
    free(g);
    return 0;
}
