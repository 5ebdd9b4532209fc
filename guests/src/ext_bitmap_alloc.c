/* ext_bitmap_alloc: a persistent block allocator with an allocation bitmap in PM, shared by
 * threads without a lock (built -O2), as slab allocators for PM heaps keep one. A thread claims
 * a free block by setting its bit with __atomic_fetch_or on the bitmap word (retrying when
 * another thread set it first), then initialises the block's header and payload. The block's
 * contents must be durable before its bit: recovery treats every block whose durable bit is set
 * as allocated and live, and checks its header (magic, owner, check word).
 *   - BUG (without FIXED): the bit is persisted right after the fetch_or and the block only once
 *     it is filled (BIT_BUG): a crash in between leaves an allocated block with garbage inside.
 *   - FIXED (ext_bitmap_alloc_fixed, built with FIXED): threads claim blocks in a DRAM copy of
 *     the bitmap; the block is filled and persisted first, and only then is its bit set in the PM
 *     bitmap with fetch_or and persisted. (Setting the PM bit at claim time and persisting it
 *     after the block is not enough: another thread's persist of the same word makes the claim
 *     durable early, which crash testing finds.) A crash before the bit's persist leaks nothing.
 *     A bit set but not yet durable is read by the other threads' fetch_or on the same word
 *     before it is durable, which is inherent to a shared bitmap word.
 * Usage: ext_bitmap_alloc [POOL]         formats and runs the allocating threads
 *        ext_bitmap_alloc POOL recover   `recovery ok: N allocated` (exit 0) or `recovery: ...` */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define THREADS 3
#define PER_THREAD 4
#define BLOCKS 64
#define BLOCK_MAGIC 0x424c4f43u
#define MAGIC 0x42495453u

struct block {
    uint32_t magic;
    uint32_t owner;
    uint64_t payload[6];
    uint64_t check;
};

struct pool {
    uint64_t magic;
    uint64_t pad0[7];
    uint64_t bitmap[BLOCKS / 64];
    uint64_t pad1[8 - BLOCKS / 64];
    struct block blocks[BLOCKS];
};

static struct pool *pool;
#ifdef FIXED
static uint64_t claimed[BLOCKS / 64]; /* DRAM: claims not yet durable */
#endif

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static uint64_t check_of(const struct block *b)
{
    uint64_t h = b->magic ^ ((uint64_t)b->owner << 32);
    for (int i = 0; i < 6; i++)
        h = (h ^ b->payload[i]) * 0x100000001b3ull;
    return h;
}

/* Claims a free block: returns its index, or -1 when the pool is full. */
static int claim(unsigned hint)
{
    for (unsigned k = 0; k < BLOCKS; k++) {
        unsigned i = (hint + k) % BLOCKS;
        uint64_t bit = 1ull << (i % 64);
#ifdef FIXED
        uint64_t *word = &claimed[i / 64]; /* FIX: claimed in DRAM */
#else
        uint64_t *word = &pool->bitmap[i / 64];
#endif
        if (__atomic_load_n(word, __ATOMIC_RELAXED) & bit)
            continue;
        uint64_t old = __atomic_fetch_or(word, bit, __ATOMIC_ACQ_REL); /* BIT_SET */
        if (!(old & bit)) {
#ifndef FIXED
            persist(word, sizeof *word); /* BIT_BUG: the claim durable before the block */
#endif
            return (int)i;
        }
    }
    return -1;
}

static void *allocator(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned n = 0; n < PER_THREAD; n++) {
        int i = claim(t * 5 + n);
        if (i < 0)
            break;
        struct block *b = &pool->blocks[i];
        b->magic = BLOCK_MAGIC; /* BLOCK_STORE: magic */
        b->owner = t;           /* BLOCK_STORE: owner */
        for (int k = 0; k < 6; k++)
            b->payload[k] = (uint64_t)i * 1000 + t * 10 + k; /* BLOCK_STORE: payload */
        b->check = check_of(b); /* BLOCK_STORE: check */
        persist(b, sizeof *b);
#ifdef FIXED
        __atomic_fetch_or(&pool->bitmap[i / 64], 1ull << (i % 64), __ATOMIC_ACQ_REL); /* BIT_SET: durable claim */
        persist(&pool->bitmap[i / 64], sizeof(uint64_t)); /* FIX: the claim durable after the block */
#endif
    }
    return NULL;
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    unsigned n = 0;
    for (unsigned i = 0; i < BLOCKS; i++) {
        if (!(pool->bitmap[i / 64] & (1ull << (i % 64))))
            continue;
        const struct block *b = &pool->blocks[i];
        if (b->magic != BLOCK_MAGIC || b->owner >= THREADS || b->check != check_of(b)) {
            printf("recovery: allocated block %u is not initialised\n", i);
            return 1;
        }
        n++;
    }
    printf("recovery ok: %u allocated\n", n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/bitmap";
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
    persist(pool, sizeof *pool);
#ifdef FIXED
    memcpy(claimed, pool->bitmap, sizeof claimed);
#endif
    pool->magic = MAGIC;
    persist(&pool->magic, sizeof pool->magic);
    pthread_t th[THREADS];
    for (uintptr_t t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, allocator, (void *)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    unsigned n = 0;
    for (unsigned w = 0; w < BLOCKS / 64; w++)
        n += (unsigned)__builtin_popcountll(pool->bitmap[w]);
    printf("allocated %u\n", n);
    return 0;
}
