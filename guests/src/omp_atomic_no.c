/* omp_atomic_no: a histogram updated with atomic updates and captures only.  Race: no. */
#include <stdio.h>

#define N 64
static int hist[4];
static int next;

int main(void)
{
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < N; i++) {
#pragma omp atomic
        hist[i % 4] += 1;
        int mine;
#pragma omp atomic capture
        mine = next++;
        (void)mine;
    }
    printf("%d %d %d\n", hist[0], hist[3], next);
    return 0;
}
