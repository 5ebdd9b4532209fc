/* ext_c11_log: a multi-producer PM log written with C11 <stdatomic.h> (built -O2), the portable
 * way C code does it. Producers reserve a slot with an atomic_compare_exchange_weak loop on a
 * DRAM _Atomic cursor, fill the slot's record in PM, persist it, and commit it with
 * atomic_store_explicit(..., memory_order_release) on the slot's PM commit word, which they
 * persist too. An indexer thread polls the commit words with memory_order_acquire, reads each
 * committed record and folds it into a durable digest in PM; the producers' end is a DRAM
 * _Atomic flag stored with memory_order_release. Recovery requires every durably committed slot
 * to hold a whole record.
 *   - BUG (without FIXED): the commit word is released before the record is persisted
 *     (COMMIT_BUG); record and commit are flushed together after it and one fence drains both in
 *     any order: the indexer can read the record before it is durable, and a crash can leave a
 *     durable commit over a record that is not.
 *   - FIXED (ext_c11_log_fixed, built with FIXED): the record is persisted, then committed.
 * Usage: ext_c11_log [POOL]           formats and runs the producers and the indexer
 *        ext_c11_log POOL recover     `recovery ok: N committed` (exit 0) or `recovery: ...` */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PRODUCERS 2
#define PER_PRODUCER 3
#define SLOTS (PRODUCERS * PER_PRODUCER)
#define MAGIC 0x43313131u

struct slot {
    _Atomic uint64_t committed; /* 0, or the record's sequence number + 1 */
    uint64_t pad[7];
    uint64_t key;   /* the record, on its own line */
    uint64_t value;
    uint64_t check;
    uint64_t pad2[5];
};

struct pool {
    uint64_t magic;
    uint64_t digest; /* the indexer's fold of the committed records */
    uint64_t indexed;
    uint64_t pad[5];
    struct slot slots[SLOTS];
};

static struct pool *pool;
static _Atomic uint64_t cursor;       /* DRAM: the next free slot */
static _Atomic int producers_left = PRODUCERS; /* DRAM */

__attribute__((target("clwb"))) static void flush(const void *p)
{
    _mm_clwb((void *)p);
}

static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        flush((void *)a);
    _mm_sfence();
}

static uint64_t check_of(uint64_t key, uint64_t value)
{
    return (key * 31 + value) ^ 0xfeedfacecafebeefull;
}

static void append(uint64_t key, uint64_t value)
{
    uint64_t s = atomic_load_explicit(&cursor, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&cursor, &s, s + 1, memory_order_acq_rel, memory_order_relaxed))
        ;
    if (s >= SLOTS)
        return;
    struct slot *sl = &pool->slots[s];
    sl->key = key;                         /* RECORD_STORE: key */
    sl->value = value;                     /* RECORD_STORE: value */
    sl->check = check_of(key, value);      /* RECORD_STORE: check */
#ifdef FIXED
    persist(&sl->key, 3 * sizeof(uint64_t)); /* FIX: the record durable before its commit */
    atomic_store_explicit(&sl->committed, s + 1, memory_order_release); /* COMMIT_STORE */
    persist(&sl->committed, sizeof(uint64_t));
#else
    atomic_store_explicit(&sl->committed, s + 1, memory_order_release); /* COMMIT_STORE */
    flush(&sl->key);                       /* COMMIT_BUG: committed before the record is durable */
    flush(&sl->committed);
    _mm_sfence();
#endif
}

static void *producer(void *arg)
{
    unsigned p = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < PER_PRODUCER; i++)
        append(p * 100 + i, (p + 1) * 7 + i * 3);
    atomic_fetch_sub_explicit(&producers_left, 1, memory_order_release);
    return NULL;
}

static void *indexer(void *arg)
{
    uint64_t next = 0;
    for (;;) {
        int last = atomic_load_explicit(&producers_left, memory_order_acquire) == 0;
        while (next < SLOTS && atomic_load_explicit(&pool->slots[next].committed, memory_order_acquire) != 0) { /* COMMIT_LOAD */
            const struct slot *sl = &pool->slots[next];
            pool->digest = pool->digest * 1099511628211ull ^ (sl->key + sl->value); /* RECORD_LOAD */
            pool->indexed = ++next;
            persist(&pool->digest, 2 * sizeof(uint64_t)); /* DIGEST_PERSIST */
        }
        if (last || next == SLOTS)
            break;
        for (volatile int spin = 0; spin < 40; spin++)
            ;
    }
    return arg;
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    unsigned n = 0;
    for (unsigned s = 0; s < SLOTS; s++) {
        const struct slot *sl = &pool->slots[s];
        if (atomic_load_explicit(&sl->committed, memory_order_relaxed) == 0)
            continue;
        if (sl->check != check_of(sl->key, sl->value)) {
            printf("recovery: slot %u committed over a torn record\n", s);
            return 1;
        }
        n++;
    }
    printf("recovery ok: %u committed\n", n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/c11log";
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
    pthread_t th[PRODUCERS + 1];
    pthread_create(&th[PRODUCERS], NULL, indexer, NULL);
    for (uintptr_t p = 0; p < PRODUCERS; p++)
        pthread_create(&th[p], NULL, producer, (void *)p);
    for (int t = 0; t <= PRODUCERS; t++)
        pthread_join(th[t], NULL);
    printf("indexed %llu\n", (unsigned long long)pool->indexed);
    return 0;
}
