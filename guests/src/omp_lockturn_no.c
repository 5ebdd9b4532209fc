/* omp_lockturn_no: two threads pass the turn with two omp locks (baton passing): each thread
 * holds its own lock, and the hand-off -- thread 0 releases its lock and takes the other's,
 * thread 1 takes thread 0's and then releases its own -- orders thread 0's write of `phase`
 * before thread 1's read of it.  Both threads read `limit` and `phase` while holding locks the
 * other does not hold: locks used as turn tokens, not around the data, so two reads under
 * disjoint locks are no sign of a bug here.  Race: no. */
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
            phase = limit / 2;
        if (me == 0) {
            omp_unset_lock(&token[0]);
            omp_set_lock(&token[1]);
        } else {
            omp_set_lock(&token[0]);
            omp_unset_lock(&token[1]);
        }
        got[me][1] = phase;
#pragma omp barrier
        omp_unset_lock(&token[1 - me]);
    }
    omp_destroy_lock(&token[0]);
    omp_destroy_lock(&token[1]);
    printf("%d %d %d %d\n", got[0][0], got[0][1], got[1][0], got[1][1]);
    return 0;
}
