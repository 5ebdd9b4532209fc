/* ext_thread_ctr: per-thread persistent counters (built -O2), the sharded-counter idiom of PM
 * key-value stores: each worker writes and persists an item in its own area, then bumps its own
 * cache-line counter with __atomic_add_fetch and writes the line back with clwb + sfence (the
 * counter commits the item); at the end it persists a `finished` flag. A reader thread sums the
 * counters live (into DRAM, for a progress line). Recovery sums the counters: every counted item
 * must be written, and a finished worker's counter must count all its rounds.
 *   - BUG (without FIXED): one worker (the last) never flushes its counter (CTR_BUG): its
 *     `finished` flag can be durable over a counter that is not.
 *   - FIXED (ext_thread_ctr_fixed): every worker flushes its counter.
 * Usage: ext_thread_ctr [POOL]         formats and counts
 *        ext_thread_ctr POOL recover   `recovery ok: ...` (exit 0) or `recovery: ...` (1) */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#pragma GCC target("clwb")

#define WORKERS 3
#define ROUNDS 6

struct pool {
    struct {
        uint64_t v;
        uint64_t pad[7];
    } ctr[WORKERS];
    struct {
        uint64_t finished;
        uint64_t pad[7];
    } flag[WORKERS];
    uint64_t items[WORKERS][ROUNDS];
};

static struct pool *pool;
static int finished;
static uint64_t live_sum;

static void *worker(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < ROUNDS; i++) {
        pool->items[t][i] = (t + 1) * 1000 + i + 1; /* ITEM_STORE */
        _mm_clwb(&pool->items[t][i]);
        _mm_sfence();
        __atomic_add_fetch(&pool->ctr[t].v, 1, __ATOMIC_RELAXED); /* CTR_ADD */
#ifndef FIXED
        if (t != WORKERS - 1) /* CTR_BUG: the last worker's counter is never flushed */
#endif
        {
            _mm_clwb(&pool->ctr[t].v);
            _mm_sfence();
        }
        sched_yield();
    }
    pool->flag[t].finished = 1; /* FINISHED_STORE */
    _mm_clwb(&pool->flag[t].finished);
    _mm_sfence();
    __atomic_add_fetch(&finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *reader(void *arg)
{
    for (;;) {
        int done = __atomic_load_n(&finished, __ATOMIC_ACQUIRE) == WORKERS;
        uint64_t sum = 0;
        for (unsigned t = 0; t < WORKERS; t++)
            sum += __atomic_load_n(&pool->ctr[t].v, __ATOMIC_RELAXED); /* CTR_LOAD */
        live_sum = sum;
        if (done)
            return arg;
        sched_yield();
    }
}

static int recover(void)
{
    uint64_t sum = 0;
    for (unsigned t = 0; t < WORKERS; t++) {
        uint64_t c = pool->ctr[t].v;
        if (c > ROUNDS || (pool->flag[t].finished && c != ROUNDS)) {
            printf("recovery: worker %u counted %llu of %d%s\n", t, (unsigned long long)c, ROUNDS,
                   pool->flag[t].finished ? " and finished" : "");
            return 1;
        }
        for (uint64_t i = 0; i < c; i++)
            if (pool->items[t][i] == 0) {
                printf("recovery: worker %u item %llu counted but not written\n", t, (unsigned long long)i);
                return 1;
            }
        sum += c;
    }
    printf("recovery ok: %llu counted\n", (unsigned long long)sum);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/counters";
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
    for (size_t off = 0; off < sizeof *pool; off += 64)
        _mm_clwb((char *)pool + off);
    _mm_sfence();
    pthread_t th[WORKERS + 1];
    for (uintptr_t t = 0; t < WORKERS; t++)
        pthread_create(&th[t], NULL, worker, (void *)t);
    pthread_create(&th[WORKERS], NULL, reader, NULL);
    for (int t = 0; t <= WORKERS; t++)
        pthread_join(th[t], NULL);
    printf("live sum %llu\n", (unsigned long long)live_sum);
    return 0;
}
