/* ext_seqlock: a PM record (a reading and its checksum) published through a seqlock, as sensor
 * and configuration stores publish one (built -O2): a single writer makes the DRAM sequence odd,
 * writes the record, makes it even again (C11 atomics, release order); readers spin while it is
 * odd, copy the record, and retry unless the sequence is unchanged. Each reader acts on what it
 * accepted: it persists a copy in its own PM slot.
 *   - BUG (this file): the writer persists the record after the sequence is even again, so a
 *     reader can accept and copy a record that is not durable yet (STORE / LOAD lines): a crash
 *     then leaves a copy of a record the pool never held.
 *   - FIXED (ext_seqlock_fixed, built with -DFIXED): the record is persisted while the sequence
 *     is still odd: every record a reader accepts is durable. A reader's loads can still read a
 *     record being written, but it never accepts them (it retries).
 * Usage: ext_seqlock [POOL]; prints how many copies are consistent, exits 0. */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define READERS 2
#define UPDATES 10
#define READS 10

struct record {
    uint64_t reading;
    uint64_t check; /* ~reading */
    uint64_t pad[6];
};

struct pool {
    struct record rec;
    struct record copy[READERS][READS]; /* each reader's accepted copies */
};

static struct pool *pool;
static _Atomic unsigned seq; /* DRAM */

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static void *writer(void *arg)
{
    (void)arg;
    for (uint64_t i = 1; i <= UPDATES; i++) {
        atomic_fetch_add_explicit(&seq, 1, memory_order_acq_rel); /* odd: writing */
        pool->rec.reading = i * 7; /* STORE: reading */
        pool->rec.check = ~(i * 7); /* STORE: check */
#ifdef FIXED
        persist(&pool->rec, sizeof pool->rec); /* FIX: durable while the sequence is odd */
#endif
        atomic_fetch_add_explicit(&seq, 1, memory_order_release); /* even: readable */
#ifndef FIXED
        persist(&pool->rec, sizeof pool->rec); /* BUG: durable only after it is readable */
#endif
        sched_yield();
    }
    return NULL;
}

static void *reader(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    for (unsigned n = 0; n < READS; n++) {
        struct record r;
        unsigned s1, s2;
        do {
            while ((s1 = atomic_load_explicit(&seq, memory_order_acquire)) & 1)
                _mm_pause();
            r.reading = pool->rec.reading; /* LOAD: reading */
            r.check = pool->rec.check;     /* LOAD: check */
            atomic_thread_fence(memory_order_acquire);
            s2 = atomic_load_explicit(&seq, memory_order_relaxed);
        } while (s1 != s2);
        pool->copy[id][n].reading = r.reading;
        pool->copy[id][n].check = r.check;
        persist(&pool->copy[id][n], sizeof r);
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/seqlock";
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    if (fd < 0 || ftruncate(fd, sizeof(struct pool)) != 0) {
        perror(path);
        return 1;
    }
    pool = mmap(NULL, sizeof(struct pool), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (pool == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    pool->rec.reading = 0;
    pool->rec.check = ~(uint64_t)0;
    persist(&pool->rec, sizeof pool->rec);
    pthread_t w, r[READERS];
    pthread_create(&w, NULL, writer, NULL);
    for (uintptr_t i = 0; i < READERS; i++)
        pthread_create(&r[i], NULL, reader, (void *)i);
    pthread_join(w, NULL);
    for (int i = 0; i < READERS; i++)
        pthread_join(r[i], NULL);
    unsigned good = 0;
    for (int i = 0; i < READERS; i++)
        for (int n = 0; n < READS; n++)
            good += pool->copy[i][n].check == ~pool->copy[i][n].reading;
    printf("consistent copies: %u of %u\n", good, READERS * READS);
    return 0;
}
