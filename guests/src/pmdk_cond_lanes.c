/* pmdk_cond_lanes: libpmemobj (dynamically linked): two workers run transactions and atomic
 * allocations concurrently in one pool, then report completion through a PMEMcond that the
 * main thread waits on.  Each transaction adds the worker's own counter to the transaction and
 * increments it; each round also allocates and frees an object (pmemobj_alloc, pmemobj_free).
 * Every one of these runs while the worker holds one of libpmemobj's lanes, whose undo and redo
 * logs in the pool the next holder of the lane reuses: with PMEMOBJ_NLANES=1 in the environment
 * both workers share lane 0, so the log memory is written and read by both threads, ordered by
 * the lane.  No access of the program's own races.
 * Usage: pmdk_cond_lanes [POOL]   removes POOL if it exists, creates a fresh pool, runs the
 *                                 workers, prints `counts 20 20, done 2`, exits 0
 * (Default POOL /mnt/pmem0/objpool; exit 1 if the pool cannot be created.) */
#include <libpmemobj.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#define ROUNDS 20

POBJ_LAYOUT_BEGIN(lanes);
POBJ_LAYOUT_ROOT(lanes, struct root);
POBJ_LAYOUT_END(lanes);

struct counter {
    uint64_t n;
    uint64_t pad[7];
};

struct root {
    PMEMmutex lock;
    PMEMcond all_done;
    struct counter count[2];
    uint64_t done;
};

static PMEMobjpool *pop;
static struct root *r;

static void bump(uint64_t *n)
{
    TX_BEGIN(pop) {
        pmemobj_tx_add_range_direct(n, sizeof *n);
        *n += 1; /* TX: the worker's own counter */
    } TX_END
}

static void *worker(void *arg)
{
    uint64_t *n = &r->count[(uintptr_t)arg].n;
    for (int i = 0; i < ROUNDS; i++) {
        bump(n);
        PMEMoid o;
        if (pmemobj_alloc(pop, &o, 64, 0, NULL, NULL) == 0)
            pmemobj_free(&o);
    }
    pmemobj_mutex_lock(pop, &r->lock);
    r->done += 1;
    pmemobj_persist(pop, &r->done, sizeof r->done);
    pmemobj_cond_signal(pop, &r->all_done);
    pmemobj_mutex_unlock(pop, &r->lock);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/objpool";
    unlink(path); /* a fresh pool every run */
    pop = pmemobj_create(path, POBJ_LAYOUT_NAME(lanes), PMEMOBJ_MIN_POOL, 0644);
    if (!pop) {
        perror("pmemobj_create");
        return 1;
    }
    r = D_RW(POBJ_ROOT(pop, struct root));
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    pmemobj_mutex_lock(pop, &r->lock);
    while (r->done < 2)
        pmemobj_cond_wait(pop, &r->all_done, &r->lock);
    uint64_t done = r->done;
    pmemobj_mutex_unlock(pop, &r->lock);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("counts %lu %lu, done %lu\n", (unsigned long)r->count[0].n, (unsigned long)r->count[1].n,
           (unsigned long)done);
    pmemobj_close(pop);
    return 0;
}
