/* pmdk_sortlist: a persistent lock-free sorted linked list (insert-only, Harris-style without
 * deletion) written the way a libpmem user writes one, built -O2 and linked against libpmem:
 * nodes are preallocated per thread in the pool and linked by index; an insert finds its
 * predecessor, fills the node, and links it with a C11 compare-exchange on the predecessor's
 * `next`, then persists the link. Two inserters insert interleaved keys (so each links into
 * the other's nodes), a scanner walks the list and sums what it sees.
 * The link itself is persisted only after its CAS, as every lock-free structure publishes:
 * another thread can load it before that persist (LINK lines, inherent in both twins).
 *   - BUG (this file): insert() persists the node's key and value after the CAS that links it,
 *     so another thread can read them before they are durable (NODE_STORE / NODE_LOAD), and
 *     a crash in between leaves a durable link to a node that is zero in PM: recovery finds the
 *     list out of order.
 *   - FIXED (pmdk_sortlist_fixed, built with -DFIXED): the node is persisted before the CAS.
 * Usage: pmdk_sortlist [POOL]        formats POOL, runs the threads, prints `keys 24 sum 3000`
 *        pmdk_sortlist POOL check    walks the existing list: `recovered: N keys`, or
 *                                    `recovered: inconsistent` and exit 1. */
#include <libpmem.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define INSERTERS 2
#define PER_THREAD 12
#define NODES (INSERTERS * PER_THREAD)

struct node {
    uint64_t key;
    uint64_t value;
    _Atomic uint64_t next; /* index + 1 of the successor, 0 at the end */
    uint64_t pad[5];
};

struct pool {
    uint64_t magic;
    uint64_t pad[7];
    struct node head; /* sentinel, key 0 */
    struct node nodes[NODES];
};

static struct pool *pool;

static struct node *at(uint64_t ref) { return ref ? &pool->nodes[ref - 1] : NULL; }

static void insert(uint64_t slot, uint64_t key, uint64_t value)
{
    struct node *n = &pool->nodes[slot];
    n->key = key;     /* NODE_STORE: key */
    n->value = value; /* NODE_STORE: value */
    for (;;) {
        struct node *pred = &pool->head;
        uint64_t succ = atomic_load_explicit(&pred->next, memory_order_acquire); /* LINK_LOAD */
        while (succ && at(succ)->key < key) { /* NODE_LOAD: key */
            pred = at(succ);
            succ = atomic_load_explicit(&pred->next, memory_order_acquire); /* LINK_LOAD */
        }
        atomic_store_explicit(&n->next, succ, memory_order_relaxed);
#ifdef FIXED
        pmem_persist(n, sizeof *n); /* FIX: the node durable before it is reachable */
#endif
        if (atomic_compare_exchange_strong_explicit(&pred->next, &succ, slot + 1, /* LINK_CAS */
                                                    memory_order_release, memory_order_relaxed)) {
            pmem_persist(&pred->next, sizeof pred->next);
#ifndef FIXED
            pmem_persist(n, sizeof *n); /* BUG: the node persisted after the CAS linked it */
#endif
            return;
        }
    }
}

static void *inserter(void *arg)
{
    uint64_t id = (uintptr_t)arg;
    for (uint64_t i = 0; i < PER_THREAD; i++) {
        uint64_t key = 1 + i * INSERTERS + id; /* interleaved: each links after the other's nodes */
        insert(id * PER_THREAD + i, key, key * 10);
        sched_yield();
    }
    return NULL;
}

static _Atomic int done;
static uint64_t scans, seen;
uint64_t last_sum; /* what the last scan saw (external: -O2 keeps the value loads) */

static void *scanner(void *arg)
{
    (void)arg;
    while (atomic_load(&done) < INSERTERS) {
        uint64_t sum = 0, count = 0;
        for (uint64_t r = atomic_load_explicit(&pool->head.next, memory_order_acquire); r; /* LINK_LOAD */
             r = atomic_load_explicit(&at(r)->next, memory_order_acquire)) {
            const struct node *n = at(r);
            sum += n->value; /* NODE_LOAD: value */
            count++;
        }
        scans++;
        seen = count > seen ? count : seen;
        last_sum = sum;
        sched_yield();
    }
    return NULL;
}

static void *inserter_main(void *arg)
{
    inserter(arg);
    atomic_fetch_add(&done, 1);
    return NULL;
}

static int check(void)
{
    uint64_t last = 0, count = 0;
    for (uint64_t r = pool->head.next; r; r = pool->nodes[r - 1].next) {
        if (r > NODES || count > NODES) {
            printf("recovered: inconsistent (bad link)\n");
            return 1;
        }
        const struct node *n = &pool->nodes[r - 1];
        if (n->key <= last || n->value != n->key * 10) {
            printf("recovered: inconsistent (key %llu after %llu)\n", (unsigned long long)n->key,
                   (unsigned long long)last);
            return 1;
        }
        last = n->key;
        count++;
    }
    printf("recovered: %llu keys\n", (unsigned long long)count);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/sortlist";
    int recover = argc > 2 && strcmp(argv[2], "check") == 0;
    size_t len;
    int is_pmem;
    pool = pmem_map_file(path, recover ? 0 : sizeof *pool, recover ? 0 : PMEM_FILE_CREATE, 0644, &len, &is_pmem);
    if (!pool) {
        perror("pmem_map_file");
        return 2;
    }
    if (recover) {
        int rc = pool->magic == 0x5157 ? check() : (printf("recovered: empty\n"), 0);
        pmem_unmap(pool, len);
        return rc;
    }
    pmem_memset_persist(pool, 0, sizeof *pool);
    pool->magic = 0x5157;
    pmem_persist(&pool->magic, sizeof pool->magic);
    pthread_t t[INSERTERS + 1];
    for (uintptr_t i = 0; i < INSERTERS; i++)
        pthread_create(&t[i], NULL, inserter_main, (void *)i);
    pthread_create(&t[INSERTERS], NULL, scanner, NULL);
    for (unsigned i = 0; i <= INSERTERS; i++)
        pthread_join(t[i], NULL);
    uint64_t keys = 0, sum = 0;
    for (uint64_t r = pool->head.next; r; r = pool->nodes[r - 1].next) {
        keys++;
        sum += pool->nodes[r - 1].value;
    }
    printf("keys %llu sum %llu\n", (unsigned long long)keys, (unsigned long long)sum);
    pmem_unmap(pool, len);
    return 0;
}
