/* drb_026_ilu_no: category SYN (inconsistent lock usage, no race).  Main
 * writes a configuration before creating two readers; each reader reads it
 * holding its own mutex, so the reads share no lock.  No write is concurrent:
 * race: no.  HMTRace's read/read "inconsistent lock usage" flags the two
 * reads (a separate kind, not a race). */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t la = PTHREAD_MUTEX_INITIALIZER, lb = PTHREAD_MUTEX_INITIALIZER;
static long config[4];
static pthread_barrier_t start; /* the readers run together */

static void *reader(void *arg)
{
    pthread_mutex_t *m = arg;
    long s = 0;
    pthread_barrier_wait(&start);
    for (int i = 0; i < 20; i++) {
        pthread_mutex_lock(m);
        s += config[i % 4]; /* ILU: read under its own lock */
        pthread_mutex_unlock(m);
    }
    return (void *)s;
}

int main(void)
{
    pthread_t a, b;
    void *ra, *rb;
    for (int i = 0; i < 4; i++)
        config[i] = i + 1;
    pthread_barrier_init(&start, NULL, 2);
    pthread_create(&a, NULL, reader, &la);
    pthread_create(&b, NULL, reader, &lb);
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    printf("sums: %ld %ld\n", (long)ra, (long)rb);
    return 0;
}
