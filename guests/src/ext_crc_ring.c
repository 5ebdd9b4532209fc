/* ext_crc_ring: a circular log of checksummed records, as embedded loggers and journaling
 * key-value stores write one (built -O2). There is no head or tail pointer in PM: each 128-byte
 * record (two cache lines: header {seq, len, crc} and payload) is written, then flushed and fenced
 * as a whole, and recovery finds the log by scanning: it takes the oldest record with a good
 * checksum and follows sequence numbers until the first record whose checksum fails. The writer
 * never orders the header against the payload: a crash can leave either line without the other,
 * and the checksum is what makes that safe.
 *   - BUG (this file): recovery trusts the sequence number and does not verify the checksum
 *     (RECOVERY_BUG): a header that reached PM without its payload is replayed, and the replayed
 *     payload is not the one that was written.
 *   - FIXED (ext_crc_ring_fixed, built with -DFIXED): recovery stops at the first bad checksum.
 *     The writer is the same in both: crash testing must not report the fixed twin.
 * Usage: ext_crc_ring [POOL]          formats the pool and appends the records (wrapping around)
 *        ext_crc_ring POOL recover    scans and replays the log: `recovery ok: records A..B` (exit 0)
 *                                     or `recovery: record S replayed with a bad payload` (exit 1) */
#include <fcntl.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLOTS 6
#define RECORDS 9
#define WORDS 13

struct record {
    uint64_t seq; /* 0: never written */
    uint64_t len;
    uint32_t crc;
    uint32_t pad;
    uint64_t payload[WORDS];
};

struct pool {
    struct record ring[SLOTS];
};

static struct pool *pool;

static uint32_t crc32c(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    crc = ~crc;
    while (len--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
    }
    return ~crc;
}

static uint32_t record_crc(const struct record *r)
{
    uint32_t c = crc32c(0, &r->seq, sizeof r->seq);
    c = crc32c(c, &r->len, sizeof r->len);
    return crc32c(c, r->payload, sizeof r->payload);
}

static uint64_t word_of(uint64_t seq, unsigned i)
{
    return seq * 0x9e3779b97f4a7c15ull + i;
}

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static void append(uint64_t seq)
{
    struct record *r = &pool->ring[(seq - 1) % SLOTS];
    struct record tmp;
    tmp.seq = seq;
    tmp.len = WORDS;
    tmp.pad = 0;
    for (unsigned i = 0; i < WORDS; i++)
        tmp.payload[i] = word_of(seq, i);
    tmp.crc = record_crc(&tmp);
    memcpy(r, &tmp, sizeof tmp); /* RECORD_STORE */
    persist(r, sizeof *r);       /* RECORD_PERSIST: header and payload, unordered */
}

static int recover(void)
{
    uint64_t first = 0;
    for (unsigned s = 0; s < SLOTS; s++) {
        const struct record *r = &pool->ring[s];
#ifdef FIXED
        if (r->crc != record_crc(r))
            continue;
#endif
        if (r->seq != 0 && (first == 0 || r->seq < first))
            first = r->seq;
    }
    if (first == 0) {
        printf("recovery ok: empty\n");
        return 0;
    }
    uint64_t seq = first;
    for (;; seq++) {
        const struct record *r = &pool->ring[(seq - 1) % SLOTS];
        if (r->seq != seq)
            break;
#ifdef FIXED
        if (r->crc != record_crc(r))
            break; /* FIX: a torn record ends the log */
#endif
        /* RECOVERY_BUG: replays a record whose checksum it never verified */
        for (unsigned i = 0; i < WORDS; i++)
            if (r->payload[i] != word_of(seq, i)) {
                printf("recovery: record %llu replayed with a bad payload\n", (unsigned long long)seq);
                return 1;
            }
    }
    printf("recovery ok: records %llu..%llu\n", (unsigned long long)first, (unsigned long long)(seq - 1));
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/ring";
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
    for (uint64_t seq = 1; seq <= RECORDS; seq++)
        append(seq);
    printf("appended %d records\n", RECORDS);
    return 0;
}
