/* pmdk_unflushed: libpmemobj (dynamically linked): the root object's counter is updated in a
 * transaction (correct: added to the transaction, persisted at commit), then its `flag` field
 * is set directly, with neither pmemobj_persist nor a transaction: a store to PM never made
 * durable. Prints both values; exits 0. The pool is created, or opened if it exists. */
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

struct root { uint64_t count; uint64_t flag; };

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/unflushed";
    PMEMobjpool *pop = access(path, F_OK) == 0 ? pmemobj_open(path, "unflushed")
                                                : pmemobj_create(path, "unflushed", PMEMOBJ_MIN_POOL, 0644);
    if (!pop) { perror("pool"); return 1; }
    PMEMoid oid = pmemobj_root(pop, sizeof(struct root));
    struct root *r = pmemobj_direct(oid);
    TX_BEGIN(pop) {
        pmemobj_tx_add_range(oid, 0, sizeof(r->count));
        r->count++;
    } TX_END
    r->flag = r->count * 10; /* BUG: no persist */
    printf("count %lu flag %lu\n", (unsigned long)r->count, (unsigned long)r->flag);
    pmemobj_close(pop);
    return 0;
}
