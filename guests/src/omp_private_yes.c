/* omp_private_yes: a temporary declared outside the parallel for and not made private: every
 * iteration writes and reads the one shared variable.  Race: yes. */
#include <stdio.h>

#define N 64
static int a[N], b[N];

int main(void)
{
    int tmp;
    for (int i = 0; i < N; i++)
        b[i] = i;
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < N; i++) {
        tmp = b[i] + 1; /* RACE: shared tmp written */
        a[i] = tmp * tmp; /* RACE: gcc -O1 stores tmp here */
    }
    printf("%d %d\n", a[N - 1], tmp);
    return 0;
}
