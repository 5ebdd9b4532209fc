/* ext_cond_ring: a bounded producer/consumer ring in PM, synchronised the textbook way with one
 * pthread mutex and two condition variables in DRAM (built -O2). Two producers put sequence-
 * numbered items into the ring's slots and advance `tail`; two consumers take them, advance
 * `head` and record each item they processed in a durable per-consumer log (the item's sequence
 * number and a digest of its payload), persisted before they move on. Producers signal
 * `not_empty` with pthread_cond_signal; the last producer to finish broadcasts it so that every
 * waiting consumer sees the end. Recovery checks every logged item against the ring: the slot
 * the item went through must still hold (durably) the payload the consumer digested.
 *   - BUG (without FIXED): the producer unlocks and signals first and persists the slot and the
 *     tail afterwards (SLOT_BUG), as "keep the critical section short" advice goes. A consumer
 *     woken by the signal (or taking the lock first) reads the slot while it is only visible,
 *     logs it and persists its log: a crash before the producer's persist leaves a durable log
 *     entry for a payload that never reached PM.
 *   - FIXED (ext_cond_ring_fixed): the slot and the tail are persisted under the mutex, before
 *     the signal.
 * Usage: ext_cond_ring [POOL]           formats and runs the producers and consumers
 *        ext_cond_ring POOL recover     `recovery ok: N logged` (exit 0) or `recovery: ...` (1) */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PRODUCERS 2
#define CONSUMERS 2
#define PER_PRODUCER 6
#define ITEMS (PRODUCERS * PER_PRODUCER)
#define CAPACITY 4
#define MAGIC 0x434e4452u

struct slot {
    uint64_t seq;
    uint64_t payload[3];
};

struct pool {
    uint64_t magic;
    uint64_t head; /* next slot to take */
    uint64_t tail; /* next slot to fill */
    uint64_t pad0[5];
    struct slot ring[ITEMS]; /* written round-robin by position, never reused: recovery can check */
    struct {
        uint64_t n;
        uint64_t pad[7];
        uint64_t seq[ITEMS];
        uint64_t digest[ITEMS];
    } log[CONSUMERS];
};

static struct pool *pool;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static unsigned producers_left = PRODUCERS;

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static uint64_t payload_word(uint64_t seq, unsigned j)
{
    return (seq + 1) * 0x9e3779b97f4a7c15ull + j;
}

static uint64_t digest(const struct slot *s)
{
    return s->payload[0] ^ (s->payload[1] << 1) ^ (s->payload[2] << 2);
}

static void *producer(void *arg)
{
    unsigned p = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < PER_PRODUCER; i++) {
        uint64_t seq = (uint64_t)p * PER_PRODUCER + i;
        pthread_mutex_lock(&lock);
        while (pool->tail - pool->head == CAPACITY)
            pthread_cond_wait(&not_full, &lock);
        struct slot *s = &pool->ring[pool->tail];
        s->seq = seq;
        for (unsigned j = 0; j < 3; j++)
            s->payload[j] = payload_word(seq, j); /* SLOT_STORE */
        pool->tail++; /* TAIL_STORE */
#ifdef FIXED
        persist(s, sizeof *s); /* FIX: durable before anyone can be told */
        persist(&pool->tail, sizeof pool->tail);
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&lock);
#else
        pthread_mutex_unlock(&lock);
        pthread_cond_signal(&not_empty);
        persist(s, sizeof *s); /* SLOT_BUG: persisted after the unlock and the signal */
        persist(&pool->tail, sizeof pool->tail);
#endif
    }
    pthread_mutex_lock(&lock);
    if (--producers_left == 0)
        pthread_cond_broadcast(&not_empty);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void *consumer(void *arg)
{
    unsigned c = (unsigned)(uintptr_t)arg;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (pool->head == pool->tail && producers_left > 0) /* TAIL_LOAD */
            pthread_cond_wait(&not_empty, &lock);
        if (pool->head == pool->tail) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        const struct slot *s = &pool->ring[pool->head];
        uint64_t seq = s->seq;
        uint64_t d = digest(s); /* SLOT_LOAD */
        pool->head++;
        persist(&pool->head, sizeof pool->head);
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&lock);
        uint64_t n = pool->log[c].n;
        pool->log[c].seq[n] = seq;
        pool->log[c].digest[n] = d;
        persist(&pool->log[c].seq[n], sizeof(uint64_t));
        persist(&pool->log[c].digest[n], sizeof(uint64_t));
        pool->log[c].n = n + 1;
        persist(&pool->log[c].n, sizeof(uint64_t));
    }
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    uint64_t logged = 0;
    for (unsigned c = 0; c < CONSUMERS; c++) {
        for (uint64_t k = 0; k < pool->log[c].n && k < ITEMS; k++) {
            uint64_t seq = pool->log[c].seq[k];
            const struct slot *s = NULL;
            for (unsigned i = 0; i < ITEMS; i++)
                if (pool->ring[i].seq == seq && pool->ring[i].payload[0] == payload_word(seq, 0))
                    s = &pool->ring[i];
            if (!s || digest(s) != pool->log[c].digest[k]) {
                printf("recovery: consumer %u logged item %llu that is not in the ring\n", c, (unsigned long long)seq);
                return 1;
            }
            logged++;
        }
    }
    printf("recovery ok: %llu logged\n", (unsigned long long)logged);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/condring";
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
    for (unsigned i = 0; i < ITEMS; i++)
        pool->ring[i].seq = ~0ull;
    persist(pool, sizeof *pool);
    pool->magic = MAGIC;
    persist(&pool->magic, sizeof pool->magic);
    pthread_t t[PRODUCERS + CONSUMERS];
    for (unsigned c = 0; c < CONSUMERS; c++)
        pthread_create(&t[c], NULL, consumer, (void *)(uintptr_t)c);
    for (unsigned p = 0; p < PRODUCERS; p++)
        pthread_create(&t[CONSUMERS + p], NULL, producer, (void *)(uintptr_t)p);
    for (unsigned i = 0; i < PRODUCERS + CONSUMERS; i++)
        pthread_join(t[i], NULL);
    uint64_t total = 0;
    for (unsigned c = 0; c < CONSUMERS; c++)
        total += pool->log[c].n;
    printf("consumed: %llu of %d\n", (unsigned long long)total, ITEMS);
    return total == ITEMS ? 0 : 1;
}
