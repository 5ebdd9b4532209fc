/* pmdk_free_reuse: libpmemobj (dynamically linked), 4 threads passing one PM node along in
 * rounds, each life of the node in the memory its predecessor freed. Threads take turns under
 * the mutex that guards the root (a turn counter in DRAM). Round r has two steps:
 *   A. thread r % 4 uses the node: reads the value it was created with, bumps its `uses`
 *      counter (a statistic of this life, never persisted, which no other thread reads in this
 *      life) and stores a new value;
 *   B. thread (r + 2) % 4 reads that value and replaces the node: pmemobj_free, then
 *      pmemobj_alloc of a node of the same size (only one fits in the pool: the allocator
 *      hands out the chunks just freed), initialised, persisted and published in the root.
 * Step A here passes the turn and unlocks before persisting the value: a genuine race inside
 * one life of the node (step B can read the value before it is durable).
 * FIXED twin: pmdk_free_reuse_fixed.c (persists the value before passing the turn). Its only
 * cross-thread history is across lives: the `uses` store of one life, never persisted, and the
 * read of `uses` by another thread in a later life, on the same bytes. No schedule lets that
 * read see the earlier store (the free comes between), so it is no race; a pass that does not
 * end the bytes' history at the free reports it.
 * Usage: pmdk_free_reuse [POOL]   removes POOL if it exists, creates a fresh pool, runs the
 *                                 rounds, prints `reused N of 8, value 0` (N nodes placed
 *                                 where an earlier one was), exits 0
 * (Default POOL /mnt/pmem0/freepool; exit 1 if the pool cannot be created.) */
#include <libpmemobj.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct node {
    uint64_t value; /* what the node holds: persisted */
    char pad[56];
    uint64_t uses; /* this life's uses, on a line of its own: volatile statistics kept in PM,
                      never persisted */
};

/* Nodes take most of the pool's heap: only one fits, so the allocator places each new node in
 * the chunks the old one gave back. */
#define POOL_SIZE (64 << 20)
#define NODE_SIZE (40 << 20)
#define THREADS 4
#define ROUNDS 8

struct root {
    uint64_t cur; /* offset of the current node in the pool */
};

static PMEMobjpool *pop;
static struct root *r;
static uint64_t turn; /* 2r: round r's step A, 2r + 1: its step B */
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER; /* guards the root and the node */
static uint64_t reused, last, offs[ROUNDS]; /* nodes placed where an earlier one was */

static struct node *at(uint64_t off)
{
    PMEMoid oid = {pmemobj_oid(r).pool_uuid_lo, off};
    return pmemobj_direct(oid);
}

/* Waits for turn `t` (under the mutex: returns holding it). */
static void wait_turn(uint64_t t)
{
    pthread_mutex_lock(&m);
    while (turn != t) {
        pthread_mutex_unlock(&m);
        sched_yield();
        pthread_mutex_lock(&m);
    }
}

static void *worker(void *arg)
{
    uint64_t me = (uint64_t)(uintptr_t)arg;
    for (uint64_t round = 0; round < ROUNDS; round++) {
        if (round % THREADS == me) {
            wait_turn(2 * round);
            struct node *p = at(r->cur);
            last += p->value; /* the value this life was created with */
            p->uses++;        /* USES: this life's statistic, never persisted */
            p->value = round; /* STORE: the node's value in this life */
#ifdef FIXED
            pmemobj_persist(pop, &p->value, sizeof p->value);
            turn++;
            pthread_mutex_unlock(&m);
#else
            turn++;
            pthread_mutex_unlock(&m);
            pmemobj_persist(pop, &p->value, sizeof p->value); /* PERSIST: after the turn is passed */
#endif
        }
        if ((round + 2) % THREADS == me) {
            wait_turn(2 * round + 1);
            last += at(r->cur)->value; /* LOAD: the value step A stored in this life */
            PMEMoid old = {pmemobj_oid(r).pool_uuid_lo, r->cur};
            pmemobj_free(&old); /* FREE: the node's life ends */
            PMEMoid n;
            if (pmemobj_alloc(pop, &n, NODE_SIZE, 0, NULL, NULL) != 0) {
                perror("pmemobj_alloc");
                exit(1);
            }
            int again = 0;
            for (int i = 0; i < ROUNDS; i++)
                again |= offs[i] == n.off;
            reused += again;
            offs[round] = n.off;
            struct node *p = pmemobj_direct(n);
            p->value = 0;
            pmemobj_persist(pop, &p->value, sizeof p->value);
            r->cur = n.off;
            pmemobj_persist(pop, &r->cur, sizeof r->cur);
            turn++;
            pthread_mutex_unlock(&m);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/freepool";
    unlink(path);
    pop = pmemobj_create(path, "freereuse", POOL_SIZE, 0666);
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
    p->value = 0;
    pmemobj_persist(pop, &p->value, sizeof p->value);
    r->cur = n.off;
    pmemobj_persist(pop, &r->cur, sizeof r->cur);
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("reused %llu of %d, value %llu\n", (unsigned long long)reused, ROUNDS, (unsigned long long)at(r->cur)->value);
    pmemobj_close(pop);
    return 0;
}
