/* pr_version_lock: a version lock in PM, as P-ART's ROWEX nodes have one: node_lock takes it by a
 * CAS from an even version to the next (failing, it says so through an out-parameter) and
 * records the version it took in the node; node_unlock releases it by an increment, so the word
 * never returns to a value it had (no lock pmrace could infer). The lock word is never
 * persisted: a thread that takes the lock loads another thread's unpersisted release, and the
 * stamp it stores is derived from it. The lock functions are declared in
 * configs/pr_version_lock.ron; their own accesses to the lock word are synchronisation, not data.
 *   - BUG (this file): the writer persists the value after its unlock; the reader, under the lock
 *     in between, copies it into PM (the PR: lines): an inter-thread inconsistency.
 *   - FIXED (pr_version_lock_fixed, built with -DFIXED): persisted before the unlock: silent.
 * Usage: pr_version_lock [POOL] [recover]; exits 0. */
#include <pthread.h>

#include "pm.h"

struct node {
    uint64_t version; /* the lock word and its stamp in one line, */
    uint64_t stamp;
    uint64_t pad[6];
    uint64_t value; /* the data in the next: flushing the stamp persists no data */
    uint64_t copy;
    uint64_t pad2[6];
};

static struct node *n;
static pthread_barrier_t bar;

__attribute__((noinline)) static void node_lock(struct node *x, int *restart)
{
    uint64_t v = __atomic_load_n(&x->version, __ATOMIC_ACQUIRE);
    if ((v & 1) || !__atomic_compare_exchange_n(&x->version, &v, v + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        *restart = 1;
        return;
    }
    x->stamp = v + 1; /* the version taken, derived from the lock word */
    PM_CLWB(&x->stamp); PM_SFENCE();
}

__attribute__((noinline)) static void node_unlock(struct node *x)
{
    __atomic_fetch_add(&x->version, 1, __ATOMIC_RELEASE);
}

static void lock(struct node *x)
{
    for (;;) {
        int restart = 0;
        node_lock(x, &restart);
        if (!restart)
            return;
    }
}

static void *writer(void *arg)
{
    (void)arg;
    lock(n);
    n->value = 42; /* PR: source store */
#ifdef FIXED
    PM_CLWB(&n->value); PM_SFENCE();
#endif
    node_unlock(n);
    pthread_barrier_wait(&bar); /* the reader's critical section runs now */
    pthread_barrier_wait(&bar);
#ifndef FIXED
    PM_CLWB(&n->value); PM_SFENCE();
#endif
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&bar);
    lock(n);
    n->copy = n->value + 1; /* PR: load, and its side effect */
    PM_CLWB(&n->copy); PM_SFENCE();
    node_unlock(n);
    pthread_barrier_wait(&bar);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    n = pm_map(path, 4096);
    if (argc > 2)
        return 0; /* recover: nothing to repair */
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t w, r;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&r, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    printf("copy %llu\n", (unsigned long long)n->copy);
    return 0;
}
