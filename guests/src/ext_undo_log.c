/* ext_undo_log: a hand-written undo log, as storage engines without PMDK keep one (built -O2).
 * A bank of accounts, each on its own cache line; two teller threads make transfers under one
 * mutex. A transfer logs the old value of both accounts (address and value), makes the log valid
 * by setting its entry count, updates the accounts in place, persists them, and commits by
 * clearing the count. Recovery rolls back: with a non-zero count it writes each entry's old value
 * back, then clears the count. The invariant is the bank's total.
 *   - BUG (this file): the count is persisted before the entries it validates (VALID_BUG): a
 *     crash in between leaves a valid log holding the previous transfer's entries (or zeros), and
 *     recovery "rolls back" accounts to values they no longer had: the total changes.
 *   - FIXED (ext_undo_log_fixed, built with -DFIXED): the entries are persisted first, then the
 *     count.
 * Usage: ext_undo_log [POOL]           formats the pool, runs the tellers, prints the total
 *        ext_undo_log POOL recover     rolls back an interrupted transfer and checks the total:
 *                                      `recovery ok: total T` (exit 0) or `recovery: total T`
 *                                      (exit 1) */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ACCOUNTS 6
#define TELLERS 2
#define ROUNDS 3
#define START 1000
#define MAGIC 0x554e444fu

struct undo_entry {
    uint64_t account;
    uint64_t old;
};

struct account {
    uint64_t balance;
    uint64_t pad[7];
};

struct pool {
    uint64_t magic;
    uint64_t pad0[7];
    uint64_t nundo; /* entries of the log that are valid */
    uint64_t pad1[7];
    struct undo_entry undo[2];
    uint64_t pad2[4];
    struct account acct[ACCOUNTS];
};

static struct pool *pool;
static pthread_mutex_t bank_mu = PTHREAD_MUTEX_INITIALIZER;

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static void transfer(unsigned from, unsigned to, uint64_t amount)
{
    pthread_mutex_lock(&bank_mu);
#ifndef FIXED
    pool->nundo = 2;
    persist(&pool->nundo, sizeof pool->nundo); /* VALID_BUG: the log made valid before its entries */
#endif
    pool->undo[0].account = from;                    /* UNDO_STORE: from */
    pool->undo[0].old = pool->acct[from].balance;    /* UNDO_STORE: old from */
    pool->undo[1].account = to;                      /* UNDO_STORE: to */
    pool->undo[1].old = pool->acct[to].balance;      /* UNDO_STORE: old to */
    persist(pool->undo, sizeof pool->undo);
#ifdef FIXED
    pool->nundo = 2;
    persist(&pool->nundo, sizeof pool->nundo); /* FIX: valid after the entries are durable */
#endif
    pool->acct[from].balance -= amount;
    pool->acct[to].balance += amount;
    persist(&pool->acct[from], sizeof(uint64_t));
    persist(&pool->acct[to], sizeof(uint64_t));
    pool->nundo = 0; /* COMMIT */
    persist(&pool->nundo, sizeof pool->nundo);
    pthread_mutex_unlock(&bank_mu);
}

static void *teller(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned r = 0; r < ROUNDS; r++) {
        unsigned from = (t * 3 + r) % ACCOUNTS, to = (t * 3 + r * 2 + 1) % ACCOUNTS;
        if (from == to)
            to = (to + 1) % ACCOUNTS;
        transfer(from, to, 10 * (r + 1) + t);
    }
    return NULL;
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    uint64_t n = pool->nundo;
    if (n > 2) {
        printf("recovery: bad log count %llu\n", (unsigned long long)n);
        return 1;
    }
    for (uint64_t i = n; i-- > 0;) {
        uint64_t a = pool->undo[i].account;
        if (a >= ACCOUNTS) {
            printf("recovery: bad log entry %llu\n", (unsigned long long)i);
            return 1;
        }
        pool->acct[a].balance = pool->undo[i].old;
        persist(&pool->acct[a], sizeof(uint64_t));
    }
    pool->nundo = 0;
    persist(&pool->nundo, sizeof pool->nundo);
    uint64_t total = 0;
    for (unsigned a = 0; a < ACCOUNTS; a++)
        total += pool->acct[a].balance;
    if (total != (uint64_t)ACCOUNTS * START) {
        printf("recovery: total %llu\n", (unsigned long long)total);
        return 1;
    }
    printf("recovery ok: total %llu (rolled back %llu)\n", (unsigned long long)total, (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/bank";
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
    for (unsigned a = 0; a < ACCOUNTS; a++)
        pool->acct[a].balance = START;
    persist(pool, sizeof *pool);
    pool->magic = MAGIC;
    persist(&pool->magic, sizeof pool->magic);
    pthread_t th[TELLERS];
    for (uintptr_t t = 0; t < TELLERS; t++)
        pthread_create(&th[t], NULL, teller, (void *)t);
    for (int t = 0; t < TELLERS; t++)
        pthread_join(th[t], NULL);
    uint64_t total = 0;
    for (unsigned a = 0; a < ACCOUNTS; a++)
        total += pool->acct[a].balance;
    printf("total %llu\n", (unsigned long long)total);
    return 0;
}
