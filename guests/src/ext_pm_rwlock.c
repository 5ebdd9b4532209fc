/* ext_pm_rwlock: a reader/writer lock implemented by hand in the PM pool it guards (built
 * -O0 -g, as research artifacts are). The lock word lives in the pool's header next to the
 * table's version: bit 63 is the writer, the low bits count readers; pm_rdlock / pm_rdunlock /
 * pm_wrlock / pm_wrunlock take it with compare-and-swap and fetch-add (functions, so that a
 * lock configuration can name them: guests/configs/ext_pm_rwlock.ron). Two writers update table
 * entries under the write lock and persist each entry and the version (whose line holds the
 * lock word, so the held lock is persisted with it); two readers sum the table under the read
 * lock. Recovery opens the pool and reads the table under the read lock.
 *   - BUG (without FIXED): recovery does not reset the lock word (STALE_BUG): a crash while a
 *     writer held the lock leaves the writer bit durable, and recovery's pm_rdlock spins for
 *     ever (the run ends at its instruction budget).
 *   - FIXED (ext_pm_rwlock_fixed, built with FIXED): recovery clears the lock word first: no
 *     thread of the crashed run can still hold it.
 * Usage: ext_pm_rwlock [POOL]          formats and runs the writers and readers
 *        ext_pm_rwlock POOL recover    `recovery ok: version V sum S` (exit 0) or
 *                                      `recovery: ...` (exit 1) */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENTRIES 8
#define WRITERS 2
#define READERS 2
#define ROUNDS 3
#define WRITER_BIT (1ull << 63)
#define MAGIC 0x52574c4bu

struct pool {
    uint64_t magic;
    uint64_t pad0[7];
    uint64_t lock;    /* the reader/writer lock word */
    uint64_t version; /* bumped by every write, persisted with its line (and the lock) */
    uint64_t pad1[6];
    struct {
        uint64_t value;
        uint64_t pad[7];
    } table[ENTRIES];
};

static struct pool *pool;
static uint64_t reader_sums[READERS];

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

__attribute__((noinline)) void pm_rdlock(uint64_t *l)
{
    for (;;) {
        uint64_t v = __atomic_load_n(l, __ATOMIC_RELAXED);
        if (!(v & WRITER_BIT) && __atomic_compare_exchange_n(l, &v, v + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        _mm_pause();
    }
}

__attribute__((noinline)) void pm_rdunlock(uint64_t *l)
{
    __atomic_fetch_sub(l, 1, __ATOMIC_RELEASE);
}

__attribute__((noinline)) void pm_wrlock(uint64_t *l)
{
    for (;;) {
        uint64_t v = 0;
        if (__atomic_compare_exchange_n(l, &v, WRITER_BIT, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) /* LOCK_TAKEN */
            return;
        _mm_pause();
    }
}

__attribute__((noinline)) void pm_wrunlock(uint64_t *l)
{
    __atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

static void *writer(void *arg)
{
    unsigned w = (unsigned)(uintptr_t)arg;
    for (unsigned r = 0; r < ROUNDS; r++) {
        pm_wrlock(&pool->lock);
        unsigned e = (w * 3 + r) % ENTRIES;
        pool->table[e].value += 10 + w; /* TABLE_STORE */
        persist(&pool->table[e], sizeof(uint64_t));
        pool->version++;                              /* VERSION_STORE */
        persist(&pool->version, sizeof pool->version); /* STALE_PERSIST: the held lock shares the line */
        pm_wrunlock(&pool->lock);
    }
    return NULL;
}

static void *reader(void *arg)
{
    unsigned rd = (unsigned)(uintptr_t)arg;
    uint64_t sum = 0;
    for (unsigned r = 0; r < ROUNDS; r++) {
        pm_rdlock(&pool->lock);
        for (unsigned e = 0; e < ENTRIES; e++)
            sum += pool->table[e].value; /* TABLE_LOAD */
        pm_rdunlock(&pool->lock);
    }
    reader_sums[rd] = sum;
    return NULL;
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
#ifdef FIXED
    pool->lock = 0; /* FIX: no holder survives a crash */
    persist(&pool->lock, sizeof pool->lock);
#endif
    pm_rdlock(&pool->lock); /* STALE_BUG: a writer bit that reached PM is never cleared */
    uint64_t sum = 0;
    for (unsigned e = 0; e < ENTRIES; e++)
        sum += pool->table[e].value;
    pm_rdunlock(&pool->lock);
    printf("recovery ok: version %llu sum %llu\n", (unsigned long long)pool->version, (unsigned long long)sum);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/rwlock";
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
    pthread_t th[WRITERS + READERS];
    for (uintptr_t t = 0; t < WRITERS; t++)
        pthread_create(&th[t], NULL, writer, (void *)t);
    for (uintptr_t t = 0; t < READERS; t++)
        pthread_create(&th[WRITERS + t], NULL, reader, (void *)t);
    for (int t = 0; t < WRITERS + READERS; t++)
        pthread_join(th[t], NULL);
    printf("version %llu reads %llu %llu\n", (unsigned long long)pool->version, (unsigned long long)reader_sums[0],
           (unsigned long long)reader_sums[1]);
    return 0;
}
