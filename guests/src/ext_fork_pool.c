/* ext_fork_pool: a parent and a forked child share one PM pool (built -O2). The parent formats
 * the pool and maps it MAP_SHARED; a forked "ingest" child appends fixed-size records, persists
 * each one and then the record count, and exits; the parent waitpid()s and derives a summary
 * (the sum of the records' values) that it stores and persists in the pool's header. Recovery
 * checks every record below the durable count (each carries a check word) and the summary.
 * How the child persists is chosen at build time, as different code bases do:
 *   - clwb + sfence through the intrinsics (this file, ext_fork_pool / _fixed);
 *   - msync(MS_SYNC) of the record's page (ext_fork_msync / _fixed: PERSIST_MSYNC);
 *   - libpmem's pmem_persist (pmdk_fork_pool / _fixed, dynamic: PERSIST_PMEM).
 *   - BUG (without FIXED): the child skips the persist of one record (SKIP_BUG) and then persists
 *     the count over it: a crash after the child's exit leaves a durable count covering a record
 *     that never reached PM.
 *   - FIXED (the _fixed twins, built with FIXED): every record persisted before the count.
 * Usage: ext_fork_pool [POOL]          formats, forks the writer, waits, summarises
 *        ext_fork_pool POOL recover    checks the durable records: `recovery ok: N records`
 *                                      (exit 0) or `recovery: ...` (exit 1) */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(PERSIST_PMEM)
#include <libpmem.h>
#else
#include <immintrin.h>
#endif

#define NREC 6
#define SKIPPED 3
#define MAGIC 0x464f524bu
#if defined(PERSIST_MSYNC)
/* msync writes back whole pages: each record on a page of its own, as page-granular logs do. */
#define RECORD_ALIGN 4096
#else
#define RECORD_ALIGN 64
#endif

struct record {
    uint64_t seq;
    uint64_t value;
    uint64_t check;
} __attribute__((aligned(RECORD_ALIGN)));

struct pool {
    uint64_t magic;
    uint64_t count;   /* records durable in the log */
    uint64_t summary; /* the parent's sum over them */
    struct record rec[NREC];
};

#define POOL_SIZE sizeof(struct pool)

static struct pool *pool;

#if defined(PERSIST_MSYNC)
static void persist(const void *p, size_t len)
{
    uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095;
    if (msync((void *)page, (uintptr_t)p + len - page, MS_SYNC) != 0)
        perror("msync");
}
#elif defined(PERSIST_PMEM)
static void persist(const void *p, size_t len)
{
    pmem_persist(p, len);
}
#else
__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}
#endif

static uint64_t check_of(uint64_t seq, uint64_t value)
{
    return (seq * 0x9e3779b97f4a7c15ull) ^ value ^ 0x5a5a5a5a5a5a5a5aull; /* REC_STORE: check (its store's line at -O2) */
}

static void ingest(void)
{
    for (uint64_t i = 0; i < NREC; i++) {
        struct record *r = &pool->rec[i];
        r->seq = i + 1;                       /* REC_STORE: seq */
        r->value = 100 + i * 7;               /* REC_STORE: value */
        r->check = check_of(r->seq, r->value); /* REC_STORE: check */
#ifndef FIXED
        if (i == SKIPPED)
            continue; /* SKIP_BUG: this record is never persisted */
#endif
        persist(r, sizeof *r);
    }
    pool->count = NREC; /* COUNT_STORE */
    persist(&pool->count, sizeof pool->count);
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    uint64_t n = pool->count, sum = 0;
    if (n > NREC) {
        printf("recovery: bad count %llu\n", (unsigned long long)n);
        return 1;
    }
    for (uint64_t i = 0; i < n; i++) {
        const struct record *r = &pool->rec[i];
        if (r->seq != i + 1 || r->check != check_of(r->seq, r->value)) {
            printf("recovery: record %llu of %llu is torn\n", (unsigned long long)i, (unsigned long long)n);
            return 1;
        }
        sum += r->value;
    }
    if (pool->summary != 0 && pool->summary != sum) {
        printf("recovery: summary %llu, records sum to %llu\n", (unsigned long long)pool->summary, (unsigned long long)sum);
        return 1;
    }
    printf("recovery ok: %llu records\n", (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/forkpool";
    int recovering = argc > 2 && strcmp(argv[2], "recover") == 0;
    int fd = open(path, recovering ? O_RDWR : O_RDWR | O_CREAT, 0644);
    struct stat st;
    if (recovering && (fd < 0 || fstat(fd, &st) != 0 || st.st_size < (off_t)POOL_SIZE)) {
        printf("recovery ok: no pool\n");
        return 0;
    }
    if (fd < 0 || (!recovering && ftruncate(fd, POOL_SIZE) != 0)) {
        perror(path);
        return 1;
    }
    pool = mmap(NULL, POOL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (pool == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    close(fd);
    if (recovering)
        return recover();
    memset(pool, 0, sizeof *pool);
    persist(pool, sizeof *pool);
    pool->magic = MAGIC;
    persist(&pool->magic, sizeof pool->magic);
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        ingest();
        _exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("writer failed\n");
        return 1;
    }
    uint64_t sum = 0, n = pool->count; /* PARENT_LOAD: count */
    for (uint64_t i = 0; i < n; i++)
        sum += pool->rec[i].value; /* PARENT_LOAD: value */
    pool->summary = sum;           /* SUMMARY_STORE */
    persist(&pool->summary, sizeof pool->summary);
    printf("records %llu sum %llu\n", (unsigned long long)n, (unsigned long long)sum);
    return 0;
}
