/* pmdk_tx_mutex: libpmemobj (dynamically linked, -O0 -g): an order book in the root object,
 * updated by three threads, each order one transaction under the root's pmemobj mutex (passed to
 * TX_BEGIN_PARAM as TX_PARAM_MUTEX, as the libpmemobj examples lock a transaction). An order
 * appends its amount to `orders[]` and bumps `count`, `total` and `last_thread`; the invariant
 * recovery checks is total == the sum of orders[0..count).
 *   - BUG (without FIXED): the transaction adds `count`, `last_thread` and the new slot with
 *     TX_ADD_FIELD/TX_ADD_DIRECT but not `total` (NOADD_BUG): its store is not undo-logged, so a
 *     crash before the commit rolls the slot and the count back and leaves the new total.
 *   - FIXED (pmdk_tx_mutex_fixed): TX_ADD_FIELD(root, total) too.
 * Usage: pmdk_tx_mutex POOL           creates the pool (removing an old one), runs the threads
 *        pmdk_tx_mutex POOL check     opens it (pmemobj_open rolls back an interrupted
 *                                     transaction): `recovery ok: N orders` (exit 0),
 *                                     `recovery: ...` (exit 1), `recovery ok: no pool` (0) */
#include <libpmemobj.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define THREADS 3
#define PER_THREAD 3
#define MAX_ORDERS (THREADS * PER_THREAD)

struct book {
    PMEMmutex lock;
    uint64_t count;
    int64_t total;
    uint64_t last_thread;
    int64_t orders[MAX_ORDERS];
};

POBJ_LAYOUT_BEGIN(book);
POBJ_LAYOUT_ROOT(book, struct book);
POBJ_LAYOUT_END(book);

static PMEMobjpool *pop;
static TOID(struct book) root;

static void place(uint64_t thread, int64_t amount)
{
    TX_BEGIN_PARAM(pop, TX_PARAM_MUTEX, &D_RW(root)->lock, TX_PARAM_NONE) { /* TX_BEGIN */
        struct book *b = D_RW(root);
        TX_ADD_FIELD(root, count);
        TX_ADD_FIELD(root, last_thread);
#ifdef FIXED
        TX_ADD_FIELD(root, total); /* FIX: the total is undo-logged too */
#endif
        TX_ADD_DIRECT(&b->orders[b->count]);
        b->orders[b->count] = amount; /* ORDER_STORE */
        b->total += amount;           /* NOADD_BUG: not undo-logged */
        b->last_thread = thread;
        b->count++;
    } TX_ONABORT {
        fprintf(stderr, "order aborted\n");
    } TX_END /* TX_END */
}

static void *trader(void *arg)
{
    uint64_t t = (uint64_t)(uintptr_t)arg;
    for (int i = 0; i < PER_THREAD; i++)
        place(t, (int64_t)(t + 1) * 100 + i);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/book";
    if (argc > 2 && strcmp(argv[2], "check") == 0) {
        pop = pmemobj_open(path, POBJ_LAYOUT_NAME(book));
        if (!pop) {
            printf("recovery ok: no pool\n");
            return 0;
        }
        const struct book *b = D_RO(POBJ_ROOT(pop, struct book));
        if (b->count > MAX_ORDERS) {
            printf("recovery: bad count %llu\n", (unsigned long long)b->count);
            return 1;
        }
        int64_t sum = 0;
        for (uint64_t i = 0; i < b->count; i++)
            sum += b->orders[i];
        if (sum != b->total) {
            printf("recovery: total %lld, orders sum to %lld\n", (long long)b->total, (long long)sum);
            return 1;
        }
        printf("recovery ok: %llu orders\n", (unsigned long long)b->count);
        pmemobj_close(pop);
        return 0;
    }
    unlink(path);
    pop = pmemobj_create(path, POBJ_LAYOUT_NAME(book), PMEMOBJ_MIN_POOL, 0644);
    if (!pop) {
        perror("pmemobj_create");
        return 1;
    }
    root = POBJ_ROOT(pop, struct book);
    pthread_t th[THREADS];
    for (uintptr_t t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, trader, (void *)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    printf("orders %llu, total %lld\n", (unsigned long long)D_RO(root)->count, (long long)D_RO(root)->total);
    pmemobj_close(pop);
    return 0;
}
