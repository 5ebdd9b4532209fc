/* pmdk_tx_sizeof: libpmemobj (dynamically linked): a bank transfer between two accounts in one
 * transaction, written with pmemobj_tx_add_range_direct over each account, as the libpmemobj
 * tutorials do. Each account is {balance, transfers, last[4]} and the invariant is that the
 * balances always sum to 2000.
 *   - BUG (this file): the range added for the destination is `sizeof(dst)`, the size of the
 *     *pointer* (8 bytes: only its balance), a classic slip: its transfer count and history are
 *     stored in the transaction without being undo-logged (SIZEOF_BUG lines), so a crash before
 *     the commit rolls the source back and leaves the destination's history new.
 *   - FIXED (pmdk_tx_sizeof_fixed, built with -DFIXED): `sizeof(*dst)`.
 * Usage: pmdk_tx_sizeof POOL          creates the pool (or opens it), runs ROUNDS transfers,
 *                                     prints the balances, exits 0
 *        pmdk_tx_sizeof POOL check    opens it (pmemobj_open rolls back an interrupted
 *                                     transaction) and checks that the balances sum to 2000 and
 *                                     that the transfer counts agree (a pool whose accounts were
 *                                     not opened yet is consistent): prints
 *                                     `consistent` (exit 0) or `inconsistent ...` (exit 1); a
 *                                     pool that cannot be opened prints `no pool`, exits 0. */
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ROUNDS 3

struct account {
    int64_t balance;
    uint64_t transfers;
    int64_t last[4]; /* the last four amounts, newest at transfers % 4 */
};

struct bank {
    struct account acct[2];
    uint64_t ready; /* set by the transaction that opens the accounts */
};

POBJ_LAYOUT_BEGIN(bank);
POBJ_LAYOUT_ROOT(bank, struct bank);
POBJ_LAYOUT_END(bank);

static void transfer(PMEMobjpool *pop, struct account *src, struct account *dst, int64_t amount)
{
    TX_BEGIN(pop) { /* TX: begins */
        pmemobj_tx_add_range_direct(src, sizeof(*src));
#ifdef FIXED
        pmemobj_tx_add_range_direct(dst, sizeof(*dst)); /* FIX: the whole account */
#else
        pmemobj_tx_add_range_direct(dst, sizeof(dst)); /* the pointer's size: the balance only */
#endif
        src->balance -= amount;
        src->last[src->transfers % 4] = -amount;
        src->transfers++;
        dst->balance += amount;
        dst->last[dst->transfers % 4] = amount; /* SIZEOF_BUG: history not undo-logged */
        dst->transfers++;                       /* SIZEOF_BUG: count not undo-logged */
    } TX_END /* COMMIT: the transaction ends */
}

static int consistent(const struct bank *b)
{
    if (!b->ready) {
        printf("consistent (no accounts yet)\n"); /* a crash before they were opened */
        return 1;
    }
    if (b->acct[0].balance + b->acct[1].balance != 2000) {
        printf("inconsistent: balances %lld %lld\n", (long long)b->acct[0].balance,
               (long long)b->acct[1].balance);
        return 0;
    }
    if (b->acct[0].transfers != b->acct[1].transfers) {
        printf("inconsistent: transfers %llu %llu\n", (unsigned long long)b->acct[0].transfers,
               (unsigned long long)b->acct[1].transfers);
        return 0;
    }
    printf("consistent\n");
    return 1;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/bank";
    if (argc > 2 && strcmp(argv[2], "check") == 0) {
        PMEMobjpool *pop = pmemobj_open(path, POBJ_LAYOUT_NAME(bank));
        if (!pop) {
            printf("no pool\n");
            return 0;
        }
        int ok = consistent(D_RO(POBJ_ROOT(pop, struct bank)));
        pmemobj_close(pop);
        return ok ? 0 : 1;
    }
    int fresh = access(path, F_OK) != 0;
    PMEMobjpool *pop = fresh ? pmemobj_create(path, POBJ_LAYOUT_NAME(bank), PMEMOBJ_MIN_POOL, 0644)
                             : pmemobj_open(path, POBJ_LAYOUT_NAME(bank));
    if (!pop) {
        perror("pool");
        return 1;
    }
    struct bank *b = D_RW(POBJ_ROOT(pop, struct bank));
    if (fresh) {
        TX_BEGIN(pop) {
            pmemobj_tx_add_range_direct(b, sizeof(*b));
            memset(b, 0, sizeof(*b));
            b->acct[0].balance = 1000;
            b->acct[1].balance = 1000;
            b->ready = 1;
        } TX_END
    }
    for (int i = 0; i < ROUNDS; i++) {
        transfer(pop, &b->acct[0], &b->acct[1], 10 * (i + 1));
        transfer(pop, &b->acct[1], &b->acct[0], 5 * (i + 1));
    }
    printf("balances %lld %lld\n", (long long)b->acct[0].balance, (long long)b->acct[1].balance);
    pmemobj_close(pop);
    return 0;
}
