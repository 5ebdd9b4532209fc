// ext_catomic_pub: PM records published through a C11 `_Atomic` pointer in DRAM, written the way
// a C developer writes lock-free publication with <stdatomic.h> (built -O2, where
// `atomic_store_explicit(..., memory_order_release)` and `atomic_load_explicit(...,
// memory_order_acquire)` are plain `mov`s; ext_catomic_pub_o0 is the same at -O0 -g): a writer
// fills a record in a PM array, then publishes it twice, through a DRAM
// `_Atomic(struct record *) latest` for readers in this process and through the PM header's
// `_Atomic uint64_t count` (then clwb + sfence) for recovery. A reader spins on `latest` and
// copies each new record into a PM audit trail that it persists.
//   - BUG (this file): the writer persists the count before the record, and persists the record
//     only after publishing it: recovery can find a counted record that is zero (COUNT_PERSIST /
//     REC_STORE), and the reader copies the record into its durable audit before the record is
//     durable (REC_STORE / REC_LOAD).
//   - FIXED (ext_catomic_pub_fixed, built with -DFIXED): the record persisted before either
//     publication.
//   - BUILTIN (ext_builtin_pub and _fixed): `latest` is a plain `struct record *` accessed with
//     gcc's `__atomic_store_n`/`__atomic_load_n` (release, acquire), which leave no trace in the
//     binary: ferrite cannot tell them from plain accesses (docs/analyses/hawkset.md).
// Usage: ext_catomic_pub [POOL]        formats POOL, prints `published 8`, exits 0
//        ext_catomic_pub POOL check    checks the counted records: `recovered: N records`, or
//                                      `recovered: torn record I` and exit 1.
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define RECORDS 8

struct record {
    uint64_t id;
    uint64_t amount;
    uint64_t check;
    uint64_t pad[5];
};

struct pool {
    _Atomic uint64_t count;
    uint64_t pad[7];
    struct record rec[RECORDS];
    uint64_t audit_len;
    uint64_t pad2[7];
    uint64_t audit[RECORDS];
};

__attribute__((target("clwb"))) static inline void persist(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + n; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

#ifdef BUILTIN
static struct record *latest;
#define PUBLISH(r) __atomic_store_n(&latest, (r), __ATOMIC_RELEASE)
#define LATEST() __atomic_load_n(&latest, __ATOMIC_ACQUIRE)
#else
static _Atomic(struct record *) latest;
#define PUBLISH(r) atomic_store_explicit(&latest, (r), memory_order_release)
#define LATEST() atomic_load_explicit(&latest, memory_order_acquire)
#endif

static void *writer(void *arg)
{
    struct pool *pool = arg;
    for (uint64_t i = 0; i < RECORDS; i++) {
        struct record *r = &pool->rec[i];
        r->id = i + 1;                          // REC_STORE: id
        r->amount = (i + 1) * 25;               // REC_STORE: amount
        r->check = r->id ^ r->amount ^ 0xfeed; // REC_STORE: check
#ifdef FIXED
        persist(r, sizeof *r); // FIX: the record durable before it is published
#endif
        PUBLISH(r);
        atomic_store_explicit(&pool->count, i + 1, memory_order_release);
        persist(&pool->count, sizeof pool->count); // COUNT_PERSIST: the flag made durable
#ifndef FIXED
        persist(r, sizeof *r); // BUG: the record durable only after its flag
#endif
        sched_yield();
    }
    return NULL;
}

static void *reader(void *arg)
{
    struct pool *pool = arg;
    const struct record *seen = NULL;
    while (pool->audit_len < RECORDS) {
        const struct record *r = LATEST();
        if (r == NULL || r == seen) {
            sched_yield();
            continue;
        }
        seen = r;
        uint64_t entry = r->id << 32 | r->amount; // REC_LOAD
        pool->audit[pool->audit_len] = entry;     // EFFECT: the audit entry
        persist(&pool->audit[pool->audit_len], sizeof entry);
        pool->audit_len++;
        persist(&pool->audit_len, sizeof pool->audit_len);
        if (r->id == RECORDS)
            break;
    }
    return NULL;
}

static int check(struct pool *pool)
{
    uint64_t n = atomic_load(&pool->count);
    if (n > RECORDS) {
        printf("recovered: bad count\n");
        return 1;
    }
    for (uint64_t i = 0; i < n; i++) {
        const struct record *r = &pool->rec[i];
        if (r->id != i + 1 || r->check != (r->id ^ r->amount ^ 0xfeed)) {
            printf("recovered: torn record %llu\n", (unsigned long long)i);
            return 1;
        }
    }
    printf("recovered: %llu records\n", (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/catomicpub";
    int recover = argc > 2 && strcmp(argv[2], "check") == 0;
    int fd = open(path, recover ? O_RDWR : O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || (!recover && ftruncate(fd, sizeof(struct pool)) != 0)) {
        perror(path);
        return 2;
    }
    void *p = mmap(NULL, sizeof(struct pool), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    struct pool *pool = p;
    if (recover)
        return check(pool);
    pthread_t w, r;
    pthread_create(&w, NULL, writer, pool);
    pthread_create(&r, NULL, reader, pool);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    // How many records the reader saw depends on the schedule; only the count is printed.
    printf("published %llu\n", (unsigned long long)atomic_load(&pool->count));
    munmap(p, sizeof(struct pool));
    close(fd);
    return 0;
}
