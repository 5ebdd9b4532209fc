/* omp_lock_yes: two locks, one per thread, guarding one counter: they exclude nothing.
 * Race: yes. */
#include <omp.h>
#include <stdio.h>

static omp_lock_t locks[2];
static int counter;

int main(void)
{
    omp_init_lock(&locks[0]);
    omp_init_lock(&locks[1]);
#pragma omp parallel num_threads(2)
    {
        int me = omp_get_thread_num();
        for (int i = 0; i < 4; i++) {
            omp_set_lock(&locks[me]);
            counter += me + 1; /* RACE: under the thread's own lock */
            omp_unset_lock(&locks[me]);
        }
    }
    omp_destroy_lock(&locks[0]);
    omp_destroy_lock(&locks[1]);
    printf("%d\n", counter);
    return 0;
}
