/* omp_lockturn_yes: omp_lockturn_no with a broken hand-off -- each thread releases and retakes
 * its own lock, which orders nothing between the two threads, so thread 1's read of `phase`
 * races with thread 0's write.  Race: yes. */
#include <omp.h>
#include <stdio.h>

static omp_lock_t token[2];
static int limit = 40;
static int phase;
static int got[2][2];

int main(void)
{
    omp_init_lock(&token[0]);
    omp_init_lock(&token[1]);
#pragma omp parallel num_threads(2)
    {
        int me = omp_get_thread_num();
        omp_set_lock(&token[me]);
#pragma omp barrier
        got[me][0] = limit;
        if (me == 0)
            phase = limit / 2; /* RACE: thread 0 writes */
        omp_unset_lock(&token[me]);
        omp_set_lock(&token[me]);
        got[me][1] = phase; /* RACE: thread 1 reads, unordered */
#pragma omp barrier
        omp_unset_lock(&token[me]);
    }
    omp_destroy_lock(&token[0]);
    omp_destroy_lock(&token[1]);
    printf("%d %d %d %d\n", got[0][0], got[0][1], got[1][0], got[1][1]);
    return 0;
}
