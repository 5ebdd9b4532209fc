/* ext_msqueue: a lock-free Michael-Scott queue in PM (built -O2), as the durable-queue papers
 * write it (Friedman et al., "A persistent lock-free queue for non-volatile memory"). Nodes come
 * from a per-thread slab of the pool; links are pool offsets. Enqueue writes and persists the
 * node, CASes it onto the last node's `next`, persists that link, then swings the tail hint
 * with a CAS and persists it; a thread that finds the tail lagging persists the link it sees and
 * helps swing the tail. Two producers enqueue, one consumer dequeues by advancing `head` (CAS,
 * persisted). Recovery walks from the durable head along durable links and requires the durable
 * tail hint to be on that path (the tail hint is what a restarted producer appends after).
 *   - BUG (without FIXED): the link CASed onto `next` is not persisted before the tail swing
 *     (LINK_BUG), so a crash after the tail's persist can leave a durable tail that the durable
 *     chain from head never reaches: the queue's suffix is lost and the next append is made to
 *     an orphan.
 *   - FIXED (ext_msqueue_fixed, built with FIXED): the link is persisted before the tail moves.
 * Usage: ext_msqueue [POOL]            formats and runs the producers and the consumer
 *        ext_msqueue POOL recover      `recovery ok: N queued` (exit 0) or `recovery: ...` (1) */
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

#define PRODUCERS 2
#define PER_PRODUCER 4
#define NODES (1 + PRODUCERS * PER_PRODUCER)
#define MAGIC 0x4d535155u

struct node {
    uint64_t value;
    uint64_t next; /* offset of the next node in the pool, 0 for none */
    uint64_t pad[6];
};

struct pool {
    uint64_t magic;
    uint64_t pad0[7];
    uint64_t head; /* offset of the dummy node */
    uint64_t pad1[7];
    uint64_t tail; /* a hint: offset of the last node or one before it */
    uint64_t pad2[7];
    struct node nodes[NODES];
};

static struct pool *pool;
static uint64_t consumed_sum;

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

static void enqueue(struct node *n, uint64_t value)
{
    n->value = value; /* NODE_STORE */
    n->next = 0;
    persist(n, sizeof *n);
    uint64_t me = off_of(n);
    for (;;) {
        uint64_t tail = __atomic_load_n(&pool->tail, __ATOMIC_ACQUIRE);
        struct node *last = at(tail);
        uint64_t next = __atomic_load_n(&last->next, __ATOMIC_ACQUIRE); /* LINK_LOAD */
        if (tail != __atomic_load_n(&pool->tail, __ATOMIC_ACQUIRE))
            continue;
        if (next == 0) {
            uint64_t expected = 0;
            if (__atomic_compare_exchange_n(&last->next, &expected, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) { /* LINK_CAS */
#ifdef FIXED
                persist(&last->next, sizeof last->next); /* FIX: the link durable before the tail moves */
#endif
                /* LINK_BUG: the link is left to whoever flushes its line next */
                uint64_t t = tail;
                __atomic_compare_exchange_n(&pool->tail, &t, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE); /* TAIL_CAS */
                persist(&pool->tail, sizeof pool->tail);
                return;
            }
        } else {
            /* The tail lags: make the link durable, then help swing it. */
            persist(&last->next, sizeof last->next);
            uint64_t t = tail;
            __atomic_compare_exchange_n(&pool->tail, &t, next, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
            persist(&pool->tail, sizeof pool->tail);
        }
    }
}

static int dequeue(uint64_t *value)
{
    for (;;) {
        uint64_t head = __atomic_load_n(&pool->head, __ATOMIC_ACQUIRE);
        uint64_t tail = __atomic_load_n(&pool->tail, __ATOMIC_ACQUIRE);
        uint64_t next = __atomic_load_n(&at(head)->next, __ATOMIC_ACQUIRE); /* LINK_LOAD: consumer */
        if (head != __atomic_load_n(&pool->head, __ATOMIC_ACQUIRE))
            continue;
        if (next == 0)
            return 0;
        if (head == tail) {
            persist(&at(head)->next, sizeof(uint64_t));
            uint64_t t = tail;
            __atomic_compare_exchange_n(&pool->tail, &t, next, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
            persist(&pool->tail, sizeof pool->tail);
            continue;
        }
        uint64_t v = at(next)->value; /* NODE_LOAD */
        uint64_t h = head;
        if (__atomic_compare_exchange_n(&pool->head, &h, next, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) { /* HEAD_CAS */
            persist(&pool->head, sizeof pool->head);
            *value = v;
            return 1;
        }
    }
}

static void *producer(void *arg)
{
    unsigned p = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < PER_PRODUCER; i++)
        enqueue(&pool->nodes[1 + p * PER_PRODUCER + i], (p + 1) * 1000 + i);
    return NULL;
}

static void *consumer(void *arg)
{
    uint64_t v, sum = 0;
    for (unsigned got = 0, tries = 0; got < 3 && tries < 200; tries++)
        if (dequeue(&v)) {
            sum += v;
            got++;
        }
    consumed_sum = sum;
    return arg;
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    uint64_t off = pool->head, tail = pool->tail, n = 0;
    int tail_seen = 0;
    for (unsigned steps = 0; off != 0; steps++) {
        if (steps > NODES || off < offsetof(struct pool, nodes) || off >= sizeof(struct pool)) {
            printf("recovery: bad link %llu\n", (unsigned long long)off);
            return 1;
        }
        if (off == tail)
            tail_seen = 1;
        off = at(off)->next;
        n += off != 0;
    }
    if (!tail_seen) {
        printf("recovery: tail %llu not reachable from head %llu\n", (unsigned long long)tail, (unsigned long long)pool->head);
        return 1;
    }
    printf("recovery ok: %llu queued\n", (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/msqueue";
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
    pool->head = pool->tail = off_of(&pool->nodes[0]);
    persist(pool, sizeof *pool);
    pool->magic = MAGIC;
    persist(&pool->magic, sizeof pool->magic);
    pthread_t th[PRODUCERS + 1];
    for (uintptr_t p = 0; p < PRODUCERS; p++)
        pthread_create(&th[p], NULL, producer, (void *)p);
    pthread_create(&th[PRODUCERS], NULL, consumer, NULL);
    for (int t = 0; t <= PRODUCERS; t++)
        pthread_join(th[t], NULL);
    printf("consumed %llu\n", (unsigned long long)consumed_sum);
    return 0;
}
