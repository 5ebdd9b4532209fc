/* omp_critical_no: every update of the counter inside an unnamed critical section; the list
 * below is appended under a named one.  Race: no. */
#include <stdio.h>

#define N 32
static int count;
static int list[2 * N], len;

int main(void)
{
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < N; i++) {
#pragma omp critical
        count += i;
#pragma omp critical(append)
        list[len++] = i;
    }
    printf("%d %d\n", count, len);
    return 0;
}
