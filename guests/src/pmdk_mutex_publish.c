/* pmdk_mutex_publish: libpmemobj (dynamically linked): an unpersisted pointer published under a
 * pmemobj mutex (HawkSet's persistence-induced race, with PMDK's own lock). The writer allocates
 * a node, initialises and persists it, then stores the node's PMEMoid into the root under
 * pmemobj_mutex_lock, but persists the root's pointer only after pmemobj_mutex_unlock. The
 * reader takes the same mutex, follows the pointer and takes a reference on the node (its
 * `refs`, persisted): a crash before the writer's persist leaves a durable reference on a node
 * the pool no longer points to.
 *
 * Two barriers put the reader's critical section between the writer's unlock and its persist
 * in every schedule. FIXED twin: pmdk_mutex_publish_fixed.c.
 * Usage: pmdk_mutex_publish [POOL]         removes POOL if it exists, creates a fresh pool,
 *                                          runs the two threads, prints `node 42, refs 1`,
 *                                          exits 0
 *        pmdk_mutex_publish POOL recover   opens the existing pool, takes the mutex and checks
 *                                          every node: prints `recovered: N node(s), refs R`
 *                                          and exits 0, or `recovered: inconsistent` and exits
 *                                          1 when a node holds references but the root does not
 *                                          point to it; `recovered: no pool` (exit 0) if the
 *                                          pool cannot be opened (a crash while pmemobj_create
 *                                          made it)
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
    uint64_t refs; /* references taken by readers */
};

struct root {
    PMEMmutex lock;
    TOID(struct node) node; /* published by the writer */
};

static PMEMobjpool *pop;
static struct root *r;
static pthread_barrier_t bar;

/* The node's constructor: runs before the allocation is published, so a node is never seen
 * uninitialised, even after a crash. */
static int node_init(PMEMobjpool *p, void *ptr, void *arg)
{
    struct node *n = ptr;
    n->value = *(const uint64_t *)arg;
    n->refs = 0;
    pmemobj_persist(p, n, sizeof *n);
    return 0;
}

static void *writer(void *arg)
{
    (void)arg;
    TOID(struct node) n;
    uint64_t value = 42;
    if (POBJ_NEW(pop, &n, struct node, node_init, &value) != 0) {
        perror("POBJ_NEW");
        return NULL;
    }
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
        D_RW(n)->refs++; /* EFFECT: a durable reference on the node */
        pmemobj_persist(pop, &D_RW(n)->refs, sizeof(uint64_t));
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
            printf("recovered: no pool\n"); /* a crash while pmemobj_create made it */
            return 0;
        }
        r = D_RW(POBJ_ROOT(pop, struct root));
        pmemobj_mutex_lock(pop, &r->lock);
        int ok = 1, nodes = 0;
        uint64_t refs = 0;
        TOID(struct node) n;
        POBJ_FOREACH_TYPE(pop, n) {
            nodes++;
            refs += D_RO(n)->refs;
            if (D_RO(n)->refs != 0 && !TOID_EQUALS(n, r->node))
                ok = 0;
        }
        if (ok)
            printf("recovered: %d node(s), refs %lu\n", nodes, (unsigned long)refs);
        else
            printf("recovered: inconsistent\n");
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
    printf("node %lu, refs %lu\n", (unsigned long)D_RO(r->node)->value, (unsigned long)D_RO(r->node)->refs);
    pmemobj_close(pop);
    return 0;
}
