/* pm_reuse_alloc: BUG-FREE.  A PM free-list allocator that reuses freed blocks, used by two
 * threads.  Each round a thread allocates a block (under the allocator lock: pop the free list,
 * persisted), fills it under its OWN lock (bumps the block's generation, stamps its owner and
 * data, persists the block, publishes the block's offset and generation in its own root line,
 * persisted), and later frees it (under the allocator lock: push it, persisted).  The frees and
 * allocations are ordered so that every allocation after the first round gets the block the OTHER
 * thread just freed: the thread reads the generation the other thread stored under the other
 * thread's lock.  Every store is persisted inside the critical section that made it, and the
 * block changes hands through the allocator lock (free, then allocate), so nothing is ever read
 * before it is durable.
 *
 * A known false-positive source for race detectors that key by address (memory reuse): the
 * generation's store (under lock T0) and its load by the next owner (under lock T1) share no lock,
 * and only the allocator's lock (which neither access holds) orders them.
 *
 * Layout (pool file, POOL_SIZE bytes):
 *   offset 0:    root { head (offset of the first free block, 0: none), nallocs }   (line 0)
 *   offset 64:   pub[2], one line each { block offset, generation, round }
 *   offset 256:  blocks[4], one line each { next, gen, owner, data[5] }
 *
 * Usage: pm_reuse_alloc [POOL]        (re)initialises the pool, runs 2 threads x 6 rounds, prints
 *                                     the counts, exits 0
 *        pm_reuse_alloc POOL check    opens the existing pool (never written), walks the free list
 *                                     and the published blocks: prints `recovery ok: ...` (exit 0)
 *                                     or `recovery: ...` (exit 1) */
#include <pthread.h>

#include "pm.h"

#define POOL_SIZE 4096
#define NTHREADS 2
#define ROUNDS 6
#define NBLOCKS 4
#define BLOCK_BASE 256

struct block {
    volatile uint64_t next; /* free list link (offset), under the allocator lock */
    volatile uint64_t gen;  /* generation: bumped by each allocation, under the owner's lock */
    volatile uint64_t owner;
    volatile uint64_t data[5];
};

struct pub {
    volatile uint64_t off;
    volatile uint64_t gen;
    volatile uint64_t round;
    uint64_t pad[5];
};

struct root {
    volatile uint64_t head;
    volatile uint64_t nallocs;
    uint64_t pad[6];
    struct pub pub[NTHREADS];
};

_Static_assert(sizeof(struct block) == 64, "a block is one line");
_Static_assert(sizeof(struct root) <= BLOCK_BASE, "root before the blocks");

static char *pool;
static struct root *root;
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t own_lock[NTHREADS] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};
static pthread_barrier_t bar;
static uint64_t last_owner[NBLOCKS]; /* DRAM: who had each block last (0: nobody, else tid + 1) */
static uint64_t crossed;             /* allocations that got the other thread's block */

static struct block *block_at(uint64_t off) { return (struct block *)(pool + off); }

static uint64_t pm_alloc(void)
{
    pthread_mutex_lock(&alloc_lock);
    uint64_t off = root->head;
    if (off == 0) {
        fprintf(stderr, "out of blocks\n");
        exit(2);
    }
    root->head = block_at(off)->next; /* ALLOC: pop under the allocator lock */
    root->nallocs++;
    PM_CLWB(&root->head); PM_SFENCE(); /* ALLOC PERSIST: inside the allocator's critical section */
    pthread_mutex_unlock(&alloc_lock);
    return off;
}

static void pm_free(uint64_t off)
{
    pthread_mutex_lock(&alloc_lock);
    struct block *b = block_at(off);
    b->next = root->head; /* FREE: push under the allocator lock */
    PM_CLWB(b); PM_SFENCE();
    root->head = off;
    PM_CLWB(&root->head); PM_SFENCE(); /* FREE PERSIST: inside the allocator's critical section */
    pthread_mutex_unlock(&alloc_lock);
}

static void fill_and_publish(int tid, uint64_t off, uint64_t round)
{
    struct block *b = block_at(off);
    pthread_mutex_lock(&own_lock[tid]);
    uint64_t g = b->gen; /* REUSE LOAD: the previous owner's generation */
    b->gen = g + 1; /* REUSE STORE: the new generation, under this thread's lock */
    b->owner = (uint64_t)tid + 1;
    for (int i = 0; i < 5; i++)
        b->data[i] = (round + 1) * 100 + (uint64_t)tid * 10 + (uint64_t)i;
    PM_CLWB(b); PM_SFENCE(); /* FILL PERSIST: the block durable inside the owner's critical section */
    struct pub *p = &root->pub[tid];
    p->off = off;
    p->gen = g + 1;
    p->round = round + 1;
    PM_CLWB(p); PM_SFENCE(); /* PUBLISH: the block's offset durable inside the critical section */
    pthread_mutex_unlock(&own_lock[tid]);
}

static void *worker(void *arg)
{
    int tid = (int)(uintptr_t)arg;
    for (uint64_t r = 0; r < ROUNDS; r++) {
        /* Thread 0 allocates first, then thread 1: each pops the block the other freed last. */
        uint64_t off = 0;
        if (tid == 0)
            off = pm_alloc();
        pthread_barrier_wait(&bar);
        if (tid == 1)
            off = pm_alloc();
        uint64_t i = (off - BLOCK_BASE) / sizeof(struct block);
        if (last_owner[i] != 0 && last_owner[i] != (uint64_t)tid + 1)
            __atomic_fetch_add(&crossed, 1, __ATOMIC_RELAXED);
        last_owner[i] = (uint64_t)tid + 1;
        fill_and_publish(tid, off, r);
        pthread_barrier_wait(&bar);
        /* Thread 0 frees first, then thread 1: thread 1's block is on top, under thread 0's. */
        if (tid == 0)
            pm_free(off);
        pthread_barrier_wait(&bar);
        if (tid == 1)
            pm_free(off);
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

/* Walks the free list and the published blocks of an existing pool. */
static int check(void)
{
    uint64_t seen = 0, n = 0;
    for (uint64_t off = root->head; off != 0; off = block_at(off)->next) {
        if (off < BLOCK_BASE || off >= BLOCK_BASE + NBLOCKS * sizeof(struct block) || (off - BLOCK_BASE) % 64 != 0) {
            puts("recovery: bad free list");
            return 1;
        }
        uint64_t bit = 1ull << ((off - BLOCK_BASE) / 64);
        if (seen & bit) {
            puts("recovery: free list cycle");
            return 1;
        }
        seen |= bit;
        n++;
    }
    uint64_t gens = 0;
    for (int i = 0; i < NBLOCKS; i++)
        gens += block_at(BLOCK_BASE + (uint64_t)i * 64)->gen;
    for (int t = 0; t < NTHREADS; t++) {
        struct pub *p = &root->pub[t];
        if (p->off == 0)
            continue;
        if (p->off < BLOCK_BASE || p->off >= BLOCK_BASE + NBLOCKS * sizeof(struct block)) {
            puts("recovery: bad published block");
            return 1;
        }
        struct block *b = block_at(p->off);
        /* The block published by t was filled by t before it was published, and a later owner
         * only bumps the generation further. */
        if (b->gen < p->gen) {
            printf("recovery: thread %d published generation %llu of a block at generation %llu\n", t,
                   (unsigned long long)p->gen, (unsigned long long)b->gen);
            return 1;
        }
    }
    /* Each allocation bumps its block's generation after the allocation is durable: at most one
     * allocation per thread can be durable without its generation. */
    if (gens + NTHREADS < root->nallocs) {
        printf("recovery: %llu allocations, generations sum to %llu\n", (unsigned long long)root->nallocs,
               (unsigned long long)gens);
        return 1;
    }
    printf("recovery ok: %llu free blocks, %llu allocations\n", (unsigned long long)n,
           (unsigned long long)root->nallocs);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    int check_mode = argc > 2 && strcmp(argv[2], "check") == 0;
    pool = check_mode ? pm_open(path, POOL_SIZE, 0) : pm_map(path, POOL_SIZE);
    root = (struct root *)pool;
    if (check_mode)
        return check();

    memset(pool, 0, BLOCK_BASE + NBLOCKS * sizeof(struct block));
    for (int i = 0; i < NBLOCKS; i++)
        block_at(BLOCK_BASE + (uint64_t)i * 64)->next = i + 1 < NBLOCKS ? BLOCK_BASE + (uint64_t)(i + 1) * 64 : 0;
    root->head = BLOCK_BASE;
    persist(pool, BLOCK_BASE + NBLOCKS * sizeof(struct block));

    pthread_barrier_init(&bar, NULL, NTHREADS);
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);

    uint64_t gens = 0, free_blocks = 0;
    for (int i = 0; i < NBLOCKS; i++)
        gens += block_at(BLOCK_BASE + (uint64_t)i * 64)->gen;
    for (uint64_t off = root->head; off != 0; off = block_at(off)->next)
        free_blocks++;
    printf("rounds %d, allocations %llu, generations %llu, reused across threads %llu, free blocks %llu\n", ROUNDS,
           (unsigned long long)root->nallocs, (unsigned long long)gens, (unsigned long long)crossed,
           (unsigned long long)free_blocks);
    return 0;
}
