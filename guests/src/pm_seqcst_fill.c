/* pm_seqcst_fill: fresh PM entries filled with sequentially consistent atomic stores, the shape
 * of C++ PM indexes (P-ART's nodes: `std::atomic<T>::store` with the default memory order).
 * THREADS threads (default 4) each insert OPS entries into a table of 256 buckets in PM, one
 * pthread mutex per bucket: an entry comes fresh (zero) from the thread's bump region, its key
 * and value are stored with __atomic_store_n(.., __ATOMIC_SEQ_CST), which x86-64 compiles to
 * `xchg`, a locked instruction, persisted, and only then linked into its bucket under the
 * bucket's lock (persisted before the unlock). Half the operations also look a key up under
 * the bucket's lock.
 *
 * Each such `xchg` turns a zero PM word non-zero, as a lock's acquiring CAS does, and nothing
 * stores zero there again: ferrite's lock inference sees an acquisition never released. The
 * program has no persistence-induced race: every store is persisted before another thread can
 * reach it, or inside the lock its readers hold. tests/pm_memory.rs runs it under the window
 * passes and bounds their heap (issue 18).
 *
 * Usage: pm_seqcst_fill [OPS_PER_THREAD] [POOL] [THREADS]; exits 0 and prints a count. */
#include <pthread.h>

#include "pm.h"

#define BUCKETS 256
#define MAX_THREADS 16

struct entry {
    uint64_t key;
    uint64_t value;
    uint64_t next; /* offset in the pool of the next entry, 0 = none */
    uint64_t pad[5];
};

static char *pool;
static uint64_t *heads; /* BUCKETS offsets, at the start of the pool */
static pthread_mutex_t locks[BUCKETS];
static long ops = 1000;
static int threads = 4;
static size_t region; /* bytes of entries per thread */

static void *worker(void *arg)
{
    long id = (long)arg;
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1);
    size_t base = BUCKETS * sizeof(uint64_t) + (size_t)id * region;
    uint64_t found = 0;
    for (long i = 0; i < ops; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t key = x | 1;
        size_t b = (x >> 8) % BUCKETS;
        uint64_t off = base + (size_t)i * sizeof(struct entry);
        struct entry *n = (struct entry *)(pool + off);
        /* A fresh entry, filled with seq_cst stores (xchg) and persisted before it is linked. */
        __atomic_store_n(&n->key, key, __ATOMIC_SEQ_CST);
        __atomic_store_n(&n->value, x, __ATOMIC_SEQ_CST);
        persist(n, sizeof *n);
        pthread_mutex_lock(&locks[b]);
        n->next = heads[b];
        persist(&n->next, sizeof n->next);
        heads[b] = off;
        persist(&heads[b], sizeof heads[b]);
        pthread_mutex_unlock(&locks[b]);
        if (i & 1) {
            size_t lb = (x >> 16) % BUCKETS;
            pthread_mutex_lock(&locks[lb]);
            for (uint64_t o = heads[lb]; o; o = ((struct entry *)(pool + o))->next)
                found += ((struct entry *)(pool + o))->key == key;
            pthread_mutex_unlock(&locks[lb]);
        }
    }
    return (void *)(uintptr_t)found;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        ops = atol(argv[1]);
    const char *path = argc > 2 ? argv[2] : PM_DEFAULT_POOL;
    if (argc > 3)
        threads = atoi(argv[3]);
    if (threads < 1 || threads > MAX_THREADS)
        threads = 4;
    if (ops < 1)
        ops = 1;
    region = (size_t)ops * sizeof(struct entry);
    size_t size = BUCKETS * sizeof(uint64_t) + (size_t)threads * region;
    size = (size + 4095) & ~(size_t)4095;
    pool = pm_map(path, size);
    memset(pool, 0, BUCKETS * sizeof(uint64_t));
    persist(pool, BUCKETS * sizeof(uint64_t));
    heads = (uint64_t *)pool;
    for (int i = 0; i < BUCKETS; i++)
        pthread_mutex_init(&locks[i], NULL);
    pthread_t t[MAX_THREADS];
    for (long i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    uint64_t found = 0;
    for (int i = 0; i < threads; i++) {
        void *r;
        pthread_join(t[i], &r);
        found += (uintptr_t)r;
    }
    uint64_t entries = 0;
    for (int b = 0; b < BUCKETS; b++)
        for (uint64_t off = heads[b]; off; off = ((struct entry *)(pool + off))->next)
            entries++;
    printf("pm_seqcst_fill: %d threads x %ld ops, %llu entries, %llu found\n", threads, ops,
           (unsigned long long)entries, (unsigned long long)found);
    return 0;
}
