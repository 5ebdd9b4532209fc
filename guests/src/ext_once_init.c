/* ext_once_init: a persistent hash index whose geometry (bucket count, hash seed) is set up
 * lazily by whichever thread uses it first, through pthread_once (or C11 call_once when built
 * with USE_C11), the usual idiom for "initialise on first use" without a global constructor
 * (built -O2; the C11 twins -O0 -g and dynamic). Four threads then insert keys: each reads the
 * geometry, locks its bucket's mutex (DRAM), appends the key to the bucket and persists it, and
 * persists its own durable count of inserted keys. Recovery rehashes every key it finds with the
 * durable geometry: each must sit in its bucket, and the buckets must hold all the counted keys.
 *   - BUG (without FIXED): the once routine stores the geometry and never persists it (INIT_BUG):
 *     the threads see it (pthread_once orders it before their loads) and persist entries placed by
 *     it; a crash leaves durable entries and counts under a zero geometry.
 *   - FIXED (ext_once_init_fixed): the geometry is persisted inside the once routine.
 * Usage: ext_once_init [POOL]          formats and runs the inserters
 *        ext_once_init POOL recover    `recovery ok: N keys` (exit 0) or `recovery: ...` (1) */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef USE_C11
#include <threads.h>
#endif

#define THREADS 4
#define PER_THREAD 3
#define BUCKETS 8
#define DEPTH 8
#define MAGIC 0x4f4e4345u

struct bucket {
    uint64_t n;
    uint64_t key[DEPTH - 1];
};

struct pool {
    uint64_t magic;
    uint64_t pad0[7];
    struct {
        uint64_t nbuckets;
        uint64_t seed;
        uint64_t pad[6];
    } geo;
    struct {
        uint64_t n;
        uint64_t pad[7];
    } count[THREADS];
    struct bucket bucket[BUCKETS];
};

static struct pool *pool;
static pthread_mutex_t locks[BUCKETS];
#ifdef USE_C11
static once_flag geo_once = ONCE_FLAG_INIT;
#else
static pthread_once_t geo_once = PTHREAD_ONCE_INIT;
#endif

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static void init_geometry(void)
{
    for (unsigned b = 0; b < BUCKETS; b++)
        pthread_mutex_init(&locks[b], NULL);
    pool->geo.seed = 0x5bd1e995; /* GEO_STORE: seed */
    pool->geo.nbuckets = BUCKETS; /* GEO_STORE: nbuckets */
#ifdef FIXED
    persist(&pool->geo, sizeof pool->geo); /* FIX: the geometry durable before anyone uses it */
#endif
    /* INIT_BUG: without FIXED the geometry is left to the cache */
}

static uint64_t bucket_of(uint64_t key, uint64_t seed, uint64_t nbuckets)
{
    return ((key * seed) >> 7) % nbuckets;
}

static void *inserter(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
#ifdef USE_C11
    call_once(&geo_once, init_geometry);
#else
    pthread_once(&geo_once, init_geometry);
#endif
    uint64_t nb = pool->geo.nbuckets, seed = pool->geo.seed; /* GEO_LOAD */
    for (unsigned i = 0; i < PER_THREAD; i++) {
        uint64_t key = 1 + t + (uint64_t)i * THREADS;
        uint64_t b = bucket_of(key, seed, nb);
        pthread_mutex_lock(&locks[b]);
        struct bucket *bk = &pool->bucket[b];
        bk->key[bk->n] = key;
        persist(&bk->key[bk->n], sizeof(uint64_t));
        bk->n++;
        persist(&bk->n, sizeof bk->n);
        pthread_mutex_unlock(&locks[b]);
        pool->count[t].n = i + 1;
        persist(&pool->count[t].n, sizeof(uint64_t));
    }
    return NULL;
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    uint64_t counted = 0, found = 0;
    for (unsigned t = 0; t < THREADS; t++)
        counted += pool->count[t].n;
    uint64_t nb = pool->geo.nbuckets, seed = pool->geo.seed, stored = 0;
    for (unsigned b = 0; b < BUCKETS; b++)
        stored += pool->bucket[b].n;
    if (nb == 0 || nb > BUCKETS || seed == 0) {
        if (counted > 0 || stored > 0) {
            printf("recovery: %llu keys counted, %llu stored, under no geometry\n", (unsigned long long)counted, (unsigned long long)stored);
            return 1;
        }
        printf("recovery ok: 0 keys\n");
        return 0;
    }
    for (unsigned b = 0; b < BUCKETS; b++) {
        for (uint64_t k = 0; k < pool->bucket[b].n && k < DEPTH - 1; k++) {
            if (bucket_of(pool->bucket[b].key[k], seed, nb) != b) {
                printf("recovery: key %llu in the wrong bucket\n", (unsigned long long)pool->bucket[b].key[k]);
                return 1;
            }
            found++;
        }
    }
    if (found < counted) {
        printf("recovery: %llu keys found, %llu counted\n", (unsigned long long)found, (unsigned long long)counted);
        return 1;
    }
    printf("recovery ok: %llu keys\n", (unsigned long long)found);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/onceinit";
    int recovering = argc > 2 && strcmp(argv[2], "recover") == 0;
    int fd = open(path, recovering ? O_RDWR : O_RDWR | O_CREAT, 0644);
    struct stat st;
    if (recovering && (fd < 0 || fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(struct pool))) {
        printf("recovery ok: no pool\n");
        return 0;
    }
    if (fd < 0 || (!recovering && ftruncate(fd, sizeof(struct pool)) != 0)) {
        perror(path);
        return 1;
    }
    pool = mmap(NULL, sizeof(struct pool), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (pool == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    if (recovering)
        return recover();
    memset(pool, 0, sizeof *pool);
    persist(pool, sizeof *pool);
    pool->magic = MAGIC;
    persist(&pool->magic, sizeof pool->magic);
    pthread_t th[THREADS];
    for (unsigned t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, inserter, (void *)(uintptr_t)t);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    uint64_t n = 0;
    for (unsigned b = 0; b < BUCKETS; b++)
        n += pool->bucket[b].n;
    printf("inserted: %llu keys\n", (unsigned long long)n);
    return n == THREADS * PER_THREAD ? 0 : 1;
}
