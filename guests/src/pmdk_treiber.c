/* pmdk_treiber: a persistent lock-free Treiber stack written the way a libpmem user writes one,
 * built -O2 and linked against libpmem: C11 <stdatomic.h> compare-exchange on the stack's head
 * (an index into the pool's node array, 0 for empty), pmem_persist for durability. Two pushers
 * push fresh nodes (never reused, so no ABA); a popper pops them and sums their values.
 * The head itself is published by its CAS and persisted only afterwards, as every lock-free
 * structure publishes: another thread's load of the head can precede that persist (HEAD lines,
 * a persistence-induced race by definition in both twins, as pr_clht's lock-free gets are).
 *   - BUG (this file): push() persists the node after the CAS that publishes it, so the popper
 *     can load its key and value before they are durable (NODE_STORE / NODE_LOAD).
 *   - FIXED (pmdk_treiber_fixed, built with -DFIXED): the node is persisted before the CAS.
 * Usage: pmdk_treiber [POOL]; prints the popped count and sum, exits 0. */
#include <libpmem.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define PUSHERS 2
#define PER_PUSHER 8
#define NODES (PUSHERS * PER_PUSHER)

struct node {
    uint64_t key;
    uint64_t value;
    uint64_t next; /* index + 1 of the node below, 0 at the bottom */
    uint64_t pad[5];
};

struct pool {
    _Atomic uint64_t head; /* index + 1 of the top node, 0 when empty */
    uint64_t pad[7];
    struct node nodes[NODES];
};

static struct pool *pool;

static void push(unsigned slot, uint64_t key, uint64_t value)
{
    struct node *n = &pool->nodes[slot];
    n->key = key;     /* NODE_STORE: key */
    n->value = value; /* NODE_STORE: value */
    uint64_t old = atomic_load_explicit(&pool->head, memory_order_acquire); /* HEAD_LOAD: push */
    do {
        n->next = old; /* NODE_STORE: next */
#ifdef FIXED
        pmem_persist(n, sizeof *n); /* FIX: the node durable before it is reachable */
#endif
    } while (!atomic_compare_exchange_weak_explicit(&pool->head, &old, slot + 1, /* HEAD_CAS: push */
                                                    memory_order_release, memory_order_acquire));
    pmem_persist(&pool->head, sizeof pool->head);
#ifndef FIXED
    pmem_persist(n, sizeof *n); /* BUG: the node persisted after the CAS published it */
#endif
}

static int pop(uint64_t *key, uint64_t *value)
{
    uint64_t old = atomic_load_explicit(&pool->head, memory_order_acquire); /* HEAD_LOAD: pop */
    for (;;) {
        if (old == 0)
            return 0;
        const struct node *n = &pool->nodes[old - 1];
        uint64_t next = n->next; /* NODE_LOAD: next */
        if (atomic_compare_exchange_weak_explicit(&pool->head, &old, next, /* HEAD_CAS: pop */
                                                  memory_order_acq_rel, memory_order_acquire)) {
            pmem_persist(&pool->head, sizeof pool->head);
            *key = n->key;     /* NODE_LOAD: key */
            *value = n->value; /* NODE_LOAD: value */
            return 1;
        }
    }
}

static void *pusher(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < PER_PUSHER; i++) {
        unsigned slot = id * PER_PUSHER + i;
        push(slot, slot + 1, (slot + 1) * 10); /* PUSH: -O2 attributes the inlined value store here */
        sched_yield();
    }
    return NULL;
}

static uint64_t popped, sum;

static void *popper(void *arg)
{
    (void)arg;
    while (popped < NODES) {
        uint64_t k, v;
        if (pop(&k, &v)) {
            popped++;
            sum += v;
            if (v != k * 10)
                printf("corrupt node %llu\n", (unsigned long long)k);
        } else {
            sched_yield();
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/treiber";
    size_t len;
    int is_pmem;
    pool = pmem_map_file(path, sizeof *pool, PMEM_FILE_CREATE, 0644, &len, &is_pmem);
    if (!pool) {
        perror("pmem_map_file");
        return 1;
    }
    pmem_memset_persist(pool, 0, sizeof *pool);
    pthread_t t[PUSHERS + 1];
    for (unsigned i = 0; i < PUSHERS; i++)
        pthread_create(&t[i], NULL, pusher, (void *)(uintptr_t)i);
    pthread_create(&t[PUSHERS], NULL, popper, NULL);
    for (unsigned i = 0; i <= PUSHERS; i++)
        pthread_join(t[i], NULL);
    printf("popped %llu sum %llu\n", (unsigned long long)popped, (unsigned long long)sum);
    pmem_unmap(pool, len);
    return 0;
}
