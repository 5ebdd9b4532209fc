/* pi_dram_caslock: per-bucket spinlocks built from atomics in DRAM (an array of lock words beside
 * the PM buckets, as P-CLHT's volatile variant and many hand-written tables keep them), inlined
 * into their callers: no function to name in a lock configuration.  Even buckets take their lock
 * with a compare-and-swap, odd ones with an exchange (test-and-set); both give it back with a
 * plain release store of 0.
 *   - BUG (this file): a writer persists the bucket's value after unlocking, so a reader holding
 *     the same lock can read it before it is durable (the store and load lines).
 *   - FIXED (pi_dram_caslock_fixed, built with -DFIXED): persisted before the unlock.
 * Usage: pi_dram_caslock [POOL]; exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define NBUCKETS 4
#define THREADS 4
#define ROUNDS 24

struct bucket {
    volatile uint64_t key;
    volatile uint64_t val;
    uint64_t pad[6];
};

_Static_assert(sizeof(struct bucket) == 64, "a bucket is one line");

static struct bucket *buckets;
static volatile int locks[NBUCKETS]; /* DRAM: 0 free, 1 held */
static volatile uint64_t sink;

static inline __attribute__((always_inline)) void lock(int i)
{
    volatile int *l = &locks[i];
    for (;;) {
        if (i % 2 == 0) {
            int expected = 0;
            if (__atomic_compare_exchange_n(l, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                return;
        } else if (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE) == 0) {
            return;
        }
        while (*l != 0)
            sched_yield();
    }
}

static inline __attribute__((always_inline)) void unlock(int i)
{
    __atomic_store_n(&locks[i], 0, __ATOMIC_RELEASE);
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < ROUNDS; i++) {
        int k = (int)((id + i / 2) % NBUCKETS);
        struct bucket *b = &buckets[k];
        if (i % 2 == 0) {
            lock(k);
            b->val = id * 1000 + i; /* STORE: the bucket's value, under its DRAM spinlock */
#ifdef FIXED
            PM_CLWB(&b->val); PM_SFENCE(); /* FIX: persisted before unlocking */
            unlock(k);
#else
            unlock(k);
            PM_CLWB(&b->val); PM_SFENCE(); /* BUG: persisted after unlocking */
#endif
        } else {
            lock(k);
            sink += b->val; /* LOAD: the bucket's value, under its DRAM spinlock */
            unlock(k);
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
