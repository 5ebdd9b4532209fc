/* thr_racy_counter: a real lost-update race.  2 threads each do 1000 times
 * `tmp = counter; sched_yield(); counter = tmp + 1;` on a shared (volatile,
 * unsynchronised) counter; a start barrier releases both together.  Prints
 * the final counter, which is SCHEDULE-DEPENDENT ON PURPOSE: anything from
 * 1000-ish to 2000; natively it usually varies from run to run, under a
 * deterministic scheduler it is a function of the schedule.  Always exits 0. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#define ITERS 1000

static volatile long counter;
static pthread_barrier_t start;

static void *worker(void *arg)
{
    pthread_barrier_wait(&start);
    for (int i = 0; i < ITERS; i++) {
        long tmp = counter; /* RACE: read */
        sched_yield();
        counter = tmp + 1; /* RACE: write */
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_barrier_init(&start, NULL, 2);
    if (pthread_create(&a, NULL, worker, NULL) || pthread_create(&b, NULL, worker, NULL)) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("counter: %ld\n", counter);
    return 0;
}
