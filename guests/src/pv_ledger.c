/* pv_ledger: a ledger in PM, a linked list of entries allocated from a PM arena, built -O2.
 * Two kinds of posting (orders and refunds) go through one helper, post(), which links a fresh
 * entry at the list's head, adds its amount to the running total and counts it, under the
 * ledger's mutex; auditors walk the list under the mutex.  One racing store site therefore
 * shows up through two call stacks, and the three stores have the three shapes `ferrite triage`
 * ranks: a pointer (the head, published before it is durable), a value (the total) and a
 * counter (the count).
 *   - BUG (this file): post() persists the head, total and count after unlocking (HEAD_STORE,
 *     TOTAL_STORE, COUNT_STORE against the auditors' HEAD_LOAD, TOTAL_LOAD, COUNT_LOAD).  The
 *     entry itself is persisted before it is linked.
 *   - FIXED (pv_ledger_fixed, built with -DFIXED): persisted before unlocking.
 * Usage: pv_ledger [POOL]; prints the entries and total, exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define POSTERS 2
#define AUDITORS 1
#define ROUNDS 8
#define ARENA 64

struct entry {
    struct entry *next;
    int64_t amount;
    uint32_t kind;
    uint32_t seq;
};

struct ledger {
    struct entry *head;
    int64_t total;
    uint64_t count;
    uint64_t pad[5];
    struct entry arena[ARENA];
};

static struct ledger *lg;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned used;
static volatile int64_t seen;

__attribute__((noinline)) static void post(uint32_t kind, int64_t amount)
{
    pthread_mutex_lock(&mu);
    struct entry *e = &lg->arena[used++];
    e->next = lg->head;
    e->amount = amount;
    e->kind = kind;
    e->seq = (uint32_t)lg->count;
    persist(e, sizeof *e); /* the entry is durable before it is linked */
    lg->head = e; /* HEAD_STORE: publishes the entry */
    lg->total += amount; /* TOTAL_STORE */
    lg->count++; /* COUNT_STORE */
#ifdef FIXED
    persist(lg, 3 * sizeof(uint64_t)); /* FIX: durable before the unlock */
    pthread_mutex_unlock(&mu);
#else
    pthread_mutex_unlock(&mu);
    persist(lg, 3 * sizeof(uint64_t)); /* BUG: durable only after the unlock */
#endif
}

/* (The empty asm keeps post() out of tail position: each caller stays a frame of its own.) */
__attribute__((noinline)) static void add_order(int64_t amount)
{
    post(1, amount);
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void add_refund(int64_t amount)
{
    post(2, -amount);
    __asm__ volatile("" ::: "memory");
}

static void *poster(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    for (unsigned r = 0; r < ROUNDS; r++) {
        if ((r + id) % 3 == 2)
            add_refund(r + 1);
        else
            add_order(10 * (r + 1));
        sched_yield();
    }
    return NULL;
}

static void *auditor(void *arg)
{
    (void)arg;
    for (unsigned r = 0; r < 2 * ROUNDS; r++) {
        pthread_mutex_lock(&mu);
        int64_t sum = 0;
        for (struct entry *e = lg->head; e; e = e->next) /* HEAD_LOAD */
            sum += e->amount;
        seen = sum - lg->total; /* TOTAL_LOAD */
        seen += (int64_t)lg->count; /* COUNT_LOAD */
        pthread_mutex_unlock(&mu);
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    lg = pm_map(path, sizeof(struct ledger));
    memset(lg, 0, sizeof *lg);
    persist(lg, sizeof *lg);
    pthread_t t[POSTERS + AUDITORS];
    for (uintptr_t i = 0; i < POSTERS; i++)
        pthread_create(&t[i], NULL, poster, (void *)i);
    for (uintptr_t i = 0; i < AUDITORS; i++)
        pthread_create(&t[POSTERS + i], NULL, auditor, (void *)i);
    for (int i = 0; i < POSTERS + AUDITORS; i++)
        pthread_join(t[i], NULL);
    printf("%llu entries, total %lld\n", (unsigned long long)lg->count, (long long)lg->total);
    return 0;
}
