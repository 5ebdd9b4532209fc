/* hs_macro_release: P-CLHT's resize help, small.  Two buckets in PM carry a one-byte lock word
 * taken by a try-lock function (bucket_trylock, declared in configs/hs_macro_release.ron as
 * HawkSet's pclht.cfg declares P-CLHT's lock_acq_chk_resize) and released by a macro, a plain
 * store of 0 (P-CLHT's LOCK_RLS: no function a configuration can name).  A resizer and a helper
 * both update the buckets under their locks (persisted before the unlock: correct); then the
 * helper sets the table's helper_done flag and the resizer spins on it (P-CLHT's
 * clht_lb_res.c:699 and :753).
 *   - BUG (this file): the flag is never persisted, so the resizer reads a value that is not
 *     durable: a persistence-induced race (the store and load lines).
 *   - FIXED (hs_macro_release_fixed, built with FIXED): the helper sets the flag and persists
 *     it under bucket 0's lock, and the resizer reads it under that lock: no race.
 * The lock's release must be seen at the macro's store: if each acquisition were held until the
 * thread exits, both threads would hold both bucket locks from their first updates on, and the
 * flag's store and load would look protected by them.
 * Usage: hs_macro_release [POOL]; prints the sum of the buckets, exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define NBUCKETS 2
#define ROUNDS 8

struct bucket {
    volatile uint8_t lock; /* 0 free, 1 held: in PM, on the bucket's line */
    uint8_t pad0[7];
    volatile uint64_t val;
    uint64_t pad[6];
};

struct table {
    volatile int32_t helper_done; /* in PM, as P-CLHT's clht_hashtable_t field */
    int32_t pad0;
    uint64_t pad[7];
    struct bucket b[NBUCKETS];
};

_Static_assert(sizeof(struct bucket) == 64, "a bucket is one line");

/* P-CLHT's LOCK_RLS: the release is a store, not a call. */
#define BUCKET_UNLOCK(l) (*(l) = 0)

static struct table *tbl;
static volatile uint64_t sink;

/* Returns 1 when it took the lock, 0 when the lock was held (lock_acq_chk_resize's contract). */
__attribute__((noinline)) int bucket_trylock(volatile uint8_t *l)
{
    uint8_t expected = 0;
    return __atomic_compare_exchange_n(l, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static void update(struct bucket *b, uint64_t v)
{
    while (!bucket_trylock(&b->lock))
        sched_yield();
    sink += b->val; /* read under the lock */
    b->val = v;
    PM_CLWB(&b->val); PM_SFENCE(); /* persisted before the unlock: no race */
    BUCKET_UNLOCK(&b->lock);
}

static void *helper(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++)
        update(&tbl->b[i % NBUCKETS], 100 + i);
#ifdef FIXED
    while (!bucket_trylock(&tbl->b[0].lock))
        sched_yield();
#endif
    tbl->helper_done = 1; /* STORE: the helper's flag (clht_lb_res.c:699) */
#ifdef FIXED
    PM_CLWB(&tbl->helper_done); PM_SFENCE(); /* FIX: persisted under the lock */
    BUCKET_UNLOCK(&tbl->b[0].lock);
#endif
    return NULL;
}

static void *resizer(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++)
        update(&tbl->b[(i + 1) % NBUCKETS], 200 + i);
#ifdef FIXED
    for (;;) {
        while (!bucket_trylock(&tbl->b[0].lock))
            sched_yield();
        int done = tbl->helper_done; /* FIX: the flag, read under the lock */
        BUCKET_UNLOCK(&tbl->b[0].lock);
        if (done == 1)
            break;
        sched_yield();
    }
#else
    while (tbl->helper_done != 1) /* LOAD: the resizer spins on the flag (clht_lb_res.c:753) */
        sched_yield();
#endif
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    tbl = pm_map(path, sizeof(struct table));
    tbl->helper_done = 0;
    for (int i = 0; i < NBUCKETS; i++) {
        tbl->b[i].lock = 0;
        tbl->b[i].val = 0;
    }
    persist(tbl, sizeof(struct table));
    pthread_t h, r;
    pthread_create(&r, NULL, resizer, NULL);
    pthread_create(&h, NULL, helper, NULL);
    pthread_join(r, NULL);
    pthread_join(h, NULL);
    printf("sum %llu\n", (unsigned long long)(tbl->b[0].val + tbl->b[1].val));
    return 0;
}
