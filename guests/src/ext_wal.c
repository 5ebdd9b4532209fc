/* ext_wal: a write-ahead log with one PM log per thread and a shared commit table, as database
 * engines group-commit (built -O2). Each worker appends an entry (LSN, value, checksum) to its
 * own log, then, under the commit mutex, takes the next global LSN's turn and records its
 * entry's index in the commit table, which it persists. A checkpointer thread, under the same
 * mutex, reads the committed entries of every log and persists their sum in its checkpoint.
 *   - BUG (this file): the worker persists its entry only after committing it (after the commit
 *     table is durable and the mutex released): a crash in between leaves a committed entry that
 *     never reached PM (recovery fails), and the checkpointer can read an entry that is not yet
 *     durable (ENTRY_STORE / ENTRY_LOAD: a persistence-induced race).
 *   - FIXED (ext_wal_fixed, built with -DFIXED): the entry is persisted before it is committed.
 * Usage: ext_wal [POOL]          formats the pool, runs the workers and the checkpointer, prints
 *                                the committed count, exits 0
 *        ext_wal POOL check      checks every committed entry: `recovery ok: N committed` (exit 0)
 *                                or `recovery: thread T entry I corrupt` (exit 1). */
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

#define WORKERS 2
#define ENTRIES 6
#define MAGIC 0x57414c31u

struct entry {
    uint64_t lsn;
    uint64_t value;
    uint64_t sum; /* lsn ^ value ^ MAGIC */
    uint64_t pad[5];
};

struct pool {
    uint64_t magic;
    uint64_t committed[WORKERS]; /* entries of each log that are committed */
    uint64_t pad[5];
    uint64_t checkpoint;
    uint64_t pad2[7];
    struct entry log[WORKERS][ENTRIES];
};

static struct pool *pool;
static pthread_mutex_t commit_mu = PTHREAD_MUTEX_INITIALIZER;
static volatile int done_workers;
static uint64_t next_lsn; /* DRAM: recovery derives it from the logs */

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static void *worker(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < ENTRIES; i++) {
        struct entry *e = &pool->log[t][i];
        uint64_t value = (t + 1) * 1000 + i;
        pthread_mutex_lock(&commit_mu);
        uint64_t lsn = ++next_lsn;
        pthread_mutex_unlock(&commit_mu);
        e->lsn = lsn;                   /* ENTRY_STORE: lsn */
        e->value = value;               /* ENTRY_STORE: value */
        e->sum = lsn ^ value ^ MAGIC;   /* ENTRY_STORE: sum */
#ifdef FIXED
        persist(e, sizeof *e); /* FIX: the entry durable before its commit */
#endif
        pthread_mutex_lock(&commit_mu);
        pool->committed[t] = i + 1;
        persist(&pool->committed[t], sizeof(uint64_t)); /* COMMIT: the commit table persisted */
        pthread_mutex_unlock(&commit_mu);
#ifndef FIXED
        persist(e, sizeof *e); /* BUG: the entry persisted after its commit */
#endif
        sched_yield();
    }
    __atomic_fetch_add(&done_workers, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void *checkpointer(void *arg)
{
    (void)arg;
    for (;;) {
        int last = __atomic_load_n(&done_workers, __ATOMIC_SEQ_CST) == WORKERS;
        pthread_mutex_lock(&commit_mu);
        uint64_t total = 0;
        for (unsigned t = 0; t < WORKERS; t++)
            for (uint64_t i = 0; i < pool->committed[t]; i++)
                total += pool->log[t][i].value; /* ENTRY_LOAD */
        pool->checkpoint = total;
        persist(&pool->checkpoint, sizeof total);
        pthread_mutex_unlock(&commit_mu);
        if (last)
            return NULL;
        sched_yield();
    }
}

static int check(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: 0 committed\n"); /* crashed while formatting */
        return 0;
    }
    uint64_t n = 0;
    for (unsigned t = 0; t < WORKERS; t++) {
        if (pool->committed[t] > ENTRIES) {
            printf("recovery: thread %u bad commit\n", t);
            return 1;
        }
        for (uint64_t i = 0; i < pool->committed[t]; i++, n++) {
            const struct entry *e = &pool->log[t][i];
            if (e->lsn == 0 || e->sum != (e->lsn ^ e->value ^ MAGIC)) {
                printf("recovery: thread %u entry %llu corrupt\n", t, (unsigned long long)i);
                return 1;
            }
        }
    }
    printf("recovery ok: %llu committed\n", (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/wal";
    int checking = argc > 2 && strcmp(argv[2], "check") == 0;
    int fd = open(path, checking ? O_RDWR : O_RDWR | O_CREAT, 0644);
    struct stat st;
    if (checking && (fd < 0 || fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(struct pool))) {
        printf("recovery ok: 0 committed\n");
        return 0;
    }
    if (fd < 0 || (!checking && ftruncate(fd, sizeof(struct pool)) != 0)) {
        perror(path);
        return 1;
    }
    pool = mmap(NULL, sizeof(struct pool), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (pool == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    if (checking)
        return check();
    memset(pool, 0, sizeof *pool);
    persist(pool, sizeof *pool);
    pool->magic = MAGIC;
    persist(&pool->magic, sizeof pool->magic);
    pthread_t w[WORKERS], c;
    for (uintptr_t t = 0; t < WORKERS; t++)
        pthread_create(&w[t], NULL, worker, (void *)t);
    pthread_create(&c, NULL, checkpointer, NULL);
    for (int t = 0; t < WORKERS; t++)
        pthread_join(w[t], NULL);
    pthread_join(c, NULL);
    printf("committed %llu, checkpoint %llu\n", (unsigned long long)(pool->committed[0] + pool->committed[1]),
           (unsigned long long)pool->checkpoint);
    return 0;
}
