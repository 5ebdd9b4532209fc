/* pi_pm_caslock: per-bucket compare-and-swap locks whose lock words live in PM, in the bucket's
 * own cache line, as P-CLHT's do (its bucket_t starts with the clht_lock_t its lock functions
 * CAS).  bucket_lock/bucket_unlock are named as custom locks in configs/pi_pm_caslock.ron, as
 * HawkSet's users name P-CLHT's.  THREADS threads update and read the buckets' values, every
 * access inside the bucket's lock.
 *   - BUG (this file): an update persists the value after unlocking the bucket, so another
 *     thread's locked read can load it before it is durable (the store and load lines).
 *   - FIXED (pi_pm_caslock_fixed, built with -DFIXED): persisted before unlocking: no race.
 * The lock functions' own accesses to the lock word (the CAS, the spin reads, the release store,
 * never persisted) race with the other threads' lock attempts by design: they are
 * synchronisation, not data, and the race passes leave them out (sync_words=off reports them).
 * Usage: pi_pm_caslock [POOL]; prints the bucket count, exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define NBUCKETS 4
#define THREADS 4
#define ROUNDS 24

struct bucket {
    volatile uint8_t lock; /* 0 free, 1 held: in PM, on the bucket's line */
    uint8_t pad0[7];
    volatile uint64_t key;
    volatile uint64_t val;
    uint64_t pad[5];
};

_Static_assert(sizeof(struct bucket) == 64, "a bucket is one line");

static struct bucket *buckets;
static volatile uint64_t sink;

__attribute__((noinline)) void bucket_lock(volatile uint8_t *l)
{
    for (;;) {
        uint8_t expected = 0;
        if (__atomic_compare_exchange_n(l, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        while (*l != 0)
            sched_yield();
    }
}

__attribute__((noinline)) void bucket_unlock(volatile uint8_t *l)
{
    __atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < ROUNDS; i++) {
        struct bucket *b = &buckets[(id + i / 2) % NBUCKETS];
        if (i % 2 == 0) {
            bucket_lock(&b->lock);
            b->val = id * 1000 + i; /* STORE: the bucket's value, under its lock */
#ifdef FIXED
            PM_CLWB(&b->val); PM_SFENCE(); /* FIX: persisted before unlocking */
            bucket_unlock(&b->lock);
#else
            bucket_unlock(&b->lock);
            PM_CLWB(&b->val); PM_SFENCE(); /* BUG: persisted after unlocking */
#endif
        } else {
            bucket_lock(&b->lock);
            sink += b->val; /* LOAD: the bucket's value, under its lock */
            bucket_unlock(&b->lock);
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
        buckets[i].lock = 0;
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
