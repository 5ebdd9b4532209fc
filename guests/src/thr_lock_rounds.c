/* thr_lock_rounds: thr_mutex's shape, small: THREADS threads (default 3), released together by a
 * barrier, each do ROUNDS rounds (default 60) of private work (a few hundred instructions of
 * arithmetic on a local state) and then an increment of a shared counter under a mutex and of a
 * second under another. Race-free. Long enough for dynamic partial-order reduction to ask for
 * alternatives at decisions all along a run (each lock acquisition races with the other
 * threads'), short enough for an exhaustive exploration in a debug build.
 * Usage: thr_lock_rounds [THREADS [ROUNDS]]; prints the counters and exits 0 (1 if they are
 * wrong, 2 on a bad argument). tests/snapshots.rs measures exploration from snapshots on it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_THREADS 8

static pthread_mutex_t m_a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m_b = PTHREAD_MUTEX_INITIALIZER;
static long c_a, c_b;
static unsigned long mixed[MAX_THREADS];
static int rounds;
static pthread_barrier_t start;

static void *worker(void *arg)
{
    long id = (long)arg;
    unsigned long h = 0x9e3779b97f4a7c15ul ^ (unsigned long)id;
    pthread_barrier_wait(&start);
    for (int i = 0; i < rounds; i++) {
        /* Private work: no shared access, so no scheduling point. */
        for (int k = 0; k < 40; k++) {
            h ^= h >> 31;
            h *= 0xbf58476d1ce4e5b9ul;
            h += (unsigned long)k;
        }
        pthread_mutex_lock(&m_a);
        c_a++;
        pthread_mutex_unlock(&m_a);
        pthread_mutex_lock(&m_b);
        c_b += 2;
        pthread_mutex_unlock(&m_b);
    }
    mixed[id] = h;
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 3;
    rounds = argc > 2 ? atoi(argv[2]) : 60;
    if (threads < 1 || threads > MAX_THREADS || rounds < 0) {
        fprintf(stderr, "usage: thr_lock_rounds [THREADS (1-%d) [ROUNDS]]\n", MAX_THREADS);
        return 2;
    }
    pthread_t t[MAX_THREADS];
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (long i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    unsigned long all = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        all ^= mixed[i];
    }
    printf("counters: %ld %ld (mix %lx)\n", c_a, c_b, all);
    return c_a == (long)threads * rounds && c_b == 2L * threads * rounds ? 0 : 1;
}
