/* pr_ntroot: a CLHT-like hash table in a PM pool whose root (the current table's offset), keys
 * and overflow links are all stored by one non-inlined non-temporal store helper (`movnti`, then
 * `mfence`), as P-CLHT's movnt64 stores its table offset, keys and bucket links; PMRace's
 * resize race (ASPLOS'22 Table 2 #1) in that shape.
 *
 * The pool: a header line (magic, the root), then chunks from a bump allocator, each a header
 * line {size, kind} persisted before use.  A table is a line {nbuckets, expansions} and
 * cache-line buckets {lock, 3 keys, 3 values, next overflow bucket}.  put() takes the bucket's
 * lock (a CAS on its PM word), stores and persists the value, then stores the key with the
 * helper; a full bucket chains an overflow bucket (linked with the helper); too many overflow
 * buckets and the put resizes: it marks every old bucket (puts that find the mark retry on the
 * new table), rehashes into a table twice as big, persists it and swaps the root with the helper.
 * Every store of the root is the helper's.  Keys are YCSB's hashed record keys (FNV-1a of the
 * record number, YCSB's default order).
 *
 * The race: the helper's `movnti` makes the root visible at once and durable only at its
 * `mfence`; a put that loads the root in between inserts into the new table, and its value and
 * key are durable at once: a crash before the fence brings back the old table and the insert is
 * lost.  FIXED twin (pr_ntroot_fixed): the new table's buckets start locked and are unlocked
 * after the helper returns (the root durable), so no put inserts into the table before.
 *
 * 4 threads; each inserts OPS/8 keys (load phase, several resizes), then runs OPS/2 YCSB-A-like
 * operations (half reads, half updates, one insert in eight).  Gets are lock-free.
 * Usage: pr_ntroot POOL [OPS [POOL_MB]]   prints the table size and key count, exits 0
 *        pr_ntroot POOL recover           resets the locks, follows the root, prints `recovered:
 *                                         N keys in B buckets` (`recovered: bad root`), exits 0 */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#ifndef FIXED
#define FIXED 0
#endif

#define MAGIC 0x4e54524f4f540001ull
#define ENTRIES 3
#define THREADS 4
#define LOCK_FREE 0
#define LOCK_HELD 1
#define LOCK_RESIZE 2
#define KIND_TABLE 1
#define KIND_BUCKET 2

struct bucket { /* one line */
    volatile uint64_t lock;
    volatile uint64_t key[ENTRIES]; /* 0: empty */
    volatile uint64_t val[ENTRIES];
    volatile uint64_t next; /* offset of the overflow bucket, 0 for none */
};

struct table {
    uint64_t nbuckets;
    volatile uint64_t expansions; /* overflow buckets chained */
    uint64_t pad[6];
    struct bucket b[];
};

struct header { /* line 0 */
    uint64_t magic;
    volatile uint64_t table_off; /* the root */
    uint64_t pad[6];
};

struct chunk { /* the line before each object */
    uint64_t size;
    uint64_t kind;
    uint64_t pad[6];
};

_Static_assert(sizeof(struct bucket) == 64, "a bucket is a line");

static char *pool;
static uint64_t pool_size;
static uint64_t next_free;     /* bump allocator (DRAM, atomic) */
static volatile int resizing;  /* one resize at a time (DRAM) */
static uint64_t ops = 512;

static struct header *hdr(void) { return (struct header *)pool; }
static struct table *table_at(uint64_t off) { return (struct table *)(pool + off); }
static struct bucket *bucket_at(uint64_t off) { return (struct bucket *)(pool + off); }
static uint64_t hash(uint64_t key) { return (key * 0x9e3779b97f4a7c15ull) >> 32; }
static void relax(void) { sched_yield(); }

/* A non-temporal 8-byte store made durable at once (`movnti`, `mfence`); not inlined, so one
 * instruction stores roots, keys and links alike. */
static __attribute__((noinline)) void nt_store(volatile uint64_t *p, uint64_t v)
{
    PM_MOVNTI64(p, v); /* PR: source store */
    PM_MFENCE();
}

/* YCSB's hashed key of record n (FNV-1a, 64 bits), never 0 (0 marks an empty slot). */
static uint64_t key_of(uint64_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 8; i++, n >>= 8)
        h = (h ^ (n & 0xff)) * 0x100000001b3ull;
    return h ? h : 1;
}

/* A zeroed object of `size` bytes after a persisted chunk header. */
static uint64_t alloc(uint64_t size, uint64_t kind)
{
    size = (size + 63) & ~63ull;
    uint64_t off = __atomic_fetch_add(&next_free, 64 + size, __ATOMIC_RELAXED);
    if (off + 64 + size > pool_size) {
        fprintf(stderr, "pool full\n");
        exit(1);
    }
    memset(pool + off + 64, 0, size);
    struct chunk *c = (struct chunk *)(pool + off);
    c->size = size;
    c->kind = kind;
    persist(c, 64);
    return off + 64;
}

static uint64_t new_table(uint64_t nbuckets)
{
    uint64_t off = alloc(sizeof(struct table) + nbuckets * sizeof(struct bucket), KIND_TABLE);
    table_at(off)->nbuckets = nbuckets;
    return off;
}

/* 1: locked; 0: the bucket is being moved by a resize (retry on the new table). */
static int lock_bucket(struct bucket *b)
{
    for (;;) {
        uint64_t free = LOCK_FREE;
        if (__atomic_compare_exchange_n(&b->lock, &free, LOCK_HELD, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return 1;
        if (free == LOCK_RESIZE)
            return 0;
        relax();
    }
}

static void unlock_bucket(struct bucket *b) { __atomic_store_n(&b->lock, LOCK_FREE, __ATOMIC_RELEASE); }

/* Into a table nobody else reaches yet (a resize's new one): no locks. */
static void insert_private(struct table *t, uint64_t key, uint64_t val)
{
    struct bucket *b = &t->b[hash(key) % t->nbuckets];
    for (;;) {
        for (int j = 0; j < ENTRIES; j++)
            if (b->key[j] == 0) {
                b->val[j] = val;
                b->key[j] = key;
                return;
            }
        if (!b->next) {
            uint64_t o = alloc(sizeof(struct bucket), KIND_BUCKET);
            persist(bucket_at(o), sizeof(struct bucket));
            b->next = o;
            t->expansions++;
        }
        b = bucket_at(b->next);
    }
}

static void persist_table(struct table *t)
{
    persist(t, sizeof *t + t->nbuckets * sizeof(struct bucket));
    for (uint64_t i = 0; i < t->nbuckets; i++)
        for (uint64_t o = t->b[i].next; o; o = bucket_at(o)->next)
            persist(bucket_at(o), sizeof(struct bucket));
}

static void resize(uint64_t old_off)
{
    if (__atomic_exchange_n(&resizing, 1, __ATOMIC_ACQUIRE)) {
        while (hdr()->table_off == old_off && resizing)
            relax();
        return;
    }
    if (hdr()->table_off != old_off) {
        __atomic_store_n(&resizing, 0, __ATOMIC_RELEASE);
        return;
    }
    struct table *old = table_at(old_off);
    uint64_t new_off = new_table(old->nbuckets * 2);
    struct table *n = table_at(new_off);
    for (uint64_t i = 0; i < old->nbuckets; i++) {
        struct bucket *b = &old->b[i];
        for (;;) { /* the old bucket stays marked: puts that find it retry on the new table */
            uint64_t free = LOCK_FREE;
            if (__atomic_compare_exchange_n(&b->lock, &free, LOCK_RESIZE, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                break;
            relax();
        }
        for (struct bucket *c = b; c; c = c->next ? bucket_at(c->next) : NULL)
            for (int j = 0; j < ENTRIES; j++)
                if (c->key[j])
                    insert_private(n, c->key[j], c->val[j]);
    }
#if FIXED
    /* The new table's buckets are published to puts only once the root is durable: they start
     * locked, and are unlocked after the root's persist. */
    for (uint64_t i = 0; i < n->nbuckets; i++)
        n->b[i].lock = LOCK_HELD;
#endif
    persist_table(n);
    nt_store(&hdr()->table_off, new_off); /* BUG: visible before durable, puts reach the new table in between */
#if FIXED
    for (uint64_t i = 0; i < n->nbuckets; i++) /* FIX: the root is durable now: puts may use the table */
        unlock_bucket(&n->b[i]);
#endif
    __atomic_store_n(&resizing, 0, __ATOMIC_RELEASE);
}

/* Returns 1 for an insert, 0 for an update. */
static int put(uint64_t key, uint64_t val)
{
    for (;;) {
        uint64_t toff = hdr()->table_off; /* PR: load */
        struct table *t = table_at(toff);
        struct bucket *b = &t->b[hash(key) % t->nbuckets];
        if (!lock_bucket(b)) {
            while (hdr()->table_off == toff)
                relax();
            continue;
        }
        struct bucket *last = b;
        for (struct bucket *c = b; c; c = c->next ? bucket_at(c->next) : NULL) {
            last = c;
            for (int j = 0; j < ENTRIES; j++)
                if (c->key[j] == key) {
                    c->val[j] = val; /* LF: read by lock-free gets before its persist */
                    persist((void *)&c->val[j], 8);
                    unlock_bucket(b);
                    return 0;
                }
        }
        for (struct bucket *c = b; c; c = c->next ? bucket_at(c->next) : NULL)
            for (int j = 0; j < ENTRIES; j++)
                if (c->key[j] == 0) {
                    c->val[j] = val; /* PR: side effect */
                    persist((void *)&c->val[j], 8);
                    nt_store(&c->key[j], key);
                    unlock_bucket(b);
                    return 1;
                }
        if (t->expansions >= t->nbuckets / 4 + 1) {
            unlock_bucket(b);
            resize(toff);
            continue;
        }
        uint64_t o = alloc(sizeof(struct bucket), KIND_BUCKET);
        struct bucket *nb = bucket_at(o);
        nb->val[0] = val;
        nb->key[0] = key;
        persist(nb, sizeof *nb);
        nt_store(&last->next, o);
        __atomic_fetch_add(&t->expansions, 1, __ATOMIC_RELAXED); /* CNT: never persisted, read by puts under other locks */
        unlock_bucket(b);
        return 1;
    }
}

/* Lock-free, as CLHT's get. */
static uint64_t get(uint64_t key)
{
    struct table *t = table_at(hdr()->table_off);
    for (struct bucket *c = &t->b[hash(key) % t->nbuckets]; c; c = c->next ? bucket_at(c->next) : NULL)
        for (int j = 0; j < ENTRIES; j++)
            if (c->key[j] == key)
                return c->val[j];
    return 0;
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg, loaded = ops / 8, x = 0x2545f4914f6cdd1dull * (id + 1);
    uint64_t found = 0;
    for (uint64_t k = 0; k < loaded; k++) /* load phase: keys id+1, id+1+THREADS, ... */
        put(key_of(1 + id + k * THREADS), k);
    for (uint64_t i = 0; i < ops / 2; i++) { /* run phase */
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        uint64_t key = key_of(1 + (x >> 8) % (loaded * THREADS));
        if (x % 8 == 0)
            put(key_of(1 + id + (loaded + i) * THREADS), i);
        else if (x & 1)
            put(key, i);
        else
            found += get(key) != 0;
    }
    return (void *)(uintptr_t)found;
}

static void reset_locks(void)
{
    /* Every lock in every chunk: a crash leaves held locks, and nobody holds them now. */
    for (uint64_t off = sizeof(struct header); off + 64 <= pool_size;) {
        struct chunk *c = (struct chunk *)(pool + off);
        if (c->size == 0 || c->size > pool_size - off - 64)
            break;
        if (c->kind == KIND_TABLE) {
            struct table *t = table_at(off + 64);
            for (uint64_t i = 0; i < t->nbuckets && (i + 2) * 64 <= c->size; i++)
                if (t->b[i].lock != LOCK_FREE) {
                    t->b[i].lock = LOCK_FREE;
                    clwb((void *)&t->b[i].lock);
                }
        } else if (c->kind == KIND_BUCKET && bucket_at(off + 64)->lock != LOCK_FREE) {
            bucket_at(off + 64)->lock = LOCK_FREE;
            clwb((void *)&bucket_at(off + 64)->lock);
        }
        off += 64 + c->size;
    }
    sfence();
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror("stat");
        exit(2);
    }
    return (uint64_t)st.st_size;
}

static int recover(const char *path)
{
    pool_size = file_size(path);
    pool = pm_open(path, pool_size, 0);
    if (hdr()->magic != MAGIC) {
        puts("recovered: no table");
        return 0;
    }
    reset_locks();
    uint64_t off = hdr()->table_off;
    if (off < 128 || off >= pool_size || table_at(off)->nbuckets == 0 ||
        off + sizeof(struct table) + table_at(off)->nbuckets * sizeof(struct bucket) > pool_size) {
        puts("recovered: bad root");
        return 0;
    }
    struct table *t = table_at(off);
    uint64_t keys = 0;
    for (uint64_t i = 0; i < t->nbuckets; i++)
        for (struct bucket *c = &t->b[i]; c; c = c->next && c->next < pool_size ? bucket_at(c->next) : NULL)
            for (int j = 0; j < ENTRIES; j++)
                keys += c->key[j] != 0;
    printf("recovered: %llu keys in %llu buckets\n", (unsigned long long)keys, (unsigned long long)t->nbuckets);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2 && strcmp(argv[2], "recover") == 0)
        return recover(path);
    uint64_t mb = 1;
    if (argc > 2)
        ops = strtoull(argv[2], NULL, 10);
    if (argc > 3)
        mb = strtoull(argv[3], NULL, 10);
    if (ops < 16 || ops > 10000000 || mb < 1 || mb > 4096) {
        fprintf(stderr, "OPS must be 16..10000000, POOL_MB 1..4096\n");
        return 2;
    }
    pool_size = mb << 20;
    pool = pm_map(path, pool_size);
    next_free = sizeof(struct header);
    uint64_t off = new_table(4);
    persist_table(table_at(off));
    nt_store(&hdr()->table_off, off);
    hdr()->magic = MAGIC;
    persist(pool, sizeof(struct header));
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
    uint64_t found = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(th[i], &r);
        found += (uint64_t)(uintptr_t)r;
    }
    struct table *t = table_at(hdr()->table_off);
    uint64_t keys = 0;
    for (uint64_t i = 0; i < t->nbuckets; i++)
        for (struct bucket *c = &t->b[i]; c; c = c->next ? bucket_at(c->next) : NULL)
            for (int j = 0; j < ENTRIES; j++)
                keys += c->key[j] != 0;
    printf("buckets %llu, keys %llu, gets found %llu\n", (unsigned long long)t->nbuckets, (unsigned long long)keys,
           (unsigned long long)found);
    return 0;
}
