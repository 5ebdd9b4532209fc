/* pmdk_tx_outside: libpmemobj (dynamically linked): a store outside the transaction. The root
 * object is a pair {a, b} that must stay equal. Each round sets both to the round's number in
 * one transaction, but adds only `a` to it (TX_ADD_FIELD): the store to `b` is not undo-logged,
 * so a crash inside the transaction rolls `a` back and leaves `b` new (pmemcheck: "store made
 * without adding to transaction").
 * Usage: pmdk_tx_outside POOL          creates the pool, or opens it if it exists, runs ROUNDS
 *                                      transactions (values continue from the pool's), prints
 *                                      `a N b N`, exits 0
 *        pmdk_tx_outside POOL check    opens the existing pool (pmemobj_open rolls back an
 *                                      interrupted transaction) and checks a == b: prints
 *                                      `consistent` and exits 0, or `inconsistent a N b M` and
 *                                      exits 1; a pool that cannot be opened (a crash while
 *                                      pmemobj_create made it) prints `no pool` and exits 0
 * (exit 1 if the pool cannot be created or opened in the first mode). */
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ROUNDS 3

POBJ_LAYOUT_BEGIN(txout);
POBJ_LAYOUT_ROOT(txout, struct root);
POBJ_LAYOUT_END(txout);

struct root {
    uint64_t a;
    uint64_t b;
};

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/txpool";
    if (argc > 2 && strcmp(argv[2], "check") == 0) {
        PMEMobjpool *pop = pmemobj_open(path, POBJ_LAYOUT_NAME(txout));
        if (!pop) {
            printf("no pool\n");
            return 0;
        }
        const struct root *r = D_RO(POBJ_ROOT(pop, struct root));
        int ok = r->a == r->b;
        if (ok)
            printf("consistent\n");
        else
            printf("inconsistent a %lu b %lu\n", (unsigned long)r->a, (unsigned long)r->b);
        pmemobj_close(pop);
        return ok ? 0 : 1;
    }
    PMEMobjpool *pop = access(path, F_OK) == 0
                           ? pmemobj_open(path, POBJ_LAYOUT_NAME(txout))
                           : pmemobj_create(path, POBJ_LAYOUT_NAME(txout), PMEMOBJ_MIN_POOL, 0644);
    if (!pop) {
        perror("pool");
        return 1;
    }
    TOID(struct root) root = POBJ_ROOT(pop, struct root);
    for (int i = 0; i < ROUNDS; i++) {
        uint64_t v = D_RO(root)->a + 1;
        TX_BEGIN(pop) { /* TX: begins */
            TX_ADD_FIELD(root, a);
            D_RW(root)->a = v;
            D_RW(root)->b = v; /* BUG: store outside the transaction */
        } TX_END /* COMMIT: the transaction ends */
    }
    printf("a %lu b %lu\n", (unsigned long)D_RO(root)->a, (unsigned long)D_RO(root)->b);
    pmemobj_close(pop);
    return 0;
}
