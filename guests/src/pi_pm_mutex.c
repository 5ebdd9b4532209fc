/* pi_pm_mutex: a pthread mutex placed in PM, in the bucket it protects (PMDK's PMEMmutex and
 * many hand-made PM structures keep their locks in the pool).  THREADS threads update and read
 * the buckets' values under the buckets' mutexes.
 *   - BUG (this file): an update persists the value after unlocking, so another thread's locked
 *     read can load it before it is durable (the store and load lines).
 *   - FIXED (pi_pm_mutex_fixed, built with -DFIXED): persisted before unlocking: no race.
 * glibc's lock and unlock read and write the mutex's words in PM (the CAS that takes it, the
 * store that releases it), against the other threads' lock attempts: synchronisation, not data,
 * which the race passes leave out (sync_words=off reports them).
 * Usage: pi_pm_mutex [POOL]; prints the bucket count, exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define NBUCKETS 4
#define THREADS 4
#define ROUNDS 24

struct bucket {
    pthread_mutex_t lock; /* 40 bytes, in PM */
    volatile uint64_t key;
    volatile uint64_t val;
    uint64_t pad;
};

_Static_assert(sizeof(struct bucket) == 64, "a bucket is one line");

static struct bucket *buckets;
static volatile uint64_t sink;

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < ROUNDS; i++) {
        struct bucket *b = &buckets[(id + i / 2) % NBUCKETS];
        if (i % 2 == 0) {
            pthread_mutex_lock(&b->lock);
            b->val = id * 1000 + i; /* STORE: the bucket's value, under its mutex */
#ifdef FIXED
            PM_CLWB(&b->val); PM_SFENCE(); /* FIX: persisted before unlocking */
            pthread_mutex_unlock(&b->lock);
#else
            pthread_mutex_unlock(&b->lock);
            PM_CLWB(&b->val); PM_SFENCE(); /* BUG: persisted after unlocking */
#endif
        } else {
            pthread_mutex_lock(&b->lock);
            sink += b->val; /* LOAD: the bucket's value, under its mutex */
            pthread_mutex_unlock(&b->lock);
        }
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    buckets = pm_map(path, NBUCKETS * sizeof(struct bucket));
    for (int i = 0; i < NBUCKETS; i++) {
        pthread_mutex_init(&buckets[i].lock, NULL);
        buckets[i].key = (uint64_t)i + 1;
        buckets[i].val = 0;
    }
    persist(buckets, NBUCKETS * sizeof(struct bucket));
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("%d buckets\n", NBUCKETS);
    return 0;
}
