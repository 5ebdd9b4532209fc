/* ext_skiplist: a lock-free skip list in PM (built -O2), after the durable lock-free skip lists
 * of the NVM literature: nodes come from per-thread slabs of the pool, links are pool offsets,
 * each level's next pointer is set with a CAS. Insert writes and persists the node (key, height,
 * its successors), CASes it into level 0 and persists that link, then links the upper levels
 * bottom-up, persisting each. Level 0 is the durable truth; the upper levels are an index, but
 * recovery trusts them for lookups and checks that every node an upper level reaches is on level
 * 0, and that level 0 holds at least the inserts the per-thread `done` words count.
 *   - BUG (without FIXED): the level-0 link is never flushed (L0_BUG): the upper links persisted
 *     after it can be durable while the node is not on the durable level 0.
 *   - FIXED (ext_skiplist_fixed): the level-0 link is persisted before the upper levels.
 * Usage: ext_skiplist [POOL]           formats and runs the inserters
 *        ext_skiplist POOL recover     `recovery ok: N keys` (exit 0) or `recovery: ...` (1) */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LEVELS 3
#define THREADS 2
#define PER_THREAD 5
#define NODES (1 + THREADS * PER_THREAD)
#define MAGIC 0x534b4950u

struct node {
    uint64_t key;
    uint64_t height;
    uint64_t next[LEVELS]; /* offsets, 0 for none */
    uint64_t pad[8 - 2 - LEVELS];
};

struct pool {
    uint64_t magic;
    uint64_t pad0[7];
    struct {
        uint64_t n;
        uint64_t pad[7];
    } done[THREADS];
    struct node nodes[NODES]; /* nodes[0]: the head, of full height */
};

static struct pool *pool;

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static struct node *at(uint64_t off)
{
    return (struct node *)((char *)pool + off);
}

static uint64_t off_of(const struct node *n)
{
    return (uint64_t)((const char *)n - (const char *)pool);
}

/* A deterministic height from the key (a coin-flip stand-in): 1..LEVELS. */
static unsigned height_of(uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    unsigned lv = 1;
    while (lv < LEVELS && (h >> (60 - lv)) & 1)
        lv++;
    return lv;
}

static void find(uint64_t key, uint64_t preds[LEVELS], uint64_t succs[LEVELS])
{
    uint64_t pred = off_of(&pool->nodes[0]);
    for (int lv = LEVELS - 1; lv >= 0; lv--) {
        uint64_t curr = __atomic_load_n(&at(pred)->next[lv], __ATOMIC_ACQUIRE); /* LINK_LOAD */
        while (curr && at(curr)->key < key) {
            pred = curr;
            curr = __atomic_load_n(&at(curr)->next[lv], __ATOMIC_ACQUIRE); /* LINK_LOAD: walk */
        }
        preds[lv] = pred;
        succs[lv] = curr;
    }
}

static void insert(struct node *n, uint64_t key)
{
    uint64_t preds[LEVELS], succs[LEVELS], me = off_of(n);
    unsigned h = height_of(key);
    for (;;) {
        find(key, preds, succs);
        n->key = key; /* NODE_STORE */
        n->height = h;
        for (unsigned lv = 0; lv < h; lv++)
            n->next[lv] = succs[lv];
        persist(n, sizeof *n);
        uint64_t expected = succs[0];
        if (__atomic_compare_exchange_n(&at(preds[0])->next[0], &expected, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) /* L0_CAS */
            break;
    }
#ifdef FIXED
    persist(&at(preds[0])->next[0], sizeof(uint64_t)); /* FIX: level 0 durable first */
#endif
    /* L0_BUG: level 0's link is left to whoever flushes its line next */
    for (unsigned lv = 1; lv < h; lv++) {
        for (;;) {
            uint64_t expected = succs[lv];
            if (__atomic_compare_exchange_n(&at(preds[lv])->next[lv], &expected, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) { /* UP_CAS */
                persist(&at(preds[lv])->next[lv], sizeof(uint64_t)); /* UP_PERSIST */
                break;
            }
            /* Someone linked in between: find this level's neighbours again. */
            find(key, preds, succs);
            n->next[lv] = succs[lv];
            persist(&n->next[lv], sizeof(uint64_t));
        }
    }
}

static void *inserter(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < PER_THREAD; i++) {
        insert(&pool->nodes[1 + t * PER_THREAD + i], 1 + t + (uint64_t)i * THREADS);
        pool->done[t].n = i + 1; /* DONE_STORE */
        persist(&pool->done[t].n, sizeof(uint64_t));
    }
    return NULL;
}

static int on_level0(uint64_t off)
{
    for (uint64_t s = pool->nodes[0].next[0], steps = 0; s != 0 && steps <= NODES; s = at(s)->next[0], steps++)
        if (s == off)
            return 1;
    return 0;
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    uint64_t n = 0, last = 0, done = 0;
    for (unsigned t = 0; t < THREADS; t++)
        done += pool->done[t].n;
    for (uint64_t s = pool->nodes[0].next[0]; s != 0; s = at(s)->next[0]) {
        if (s < offsetof(struct pool, nodes) || s >= sizeof(struct pool) || ++n > NODES) {
            printf("recovery: bad link %llu\n", (unsigned long long)s);
            return 1;
        }
        if (at(s)->key <= last) {
            printf("recovery: level 0 unsorted at %llu\n", (unsigned long long)at(s)->key);
            return 1;
        }
        last = at(s)->key;
    }
    for (unsigned lv = 1; lv < LEVELS; lv++)
        for (uint64_t s = pool->nodes[0].next[lv], steps = 0; s != 0; s = at(s)->next[lv], steps++) {
            if (s < offsetof(struct pool, nodes) || s >= sizeof(struct pool) || steps > NODES) {
                printf("recovery: bad link on level %u\n", lv);
                return 1;
            }
            if (!on_level0(s)) {
                printf("recovery: key %llu on level %u but not on level 0\n", (unsigned long long)at(s)->key, lv);
                return 1;
            }
        }
    if (n < done) {
        printf("recovery: %llu keys on level 0, %llu inserts done\n", (unsigned long long)n, (unsigned long long)done);
        return 1;
    }
    printf("recovery ok: %llu keys\n", (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/skiplist";
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
    pool->nodes[0].height = LEVELS;
    persist(pool, sizeof *pool);
    pool->magic = MAGIC;
    persist(&pool->magic, sizeof pool->magic);
    pthread_t th[THREADS];
    for (uintptr_t t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, inserter, (void *)t);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    uint64_t n = 0;
    for (uint64_t s = pool->nodes[0].next[0]; s != 0; s = at(s)->next[0])
        n++;
    printf("skip list holds %llu keys\n", (unsigned long long)n);
    return 0;
}
