/* crash_two_callers: one crash-consistency bug reached from two call sites.
 *
 * put() stores a record's value, then persists only the record's "valid" flag: a crash after
 * the flag's fence can leave a valid record without its value, which check mode reports.  main
 * calls put() from two places (the first record, then the rest), so the failing crash points
 * are at one fence reached through two call stacks, and the lost store is the same line: one
 * bug.  `ferrite crash` reports it as one finding with both call stacks (tests/crash.rs).
 *
 * Usage: crash_two_callers [POOL] [check]    exits 0; check mode exits 1 on a valid record
 *        whose value is missing.
 */
#include "pm.h"

#define NRECORDS 4

struct record {
    uint64_t value;
    char pad[PM_CACHELINE - sizeof(uint64_t)];
    uint64_t valid;
    char pad2[PM_CACHELINE - sizeof(uint64_t)];
};

__attribute__((noinline)) static void put(struct record *r, uint64_t value)
{
    r->value = value; /* LOST: never persisted */
    r->valid = 1;
    persist(&r->valid, sizeof r->valid);
}

static int check(const struct record *rs)
{
    for (int i = 0; i < NRECORDS; i++) {
        if (rs[i].valid && rs[i].value != (uint64_t)(i + 1) * 10) {
            printf("recovery: record %d valid without its value\n", i);
            return 1;
        }
    }
    puts("recovery ok");
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    size_t size = NRECORDS * sizeof(struct record);
    if (argc > 2 && strcmp(argv[2], "check") == 0)
        return check(pm_open(path, size, 0));
    struct record *rs = pm_map(path, size);
    memset(rs, 0, size);
    persist(rs, size);
    put(&rs[0], 10); /* the first call site */
    for (int i = 1; i < NRECORDS; i++)
        put(&rs[i], (uint64_t)(i + 1) * 10); /* the second call site */
    puts("done");
    return 0;
}
