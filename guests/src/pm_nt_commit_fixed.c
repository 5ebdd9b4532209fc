/* pm_nt_commit_fixed: FIXED twin of pm_nt_commit.c.  Each record's payload is written with
 * non-temporal stores, then drained with an sfence (pmem_drain) BEFORE the commit flag is stored
 * and flushed with `clflush`: a durable flag always commits a durable payload.  No batch drain at
 * the end (nothing is left to drain).
 *
 * Layout (pool file, POOL_SIZE bytes):
 *   offset 0:   header { uint64_t commit; }  alone in its 64-byte line (records 0..commit-1 are
 *               committed)
 *   offset 64:  records[8], one 64-byte line each { key, value, pad[6] }
 *
 * Usage: pm_nt_commit_fixed [POOL]        (re)initialises the pool, commits 2 records, prints them
 *        pm_nt_commit_fixed POOL check    opens the existing pool (never written), verifies every
 *                                   committed record: prints `recovery ok: N records` (exit 0) or
 *                                   `recovery: record I torn` (exit 1; `recovery: bad commit N`) */
#include "pm.h"

#define NRECORDS 8
#define NCOMMIT 2
#define POOL_SIZE 4096

struct record {
    uint64_t key;
    uint64_t value;
    uint64_t pad[6];
};

struct pool {
    volatile uint64_t commit;
    uint64_t pad[7];
    struct record rec[NRECORDS];
};

_Static_assert(sizeof(struct record) == 64, "a record is one line");
_Static_assert(sizeof(struct pool) <= POOL_SIZE, "pool fits");

static uint64_t key_of(uint64_t i) { return i + 1; }
static uint64_t value_of(uint64_t i) { return (i + 1) * 1000 + 7; }

__attribute__((noinline)) static void commit_record(struct pool *p, uint64_t i)
{
    struct record *r = &p->rec[i];
    uint64_t k = key_of(i), v = value_of(i);
    PM_MOVNTI64(&r->key, k); PM_MOVNTI64(&r->value, v); /* NT: payload key and value */
    PM_SFENCE(); /* FIX: the NT payload drained before the commit flag */
    p->commit = i + 1; /* COMMIT: the flag stored */
    PM_CLFLUSH(&p->commit); /* FLAG: the flag's line durable at once */
}

static int check(struct pool *p)
{
    uint64_t n = p->commit;
    if (n > NRECORDS) {
        printf("recovery: bad commit %llu\n", (unsigned long long)n);
        return 1;
    }
    for (uint64_t i = 0; i < n; i++) {
        const struct record *r = &p->rec[i];
        uint64_t k = key_of(i), v = value_of(i);
        if (r->key != k || r->value != v) {
            printf("recovery: record %llu torn\n", (unsigned long long)i);
            return 1;
        }
    }
    printf("recovery ok: %llu records\n", (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2 && strcmp(argv[2], "check") == 0)
        return check(pm_open(path, POOL_SIZE, 0));

    struct pool *p = pm_map(path, POOL_SIZE);
    p->commit = 0; /* records are written in full before a flag covers them */
    persist((void *)&p->commit, sizeof p->commit);

    for (uint64_t i = 0; i < NCOMMIT; i++)
        commit_record(p, i);

    printf("committed %llu records\n", (unsigned long long)p->commit);
    for (uint64_t i = 0; i < p->commit; i++)
        printf("  [%llu] key=%llu value=%llu\n", (unsigned long long)i, (unsigned long long)p->rec[i].key,
               (unsigned long long)p->rec[i].value);
    return 0;
}
