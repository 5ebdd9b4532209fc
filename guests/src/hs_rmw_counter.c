/* hs_rmw_counter: a PM counter that worker threads bump with an atomic fetch-and-add, each
 * persisting it after its own increment, without a lock.  Another worker's fetch-and-add reads
 * the counter before the first worker's persist; but that read is the read half of a locked
 * read-modify-write, whose own store writes the value it read (plus one) back into the same
 * bytes: the counter it leaves behind carries the first increment, durable with its own persist.
 * HawkSet's code records a locked instruction as a fence and a store, never as a load.
 *   - BUG (this file): main reads the counter with a plain load while the workers run (the
 *     store and load lines): it can act on a count a crash loses.
 *   - FIXED (hs_rmw_counter_fixed, built with -DFIXED): main reads it after joining them; only
 *     the workers' own fetch-and-adds read it while they run.
 * Usage: hs_rmw_counter [POOL]; exits 0. */
#include <pthread.h>

#include "pm.h"

#define WORKERS 2
#define BUMPS 50

struct root {
    uint64_t count;
    uint64_t pad[7];
};

static struct root *r;
static volatile uint64_t sink;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < BUMPS; i++) {
        __atomic_fetch_add(&r->count, 1, __ATOMIC_SEQ_CST); /* STORE: the increment */
        PM_CLWB(&r->count);
        PM_SFENCE();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    r = pm_map(path, 4096);
    pthread_t w[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&w[i], NULL, worker, NULL);
#ifndef FIXED
    sink = *(volatile uint64_t *)&r->count; /* LOAD: by main, while the workers run */
#endif
    for (int i = 0; i < WORKERS; i++)
        pthread_join(w[i], NULL);
#ifdef FIXED
    sink = *(volatile uint64_t *)&r->count; /* FIX: main reads after the joins */
#endif
    printf("count %lu\n", (unsigned long)r->count);
    return 0;
}
