/* pm_log: an append-only log in persistent memory.
 *
 * BUGGY: append() stores the entry but never flushes it; only the count is
 * persisted.  After a crash the count can cover an entry that never reached
 * PM, which check mode reports as "recovery: entry I corrupt".  The fixed twin
 * is pm_log_fixed.c.
 *
 * Layout (pool file, POOL_SIZE bytes, mapped MAP_SHARED):
 *   offset 0:   header { uint64_t count; }  alone in its 64-byte line
 *   offset 64:  entries[32], 64 bytes each { uint64_t key, value; char text[48]; }
 *
 * Usage: pm_log [POOL] [check]      POOL defaults to /mnt/pmem0/pool
 *   normal mode: (re)initialises the log (count = 0, entries zeroed, persisted),
 *                appends 5 entries, prints them, exits 0.
 *   check mode:  opens the existing pool without truncating or modifying it and
 *                verifies every entry i < count is well formed:
 *                key == i+1, value == (i+1)*100, text == "entry <i+1>: hello-<i+1>".
 *                Prints "recovery ok: N entries" and exits 0, or prints
 *                "recovery: entry I corrupt" and exits 1.
 */
#include "pm.h"

#define NENTRIES 32
#define POOL_SIZE 4096
#define NAPPEND 5

struct entry {
    uint64_t key;
    uint64_t value;
    char text[48];
};

struct pool {
    uint64_t count;
    char pad[PM_CACHELINE - sizeof(uint64_t)];
    struct entry entries[NENTRIES];
};

_Static_assert(sizeof(struct entry) == 64, "entry is one cache line");
_Static_assert(sizeof(struct pool) <= POOL_SIZE, "pool fits");

static void expected_text(char *buf, size_t n, uint64_t i)
{
    snprintf(buf, n, "entry %llu: hello-%llu", (unsigned long long)(i + 1),
             (unsigned long long)(i + 1));
}

__attribute__((noinline)) static void append(struct pool *p, uint64_t key, uint64_t value,
                                             const char *text)
{
    uint64_t i = p->count;
    if (i >= NENTRIES) {
        fprintf(stderr, "log full\n");
        exit(2);
    }
    struct entry tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.key = key;
    tmp.value = value;
    strncpy(tmp.text, text, sizeof tmp.text - 1);
    struct entry *e = &p->entries[i];
    *e = tmp; /* BUG: entry stored but never persisted */
    p->count = i + 1;
    persist(&p->count, sizeof p->count);
}

static int check(struct pool *p)
{
    uint64_t n = p->count;
    if (n > NENTRIES) {
        printf("recovery: bad count %llu\n", (unsigned long long)n);
        return 1;
    }
    for (uint64_t i = 0; i < n; i++) {
        const struct entry *e = &p->entries[i];
        char want[48];
        expected_text(want, sizeof want, i);
        if (e->key != i + 1 || e->value != (i + 1) * 100 ||
            memchr(e->text, 0, sizeof e->text) == NULL || strcmp(e->text, want) != 0) {
            printf("recovery: entry %d corrupt\n", (int)i);
            return 1;
        }
    }
    printf("recovery ok: %llu entries\n", (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    int check_mode = argc > 2 && strcmp(argv[2], "check") == 0;

    if (check_mode) {
        struct pool *p = pm_open(path, POOL_SIZE, 0);
        return check(p);
    }

    struct pool *p = pm_map(path, POOL_SIZE);

    /* Initialise: empty log, everything persisted. */
    memset(p, 0, sizeof *p);
    persist(p, sizeof *p);

    for (uint64_t i = 0; i < NAPPEND; i++) {
        char text[48];
        expected_text(text, sizeof text, i);
        append(p, i + 1, (i + 1) * 100, text);
    }

    printf("log has %llu entries\n", (unsigned long long)p->count);
    for (uint64_t i = 0; i < p->count; i++) {
        const struct entry *e = &p->entries[i];
        printf("  [%llu] key=%llu value=%llu text=\"%s\"\n", (unsigned long long)i,
               (unsigned long long)e->key, (unsigned long long)e->value, e->text);
    }
    return 0;
}
