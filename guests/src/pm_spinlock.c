/* pm_spinlock: a spinlock word in PM sharing its cache line with the data it protects.
 * Updating the data persists the whole line while the lock is held, so a crash can leave the
 * lock durably taken; recovery then spins on it forever (a hang). The fixed twin
 * (pm_spinlock_fixed.c) resets the lock when it opens the pool, as PMDK does for its locks.
 * Usage: pm_spinlock POOL [recover]; exits 0. */
#include "pm.h"

struct pool {
    uint64_t lock;
    uint64_t value;
};

static void acquire(struct pool *p)
{
    uint64_t expected;
    do {
        expected = 0;
    } while (!__atomic_compare_exchange_n(&p->lock, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)); /* LOCK */
}

static void release(struct pool *p)
{
    __atomic_store_n(&p->lock, 0, __ATOMIC_RELEASE);
    persist(&p->lock, sizeof p->lock);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    int recovering = argc > 2 && strcmp(argv[2], "recover") == 0;
    struct pool *p = recovering ? pm_open(path, 4096, 0) : pm_map(path, 4096);
#ifdef RESET_LOCK_ON_OPEN
    p->lock = 0; /* FIX: recovery resets the volatile lock */
    persist(&p->lock, sizeof p->lock);
#endif
    if (recovering) {
        acquire(p);
        printf("recovered value %llu\n", (unsigned long long)p->value);
        release(p);
        return 0;
    }
    p->lock = 0;
    p->value = 0;
    persist(p, sizeof *p);
    for (int i = 0; i < 3; i++) {
        acquire(p);
        p->value++;
        persist(&p->value, sizeof p->value); /* BUG: persists the held lock with it */
        release(p);
    }
    printf("value %llu\n", (unsigned long long)p->value);
    return 0;
}
