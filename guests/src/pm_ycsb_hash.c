/* pm_ycsb_hash: BUG-FREE: a YCSB-like workload on a small PM hash table, for the cost columns of
 * `ferrite compare` (a throughput-style case, not a bug).  Two threads run a deterministic mix of
 * 50% reads and 50% updates (read-modify-write upserts: value += delta) over 64 keys drawn from a
 * Zipf(1) distribution (a fixed LCG per thread; no time, no rand()).  The table resizes as keys
 * arrive.
 *
 * The table: a root line { table_off, nbuckets, next_free, resizes } and a table of nbuckets
 * one-line buckets { nkeys, slot[3] {key, value} } from a bump allocator.  Bucket b is protected by
 * lock stripe b mod 16 (16 DRAM mutexes; nbuckets is a multiple of 16, so a key's stripe, its hash
 * mod 16, does not change when the table grows, and the first 16-bucket table has a lock per
 * bucket).  An operation takes its key's stripe, reads the root, and reads or updates the bucket;
 * an update persists the bucket's line before unlocking.  When a bucket is full the thread
 * releases its stripe, takes all 16 in order, and (if no one resized meanwhile) allocates a table
 * twice as large (or more, until every bucket fits), rehashes into it, persists it, then swaps and
 * persists the root, all before unlocking.  Everything is persisted inside the critical section
 * that wrote it.
 *
 * Output depends only on the workload: the number of reads and updates, the keys present, the sum
 * of the values (updates commute) and the final table size (the smallest size the final key set
 * fits; keys are never removed).  About 1.05 M emulated instructions.
 * Usage: pm_ycsb_hash [POOL [OPS]]     OPS operations per thread (default 2500), prints the counts
 *        pm_ycsb_hash POOL check       opens the existing pool (never written) and checks the table:
 *                                      prints `recovery ok: N keys, B buckets` (exit 0) or
 *                                      `recovery: ...` (exit 1) */
#include <pthread.h>

#include "pm.h"

#define POOL_SIZE (64 * 1024)
#define NTHREADS 2
#define NSTRIPES 16
#define NKEYS 64
#define SLOTS 3
#define TABLE_BASE 64

struct bucket {
    uint64_t nkeys;
    struct {
        uint64_t key; /* 0: empty */
        uint64_t value;
    } slot[SLOTS];
    uint64_t pad;
};

struct root {
    volatile uint64_t table_off;
    volatile uint64_t nbuckets;
    volatile uint64_t next_free;
    volatile uint64_t resizes;
    uint64_t pad[4];
};

_Static_assert(sizeof(struct bucket) == 64, "a bucket is one line");
_Static_assert(sizeof(struct root) == TABLE_BASE, "root line");

static char *pool;
static struct root *root;
static pthread_mutex_t stripe[NSTRIPES];
static uint64_t ops_per_thread = 2500;
static uint64_t zipf_cdf[NKEYS]; /* cumulative weights of keys 1..NKEYS, weight 100000 / k */
static uint64_t reads[NTHREADS], updates[NTHREADS], delta_sum[NTHREADS];
static volatile uint64_t sink;

static uint64_t hash(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 32; }
static struct bucket *table_at(uint64_t off) { return (struct bucket *)(pool + off); }

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 17;
}

static uint64_t zipf_key(uint64_t u)
{
    uint64_t x = u % zipf_cdf[NKEYS - 1];
    uint64_t lo = 0, hi = NKEYS - 1;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (zipf_cdf[mid] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo + 1;
}

static void lock_all(void)
{
    for (int i = 0; i < NSTRIPES; i++)
        pthread_mutex_lock(&stripe[i]);
}

static void unlock_all(void)
{
    for (int i = NSTRIPES - 1; i >= 0; i--)
        pthread_mutex_unlock(&stripe[i]);
}

/* Whether every key of the table at `off` fits a table of `n` buckets. */
static int fits(uint64_t off, uint64_t nb, uint64_t n)
{
    uint8_t occ[1024] = {0};
    const struct bucket *t = table_at(off);
    for (uint64_t b = 0; b < nb; b++)
        for (int j = 0; j < SLOTS; j++)
            if (t[b].slot[j].key != 0 && ++occ[hash(t[b].slot[j].key) % n] > SLOTS)
                return 0;
    return 1;
}

/* Under all stripes: grows the table unless another thread already replaced `seen`. */
static void resize(uint64_t seen)
{
    lock_all();
    if (root->table_off == seen) {
        uint64_t old = root->table_off, nb = root->nbuckets, n = nb * 2;
        while (!fits(old, nb, n))
            n *= 2;
        uint64_t off = root->next_free;
        if (n > 1024 || off + n * sizeof(struct bucket) > POOL_SIZE) {
            fprintf(stderr, "table full\n");
            exit(2);
        }
        struct bucket *t = table_at(off);
        memset(t, 0, n * sizeof(struct bucket));
        const struct bucket *o = table_at(old);
        for (uint64_t b = 0; b < nb; b++)
            for (int j = 0; j < SLOTS; j++)
                if (o[b].slot[j].key != 0) {
                    struct bucket *d = &t[hash(o[b].slot[j].key) % n];
                    d->slot[d->nkeys].key = o[b].slot[j].key;
                    d->slot[d->nkeys].value = o[b].slot[j].value;
                    d->nkeys++;
                }
        persist(t, n * sizeof(struct bucket)); /* the new table durable before the root points to it */
        root->table_off = off;
        root->nbuckets = n;
        root->next_free = off + n * sizeof(struct bucket);
        root->resizes++;
        PM_CLWB(root); PM_SFENCE(); /* RESIZE: the root swapped and persisted under every stripe */
    }
    unlock_all();
}

/* Reads (update == 0) or adds `delta` to the key's value, inserting it if absent. */
static void op(uint64_t key, int update, uint64_t delta)
{
    uint64_t h = hash(key);
    pthread_mutex_t *l = &stripe[h % NSTRIPES];
    for (;;) {
        pthread_mutex_lock(l);
        uint64_t off = root->table_off; /* ROOT LOAD: under the key's stripe */
        struct bucket *b = &table_at(off)[h % root->nbuckets];
        int j;
        for (j = 0; j < (int)b->nkeys; j++)
            if (b->slot[j].key == key)
                break;
        if (!update) {
            if (j < (int)b->nkeys)
                sink = b->slot[j].value; /* READ: under the key's stripe */
            pthread_mutex_unlock(l);
            return;
        }
        if (j < (int)b->nkeys) {
            b->slot[j].value += delta; /* UPDATE: under the key's stripe */
            PM_CLWB(b); PM_SFENCE(); /* UPDATE PERSIST: before unlocking */
            pthread_mutex_unlock(l);
            return;
        }
        if (b->nkeys < SLOTS) {
            b->slot[j].key = key;
            b->slot[j].value = delta;
            b->nkeys = (uint64_t)j + 1; /* INSERT: under the key's stripe */
            PM_CLWB(b); PM_SFENCE(); /* INSERT PERSIST: before unlocking */
            pthread_mutex_unlock(l);
            return;
        }
        pthread_mutex_unlock(l);
        resize(off);
    }
}

static void *worker(void *arg)
{
    int tid = (int)(uintptr_t)arg;
    uint64_t s = 0x2545F4914F6CDD1Dull + (uint64_t)tid * 0x9E3779B97F4A7C15ull;
    for (uint64_t i = 0; i < ops_per_thread; i++) {
        uint64_t u = lcg(&s);
        uint64_t key = zipf_key(u >> 8);
        if (u & 1) {
            uint64_t delta = (u >> 40) % 100 + 1;
            op(key, 1, delta);
            updates[tid]++;
            delta_sum[tid] += delta;
        } else {
            op(key, 0, 0);
            reads[tid]++;
        }
    }
    return NULL;
}

static int check(void)
{
    uint64_t off = root->table_off, nb = root->nbuckets;
    if (off == 0) {
        puts("recovery ok: empty pool");
        return 0;
    }
    if (nb < NSTRIPES || nb > 1024 || nb % NSTRIPES != 0 || off < TABLE_BASE || off + nb * 64 > POOL_SIZE ||
        off + nb * 64 > root->next_free) {
        puts("recovery: bad root");
        return 1;
    }
    const struct bucket *t = table_at(off);
    uint64_t keys = 0;
    uint8_t seen[NKEYS + 1] = {0};
    for (uint64_t b = 0; b < nb; b++) {
        if (t[b].nkeys > SLOTS) {
            printf("recovery: bucket %llu overfull\n", (unsigned long long)b);
            return 1;
        }
        for (uint64_t j = 0; j < t[b].nkeys; j++) {
            uint64_t k = t[b].slot[j].key;
            if (k == 0 || k > NKEYS || hash(k) % nb != b || seen[k]) {
                printf("recovery: bad key in bucket %llu\n", (unsigned long long)b);
                return 1;
            }
            seen[k] = 1;
            keys++;
        }
    }
    printf("recovery ok: %llu keys, %llu buckets\n", (unsigned long long)keys, (unsigned long long)nb);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    int check_mode = argc > 2 && strcmp(argv[2], "check") == 0;
    if (argc > 2 && !check_mode) {
        ops_per_thread = strtoull(argv[2], NULL, 10);
        if (ops_per_thread < 1 || ops_per_thread > 1000000) {
            fprintf(stderr, "OPS must be 1..1000000\n");
            return 2;
        }
    }
    pool = check_mode ? pm_open(path, POOL_SIZE, 0) : pm_map(path, POOL_SIZE);
    root = (struct root *)pool;
    if (check_mode)
        return check();

    uint64_t total = 0;
    for (int k = 1; k <= NKEYS; k++) {
        total += 100000 / (uint64_t)k;
        zipf_cdf[k - 1] = total;
    }
    for (int i = 0; i < NSTRIPES; i++)
        pthread_mutex_init(&stripe[i], NULL);

    /* Initialise: an empty 16-bucket table, then the root pointing to it. */
    memset(root, 0, sizeof *root);
    persist(root, sizeof *root);
    memset(table_at(TABLE_BASE), 0, NSTRIPES * sizeof(struct bucket));
    persist(table_at(TABLE_BASE), NSTRIPES * sizeof(struct bucket));
    root->nbuckets = NSTRIPES;
    root->next_free = TABLE_BASE + NSTRIPES * sizeof(struct bucket);
    root->table_off = TABLE_BASE;
    persist(root, sizeof *root);

    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);

    const struct bucket *t = table_at(root->table_off);
    uint64_t keys = 0, sum = 0;
    for (uint64_t b = 0; b < root->nbuckets; b++)
        for (uint64_t j = 0; j < t[b].nkeys; j++) {
            keys++;
            sum += t[b].slot[j].value;
        }
    printf("ops %llu, reads %llu, updates %llu, keys %llu, value sum %llu (expected %llu), buckets %llu\n",
           (unsigned long long)(NTHREADS * ops_per_thread), (unsigned long long)(reads[0] + reads[1]),
           (unsigned long long)(updates[0] + updates[1]), (unsigned long long)keys, (unsigned long long)sum,
           (unsigned long long)(delta_sum[0] + delta_sum[1]), (unsigned long long)root->nbuckets);
    return 0;
}
