/* pmdk_mutex_publish: libpmemobj (dynamically linked): an unpersisted pointer published under a
 * pmemobj mutex (HawkSet's persistence-induced race, with PMDK's own lock). The writer allocates
 * a node, initialises and persists it, then stores the node's PMEMoid into the root under
 * pmemobj_mutex_lock, but persists the root's pointer only after pmemobj_mutex_unlock. The
 * reader takes the same mutex, follows the pointer and records in the root (persisted) that it
 * holds the node: a crash before the writer's persist leaves the reader's durable record of a
 * node the pool no longer points to.
 *
 * Two barriers put the reader's critical section between the writer's unlock and its persist
 * in every schedule. FIXED twin: pmdk_mutex_publish_fixed.c.
 * Usage: pmdk_mutex_publish [POOL]         removes POOL if it exists, creates a fresh pool,
 *                                          runs the two threads, prints `node 42, reader saw
 *                                          42`, exits 0
 *        pmdk_mutex_publish POOL recover   opens the existing pool and takes the mutex: prints
 *                                          `recovered: node N, held` (or `recovered: no node`)
 *                                          and exits 0, or `recovered: inconsistent` and exits
 *                                          1 when the reader's record survived but the pointer
 *                                          did not; `recovered: no pool` (exit 0) if the pool
 *                                          cannot be opened (a crash while pmemobj_create made
 *                                          it)
 * (Default POOL /mnt/pmem0/objpool; exit 1 if the pool cannot be created.) */
#include <libpmemobj.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

POBJ_LAYOUT_BEGIN(publish);
POBJ_LAYOUT_ROOT(publish, struct root);
POBJ_LAYOUT_TOID(publish, struct node);
POBJ_LAYOUT_END(publish);

struct node {
    uint64_t value;
};

struct root {
    PMEMmutex lock;
    TOID(struct node) node; /* published by the writer */
    TOID(struct node) held; /* the node the reader holds */
};

static PMEMobjpool *pop;
static struct root *r;
static pthread_barrier_t bar;
static uint64_t seen;

static void *writer(void *arg)
{
    (void)arg;
    TOID(struct node) n;
    if (POBJ_NEW(pop, &n, struct node, NULL, NULL) != 0) {
        perror("POBJ_NEW");
        return NULL;
    }
    D_RW(n)->value = 42;
    pmemobj_persist(pop, &D_RW(n)->value, sizeof(uint64_t));
    pmemobj_mutex_lock(pop, &r->lock);
    r->node = n; /* BUG: published under the mutex, persisted after unlocking */
    pmemobj_mutex_unlock(pop, &r->lock);
    pthread_barrier_wait(&bar); /* the reader runs its critical section now */
    pthread_barrier_wait(&bar);
    pmemobj_persist(pop, &r->node, sizeof r->node); /* PERSIST: after the unlock */
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&bar);
    pmemobj_mutex_lock(pop, &r->lock);
    TOID(struct node) n = r->node; /* LOAD: under the mutex, before the writer's persist */
    if (!TOID_IS_NULL(n)) {
        seen = D_RO(n)->value;
        r->held = n; /* EFFECT: the reader's durable record of the node it holds */
        pmemobj_persist(pop, &r->held, sizeof r->held);
    }
    pmemobj_mutex_unlock(pop, &r->lock);
    pthread_barrier_wait(&bar);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/objpool";
    if (argc > 2 && strcmp(argv[2], "recover") == 0) {
        pop = pmemobj_open(path, POBJ_LAYOUT_NAME(publish));
        if (!pop) {
            printf("recovered: no pool\n");
            return 0;
        }
        r = D_RW(POBJ_ROOT(pop, struct root));
        pmemobj_mutex_lock(pop, &r->lock);
        int ok = TOID_IS_NULL(r->held) || TOID_EQUALS(r->held, r->node);
        if (!ok)
            printf("recovered: inconsistent\n");
        else if (TOID_IS_NULL(r->node))
            printf("recovered: no node\n");
        else
            printf("recovered: node %lu%s\n", (unsigned long)D_RO(r->node)->value,
                   TOID_IS_NULL(r->held) ? "" : ", held");
        pmemobj_mutex_unlock(pop, &r->lock);
        pmemobj_close(pop);
        return ok ? 0 : 1;
    }
    unlink(path); /* a fresh pool every run */
    pop = pmemobj_create(path, POBJ_LAYOUT_NAME(publish), PMEMOBJ_MIN_POOL, 0644);
    if (!pop) {
        perror("pmemobj_create");
        return 1;
    }
    r = D_RW(POBJ_ROOT(pop, struct root));
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t w, rd;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&rd, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(rd, NULL);
    printf("node %lu, reader saw %lu\n", (unsigned long)D_RO(r->node)->value, (unsigned long)seen);
    pmemobj_close(pop);
    return 0;
}
