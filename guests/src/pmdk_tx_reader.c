/* pmdk_tx_reader: PMRace's transaction rule (ASPLOS'22 §4.3): bytes a PMDK transaction has added
 * (TX_ADD: snapshotted into the undo log) are not candidates, because the undo log restores them.
 * The writer changes `x` inside a transaction that added it and, while the transaction is open,
 * lets the reader (a second thread, synchronised by a DRAM barrier) copy `x` into `y` and persist
 * it. With `plain` as argv[2] the writer instead stores `x` outside any transaction and persists
 * it only after the reader ran: then the reader's copy is an inter-thread inconsistency.
 * Usage: pmdk_tx_reader [POOL [plain]]   fresh pool; prints `x 7, y 7`, exits 0 */
#include <libpmemobj.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

POBJ_LAYOUT_BEGIN(txr);
POBJ_LAYOUT_ROOT(txr, struct root);
POBJ_LAYOUT_END(txr);

struct root {
    uint64_t x;
    char pad[56];
    uint64_t y;
};

static PMEMobjpool *pop;
static struct root *r;
static pthread_barrier_t bar;
static int plain;

static void *writer(void *arg)
{
    (void)arg;
    if (plain) {
        r->x = 7; /* PR: plain store */
        pthread_barrier_wait(&bar); /* the reader runs now */
        pthread_barrier_wait(&bar);
        pmemobj_persist(pop, &r->x, sizeof r->x);
        return NULL;
    }
    TX_BEGIN(pop) {
        pmemobj_tx_add_range_direct(&r->x, sizeof r->x);
        r->x = 7; /* PR: store in the transaction */
        pthread_barrier_wait(&bar);
        pthread_barrier_wait(&bar);
    } TX_END
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&bar);
    uint64_t t = r->x; /* PR: load */
    r->y = t; /* PR: side effect */
    pmemobj_persist(pop, &r->y, sizeof r->y);
    pthread_barrier_wait(&bar);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/txpool";
    plain = argc > 2 && strcmp(argv[2], "plain") == 0;
    unlink(path);
    pop = pmemobj_create(path, POBJ_LAYOUT_NAME(txr), PMEMOBJ_MIN_POOL, 0644);
    if (!pop) {
        perror("pmemobj_create");
        return 1;
    }
    r = D_RW(POBJ_ROOT(pop, struct root));
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t w, d;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&d, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(d, NULL);
    printf("x %llu, y %llu\n", (unsigned long long)r->x, (unsigned long long)r->y);
    pmemobj_close(pop);
    return 0;
}
