/* pi_clht_resize: the shape of P-CLHT's resize bug (HawkSet Table 2 #4).  A lock-based hash table
 * in PM: the root holds the offset of the current table; put() takes the table lock, loads the
 * root, grows the table when it is half full (allocate a table twice as big, rehash into it,
 * persist it, swap the root's offset), inserts, and unlocks.  The swapped root pointer is
 * persisted only after the lock is released, so another thread's put can load the new table's
 * offset and insert into a table that a crash would forget.
 * By default two threads insert 20 keys each (four resizes); `pi_clht_resize POOL KEYS THREADS`
 * scales it (a benchmark: 4 threads x 5000 keys).  FIXED twin: pi_clht_resize_fixed.c.
 * Usage: pi_clht_resize [POOL [KEYS [THREADS]]]; prints the table size and a checksum, exits 0. */
#include <pthread.h>

#include "pm.h"

#define POOL_SIZE (4 * 1024 * 1024)
#define MAX_THREADS 8

struct bucket {
    uint64_t key; /* 0: empty */
    uint64_t val;
};

struct table {
    uint64_t nbuckets;
    uint64_t count;
    uint64_t pad[6];
    struct bucket b[];
};

struct root {
    volatile uint64_t table_off;
    uint64_t pad[7];
};

static char *pool;
static uint64_t keys = 20;
static uint64_t next_free; /* bump allocator (under the lock) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct table *table_at(uint64_t off) { return (struct table *)(pool + off); }

static void persist_table(struct table *t)
{
    persist(t, sizeof *t + t->nbuckets * sizeof(struct bucket));
}

static void insert(struct table *t, uint64_t key, uint64_t val)
{
    uint64_t i = key % t->nbuckets;
    while (t->b[i].key != 0)
        i = (i + 1) % t->nbuckets;
    t->b[i].key = key;
    t->b[i].val = val;
    persist(&t->b[i], sizeof t->b[i]);
    t->count++;
    persist(&t->count, sizeof t->count);
}

static uint64_t new_table(uint64_t nbuckets)
{
    uint64_t off = next_free;
    next_free += sizeof(struct table) + nbuckets * sizeof(struct bucket);
    struct table *t = table_at(off);
    memset(t, 0, sizeof *t + nbuckets * sizeof(struct bucket));
    t->nbuckets = nbuckets;
    return off;
}

/* Under the lock: returns 1 when it swapped the root. */
static int maybe_resize(struct root *root)
{
    struct table *t = table_at(root->table_off);
    if ((t->count + 1) * 2 <= t->nbuckets)
        return 0;
    uint64_t off = new_table(t->nbuckets * 2);
    struct table *n = table_at(off);
    for (uint64_t i = 0; i < t->nbuckets; i++)
        if (t->b[i].key != 0)
            insert(n, t->b[i].key, t->b[i].val);
    persist_table(n);
    root->table_off = off; /* BUG: root swapped under the lock, persisted after unlocking */
    return 1;
}

static void put(uint64_t key, uint64_t val)
{
    struct root *root = (struct root *)pool;
    pthread_mutex_lock(&lock);
    int swapped = maybe_resize(root);
    struct table *t = table_at(root->table_off); /* LOAD: another thread's unpersisted root */
    insert(t, key, val);
    pthread_mutex_unlock(&lock);
    if (swapped) {
        PM_CLWB(&root->table_off); PM_SFENCE(); /* PERSIST: the root, too late */
    }
}

static void *worker(void *arg)
{
    uint64_t base = (uint64_t)(uintptr_t)arg;
    for (uint64_t k = 1; k <= keys; k++)
        put(base + k, (base + k) * 10);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    int nthreads = 2;
    if (argc > 2)
        keys = strtoull(argv[2], NULL, 10);
    if (argc > 3)
        nthreads = atoi(argv[3]);
    if (keys < 1 || keys > 30000 || nthreads < 1 || nthreads > MAX_THREADS || keys * nthreads > 60000) {
        fprintf(stderr, "KEYS must be 1..30000, THREADS 1..8, KEYS*THREADS at most 60000\n");
        return 2;
    }
    pool = pm_map(path, POOL_SIZE);
    struct root *root = (struct root *)pool;
    next_free = 64;
    uint64_t off = new_table(8);
    persist_table(table_at(off));
    root->table_off = off;
    persist((void *)&root->table_off, sizeof root->table_off);
    pthread_t th[MAX_THREADS];
    for (int i = 0; i < nthreads; i++)
        pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i * 1000000));
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    struct table *t = table_at(root->table_off);
    uint64_t sum = 0;
    for (uint64_t i = 0; i < t->nbuckets; i++)
        sum += t->b[i].key + t->b[i].val;
    printf("buckets %llu, count %llu, sum %llu\n", (unsigned long long)t->nbuckets,
           (unsigned long long)t->count, (unsigned long long)sum);
    return 0;
}
