/* thr_racy_counter_n: the lost-update race of thr_racy_counter with THREADS threads and ITERS
 * increments each and no yield: `tmp = counter; counter = tmp + 1;` on a shared unsynchronised
 * counter, after a start barrier. Long enough (4 threads x 20000: about 0.9 M instructions) that
 * an exhaustive exploration with every instruction a scheduling point (`--preempt all`) has
 * hundreds of thousands of decisions per schedule: it measures what the explorer keeps per
 * schedule.
 *
 * Usage: thr_racy_counter_n [THREADS [ITERS]]   prints `counter C` (schedule-dependent), exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static volatile long counter;
static pthread_barrier_t start;
static long iters = 20000;

static void *worker(void *arg)
{
    pthread_barrier_wait(&start);
    for (long i = 0; i < iters; i++) {
        long tmp = counter; /* RACE: read */
        counter = tmp + 1;  /* RACE: write */
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4;
    if (argc > 2)
        iters = atol(argv[2]);
    if (n < 1 || n > 64)
        return 2;
    pthread_t t[64];
    pthread_barrier_init(&start, NULL, (unsigned)n);
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("counter %ld\n", counter);
    return 0;
}
