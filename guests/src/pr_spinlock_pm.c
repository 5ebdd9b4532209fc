/* pr_spinlock_pm: a PMRace synchronization inconsistency: a spinlock word in PM that becomes
 * durable while held.  Two threads each increment a counter 3 times under a CAS spinlock that
 * lives on the same cache line as the counter; the critical section persists the counter's line,
 * so the held lock (1) is written back with it.  The release stores 0 and persists it, but a crash
 * inside the critical section leaves the lock durably taken.  Recovery tries to take the lock
 * with a bounded spin and gives up: `lock stuck`, exit 3 (an unbounded spin would hang).
 *
 * The spin calls sched_yield between failed CAS attempts.  Output: the final counter (6).
 * FIXED twin: pr_spinlock_pm_fixed.c (same run; its recovery resets the lock word on open).
 * Usage: pr_spinlock_pm [POOL]          prints the counter, exits 0
 *        pr_spinlock_pm POOL recover    opens the existing pool, takes the lock (at most 1000000
 *                                       attempts), prints `recovered: counter N` and exits 0;
 *                                       prints `lock stuck` and exits 3 if the lock stays held */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define ROUNDS 3
#define RECOVERY_SPINS 1000000

struct root { /* one cache line */
    volatile uint64_t lock; /* 0: free, 1: held */
    volatile uint64_t counter;
    volatile uint64_t last; /* id of the last thread that incremented */
    uint64_t pad[5];
};

static struct root *p;

/* Takes the lock; gives up after `limit` failed attempts when limit > 0 (returns -1). */
static int acquire(struct root *r, long limit)
{
    long tries = 0;
    uint64_t expected = 0;
    while (!__atomic_compare_exchange_n(&r->lock, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) { /* PR: lock cas */
        if (limit > 0 && ++tries >= limit)
            return -1;
        expected = 0;
        if (limit == 0)
            sched_yield();
    }
    return 0;
}

static void release(struct root *r)
{
    __atomic_store_n(&r->lock, 0, __ATOMIC_RELEASE);
    PM_CLWB(r); PM_SFENCE();
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        acquire(p, 0);
        p->counter = p->counter + 1;
        p->last = id;
        PM_CLWB(p); PM_SFENCE(); /* BUG: persists the held lock with the counter */
        release(p);
    }
    return NULL;
}

static int recover(const char *path)
{
    p = pm_open(path, 4096, 0);
    if (acquire(p, RECOVERY_SPINS) != 0) {
        puts("lock stuck");
        return 3;
    }
    printf("recovered: counter %llu\n", (unsigned long long)p->counter);
    release(p);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2 && strcmp(argv[2], "recover") == 0)
        return recover(path);
    p = pm_map(path, 4096);
    p->lock = 0;
    p->counter = 0;
    p->last = 0;
    PM_CLWB(p); PM_SFENCE();
    pthread_t a, b;
    pthread_create(&a, NULL, worker, (void *)1);
    pthread_create(&b, NULL, worker, (void *)2);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("counter %llu\n", (unsigned long long)p->counter);
    return 0;
}
