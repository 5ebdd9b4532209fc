/* pm_xchg_index: a PM hash index whose fresh nodes are filled with sequentially consistent atomic
 * exchanges, as C++ PM indexes fill theirs (`std::atomic<T>::store` with the default order and
 * `__atomic_exchange_n(.., __ATOMIC_SEQ_CST)` compile to `xchg`). THREADS threads (default 4)
 * each do OPS operations on a table of 16 buckets with one pthread mutex each:
 *   - read the index's header (bucket count and table offset, written and persisted by main
 *     before the threads exist) without a lock: a line every operation reads;
 *   - insert a fresh node from the thread's own region: key, value and tag filled by
 *     `__atomic_exchange_n`, persisted, then linked at its bucket's head under the bucket's
 *     mutex (persisted before the unlock);
 *   - every other operation, look a key up under its bucket's mutex, walking the whole chain
 *     (chains grow to OPS*THREADS/16 nodes);
 *   - bump the index's entry counter under a statistics mutex.
 * Each `xchg` turns a zero PM word non-zero, as a lock's acquiring CAS does, and nothing stores
 * zero there again: ferrite's lock inference sees an acquisition never released, and every
 * operation changed the thread's lockset. hawkset kept a record per access made under each
 * such lockset: every chain walk added a record per node it read, quadratic in the operations
 * (tests/pm_memory.rs bounds the records and the heap).
 *   - BUG (this file): the counter is persisted after the statistics mutex's unlock; another
 *     thread's bump loads it under the mutex before it is durable (STORE, LOAD lines).
 *   - FIXED (pm_xchg_index_fixed): persisted before the unlock. No other race in either.
 * Usage: pm_xchg_index [OPS_PER_THREAD] [POOL] [THREADS]; exits 0 and prints a count. */
#include <pthread.h>

#include "pm.h"

#define BUCKETS 16
#define MAX_THREADS 16

struct header {
    uint64_t buckets;   /* BUCKETS */
    uint64_t table_off; /* offset of the bucket heads in the pool */
    uint64_t pad[6];
};

struct stats {
    uint64_t count; /* entries inserted */
    uint64_t pad[7];
};

struct node {
    uint64_t key;
    uint64_t value;
    uint64_t tag;
    uint64_t next; /* offset in the pool of the next node, 0 = none */
    uint64_t pad[4];
};

static char *pool;
static struct header *hdr;
static struct stats *st;
static pthread_mutex_t locks[BUCKETS];
static pthread_mutex_t stat_lock = PTHREAD_MUTEX_INITIALIZER;
static long ops = 500;
static int threads = 4;
static size_t region; /* bytes of nodes per thread */
static size_t nodes_base;

static void bump(void)
{
    pthread_mutex_lock(&stat_lock);
    uint64_t c = *(volatile uint64_t *)&st->count; /* LOAD: the counter, under the statistics mutex */
    *(volatile uint64_t *)&st->count = c + 1;      /* STORE: the counter */
#ifdef FIXED
    persist(&st->count, sizeof st->count); /* FIX: durable before the unlock */
    pthread_mutex_unlock(&stat_lock);
#else
    pthread_mutex_unlock(&stat_lock);
    persist(&st->count, sizeof st->count); /* BUG: durable only after the unlock */
#endif
}

static void *worker(void *arg)
{
    long id = (long)arg;
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1);
    size_t base = nodes_base + (size_t)id * region;
    uint64_t found = 0;
    for (long i = 0; i < ops; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t key = x | 1;
        /* The header, read by every operation without a lock (persisted before the threads). */
        uint64_t nb = __atomic_load_n(&hdr->buckets, __ATOMIC_ACQUIRE);
        uint64_t *heads = (uint64_t *)(pool + __atomic_load_n(&hdr->table_off, __ATOMIC_ACQUIRE));
        size_t b = (x >> 8) % nb;
        uint64_t off = base + (size_t)i * sizeof(struct node);
        struct node *n = (struct node *)(pool + off);
        /* A fresh node, filled with seq_cst exchanges (xchg) and persisted before it is linked. */
        (void)__atomic_exchange_n(&n->key, key, __ATOMIC_SEQ_CST);
        (void)__atomic_exchange_n(&n->value, x, __ATOMIC_SEQ_CST);
        (void)__atomic_exchange_n(&n->tag, (uint64_t)id + 1, __ATOMIC_SEQ_CST);
        persist(n, sizeof *n);
        pthread_mutex_lock(&locks[b]);
        n->next = heads[b];
        persist(&n->next, sizeof n->next);
        heads[b] = off;
        persist(&heads[b], sizeof heads[b]);
        pthread_mutex_unlock(&locks[b]);
        bump();
        if (i & 1) {
            size_t lb = (x >> 16) % nb;
            pthread_mutex_lock(&locks[lb]);
            for (uint64_t o = heads[lb]; o; o = ((struct node *)(pool + o))->next)
                found += ((struct node *)(pool + o))->key == key;
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
    region = (size_t)ops * sizeof(struct node);
    /* Header line, statistics line, bucket heads, then the threads' regions of nodes. */
    nodes_base = 2 * PM_CACHELINE + BUCKETS * sizeof(uint64_t);
    size_t size = nodes_base + (size_t)threads * region;
    size = (size + 4095) & ~(size_t)4095;
    pool = pm_map(path, size);
    hdr = (struct header *)pool;
    st = (struct stats *)(pool + PM_CACHELINE);
    memset(pool, 0, nodes_base);
    hdr->buckets = BUCKETS;
    hdr->table_off = 2 * PM_CACHELINE;
    persist(pool, nodes_base);
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
    uint64_t *heads = (uint64_t *)(pool + hdr->table_off);
    for (int b = 0; b < BUCKETS; b++)
        for (uint64_t off = heads[b]; off; off = ((struct node *)(pool + off))->next)
            entries++;
    printf("pm_xchg_index: %d threads x %ld ops, %llu entries, count %llu, %llu found\n", threads, ops,
           (unsigned long long)entries, (unsigned long long)st->count, (unsigned long long)found);
    return 0;
}
