/* ext_hoh_list: a sorted linked list in PM with hand-over-hand (lock-coupling) locking (built
 * -O2), as the fine-grained-locking chapters teach it: the per-node pthread mutexes live in
 * DRAM, in a side array indexed by the node's slot (a mutex in PM would be garbage after a
 * crash). Links are slot numbers. Insert locks the head sentinel, then walks holding the lock of
 * the predecessor and of the current node, writes and persists the new node, links it after the
 * predecessor and persists the link. Each thread counts its finished inserts in a persistent
 * per-thread `done` word. Recovery walks the list from the sentinel: it must be sorted, acyclic,
 * and hold at least as many nodes as the durable `done` counts say were inserted.
 *   - BUG (without FIXED): the link is persisted after both locks are released (LINK_BUG): a
 *     thread that locks the predecessor next reads the link while it is only visible, inserts
 *     after the new node, persists its own link and its `done`; a crash before the first thread's
 *     persist loses both nodes while `done` says they were inserted.
 *   - FIXED (ext_hoh_list_fixed): the link is persisted while the predecessor is still locked.
 * Usage: ext_hoh_list [POOL]           formats and runs the inserters
 *        ext_hoh_list POOL recover     `recovery ok: N nodes` (exit 0) or `recovery: ...` (1) */
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
#define SLOTS (1 + THREADS * PER_THREAD)
#define MAGIC 0x484f484cu

struct node {
    uint64_t key;
    uint64_t next; /* slot of the successor, 0 for the end (slot 0 is the sentinel) */
    uint64_t pad[6];
};

struct pool {
    uint64_t magic;
    uint64_t pad0[7];
    struct {
        uint64_t n;
        uint64_t pad[7];
    } done[THREADS];
    struct node nodes[SLOTS];
};

static struct pool *pool;
static pthread_mutex_t locks[SLOTS]; /* DRAM: one per node slot */

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static void insert(uint64_t slot, uint64_t key)
{
    uint64_t prev = 0;
    pthread_mutex_lock(&locks[prev]);
    uint64_t curr = pool->nodes[prev].next; /* LINK_LOAD */
    if (curr)
        pthread_mutex_lock(&locks[curr]);
    while (curr && pool->nodes[curr].key < key) {
        pthread_mutex_unlock(&locks[prev]);
        prev = curr;
        curr = pool->nodes[curr].next; /* LINK_LOAD: walk */
        if (curr)
            pthread_mutex_lock(&locks[curr]);
    }
    struct node *n = &pool->nodes[slot];
    n->key = key;
    n->next = curr;
    persist(n, sizeof *n);
    pool->nodes[prev].next = slot; /* LINK_STORE */
#ifdef FIXED
    persist(&pool->nodes[prev].next, sizeof(uint64_t)); /* FIX: durable before the predecessor is unlocked */
#endif
    if (curr)
        pthread_mutex_unlock(&locks[curr]);
    pthread_mutex_unlock(&locks[prev]);
#ifndef FIXED
    persist(&pool->nodes[prev].next, sizeof(uint64_t)); /* LINK_BUG: persisted after the locks are released */
#endif
}

static void *inserter(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < PER_THREAD; i++) {
        /* Interleaved keys: thread t inserts t+1, t+1+THREADS, ... so that neighbours alternate. */
        insert(1 + t * PER_THREAD + i, 1 + t + (uint64_t)i * THREADS);
        pool->done[t].n = i + 1; /* DONE_STORE */
        persist(&pool->done[t].n, sizeof(uint64_t));
    }
    return NULL;
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    uint64_t done = 0, n = 0, last = 0;
    for (unsigned t = 0; t < THREADS; t++)
        done += pool->done[t].n;
    for (uint64_t s = pool->nodes[0].next; s != 0; s = pool->nodes[s].next) {
        if (s >= SLOTS || ++n > SLOTS) {
            printf("recovery: bad link %llu\n", (unsigned long long)s);
            return 1;
        }
        if (pool->nodes[s].key <= last) {
            printf("recovery: unsorted at key %llu\n", (unsigned long long)pool->nodes[s].key);
            return 1;
        }
        last = pool->nodes[s].key;
    }
    if (n < done) {
        printf("recovery: %llu nodes reachable, %llu inserts done\n", (unsigned long long)n, (unsigned long long)done);
        return 1;
    }
    printf("recovery ok: %llu nodes\n", (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/hohlist";
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
    pool->magic = MAGIC;
    persist(&pool->magic, sizeof pool->magic);
    for (unsigned s = 0; s < SLOTS; s++)
        pthread_mutex_init(&locks[s], NULL);
    pthread_t th[THREADS];
    for (uintptr_t t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, inserter, (void *)t);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    uint64_t n = 0;
    for (uint64_t s = pool->nodes[0].next; s != 0; s = pool->nodes[s].next)
        n++;
    printf("list holds %llu nodes\n", (unsigned long long)n);
    return 0;
}
