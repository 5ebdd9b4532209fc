/* pmdk_pmem2_log: an append-only journal on libpmem2 (dynamically linked), written the way the
 * libpmem2 examples write one: pmem2_map_new, then the map's own functions (pmem2_get_memcpy_fn,
 * pmem2_get_flush_fn, pmem2_get_drain_fn, pmem2_get_persist_fn). Records are copied with
 * PMEM2_F_MEM_NOFLUSH so that several can be flushed together before one drain; the header's
 * count commits them and is persisted afterwards.
 *   - BUG (this file): append() copies the record with PMEM2_F_MEM_NOFLUSH and drains, but never
 *     flushes it: the drain orders nothing, and the count committing the record is persisted
 *     while the record is still in the cache (a crash leaves a committed, empty record).
 *   - FIXED (pmdk_pmem2_log_fixed, built with -DFIXED): flushed before the drain.
 * Usage: pmdk_pmem2_log POOL          creates (or truncates) the pool, appends RECORDS records,
 *                                     prints the count, exits 0
 *        pmdk_pmem2_log POOL check    opens it and checks every committed record: prints
 *                                     `recovery ok: N records` (exit 0) or `recovery: record I
 *                                     corrupt` (exit 1); a pool shorter than the journal (a crash
 *                                     before it was sized) is `recovery ok: 0 records`. */
#include <fcntl.h>
#include <libpmem2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RECORDS 4
#define POOL_SIZE 4096

struct record {
    uint64_t seq;
    char text[56];
};

struct journal {
    uint64_t count;
    uint64_t pad[7];
    struct record rec[RECORDS];
};

static int fail(const char *what)
{
    fprintf(stderr, "%s: %s\n", what, pmem2_errormsg());
    return 1;
}

static void fill(struct record *r, uint64_t i)
{
    memset(r, 0, sizeof *r);
    r->seq = i + 1;
    snprintf(r->text, sizeof r->text, "record %llu of the journal", (unsigned long long)(i + 1));
}

static int check(const struct journal *j)
{
    if (j->count > RECORDS) {
        printf("recovery: bad count %llu\n", (unsigned long long)j->count);
        return 1;
    }
    for (uint64_t i = 0; i < j->count; i++) {
        struct record want;
        fill(&want, i);
        if (memcmp(&j->rec[i], &want, sizeof want) != 0) {
            printf("recovery: record %llu corrupt\n", (unsigned long long)i);
            return 1;
        }
    }
    printf("recovery ok: %llu records\n", (unsigned long long)j->count);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/pmem2log";
    int checking = argc > 2 && strcmp(argv[2], "check") == 0;
    int fd = open(path, checking ? O_RDWR : O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        return checking ? 0 : 1;
    }
    struct stat st;
    if (checking && (fstat(fd, &st) != 0 || st.st_size < POOL_SIZE)) {
        printf("recovery ok: 0 records\n");
        return 0;
    }
    if (!checking && ftruncate(fd, POOL_SIZE) != 0) {
        perror("ftruncate");
        return 1;
    }
    struct pmem2_config *cfg;
    struct pmem2_source *src;
    struct pmem2_map *map;
    if (pmem2_config_new(&cfg))
        return fail("pmem2_config_new");
    if (pmem2_source_from_fd(&src, fd))
        return fail("pmem2_source_from_fd");
    if (pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE))
        return fail("pmem2_config_set_required_store_granularity");
    if (pmem2_map_new(&map, cfg, src))
        return fail("pmem2_map_new");
    struct journal *j = pmem2_map_get_address(map);
    if (checking)
        return check(j);

    pmem2_memcpy_fn copy = pmem2_get_memcpy_fn(map);
    pmem2_flush_fn flush = pmem2_get_flush_fn(map);
    pmem2_drain_fn drain = pmem2_get_drain_fn(map);
    pmem2_persist_fn persist = pmem2_get_persist_fn(map);

    j->count = 0;
    persist(&j->count, sizeof j->count);
    for (uint64_t i = 0; i < RECORDS; i++) {
        struct record r;
        fill(&r, i);
        copy(&j->rec[i], &r, sizeof r, PMEM2_F_MEM_NOFLUSH); /* RECORD: copied with NOFLUSH */
#ifdef FIXED
        flush(&j->rec[i], sizeof r); /* FIX: flushed before the drain */
#else
        (void)flush;
#endif
        drain();
        j->count = i + 1;
        persist(&j->count, sizeof j->count); /* COMMIT: the count persisted */
    }
    printf("count %llu\n", (unsigned long long)j->count);
    pmem2_map_delete(&map);
    pmem2_source_delete(&src);
    pmem2_config_delete(&cfg);
    close(fd);
    return 0;
}
