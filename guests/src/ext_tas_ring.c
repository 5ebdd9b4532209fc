/* ext_tas_ring: a PM ring buffer (head, tail and 8 slots in PM) shared by two producers and a
 * consumer through a test-and-set spinlock of a DRAM byte, as small C projects write one
 * (built -O2): `__atomic_test_and_set` to take it (an xchg of the byte), a relaxed load while
 * it is held, `__atomic_clear` to release it (a plain store of 0). No function names the lock:
 * it is inferred from the pattern of its accesses (docs/analyses/hawkset.md "Inferred locks").
 *   - BUG (this file): enqueue() persists the slot and the tail after releasing the spinlock;
 *     the consumer, under the spinlock in between, can load both before they are durable
 *     (SLOT_STORE/SLOT_LOAD, TAIL_STORE/TAIL_LOAD).
 *   - FIXED (ext_tas_ring_fixed, built with -DFIXED): persisted before the release.
 * The consumer persists the head inside its critical section in both.
 * Usage: ext_tas_ring [POOL]; prints the number and sum of the items consumed, exits 0. */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define CAP 8
#define PRODUCERS 2
#define ITEMS 12 /* per producer */

struct ring {
    uint64_t head;
    uint64_t tail;
    uint64_t pad[6];
    uint64_t slot[CAP];
};

static struct ring *ring;
static volatile char ring_lock; /* DRAM */

static void spin_lock(volatile char *l)
{
    while (__atomic_test_and_set(l, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(l, __ATOMIC_RELAXED))
            _mm_pause();
}

static void spin_unlock(volatile char *l) { __atomic_clear(l, __ATOMIC_RELEASE); }

__attribute__((target("clflushopt"))) static void flush(const void *p)
{
    _mm_clflushopt((void *)p);
}

static int enqueue(uint64_t v)
{
    spin_lock(&ring_lock);
    uint64_t t = ring->tail; /* TAIL_LOAD: enqueue */
    if (t - ring->head == CAP) {
        spin_unlock(&ring_lock);
        return 0;
    }
    ring->slot[t % CAP] = v; /* SLOT_STORE */
    ring->tail = t + 1;      /* TAIL_STORE */
#ifdef FIXED
    flush(&ring->slot[t % CAP]);
    flush(&ring->tail);
    _mm_sfence(); /* FIX: durable before the release */
#endif
    spin_unlock(&ring_lock);
#ifndef FIXED
    flush(&ring->slot[t % CAP]);
    flush(&ring->tail);
    _mm_sfence(); /* BUG: durable only after the release */
#endif
    return 1;
}

static int dequeue(uint64_t *v)
{
    spin_lock(&ring_lock);
    uint64_t h = ring->head;
    if (h == ring->tail) { /* TAIL_LOAD */
        spin_unlock(&ring_lock);
        return 0;
    }
    *v = ring->slot[h % CAP]; /* SLOT_LOAD */
    ring->head = h + 1;
    flush(&ring->head);
    _mm_sfence();
    spin_unlock(&ring_lock);
    return 1;
}

static void *producer(void *arg)
{
    uint64_t base = (uint64_t)(uintptr_t)arg * 1000;
    for (uint64_t i = 1; i <= ITEMS;)
        if (enqueue(base + i))
            i++;
        else
            sched_yield();
    return NULL;
}

static uint64_t consumed, total;

static void *consumer(void *arg)
{
    (void)arg;
    while (consumed < PRODUCERS * ITEMS) {
        uint64_t v;
        if (dequeue(&v)) {
            consumed++;
            total += v;
        } else {
            sched_yield();
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/ring";
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror(path);
        return 1;
    }
    ring = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ring == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    ring->head = ring->tail = 0;
    flush(ring);
    _mm_sfence();
    pthread_t t[PRODUCERS + 1];
    for (uintptr_t i = 0; i < PRODUCERS; i++)
        pthread_create(&t[i], NULL, producer, (void *)(i + 1));
    pthread_create(&t[PRODUCERS], NULL, consumer, NULL);
    for (int i = 0; i <= PRODUCERS; i++)
        pthread_join(t[i], NULL);
    printf("consumed %llu total %llu\n", (unsigned long long)consumed, (unsigned long long)total);
    return 0;
}
