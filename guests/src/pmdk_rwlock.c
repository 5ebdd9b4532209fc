/* pmdk_rwlock: a configuration record in a libpmemobj pool guarded by a PMEMrwlock that lives
 * in the pool (pmemobj_rwlock_wrlock / pmemobj_rwlock_rdlock), built -O0 -g as a research
 * artifact is, dynamically linked against libpmemobj. A writer thread publishes 6 generations
 * of the record; two reader threads take the read lock, copy the record into a snapshot of
 * their own in the pool and persist it with pmemobj_memcpy_persist (a durable copy of what
 * they read).
 *   - BUG (this file): the writer persists the record after pmemobj_rwlock_unlock, so a reader
 *     holding the read lock in between copies bytes that are not yet durable into its durable
 *     snapshot (STORE / LOAD lines): after a crash there, a snapshot names a generation the
 *     record never reached.
 *   - FIXED (pmdk_rwlock_fixed, built with -DFIXED): persisted before the unlock.
 * A PMEMrwlock in the pool is not a bug: libpmemobj reinitialises it when the pool is opened.
 * Usage: pmdk_rwlock [POOL]          removes POOL, creates a fresh pool, runs the threads,
 *                                    prints `generation 6`, exits 0
 *        pmdk_rwlock POOL recover    opens the pool: `recovered: generation N`, or
 *                                    `recovered: inconsistent` and exit 1 when a snapshot is
 *                                    newer than the record (`recovered: no pool` if none). */
#include <libpmemobj.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define GENERATIONS 6
#define READERS 2

struct config {
    uint64_t generation;
    uint64_t limit;
    uint64_t timeout;
    uint64_t flags;
};

struct snapshot {
    struct config copy;
    uint64_t pad[4];
};

struct root {
    PMEMrwlock lock;
    struct config cfg;
    uint64_t pad[4];
    struct snapshot snap[READERS];
};

static PMEMobjpool *pop;
static struct root *r;
static volatile int finished;

static void *writer(void *arg)
{
    (void)arg;
    for (uint64_t g = 1; g <= GENERATIONS; g++) {
        pmemobj_rwlock_wrlock(pop, &r->lock);
        r->cfg.limit = g * 100;      /* STORE: limit */
        r->cfg.timeout = g * 7;      /* STORE: timeout */
        r->cfg.generation = g;       /* STORE: generation */
#ifdef FIXED
        pmemobj_persist(pop, &r->cfg, sizeof r->cfg); /* FIX: durable before the unlock */
#endif
        pmemobj_rwlock_unlock(pop, &r->lock);
#ifndef FIXED
        pmemobj_persist(pop, &r->cfg, sizeof r->cfg); /* BUG: persisted after the unlock */
#endif
        sched_yield();
    }
    finished = 1;
    return NULL;
}

static void *reader(void *arg)
{
    struct snapshot *mine = &r->snap[(uintptr_t)arg];
    uint64_t last = 0;
    while (last < GENERATIONS) {
        pmemobj_rwlock_rdlock(pop, &r->lock);
        if (r->cfg.generation != last) { /* LOAD: generation */
            pmemobj_memcpy_persist(pop, &mine->copy, &r->cfg, sizeof r->cfg); /* LOAD: copied */
            last = mine->copy.generation;
        }
        pmemobj_rwlock_unlock(pop, &r->lock);
        sched_yield();
    }
    return NULL;
}

static int recover(const char *path)
{
    pop = pmemobj_open(path, "rwcfg");
    if (!pop) {
        printf("recovered: no pool\n");
        return 0;
    }
    r = pmemobj_direct(pmemobj_root(pop, sizeof(struct root)));
    pmemobj_rwlock_rdlock(pop, &r->lock);
    int ok = 1;
    for (int i = 0; i < READERS; i++)
        if (r->snap[i].copy.generation > r->cfg.generation)
            ok = 0;
    if (ok)
        printf("recovered: generation %lu\n", (unsigned long)r->cfg.generation);
    else
        printf("recovered: inconsistent\n");
    pmemobj_rwlock_unlock(pop, &r->lock);
    pmemobj_close(pop);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/rwcfg";
    if (argc > 2 && strcmp(argv[2], "recover") == 0)
        return recover(path);
    unlink(path); /* a fresh pool every run */
    pop = pmemobj_create(path, "rwcfg", PMEMOBJ_MIN_POOL, 0644);
    if (!pop) {
        perror("pmemobj_create");
        return 1;
    }
    r = pmemobj_direct(pmemobj_root(pop, sizeof(struct root)));
    pthread_t w, rd[READERS];
    pthread_create(&w, NULL, writer, NULL);
    for (uintptr_t i = 0; i < READERS; i++)
        pthread_create(&rd[i], NULL, reader, (void *)i);
    pthread_join(w, NULL);
    for (int i = 0; i < READERS; i++)
        pthread_join(rd[i], NULL);
    printf("generation %lu\n", (unsigned long)r->cfg.generation);
    pmemobj_close(pop);
    return 0;
}
