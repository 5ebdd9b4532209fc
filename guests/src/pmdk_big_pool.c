/* pmdk_big_pool: a libpmemobj hash table (dynamically linked) in a big pool of which the workload
 * touches a small part: PMDK programs commonly create pools of 1-8 GiB and use a few MiB of them.
 * Used to measure what ferrite's memory follows (the lines touched, not the pool's size) and to
 * crash-test a big sparse pool.
 *
 * Usage: pmdk_big_pool POOL SIZE N         removes POOL if it exists, creates a pool of SIZE
 *                                          bytes (K, M, G suffixes) with a table of 64 buckets,
 *                                          inserts the keys 1..N, one transaction each, prints
 *                                          `inserted N`, exits 0 (1 if the pool cannot be made)
 *        pmdk_big_pool POOL SIZE N check   opens the pool and checks the table: the keys are
 *                                          exactly 1..count, each in its bucket with its value,
 *                                          count at most N; prints `consistent: C keys` and
 *                                          exits 0, or `inconsistent: ...` and exits 1;
 *                                          `no pool` (exit 0) if the pool cannot be opened (a
 *                                          crash while pmemobj_create made it), `no table`
 *                                          (exit 0) if the root was never set up
 * Transactions keep the table consistent at every crash point: every check passes. */
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBUCKETS 64

POBJ_LAYOUT_BEGIN(bigpool);
POBJ_LAYOUT_ROOT(bigpool, struct root);
POBJ_LAYOUT_TOID(bigpool, struct entry);
POBJ_LAYOUT_TOID(bigpool, struct table);
POBJ_LAYOUT_END(bigpool);

struct entry {
    uint64_t key;
    uint64_t value;
    TOID(struct entry) next;
};

struct table {
    TOID(struct entry) bucket[NBUCKETS];
};

struct root {
    uint64_t count;
    TOID(struct table) table;
};

static uint64_t value_of(uint64_t key) { return key * 0x9e3779b97f4a7c15ull; }

static unsigned bucket_of(uint64_t key) { return (unsigned)((key * 0x2545f4914f6cdd1dull) >> 58); }

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long n = strtoull(s, &end, 10);
    switch (*end) {
    case 'K': case 'k': n <<= 10; break;
    case 'M': case 'm': n <<= 20; break;
    case 'G': case 'g': n <<= 30; break;
    default: break;
    }
    return (size_t)n;
}

static int check(const char *path, uint64_t n)
{
    PMEMobjpool *pop = pmemobj_open(path, POBJ_LAYOUT_NAME(bigpool));
    if (!pop) {
        printf("no pool\n");
        return 0;
    }
    TOID(struct root) root = POBJ_ROOT(pop, struct root);
    if (TOID_IS_NULL(D_RO(root)->table)) {
        printf("no table\n");
        pmemobj_close(pop);
        return 0;
    }
    uint64_t count = D_RO(root)->count;
    if (count > n) {
        printf("inconsistent: count %lu > %lu\n", (unsigned long)count, (unsigned long)n);
        return 1;
    }
    unsigned char *seen = calloc(count + 1, 1);
    uint64_t found = 0;
    const struct table *t = D_RO(D_RO(root)->table);
    for (unsigned b = 0; b < NBUCKETS; b++) {
        for (TOID(struct entry) e = t->bucket[b]; !TOID_IS_NULL(e); e = D_RO(e)->next) {
            const struct entry *x = D_RO(e);
            if (x->key == 0 || x->key > count || seen[x->key] || bucket_of(x->key) != b || x->value != value_of(x->key)) {
                printf("inconsistent: key %lu in bucket %u\n", (unsigned long)x->key, b);
                return 1;
            }
            seen[x->key] = 1;
            found++;
        }
    }
    if (found != count) {
        printf("inconsistent: %lu keys, count %lu\n", (unsigned long)found, (unsigned long)count);
        return 1;
    }
    printf("consistent: %lu keys\n", (unsigned long)count);
    free(seen);
    pmemobj_close(pop);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s POOL SIZE N [check]\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    size_t size = parse_size(argv[2]);
    uint64_t n = strtoull(argv[3], NULL, 10);
    if (argc > 4 && strcmp(argv[4], "check") == 0)
        return check(path, n);
    unlink(path);
    PMEMobjpool *pop = pmemobj_create(path, POBJ_LAYOUT_NAME(bigpool), size, 0644);
    if (!pop) {
        perror("pmemobj_create");
        return 1;
    }
    TOID(struct root) root = POBJ_ROOT(pop, struct root);
    TX_BEGIN(pop) {
        TX_ADD(root);
        D_RW(root)->table = TX_ZNEW(struct table);
        D_RW(root)->count = 0;
    } TX_END
    for (uint64_t key = 1; key <= n; key++) {
        TX_BEGIN(pop) {
            struct table *t = D_RW(D_RW(root)->table);
            unsigned b = bucket_of(key);
            TOID(struct entry) e = TX_NEW(struct entry);
            D_RW(e)->key = key;
            D_RW(e)->value = value_of(key);
            D_RW(e)->next = t->bucket[b];
            TX_ADD_FIELD_DIRECT(t, bucket[b]);
            t->bucket[b] = e;
            TX_ADD_FIELD(root, count);
            D_RW(root)->count = key;
        } TX_END
    }
    printf("inserted %lu\n", (unsigned long)n);
    pmemobj_close(pop);
    return 0;
}
