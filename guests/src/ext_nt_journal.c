/* ext_nt_journal: an append-only journal whose records are copied with non-temporal 16-byte
 * stores (_mm_stream_si128), as bulk loaders bypass the cache, and committed by a tail index
 * that is stored, flushed with clflushopt and fenced (built -O0 -g, as research prototypes are).
 * Recovery checks the records below the durable tail.
 *   - BUG (this file): no sfence between the streamed record and the tail's store (NT_BUG):
 *     the write-combining buffers may still hold the record when the tail's line is written back
 *     (by the clflushopt, or by any eviction before it), so a crash can leave a durable tail over
 *     a record that never reached PM. The final fence completes everything: at exit nothing is
 *     left unpersisted.
 *   - FIXED (ext_nt_journal_fixed, built with -DFIXED): _mm_sfence() after the copy, before the
 *     tail is stored.
 * Usage: ext_nt_journal [POOL]          formats the pool and appends the records
 *        ext_nt_journal POOL recover    checks the committed records: `recovery ok: N records`
 *                                       (exit 0) or `recovery: record I torn` (exit 1) */
#include <emmintrin.h>
#include <fcntl.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RECORDS 5
#define WORDS 16 /* 128 bytes: two lines */

struct header {
    uint64_t magic;
    uint64_t tail; /* records [0, tail) are committed */
    uint64_t pad[6];
};

struct record {
    uint64_t w[WORDS];
};

struct pool {
    struct header hdr;
    struct record rec[RECORDS];
};

#define MAGIC 0x4e544a31u

static struct pool *pool;

static void nt_copy(void *dst, const void *src, size_t len)
{
    __m128i *d = (__m128i *)dst;
    const __m128i *s = (const __m128i *)src;
    for (size_t i = 0; i < len / 16; i++)
        _mm_stream_si128(&d[i], _mm_loadu_si128(&s[i])); /* RECORD_STREAM */
}

__attribute__((target("clflushopt"))) static void flush_line(const void *p)
{
    _mm_clflushopt((void *)p);
}

static uint64_t word_of(uint64_t i, unsigned j)
{
    return (i + 1) * 0x100000001b3ull ^ j;
}

static void append(uint64_t i)
{
    struct record r;
    for (unsigned j = 0; j < WORDS; j++)
        r.w[j] = word_of(i, j);
    nt_copy(&pool->rec[i], &r, sizeof r);
#ifdef FIXED
    _mm_sfence(); /* FIX: the record durable before the tail covers it */
#endif
    pool->hdr.tail = i + 1; /* NT_BUG: the tail stored while the record may still be in flight */
    flush_line(&pool->hdr.tail);
    _mm_sfence(); /* TAIL_FENCE */
}

static int recover(void)
{
    if (pool->hdr.magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    uint64_t tail = pool->hdr.tail;
    if (tail > RECORDS) {
        printf("recovery: bad tail %llu\n", (unsigned long long)tail);
        return 1;
    }
    for (uint64_t i = 0; i < tail; i++)
        for (unsigned j = 0; j < WORDS; j++)
            if (pool->rec[i].w[j] != word_of(i, j)) {
                printf("recovery: record %llu torn\n", (unsigned long long)i);
                return 1;
            }
    printf("recovery ok: %llu records\n", (unsigned long long)tail);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/ntjournal";
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
    pool->hdr.magic = MAGIC;
    pool->hdr.tail = 0;
    flush_line(&pool->hdr);
    _mm_sfence();
    for (uint64_t i = 0; i < RECORDS; i++)
        append(i);
    printf("appended %d records\n", RECORDS);
    return 0;
}
