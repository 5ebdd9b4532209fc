/* pr_cceh_fixed: FIXED twin of pr_cceh.c.  The doubler persists the new depth before releasing
 * the directory lock, so the inserter (still without the directory lock, same barriers, same
 * rounds) only ever computes its slot from a durable depth.
 * Usage: pr_cceh_fixed [POOL]          prints the depth and the number of keys, exits 0
 *        pr_cceh_fixed POOL recover    opens the existing pool, walks the directory, prints
 *                                      `recovered: depth D, N keys` (`recovered: inconsistent`
 *                                      if a record is deeper than the directory, `recovered: bad
 *                                      directory` if an offset is out of range), exits 0 */
#include <pthread.h>

#include "pm.h"

#define ROUNDS 4
#define MAX_DEPTH 4
#define MAX_SEGS (1 << MAX_DEPTH)
#define SLOTS 8
#define POOL_SIZE 8192

struct dir {
    volatile uint64_t depth; /* line 0 */
    uint64_t pad[7];
    volatile uint64_t seg_off[MAX_SEGS]; /* lines 1-2 */
};

struct seg { /* two cache lines */
    struct {
        volatile uint64_t key; /* 0: empty */
        volatile uint64_t depth;
    } slot[SLOTS];
};

static char *pool;
static struct dir *dir;
static uint64_t next_free; /* bump allocator, under the directory lock */
static pthread_mutex_t dir_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t seg_lock[MAX_SEGS];
static pthread_barrier_t bar;

static uint64_t new_segment(void)
{
    uint64_t off = next_free;
    next_free += sizeof(struct seg);
    struct seg *s = (struct seg *)(pool + off);
    for (int j = 0; j < SLOTS; j++)
        s->slot[j].key = s->slot[j].depth = 0;
    persist(s, sizeof *s);
    return off;
}

static void *doubler(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&dir_lock);
        uint64_t d = dir->depth;
        for (uint64_t e = 1u << d; e < 2u << d; e++)
            dir->seg_off[e] = new_segment();
        persist((void *)&dir->seg_off[1u << d], (1u << d) * sizeof dir->seg_off[0]);
        dir->depth = d + 1; /* PR: source store */
        PM_CLWB(&dir->depth); PM_SFENCE(); /* FIX: depth persisted before unlock */
        pthread_mutex_unlock(&dir_lock);
        pthread_barrier_wait(&bar); /* the inserter runs now */
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

static void *inserter(void *arg)
{
    (void)arg;
    for (uint64_t i = 0; i < ROUNDS; i++) {
        uint64_t key = i + 1;
        pthread_barrier_wait(&bar);
        uint64_t depth = dir->depth; /* PR: load */
        uint64_t idx = key & ((1u << depth) - 1);
        uint64_t j = (key + depth) % SLOTS;
        pthread_mutex_lock(&seg_lock[idx]);
        struct seg *s = (struct seg *)(pool + dir->seg_off[idx]);
        s->slot[j].key = key; /* PR: side effect */
        s->slot[j].depth = depth; /* PR: content side effect */
        PM_CLWB(&s->slot[j]); PM_SFENCE();
        pthread_mutex_unlock(&seg_lock[idx]);
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

/* Walks segments 0 .. 2^depth - 1: -1 if an offset is out of range, else the number of keys;
 * *deeper is set if a record carries a depth greater than the directory's. */
static int count_keys(uint64_t depth, int *deeper)
{
    int n = 0;
    *deeper = 0;
    for (uint64_t e = 0; e < (1u << depth); e++) {
        uint64_t off = dir->seg_off[e];
        if (off < sizeof(struct dir) || off > POOL_SIZE - sizeof(struct seg))
            return -1;
        struct seg *s = (struct seg *)(pool + off);
        for (int j = 0; j < SLOTS; j++) {
            if (s->slot[j].key == 0)
                continue;
            n++;
            if (s->slot[j].depth > depth)
                *deeper = 1;
        }
    }
    return n;
}

static int recover(const char *path)
{
    pool = pm_open(path, POOL_SIZE, 0);
    dir = (struct dir *)pool;
    uint64_t depth = dir->depth;
    int deeper;
    int n = depth > MAX_DEPTH ? -1 : count_keys(depth, &deeper);
    if (n < 0)
        puts("recovered: bad directory");
    else if (deeper)
        puts("recovered: inconsistent");
    else
        printf("recovered: depth %llu, %d keys\n", (unsigned long long)depth, n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2 && strcmp(argv[2], "recover") == 0)
        return recover(path);
    pool = pm_map(path, POOL_SIZE);
    dir = (struct dir *)pool;
    next_free = sizeof(struct dir);
    dir->seg_off[0] = new_segment(); /* entries >= 2^depth are written by the doubling */
    dir->depth = 0;
    persist(dir, offsetof(struct dir, seg_off) + sizeof dir->seg_off[0]);
    for (int e = 0; e < MAX_SEGS; e++)
        pthread_mutex_init(&seg_lock[e], NULL);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t a, b;
    pthread_create(&a, NULL, doubler, NULL);
    pthread_create(&b, NULL, inserter, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    int deeper;
    int n = count_keys(dir->depth, &deeper);
    printf("depth %llu, %d keys%s\n", (unsigned long long)dir->depth, n, deeper ? " (inconsistent)" : "");
    return 0;
}
