/* omp_parallel_stack_no: several parallel regions in a row sharing a struct on main's stack:
 * each region's writes happen before the next region's reads through the join and the fork.
 * Race: no. */
#include <omp.h>
#include <stdio.h>

struct state {
    int v[2];
    int round;
};

int main(void)
{
    struct state st = {{0, 0}, 0};
    for (int r = 0; r < 3; r++) {
#pragma omp parallel num_threads(2) shared(st)
        {
            int me = omp_get_thread_num();
            st.v[me] += r + 1;
#pragma omp barrier
#pragma omp master
            st.round += st.v[0] + st.v[1];
        }
    }
    printf("%d %d %d\n", st.v[0], st.v[1], st.round);
    return 0;
}
