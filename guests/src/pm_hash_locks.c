/* pm_hash_locks: a lock-heavy concurrent hash table in PM, the shape of real PM key-value
 * stores: THREADS threads (default 4) run OPS operations each over 1,024 buckets, one pthread
 * mutex per bucket, 40% updates (an insert or an in-place update, persisted with clwb + sfence
 * before the bucket is unlocked) and 60% lookups. Entries come from a per-thread bump region
 * of the pool. Used by `ferrite bench` and docs/performance.md for the cost of thread switches.
 *
 * Usage: pm_hash_locks [OPS_PER_THREAD] [POOL|dram] [THREADS]; exits 0 and prints a checksum.
 * With `dram` the table lives in ordinary memory (the same program without PM accesses). */
#include <pthread.h>

#include "pm.h"

#define BUCKETS 1024
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
static long ops = 20000;
static int threads = 4;
static size_t region; /* bytes of entries per thread */
static int use_pm = 1;

static void persist_range(void *p, size_t n)
{
    if (!use_pm)
        return;
    persist(p, n);
}

static void *worker(void *arg)
{
    long id = (long)arg;
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1);
    size_t base = BUCKETS * sizeof(uint64_t) + (size_t)id * region;
    size_t used = 0;
    uint64_t found = 0;
    for (long i = 0; i < ops; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t key = x % (BUCKETS * 8);
        size_t b = key % BUCKETS;
        int update = (x >> 32) % 10 < 4;
        pthread_mutex_lock(&locks[b]);
        uint64_t off = heads[b];
        struct entry *e = NULL;
        while (off) {
            struct entry *c = (struct entry *)(pool + off);
            if (c->key == key) {
                e = c;
                break;
            }
            off = c->next;
        }
        if (update) {
            if (e) {
                e->value = x;
                persist_range(&e->value, sizeof e->value);
            } else if (used + sizeof(struct entry) <= region) {
                struct entry *n = (struct entry *)(pool + base + used);
                n->key = key;
                n->value = x;
                n->next = heads[b];
                persist_range(n, sizeof *n);
                heads[b] = base + used;
                persist_range(&heads[b], sizeof heads[b]);
                used += sizeof(struct entry);
            }
        } else if (e) {
            found += e->value & 1;
        }
        pthread_mutex_unlock(&locks[b]);
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
    region = (size_t)(ops * 4 / 10 + 1) * sizeof(struct entry);
    size_t size = BUCKETS * sizeof(uint64_t) + (size_t)threads * region;
    size = (size + 4095) & ~(size_t)4095;
    if (strcmp(path, "dram") == 0) {
        use_pm = 0;
        pool = calloc(1, size);
    } else {
        pool = pm_map(path, size);
        memset(pool, 0, BUCKETS * sizeof(uint64_t));
        persist(pool, BUCKETS * sizeof(uint64_t));
    }
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
    printf("pm_hash_locks: %d threads x %ld ops, %llu entries, %llu odd values found\n", threads, ops,
           (unsigned long long)entries, (unsigned long long)found);
    return 0;
}
