/* pmdk_realloc_init: libpmemobj (dynamically linked): a node replaced by a new one that
 * libpmemobj's allocator places in the freed node's memory, published before its
 * initialisation is durable. The shape of a resizing index (P-CLHT's tables): a writer thread
 * frees the old node (the reader is done with it), allocates the new one (same size: the
 * allocator hands out the block just freed), initialises it, stores its offset into the root
 * and persists the root under a mutex, and only then persists the node's value. The reader waits for the root
 * to change (under the mutex that guards the root) and reads the new node's value: it can read it before it
 * is durable, and a crash there leaves a durable root pointing at a node whose value was lost.
 *
 * The old node's bytes were read by the reader in their first life: the new node is fresh all
 * the same, and the heuristic that drops initialisation (HawkSet's IRH) must not take the
 * reader's earlier reads for a publication of it. FIXED twin: pmdk_realloc_init_fixed.c
 * (persists the value before publishing the node: silent).
 * Usage: pmdk_realloc_init [POOL]   removes POOL if it exists, creates a fresh pool, runs the
 *                                   two threads, prints `reused, reader saw 2` (`fresh, ...`
 *                                   if the allocator placed the node elsewhere), exits 0
 * (Default POOL /mnt/pmem0/reallocpool; exit 1 if the pool cannot be created.) */
#include <libpmemobj.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct node {
    uint64_t value;
};

/* Nodes take most of the pool's heap: only one fits, so the allocator can place the new node
 * nowhere but in the chunks the old one gave back (it hands out fresh space first otherwise). */
#define POOL_SIZE (64 << 20)
#define NODE_SIZE (16 << 20)

struct root {
    uint64_t cur;     /* offset of the current node in the pool */
    uint64_t version; /* bumped with each new node (the offset may stay the same) */
};

static PMEMobjpool *pop;
static struct root *r;
static pthread_barrier_t bar;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER; /* guards the root */
static uint64_t first, seen;

static struct node *at(uint64_t off)
{
    PMEMoid oid = {pmemobj_oid(r).pool_uuid_lo, off};
    return pmemobj_direct(oid);
}

static void *writer(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&bar); /* the reader has read the first node */
    PMEMoid old = {pmemobj_oid(r).pool_uuid_lo, r->cur};
    pmemobj_free(&old);
    PMEMoid n;
    if (pmemobj_alloc(pop, &n, NODE_SIZE, 0, NULL, NULL) != 0) {
        perror("pmemobj_alloc");
        exit(1);
    }
    struct node *p = pmemobj_direct(n);
    p->value = 2; /* BUG: the new node's value, persisted only after the node is published */
    pthread_mutex_lock(&m);
    r->cur = n.off; /* PUBLISH: the root points at the new node */
    r->version = 1;
    pmemobj_persist(pop, r, sizeof *r);
    pthread_mutex_unlock(&m);
    pmemobj_persist(pop, &p->value, sizeof p->value); /* PERSIST: too late */
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    first = at(r->cur)->value; /* the first node's value: its bytes are shared from now on */
    pthread_mutex_unlock(&m);
    pthread_barrier_wait(&bar);
    for (;;) {
        pthread_mutex_lock(&m);
        if (r->version != 0) {
            seen = at(r->cur)->value; /* LOAD: the new node's value */
            pthread_mutex_unlock(&m);
            return NULL;
        }
        pthread_mutex_unlock(&m);
        sched_yield();
    }
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/reallocpool";
    unlink(path);
    pop = pmemobj_create(path, "realloc", POOL_SIZE, 0666);
    if (pop == NULL) {
        perror("pmemobj_create");
        return 1;
    }
    r = pmemobj_direct(pmemobj_root(pop, sizeof(struct root)));
    PMEMoid n;
    if (pmemobj_alloc(pop, &n, NODE_SIZE, 0, NULL, NULL) != 0) {
        perror("pmemobj_alloc");
        return 1;
    }
    struct node *p = pmemobj_direct(n);
    p->value = 1;
    pmemobj_persist(pop, &p->value, sizeof p->value);
    r->cur = n.off;
    pmemobj_persist(pop, &r->cur, sizeof r->cur);
    uint64_t old = n.off;
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t w, rd;
    pthread_create(&rd, NULL, reader, NULL);
    pthread_create(&w, NULL, writer, NULL);
    pthread_join(w, NULL);
    pthread_join(rd, NULL);
    printf("%s, reader saw %llu\n", r->cur == old ? "reused" : "fresh", (unsigned long long)seen);
    pmemobj_close(pop);
    return first == 1 ? 0 : 1;
}
