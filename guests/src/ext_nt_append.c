/* ext_nt_append: a multi-threaded append-only log whose 32-byte records are written with
 * non-temporal intrinsics (two _mm_stream_si64 for the header words, one _mm_stream_si128 for the
 * body), the way logging libraries bypass the cache (built -O2). Appenders reserve a slot with
 * __atomic_fetch_add on a DRAM counter (recovery finds the records by their owner words), stream
 * the record and fence it with _mm_sfence; after its last record each appender stores its
 * durable `done` count and persists it (clwb + sfence). Recovery checks that every record a `done` count covers is in the log, whole.
 *   - BUG (without FIXED): the fence is written "between records" (`if (i + 1 < PER_THREAD)`,
 *     FENCE_BUG), so the last record is not fenced before the `done` store. The next record's
 *     locked fetch_add drains the earlier ones, but nothing drains the last one before `done`:
 *     the write-combining buffer may still hold it when `done`'s line is written back, so a crash
 *     can leave `done` covering a record that never reached PM.
 *   - FIXED (ext_nt_append_fixed): one _mm_sfence per record.
 * Usage: ext_nt_append [POOL]          formats and runs the appenders
 *        ext_nt_append POOL recover    `recovery ok: N records` (exit 0) or `recovery: ...` (1) */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define THREADS 3
#define PER_THREAD 4
#define SLOTS (THREADS * PER_THREAD)
#define MAGIC 0x4e544150u

struct record {
    uint64_t owner; /* thread + 1 (0: empty) */
    uint64_t seq;
    uint64_t body[2]; /* body[0] ^ body[1] == check(owner, seq) */
} __attribute__((aligned(32)));

struct pool {
    uint64_t magic;
    uint64_t pad0[7];
    struct {
        uint64_t n;
        uint64_t pad[7];
    } done[THREADS];
    struct record rec[SLOTS];
};

static struct pool *pool;
static uint64_t next_slot; /* DRAM: recovery finds the records by their owner words */

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static uint64_t check(uint64_t owner, uint64_t seq)
{
    return owner * 0xff51afd7ed558ccdull + seq;
}

static void *appender(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < PER_THREAD; i++) {
        uint64_t slot = __atomic_fetch_add(&next_slot, 1, __ATOMIC_RELAXED); /* RESERVE */
        struct record *r = &pool->rec[slot];
        uint64_t b0 = (slot + 1) * 0x9e3779b97f4a7c15ull;
        _mm_stream_si64((long long *)&r->owner, (long long)(t + 1)); /* STREAM_OWNER */
        _mm_stream_si64((long long *)&r->seq, (long long)i);
        _mm_stream_si128((__m128i *)r->body, _mm_set_epi64x((long long)(b0 ^ check(t + 1, i)), (long long)b0)); /* STREAM_BODY */
#ifdef FIXED
        _mm_sfence(); /* FIX: every record fenced */
#else
        if (i + 1 < PER_THREAD)
            _mm_sfence(); /* FENCE_BUG: "between records": the last one is left in flight */
#endif
    }
    pool->done[t].n = PER_THREAD; /* DONE_STORE */
    persist(&pool->done[t].n, sizeof(uint64_t));
    return NULL;
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    uint64_t total = 0;
    for (unsigned t = 0; t < THREADS; t++) {
        for (uint64_t i = 0; i < pool->done[t].n && i < PER_THREAD; i++) {
            int found = 0;
            for (unsigned s = 0; s < SLOTS; s++) {
                const struct record *r = &pool->rec[s];
                if (r->owner == t + 1 && r->seq == i && (r->body[0] ^ r->body[1]) == check(t + 1, i))
                    found = 1;
            }
            if (!found) {
                printf("recovery: thread %u's record %llu is missing or torn\n", t, (unsigned long long)i);
                return 1;
            }
            total++;
        }
    }
    printf("recovery ok: %llu records\n", (unsigned long long)total);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/ntappend";
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
        pthread_create(&th[t], NULL, appender, (void *)(uintptr_t)t);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    printf("appended: %llu records\n", (unsigned long long)next_slot);
    return next_slot == SLOTS ? 0 : 1;
}
