/* pi_inline_caslock: per-bucket compare-and-swap locks compiled into their callers, with the lock
 * words in PM, as P-CLHT's bucket locks after inlining (pr_clht): no function a lock
 * configuration could name.  THREADS threads update and read the buckets' values, every access
 * inside the bucket's lock; the lock is a CAS from 0 to 1 and a release store of 0.
 *   - BUG (this file): an update persists the value after unlocking the bucket, so another
 *     thread's locked read can load it before it is durable (the store and load lines).
 *   - FIXED (pi_inline_caslock_fixed, built with FIXED): persisted before unlocking: no race.
 * The race passes infer the lock from the accesses to its word (infer_locks, on by default): the
 * CAS that takes it from 0 and the holder's store of 0 are an acquire and a release, and the
 * word's own accesses (the CAS, the spin reads, the release store, never persisted) are
 * synchronisation.  With infer_locks=off the fixed twin is reported: every locked access looks
 * unprotected, and the lock word races with every attempt.
 * Usage: pi_inline_caslock [POOL]; prints the bucket count, exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define NBUCKETS 4
#define THREADS 4
#define ROUNDS 24

struct bucket {
    volatile uint64_t lock; /* 0 free, 1 held: in PM, on the bucket's line */
    volatile uint64_t key;
    volatile uint64_t val;
    uint64_t pad[5];
};

_Static_assert(sizeof(struct bucket) == 64, "a bucket is one line");

static struct bucket *buckets;
static volatile uint64_t sink;

static inline __attribute__((always_inline)) void lock(volatile uint64_t *l)
{
    for (;;) {
        uint64_t expected = 0;
        if (__atomic_compare_exchange_n(l, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        while (*l != 0)
            sched_yield();
    }
}

static inline __attribute__((always_inline)) void unlock(volatile uint64_t *l)
{
    __atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < ROUNDS; i++) {
        struct bucket *b = &buckets[(id + i / 2) % NBUCKETS];
        if (i % 2 == 0) {
            lock(&b->lock);
            b->val = id * 1000 + i; /* STORE: the bucket's value, under its inline lock */
#ifdef FIXED
            PM_CLWB(&b->val); PM_SFENCE(); /* FIX: persisted before unlocking */
            unlock(&b->lock);
#else
            unlock(&b->lock);
            PM_CLWB(&b->val); PM_SFENCE(); /* BUG: persisted after unlocking */
#endif
        } else {
            lock(&b->lock);
            sink += b->val; /* LOAD: the bucket's value, under its inline lock */
            unlock(&b->lock);
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
    for (uint64_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("%d buckets\n", NBUCKETS);
    return 0;
}
