/* omp_indirect_yes: a parallel for writing through an index array that maps two iterations
 * of different halves to one element.  Race: yes. */
#include <stdio.h>

#define N 16
static int idx[N];
static double x[N];

int main(void)
{
    for (int i = 0; i < N; i++)
        idx[i] = i;
    idx[N - 1] = 0; /* the last iteration aliases the first */
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < N; i++)
        x[idx[i]] += 1.0; /* RACE: x[idx[i]] updated twice */
    printf("%f\n", x[0]);
    return 0;
}
