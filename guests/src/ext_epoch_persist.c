/* ext_epoch_persist: epoch (group) persistence, as batching loggers do it (built -O2). Worker
 * threads append records to their own PM buffer without flushing anything and publish how many
 * they wrote through a DRAM atomic. A dedicated persister thread periodically takes a snapshot of
 * every worker's count, flushes the new records with clwb, fences, and then makes the batch
 * durable by writing the per-worker durable counts and advancing the epoch in the pool's header
 * (one line), which it flushes and fences. Recovery trusts every record below the durable counts
 * (each record carries a check word). The header's stores may reach PM one by one (a line can be
 * written back between them), so recovery asks nothing of the epoch beyond the counts.
 *   - BUG (without FIXED): the header is written and flushed before the fence of the records'
 *     flushes (EPOCH_BUG): one sfence drains both, in any order, so a crash can leave a durable
 *     header covering records still in the cache.
 *   - FIXED (ext_epoch_persist_fixed, built with FIXED): the records' flushes are fenced first.
 * Usage: ext_epoch_persist [POOL]         formats and runs the workers and the persister
 *        ext_epoch_persist POOL recover   `recovery ok: epoch E, N records` (exit 0) or
 *                                         `recovery: ...` (exit 1) */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define WORKERS 2
#define PER_WORKER 8
#define MAGIC 0x45504f43u

struct record {
    uint64_t seq;
    uint64_t payload;
    uint64_t check;
    uint64_t pad[5];
};

struct header {
    uint64_t epoch;
    uint64_t durable[WORKERS]; /* records of each worker covered by the epoch */
    uint64_t pad[8 - 1 - WORKERS];
};

struct pool {
    uint64_t magic;
    uint64_t pad0[7];
    struct header hdr;
    struct record buf[WORKERS][PER_WORKER];
};

static struct pool *pool;
static uint64_t written[WORKERS]; /* DRAM: records each worker has written */
static int workers_done;          /* DRAM: workers that finished */

static uint64_t check_of(uint64_t seq, uint64_t payload)
{
    return seq * 0x100000001b3ull ^ payload ^ 0xc3c3c3c3ull;
}

static void *worker(void *arg)
{
    unsigned w = (unsigned)(uintptr_t)arg;
    for (uint64_t i = 0; i < PER_WORKER; i++) {
        struct record *r = &pool->buf[w][i];
        r->seq = i + 1;                          /* RECORD_STORE: seq */
        r->payload = (w + 1) * 10000 + i * i;    /* RECORD_STORE: payload */
        r->check = check_of(r->seq, r->payload); /* RECORD_STORE: check */
        __atomic_store_n(&written[w], i + 1, __ATOMIC_RELEASE);
        for (volatile int spin = 0; spin < 50; spin++)
            ;
    }
    __atomic_fetch_add(&workers_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* One batch: flush what the workers wrote since the last one, then publish it durably. */
__attribute__((target("clwb"))) static int persist_batch(void)
{
    uint64_t snap[WORKERS];
    int any = 0;
    for (unsigned w = 0; w < WORKERS; w++) {
        snap[w] = __atomic_load_n(&written[w], __ATOMIC_ACQUIRE);
        for (uint64_t i = pool->hdr.durable[w]; i < snap[w]; i++) {
            _mm_clwb(&pool->buf[w][i]); /* RECORD_FLUSH */
            any = 1;
        }
    }
    if (!any)
        return 0;
#ifdef FIXED
    _mm_sfence(); /* FIX: the records are durable before the header names them */
#endif
    for (unsigned w = 0; w < WORKERS; w++)
        pool->hdr.durable[w] = snap[w]; /* EPOCH_BUG: the header written before the records' fence */
    pool->hdr.epoch++;                  /* EPOCH_STORE */
    _mm_clwb(&pool->hdr);
    _mm_sfence(); /* EPOCH_FENCE */
    return 1;
}

static void *persister(void *arg)
{
    for (;;) {
        int done = __atomic_load_n(&workers_done, __ATOMIC_ACQUIRE) == WORKERS;
        persist_batch();
        if (done)
            break;
        for (volatile int spin = 0; spin < 200; spin++)
            ;
    }
    return arg;
}

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    uint64_t total = 0;
    for (unsigned w = 0; w < WORKERS; w++) {
        uint64_t n = pool->hdr.durable[w];
        if (n > PER_WORKER) {
            printf("recovery: worker %u durable count %llu\n", w, (unsigned long long)n);
            return 1;
        }
        for (uint64_t i = 0; i < n; i++) {
            const struct record *r = &pool->buf[w][i];
            if (r->seq != i + 1 || r->check != check_of(r->seq, r->payload)) {
                printf("recovery: worker %u record %llu below epoch %llu is torn\n", w, (unsigned long long)i,
                       (unsigned long long)pool->hdr.epoch);
                return 1;
            }
        }
        total += n;
    }
    printf("recovery ok: epoch %llu, %llu records\n", (unsigned long long)pool->hdr.epoch, (unsigned long long)total);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/epoch";
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
    pthread_t th[WORKERS + 1];
    for (uintptr_t w = 0; w < WORKERS; w++)
        pthread_create(&th[w], NULL, worker, (void *)w);
    pthread_create(&th[WORKERS], NULL, persister, NULL);
    for (int t = 0; t <= WORKERS; t++)
        pthread_join(th[t], NULL);
    printf("epoch %llu\n", (unsigned long long)pool->hdr.epoch);
    return 0;
}
