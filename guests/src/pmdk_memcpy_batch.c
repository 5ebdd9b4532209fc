/* pmdk_memcpy_batch: a batched record log on libpmem's memcpy family (dynamically linked, -O2),
 * as the libpmem man pages recommend for throughput: each record's text is copied with
 * pmem_memcpy_nodrain and its tail cleared with pmem_memset_nodrain, and one pmem_drain ends a
 * batch; the commit count is then stored and pmem_persist'ed. A batch counter is written with
 * pmem_memcpy(PMEM_F_MEM_NONTEMPORAL) (it drains), a checksum of the committed records with
 * pmem_memcpy(PMEM_F_MEM_NOFLUSH) followed by pmem_deep_persist. Built with USE_PMEM2
 * (pmdk_pmem2_batch) the same log goes through libpmem2: pmem2_get_memcpy_fn/memset_fn with
 * PMEM2_F_MEM_NODRAIN, pmem2_get_drain_fn, pmem2_get_persist_fn.
 *   - BUG (without FIXED): the drain is issued only when a batch is full (DRAIN_BUG): the last,
 *     partial batch's copies are still in flight when its commit count is stored and flushed, so
 *     a crash before the commit's fence can leave the count durable over records that are not.
 *   - FIXED (pmdk_memcpy_batch_fixed, pmdk_pmem2_batch_fixed): every batch is drained.
 * Usage: pmdk_memcpy_batch POOL        creates (or truncates) the pool, appends RECORDS records
 *        pmdk_memcpy_batch POOL check  `recovery ok: N records` (exit 0) or `recovery: ...` (1) */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef USE_PMEM2
#include <libpmem2.h>
#else
#include <libpmem.h>
#endif

#define RECORDS 10
#define BATCH 4
#define POOL_SIZE 4096
#define TEXT 100

struct record {
    char text[TEXT];
    char tail[128 - TEXT];
};

struct log {
    uint64_t count; /* committed records */
    uint64_t pad0[7];
    uint64_t batches;
    uint64_t pad1[7];
    uint64_t sum; /* checksum of the committed records' texts */
    uint64_t pad2[7];
    struct record rec[RECORDS];
};

#ifdef USE_PMEM2
static pmem2_memcpy_fn copy_fn;
static pmem2_memset_fn set_fn;
static pmem2_drain_fn drain_fn;
static pmem2_persist_fn persist_fn;
#define COPY_NODRAIN(d, s, n) copy_fn((d), (s), (n), PMEM2_F_MEM_NODRAIN)
#define SET_NODRAIN(d, c, n) set_fn((d), (c), (n), PMEM2_F_MEM_NODRAIN)
#define DRAIN() drain_fn()
#define PERSIST(p, n) persist_fn((p), (n))
#define COPY_NT(d, s, n) copy_fn((d), (s), (n), PMEM2_F_MEM_NONTEMPORAL)
#define COPY_NOFLUSH(d, s, n) copy_fn((d), (s), (n), PMEM2_F_MEM_NOFLUSH)
#define DEEP_PERSIST(p, n) persist_fn((p), (n))
#else
#define COPY_NODRAIN(d, s, n) pmem_memcpy_nodrain((d), (s), (n))
#define SET_NODRAIN(d, c, n) pmem_memset_nodrain((d), (c), (n))
#define DRAIN() pmem_drain()
#define PERSIST(p, n) pmem_persist((p), (n))
#define COPY_NT(d, s, n) pmem_memcpy((d), (s), (n), PMEM_F_MEM_NONTEMPORAL)
#define COPY_NOFLUSH(d, s, n) pmem_memcpy((d), (s), (n), PMEM_F_MEM_NOFLUSH)
#define DEEP_PERSIST(p, n) pmem_deep_persist((p), (n))
#endif

static void text_of(char *out, uint64_t i)
{
    memset(out, 0, TEXT);
    snprintf(out, TEXT, "record %llu: the batched log keeps %d records per drain", (unsigned long long)i, BATCH);
}

static uint64_t sum_of(const char *t)
{
    uint64_t s = 0;
    for (int i = 0; i < TEXT; i++)
        s = s * 31 + (unsigned char)t[i];
    return s;
}

static int check(const struct log *l)
{
    if (l->count > RECORDS) {
        printf("recovery: bad count %llu\n", (unsigned long long)l->count);
        return 1;
    }
    char want[TEXT];
    for (uint64_t i = 0; i < l->count; i++) {
        text_of(want, i);
        if (memcmp(l->rec[i].text, want, TEXT) != 0) {
            printf("recovery: record %llu of %llu corrupt\n", (unsigned long long)i, (unsigned long long)l->count);
            return 1;
        }
    }
    printf("recovery ok: %llu records\n", (unsigned long long)l->count);
    return 0;
}

static void append_all(struct log *l)
{
    char text[TEXT];
    uint64_t sum = 0, batches = 0;
    for (uint64_t first = 0; first < RECORDS; first += BATCH) {
        uint64_t end = first + BATCH < RECORDS ? first + BATCH : RECORDS;
        for (uint64_t i = first; i < end; i++) {
            text_of(text, i);
            COPY_NODRAIN(l->rec[i].text, text, TEXT); /* RECORD_COPY */
            SET_NODRAIN(l->rec[i].tail, 0, sizeof l->rec[i].tail);
            sum += sum_of(text);
        }
#ifdef FIXED
        DRAIN(); /* FIX: every batch drained before its commit */
#else
        if (end - first == BATCH)
            DRAIN(); /* DRAIN_BUG: only full batches are drained */
#endif
        l->count = end; /* COMMIT_STORE */
        PERSIST(&l->count, sizeof l->count); /* COMMIT_PERSIST */
        batches++;
        COPY_NT(&l->batches, &batches, sizeof batches);
        COPY_NOFLUSH(&l->sum, &sum, sizeof sum);
        DEEP_PERSIST(&l->sum, sizeof l->sum);
    }
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/batchlog";
    int checking = argc > 2 && strcmp(argv[2], "check") == 0;
    int fd = open(path, checking ? O_RDWR : O_RDWR | O_CREAT | O_TRUNC, 0644);
    struct stat st;
    if (checking && (fd < 0 || fstat(fd, &st) != 0 || st.st_size < POOL_SIZE)) {
        printf("recovery ok: 0 records\n");
        return 0;
    }
    if (fd < 0 || (!checking && ftruncate(fd, POOL_SIZE) != 0)) {
        perror(path);
        return 1;
    }
#ifdef USE_PMEM2
    struct pmem2_config *cfg;
    struct pmem2_source *src;
    struct pmem2_map *map;
    if (pmem2_config_new(&cfg) || pmem2_source_from_fd(&src, fd) ||
        pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE) || pmem2_map_new(&map, cfg, src)) {
        fprintf(stderr, "pmem2: %s\n", pmem2_errormsg());
        return 1;
    }
    struct log *l = pmem2_map_get_address(map);
    copy_fn = pmem2_get_memcpy_fn(map);
    set_fn = pmem2_get_memset_fn(map);
    drain_fn = pmem2_get_drain_fn(map);
    persist_fn = pmem2_get_persist_fn(map);
#else
    struct log *l = mmap(NULL, POOL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (l == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
#endif
    if (checking)
        return check(l);
    append_all(l);
    printf("committed %llu records in %llu batches\n", (unsigned long long)l->count, (unsigned long long)l->batches);
    return 0;
}
