/* omp_depend_yes: two tasks that both read the variable in their depend clauses but one of
 * them writes it: in/in dependences order nothing.  Race: yes. */
#include <stdio.h>

static int v = 1, r1, r2;

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
#pragma omp task depend(in : v)
        v = v + 10; /* RACE: writes under depend(in) */
#pragma omp task depend(in : v)
        r2 = v; /* RACE: reads under depend(in) */
#pragma omp taskwait
        r1 = v;
    }
    printf("%d %d\n", r1, r2);
    return 0;
}
