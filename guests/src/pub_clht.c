/* pub_clht: the shape of P-CLHT (RECIPE's persistent CLHT, clht_lb_res.c), the hash table of
 * HawkSet's Table 2 bug #3, written small: a PM hash table of 64-byte buckets, each with its
 * lock byte in PM (CLHT's clht_lock_t), three key/value slots and an overflow link; puts take
 * the bucket's lock through lock_acq_chk_resize(lock, table), which fails when the table it
 * locked in has been replaced, and release it with lock_rel(lock) (named as custom locks in
 * configs/pub_clht.ron, as HawkSet's pclht.cfg names them); gets are lock-free.  A put that
 * finds its bucket chain full resizes: under the resize mutex it allocates a table twice as
 * big, rehashes every bucket into it, persists it, and swaps the root's table pointer.
 *   - The planted race (bug #3's shape): the swapped table pointer is persisted only after the
 *     resize mutex is released (RACE: table pointer), while every get and put loads the table
 *     pointer (RACE: loads of the table pointer).
 * Gets read bucket slots without a lock, so the slots' stores (persisted inside the bucket's
 * lock) are visible before they are durable too: that is what lock-free reads are.
 * THREADS threads (4) insert and look up KEYS keys each (YCSB-like, 50/50), in a table that
 * starts with 4 buckets, so it resizes.
 * Usage: pub_clht [POOL [KEYS [THREADS]]]; prints the keys found, exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define POOL_SIZE (8 << 20)
#define SLOTS 3
#define MAX_THREADS 8

struct bucket {
    volatile uint8_t lock; /* 0 free, 1 held */
    uint8_t pad[7];
    volatile uint64_t key[SLOTS]; /* 0: empty */
    volatile uint64_t val[SLOTS];
    volatile uint64_t next; /* overflow bucket (offset), 0: none */
};

struct table {
    uint64_t nbuckets;
    uint64_t pad[7];
    struct bucket b[];
};

struct root {
    volatile uint64_t table; /* the current table (an address, as CLHT's clht_t::ht) */
    volatile uint64_t next_free;
    uint64_t pad[6];
};

_Static_assert(sizeof(struct bucket) == 64, "a bucket is one line");

static char *pool;
static struct root *root;
static pthread_mutex_t resize_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t keys = 40;
static int threads = 4;
static uint64_t found[MAX_THREADS];

static struct table *table_at(uint64_t p) { return (struct table *)(uintptr_t)p; }

static uint64_t alloc(uint64_t size)
{
    pthread_mutex_lock(&alloc_lock);
    uint64_t off = root->next_free;
    root->next_free = off + ((size + 63) & ~63ull);
    persist((void *)&root->next_free, sizeof root->next_free);
    pthread_mutex_unlock(&alloc_lock);
    if (off + size > POOL_SIZE) {
        fprintf(stderr, "pool full\n");
        exit(1);
    }
    memset(pool + off, 0, size);
    persist(pool + off, size);
    return off;
}

static uint64_t hash(uint64_t k) { return (k * 0x9e3779b97f4a7c15ull) >> 20; }

/* 1: locked in table `t` (still the current one); 0: the table was replaced, retry. */
__attribute__((noinline)) int lock_acq_chk_resize(volatile uint8_t *lock, uint64_t t)
{
    uint8_t expected = 0;
    while (!__atomic_compare_exchange_n(lock, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        expected = 0;
        sched_yield();
    }
    if (root->table != t) {
        __atomic_store_n(lock, 0, __ATOMIC_RELEASE);
        return 0;
    }
    return 1;
}

__attribute__((noinline)) void lock_rel(volatile uint8_t *lock)
{
    __atomic_store_n(lock, 0, __ATOMIC_RELEASE);
}

static uint64_t get(uint64_t key)
{
    struct table *t = table_at(root->table); /* RACE: loads of the table pointer (get) */
    struct bucket *b = &t->b[hash(key) % t->nbuckets];
    for (;;) {
        for (int i = 0; i < SLOTS; i++)
            if (b->key[i] == key)
                return b->val[i];
        if (!b->next)
            return 0;
        b = (struct bucket *)(pool + b->next);
    }
}

static void rehash_into(struct table *nt, uint64_t key, uint64_t val)
{
    struct bucket *b = &nt->b[hash(key) % nt->nbuckets];
    for (int overflow = 0;; overflow = 1) {
        for (int i = 0; i < SLOTS; i++) {
            if (b->key[i] == 0) {
                b->val[i] = val;
                b->key[i] = key;
                if (overflow) /* the table itself is persisted after the rehash */
                    persist(b, sizeof *b);
                return;
            }
        }
        if (!b->next)
            b->next = alloc(sizeof(struct bucket));
        b = (struct bucket *)(pool + b->next);
    }
}

/* Doubles the table `old_off` unless another thread already replaced it. */
static void resize(uint64_t old_off)
{
    pthread_mutex_lock(&resize_lock);
    if (root->table != old_off) {
        pthread_mutex_unlock(&resize_lock);
        return;
    }
    struct table *old = table_at(old_off);
    /* Every bucket of the old table stays locked while it is copied (CLHT's resize locks them). */
    for (uint64_t i = 0; i < old->nbuckets; i++)
        lock_acq_chk_resize(&old->b[i].lock, old_off);
    uint64_t n = old->nbuckets * 2;
    uint64_t off = (uint64_t)(uintptr_t)(pool + alloc(sizeof(struct table) + n * sizeof(struct bucket)));
    struct table *nt = table_at(off);
    nt->nbuckets = n;
    for (uint64_t i = 0; i < old->nbuckets; i++)
        for (struct bucket *b = &old->b[i];; b = (struct bucket *)(pool + b->next)) {
            for (int s = 0; s < SLOTS; s++)
                if (b->key[s])
                    rehash_into(nt, b->key[s], b->val[s]);
            if (!b->next)
                break;
        }
    persist(nt, sizeof(struct table) + n * sizeof(struct bucket));
    root->table = off; /* RACE: table pointer, swapped under the resize mutex */
    pthread_mutex_unlock(&resize_lock);
    persist((void *)&root->table, sizeof root->table); /* ... and persisted after unlocking it */
    for (uint64_t i = 0; i < old->nbuckets; i++)
        lock_rel(&old->b[i].lock);
}

static void put(uint64_t key, uint64_t val)
{
    for (;;) {
        uint64_t toff = root->table; /* RACE: loads of the table pointer (put) */
        struct table *t = table_at(toff);
        struct bucket *b = &t->b[hash(key) % t->nbuckets];
        if (!lock_acq_chk_resize(&b->lock, toff))
            continue;
        int depth = 0;
        for (struct bucket *c = b;; c = (struct bucket *)(pool + c->next), depth++) {
            for (int i = 0; i < SLOTS; i++) {
                if (c->key[i] == 0 || c->key[i] == key) {
                    c->val[i] = val; /* STORE: slot value, under the bucket lock */
                    c->key[i] = key; /* STORE: slot key, under the bucket lock */
                    persist((void *)c, sizeof *c);
                    lock_rel(&b->lock);
                    return;
                }
            }
            if (!c->next)
                break;
        }
        lock_rel(&b->lock);
        if (depth >= 1) {
            resize(toff);
            continue;
        }
        /* One overflow bucket per chain, then the table grows. */
        lock_acq_chk_resize(&b->lock, toff);
        if (!b->next) {
            uint64_t o = alloc(sizeof(struct bucket));
            b->next = o; /* STORE: overflow link, under the bucket lock */
            persist((void *)&b->next, sizeof b->next);
        }
        lock_rel(&b->lock);
    }
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 1; i <= keys; i++) {
        uint64_t k = id * 1000003 + i;
        put(k, k * 7);
        if (get(k) == k * 7)
            found[id]++;
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2)
        keys = strtoull(argv[2], NULL, 10);
    if (argc > 3)
        threads = atoi(argv[3]);
    if (threads < 1 || threads > MAX_THREADS)
        threads = 4;
    pool = pm_map(path, POOL_SIZE);
    root = (struct root *)pool;
    root->next_free = 64;
    root->table = 0;
    persist(root, sizeof *root);
    uint64_t t = (uint64_t)(uintptr_t)(pool + alloc(sizeof(struct table) + 4 * sizeof(struct bucket)));
    table_at(t)->nbuckets = 4;
    persist(table_at(t), sizeof(struct table));
    root->table = t;
    persist((void *)&root->table, sizeof root->table);
    pthread_t th[MAX_THREADS];
    for (uintptr_t i = 0; i < (uintptr_t)threads; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    uint64_t total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        total += found[i];
    }
    printf("found %llu of %llu keys\n", (unsigned long long)total, (unsigned long long)(keys * threads));
    return 0;
}
