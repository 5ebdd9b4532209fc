/* ext_rwlock_hits: a PM price table behind a pthread_rwlock_t (in DRAM), built -O2: an updater
 * changes prices under the write lock and persists them inside it; lookups take the read lock.
 * Each entry also counts its lookups in PM ("hits", for an LRU policy after restart).
 *   - BUG (this file): lookup() bumps the entry's hit count under the *read* lock and persists
 *     it there: two readers hold the read lock together, so one's store races with the other's
 *     load of the count (HITS_STORE / HITS_LOAD), both a data race and a persistence-induced race.
 *   - FIXED (ext_rwlock_hits_fixed, built with -DFIXED): the count is bumped under the write
 *     lock (the reader drops the read lock and takes the write lock for it).
 * Usage: ext_rwlock_hits [POOL]; prints the total of the hit counts, exits 0. */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define ENTRIES 4
#define READERS 3
#define LOOKUPS 8

struct item {
    uint64_t price;
    uint64_t hits;
    uint64_t pad[6];
};

static struct item *table;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static uint64_t lookup(unsigned i)
{
    pthread_rwlock_rdlock(&rw);
    uint64_t price = table[i].price;
#ifndef FIXED
    table[i].hits = table[i].hits + 1; /* HITS_STORE HITS_LOAD: under the read lock */
    persist(&table[i].hits, sizeof(uint64_t));
    pthread_rwlock_unlock(&rw);
#else
    pthread_rwlock_unlock(&rw);
    pthread_rwlock_wrlock(&rw);
    table[i].hits = table[i].hits + 1; /* FIX: under the write lock */
    persist(&table[i].hits, sizeof(uint64_t));
    pthread_rwlock_unlock(&rw);
#endif
    return price;
}

static void update(unsigned i, uint64_t price)
{
    pthread_rwlock_wrlock(&rw);
    table[i].price = price;
    persist(&table[i].price, sizeof(uint64_t));
    pthread_rwlock_unlock(&rw);
}

static void *reader(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t sum = 0;
    for (unsigned n = 0; n < LOOKUPS; n++) {
        sum += lookup((id + n) % ENTRIES);
        sched_yield();
    }
    return (void *)(uintptr_t)(sum != 0);
}

static void *updater(void *arg)
{
    (void)arg;
    for (unsigned n = 0; n < 2 * ENTRIES; n++) {
        update(n % ENTRIES, 100 + n);
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/prices";
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror(path);
        return 1;
    }
    table = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (table == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (unsigned i = 0; i < ENTRIES; i++) {
        table[i].price = 10 * (i + 1);
        table[i].hits = 0;
    }
    persist(table, ENTRIES * sizeof *table);
    pthread_t t[READERS + 1];
    for (uintptr_t i = 0; i < READERS; i++)
        pthread_create(&t[i], NULL, reader, (void *)i);
    pthread_create(&t[READERS], NULL, updater, NULL);
    for (int i = 0; i <= READERS; i++)
        pthread_join(t[i], NULL);
    uint64_t hits = 0;
    for (unsigned i = 0; i < ENTRIES; i++)
        hits += table[i].hits;
    printf("hits %llu\n", (unsigned long long)hits);
    return 0;
}
