/* thr_yield_many: THREADS threads (default 4) each call sched_yield YIELDS times (default
 * 1,000), all alive at once (they start together behind a barrier). Measures what a thread
 * switch costs as the number of live threads grows (`ferrite bench`, docs/performance.md).
 * Usage: thr_yield_many [THREADS] [YIELDS]; exits 0. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

static long yields = 1000;
static pthread_barrier_t start;

static void *worker(void *arg)
{
    pthread_barrier_wait(&start);
    for (long i = 0; i < yields; i++)
        sched_yield();
    return NULL;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 4;
    if (argc > 2)
        yields = atol(argv[2]);
    if (n < 1)
        n = 1;
    pthread_t *t = calloc((size_t)n, sizeof *t);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_barrier_init(&start, NULL, (unsigned)n);
    for (long i = 0; i < n; i++)
        if (pthread_create(&t[i], &attr, worker, NULL) != 0) {
            fprintf(stderr, "pthread_create failed at thread %ld\n", i);
            return 1;
        }
    for (long i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("yield: %ld threads x %ld yields\n", n, yields);
    return 0;
}
