/* pmdk_txlist: libpmemobj (dynamically linked, -O0 -g): a persistent singly linked set of
 * key/value nodes written with the TOID macros, as the libpmemobj examples are. Insert allocates
 * the node with TX_ZNEW inside the transaction and links it at the head; a duplicate key aborts
 * the transaction with pmemobj_tx_abort; the running sum of values is kept by a nested
 * transaction; remove unlinks a node and frees it with TX_FREE. The root holds the head, the
 * node count and the sum; recovery (pmemobj_open rolls back an interrupted transaction) checks
 * that the count and the sum agree with the list.
 *   - BUG (this file): insert adds the head and not the count to the transaction (COUNT_BUG): the
 *     count is stored inside the transaction without being undo-logged, so a crash before the
 *     commit rolls the head back and leaves the count incremented.
 *   - FIXED (pmdk_txlist_fixed, built with -DFIXED): TX_ADD_FIELD(root, count) as well.
 * Usage: pmdk_txlist POOL          creates the pool, inserts, retries a duplicate, removes one
 *        pmdk_txlist POOL check    opens the pool and checks it: `consistent: N nodes` (exit 0) or
 *                                  `inconsistent ...` (exit 1); `no pool` (exit 0) */
#include <errno.h>
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

POBJ_LAYOUT_BEGIN(txlist);
POBJ_LAYOUT_ROOT(txlist, struct root);
POBJ_LAYOUT_TOID(txlist, struct node);
POBJ_LAYOUT_END(txlist);

struct node {
    uint64_t key;
    uint64_t value;
    TOID(struct node) next;
};

struct root {
    TOID(struct node) head;
    uint64_t count;
    uint64_t sum;
};

static int insert(PMEMobjpool *pop, TOID(struct root) root, uint64_t key, uint64_t value)
{
    int ret = 0;
    TX_BEGIN(pop) { /* TX: insert */
        for (TOID(struct node) n = D_RO(root)->head; !TOID_IS_NULL(n); n = D_RO(n)->next)
            if (D_RO(n)->key == key)
                pmemobj_tx_abort(EEXIST); /* ABORT: a duplicate key */
        TX_ADD_FIELD(root, head);
#ifdef FIXED
        TX_ADD_FIELD(root, count); /* FIX: the count undo-logged too */
#endif
        TOID(struct node) n = TX_ZNEW(struct node);
        D_RW(n)->key = key;
        D_RW(n)->value = value;
        D_RW(n)->next = D_RO(root)->head;
        D_RW(root)->head = n;
        D_RW(root)->count++; /* COUNT_BUG: stored in the transaction, never added to it */
        TX_BEGIN(pop) { /* nested: the sum */
            TX_ADD_FIELD(root, sum);
            D_RW(root)->sum += value;
        } TX_END
    } TX_ONABORT {
        ret = -1;
    } TX_END /* COMMIT: insert */
    return ret;
}

static int remove_key(PMEMobjpool *pop, TOID(struct root) root, uint64_t key)
{
    int ret = -1;
    TX_BEGIN(pop) {
        TOID(struct node) prev = TOID_NULL(struct node);
        for (TOID(struct node) n = D_RO(root)->head; !TOID_IS_NULL(n); prev = n, n = D_RO(n)->next) {
            if (D_RO(n)->key != key)
                continue;
            if (TOID_IS_NULL(prev)) {
                TX_ADD_FIELD(root, head);
                D_RW(root)->head = D_RO(n)->next;
            } else {
                TX_ADD_FIELD(prev, next);
                D_RW(prev)->next = D_RO(n)->next;
            }
            TX_ADD_FIELD(root, count);
            D_RW(root)->count--;
            TX_ADD_FIELD(root, sum);
            D_RW(root)->sum -= D_RO(n)->value;
            TX_FREE(n);
            ret = 0;
            break;
        }
    } TX_END
    return ret;
}

static int check(PMEMobjpool *pop)
{
    TOID(struct root) root = POBJ_ROOT(pop, struct root);
    uint64_t count = 0, sum = 0;
    for (TOID(struct node) n = D_RO(root)->head; !TOID_IS_NULL(n) && count < 100; n = D_RO(n)->next) {
        count++;
        sum += D_RO(n)->value;
    }
    if (count != D_RO(root)->count || sum != D_RO(root)->sum) {
        printf("inconsistent: list has %llu nodes (sum %llu), root says %llu (sum %llu)\n",
               (unsigned long long)count, (unsigned long long)sum, (unsigned long long)D_RO(root)->count,
               (unsigned long long)D_RO(root)->sum);
        return 1;
    }
    printf("consistent: %llu nodes\n", (unsigned long long)count);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/txlist";
    if (argc > 2 && strcmp(argv[2], "check") == 0) {
        PMEMobjpool *pop = pmemobj_open(path, POBJ_LAYOUT_NAME(txlist));
        if (!pop) {
            printf("no pool\n");
            return 0;
        }
        int rc = check(pop);
        pmemobj_close(pop);
        return rc;
    }
    PMEMobjpool *pop = pmemobj_create(path, POBJ_LAYOUT_NAME(txlist), PMEMOBJ_MIN_POOL, 0644);
    if (!pop) {
        perror("pmemobj_create");
        return 1;
    }
    TOID(struct root) root = POBJ_ROOT(pop, struct root);
    insert(pop, root, 7, 70);
    insert(pop, root, 3, 30);
    if (insert(pop, root, 7, 71) == 0)
        printf("duplicate accepted\n");
    remove_key(pop, root, 7);
    insert(pop, root, 5, 50);
    printf("count %llu sum %llu\n", (unsigned long long)D_RO(root)->count, (unsigned long long)D_RO(root)->sum);
    pmemobj_close(pop);
    return 0;
}
