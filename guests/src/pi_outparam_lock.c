/* pi_outparam_lock: node locks that report success through an out-parameter, as P-ART's ROWEX
 * locks do (`writeLockOrRestart(bool &needRestart)`): write_lock_or_restart(node, &restart) tries
 * to set the lock bit of the node's version word (in PM, at the node's start) with a CAS and sets
 * *restart when the node is locked by another thread; the caller retries.  write_unlock(node)
 * adds to the version, clearing the bit.  configs/pi_outparam_lock.ron names them as HawkSet's
 * part.cfg does: a try-acquire whose success is the out-parameter (argument 1) being false.
 * Declared as a plain Acquire instead (configs/pi_outparam_lock_acquire.ron, the closest a
 * return-value-only configuration gets), every failed attempt would be a lock held for good,
 * and the race below would be hidden.
 * THREADS threads update and read the nodes' values, every access under the node's lock.
 *   - BUG (this file): an update persists the value after unlocking (the store and load lines).
 *   - FIXED (pi_outparam_lock_fixed, built with -DFIXED): persisted before unlocking: no race.
 * Usage: pi_outparam_lock [POOL]; prints the node count, exits 0. */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

#include "pm.h"

#define NNODES 2
#define THREADS 4
#define ROUNDS 16
#define LOCKED 2u

struct node {
    volatile uint64_t version; /* bit 1: locked; the rest counts unlocks */
    volatile uint64_t key;
    volatile uint64_t val;
    uint64_t pad[5];
};

static struct node *nodes;
static volatile uint64_t sink;

__attribute__((noinline)) void write_lock_or_restart(struct node *n, bool *need_restart)
{
    uint64_t v = n->version;
    if (v & LOCKED) {
        *need_restart = true;
        return;
    }
    if (!__atomic_compare_exchange_n(&n->version, &v, v + LOCKED, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        *need_restart = true;
}

__attribute__((noinline)) void write_unlock(struct node *n)
{
    __atomic_fetch_add(&n->version, LOCKED, __ATOMIC_RELEASE);
}

static void lock_node(struct node *n)
{
    for (;;) {
        bool need_restart = false;
        write_lock_or_restart(n, &need_restart);
        if (!need_restart)
            return;
        sched_yield();
    }
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < ROUNDS; i++) {
        struct node *n = &nodes[(id + i / 2) % NNODES];
        lock_node(n);
        if (i % 2 == 0) {
            n->val = id * 1000 + i; /* STORE: the node's value, under its lock */
#ifdef FIXED
            PM_CLWB(&n->val); PM_SFENCE(); /* FIX: persisted before unlocking */
            write_unlock(n);
#else
            write_unlock(n);
            PM_CLWB(&n->val); PM_SFENCE(); /* BUG: persisted after unlocking */
#endif
        } else {
            sink += n->val; /* LOAD: the node's value, under its lock */
            write_unlock(n);
        }
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    nodes = pm_map(path, NNODES * sizeof(struct node));
    for (int i = 0; i < NNODES; i++) {
        nodes[i].version = 0;
        nodes[i].key = (uint64_t)i + 1;
        nodes[i].val = 0;
    }
    persist(nodes, NNODES * sizeof(struct node));
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("%d nodes\n", NNODES);
    return 0;
}
