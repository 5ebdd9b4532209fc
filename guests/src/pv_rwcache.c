/* pv_rwcache: a cache of PM entries, each guarded by a home-made reader-writer spin lock whose
 * word is in PM at the end of the entry (bit 0: a writer; readers add 2), built -O2.
 * configs/pv_rwcache.cfg declares it in HawkSet's own format: rw_rdlock with `type: shared`,
 * rw_wrlock `type: unique`, and (a translation mistake left on purpose) a function this program
 * does not have, which ferrite names in a warning; the report counts each declared function's
 * calls and acquisitions.
 *   - BUG (this file): (1) a writer persists an entry's payload after unlocking it, so a
 *     reader's load under the read lock can see it before it is durable (STORE/LOAD); (2) readers
 *     count their hits with a plain store under the *read* lock, persisted before unlocking:
 *     two readers hold the lock together, so one's hit count races with the other's load
 *     (HITS_STORE/HITS_LOAD) — reported only because the read lock is declared shared.
 *   - FIXED (pv_rwcache_fixed, built with -DFIXED): the payload is persisted before the unlock
 *     and hits are counted under the write lock.
 * Usage: pv_rwcache [POOL]; prints the hit total, exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define NENT 3
#define THREADS 4
#define ROUNDS 10
#define WRITER 1u

struct entry {
    uint64_t payload[2];
    uint32_t hits;
    uint32_t epoch;
    volatile uint64_t rw; /* the lock word */
    uint64_t pad[4];
};

static struct entry *ents;
static volatile uint64_t sink;

__attribute__((noinline)) void rw_rdlock(volatile uint64_t *w)
{
    for (;;) {
        uint64_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
        if (!(v & WRITER) && __atomic_compare_exchange_n(w, &v, v + 2, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        sched_yield();
    }
}

__attribute__((noinline)) void rw_rdunlock(volatile uint64_t *w)
{
    __atomic_fetch_sub(w, 2, __ATOMIC_RELEASE);
}

__attribute__((noinline)) void rw_wrlock(volatile uint64_t *w)
{
    for (;;) {
        uint64_t v = 0;
        if (__atomic_compare_exchange_n(w, &v, WRITER, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        sched_yield();
    }
}

__attribute__((noinline)) void rw_wrunlock(volatile uint64_t *w)
{
    __atomic_fetch_sub(w, WRITER, __ATOMIC_RELEASE);
}

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    for (unsigned r = 0; r < ROUNDS; r++) {
        struct entry *e = &ents[(id + r) % NENT];
        if (id == 0 && r % 2 == 0) {
            rw_wrlock(&e->rw);
            e->payload[1] = e->payload[0] + r; /* STORE: the payload, under the write lock */
#ifdef FIXED
            PM_CLWB(&e->payload[1]); PM_SFENCE(); /* FIX: persisted before the unlock */
            rw_wrunlock(&e->rw);
#else
            rw_wrunlock(&e->rw);
            PM_CLWB(&e->payload[1]); PM_SFENCE(); /* BUG: persisted after the unlock */
#endif
        } else {
            rw_rdlock(&e->rw);
            sink += e->payload[1]; /* LOAD: the payload, under the read lock */
            sink += e->hits; /* HITS_LOAD: another reader's count, under the read lock */
#ifdef FIXED
            rw_rdunlock(&e->rw);
            rw_wrlock(&e->rw);
            e->hits++; /* FIX: counted under the write lock */
            PM_CLWB(&e->hits); PM_SFENCE();
            rw_wrunlock(&e->rw);
#else
            e->hits++; /* HITS_STORE: counted under the read lock, which other readers share */
            PM_CLWB(&e->hits); PM_SFENCE();
            rw_rdunlock(&e->rw);
#endif
        }
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    ents = pm_map(path, NENT * sizeof(struct entry));
    for (int i = 0; i < NENT; i++) {
        memset(&ents[i], 0, sizeof ents[i]);
        ents[i].payload[0] = 100u * (unsigned)i;
    }
    persist(ents, NENT * sizeof(struct entry));
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    unsigned hits = 0;
    for (int i = 0; i < NENT; i++)
        hits += ents[i].hits;
    printf("hits %u\n", hits);
    return 0;
}
