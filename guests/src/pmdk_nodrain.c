/* pmdk_nodrain: an append-only PM journal written the way a libpmem user batches copies (built
 * -O2 against libpmem): each 256-byte entry is copied with
 * pmem_memcpy(dst, src, len, PMEM_F_MEM_NONTEMPORAL | PMEM_F_MEM_NODRAIN) (libpmem's
 * non-temporal stores, not fenced) and then published by bumping the header's count and
 * persisting it. The journal's entries are zeroed with pmem_memset_nodrain when formatting.
 *   - BUG (this file): no pmem_drain() between the entry's copy and the count that commits it.
 *     The count's line can be written back (and is made durable by its own flush and fence)
 *     while the entry's non-temporal stores are still in the write-combining buffers: a crash
 *     there leaves a committed entry that is torn. By the end everything was fenced, so nothing
 *     is unpersisted at exit.
 *   - FIXED (pmdk_nodrain_fixed, built with -DFIXED): pmem_drain() before the count is stored.
 * Usage: pmdk_nodrain [POOL]        formats POOL, appends 6 entries, prints `entries 6`
 *        pmdk_nodrain POOL check    checks every committed entry's checksum: `recovered: N
 *                                   entries`, or `recovered: torn entry I` and exit 1. */
#include <libpmem.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define ENTRIES 6
#define WORDS 32 /* 256 bytes: above libpmem's non-temporal threshold */

struct entry {
    uint64_t seq;
    uint64_t word[WORDS - 2];
    uint64_t sum;
};

struct journal {
    uint64_t count;
    uint64_t pad[7];
    struct entry e[ENTRIES];
};

static uint64_t checksum(const struct entry *e)
{
    uint64_t s = e->seq * 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < WORDS - 2; i++)
        s = (s ^ e->word[i]) * 0x100000001b3ull;
    return s;
}

static int check(const struct journal *j)
{
    uint64_t n = j->count;
    if (n > ENTRIES) {
        printf("recovered: bad count %llu\n", (unsigned long long)n);
        return 1;
    }
    for (uint64_t i = 0; i < n; i++) {
        const struct entry *e = &j->e[i];
        if (e->seq != i + 1 || e->sum != checksum(e)) { /* CHECK: recovery reads the entry */
            printf("recovered: torn entry %llu\n", (unsigned long long)i);
            return 1;
        }
    }
    printf("recovered: %llu entries\n", (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/nodrain";
    int recover = argc > 2 && strcmp(argv[2], "check") == 0;
    size_t len;
    int is_pmem;
    struct journal *j = pmem_map_file(path, recover ? 0 : sizeof *j, recover ? 0 : PMEM_FILE_CREATE, 0644, &len, &is_pmem);
    if (!j) {
        perror("pmem_map_file");
        return 2;
    }
    if (recover) {
        int rc = check(j);
        pmem_unmap(j, len);
        return rc;
    }
    pmem_memset_nodrain(j->e, 0, sizeof j->e);
    j->count = 0;
    pmem_flush(&j->count, sizeof j->count);
    pmem_drain(); /* the format is durable before the first entry */

    struct entry buf;
    for (uint64_t i = 0; i < ENTRIES; i++) {
        buf.seq = i + 1;
        for (int w = 0; w < WORDS - 2; w++)
            buf.word[w] = (i + 1) * 1000 + (uint64_t)w;
        buf.sum = checksum(&buf);
        pmem_memcpy(&j->e[i], &buf, sizeof buf, PMEM_F_MEM_NONTEMPORAL | PMEM_F_MEM_NODRAIN); /* ENTRY: copied, not drained */
#ifdef FIXED
        pmem_drain(); /* FIX: the entry durable before the count commits it */
#endif
        j->count = i + 1;                      /* COMMIT: the count */
        pmem_persist(&j->count, sizeof j->count); /* BUG: commits an entry that may not be durable */
    }
    printf("entries %llu\n", (unsigned long long)j->count);
    pmem_unmap(j, len);
    return 0;
}
