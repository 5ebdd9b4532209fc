/* sync_tailcall: lock wrappers that reach pthread's functions by a tail jump.  my_lock(m) checks
 * its argument and ends in `return pthread_mutex_lock(m);`, my_unlock(m) in `return
 * pthread_mutex_unlock(m);`, compiled with -O2 for these two functions (sibling-call
 * optimisation), so each ends in a `jmp` to the pthread function, a block after its entry: the
 * lock is entered without a call of its own and returns straight to the wrapper's caller.  Two threads each add 1 to a PM counter (persisted inside the critical
 * section) and to a DRAM counter, ROUNDS times, holding the mutex through the wrappers: no race,
 * no persistence-induced race.  A detector that does not see a lock reached by a tail jump sees
 * no lock at all and reports both counters.
 * Usage: sync_tailcall [POOL]; prints `pm 400, dram 400`, exits 0. */
#include <errno.h>
#include <pthread.h>

#include "pm.h"

#define ROUNDS 200

struct root {
    volatile uint64_t counter;
    uint64_t pad[7];
};

static struct root *r;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t dram;

__attribute__((noinline, optimize("O2", "optimize-sibling-calls"))) int my_lock(pthread_mutex_t *m)
{
    if (m == NULL)
        return EINVAL;
    return pthread_mutex_lock(m); /* TAIL: jmp pthread_mutex_lock */
}

__attribute__((noinline, optimize("O2", "optimize-sibling-calls"))) int my_unlock(pthread_mutex_t *m)
{
    if (m == NULL)
        return EINVAL;
    return pthread_mutex_unlock(m); /* TAIL: jmp pthread_mutex_unlock */
}

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        my_lock(&lock);
        r->counter = r->counter + 1; /* PM: under the lock */
        PM_CLWB(&r->counter); PM_SFENCE(); /* PERSIST: in the same critical section */
        dram = dram + 1; /* DRAM: under the lock */
        my_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    r = pm_map(path, 4096);
    r->counter = 0;
    persist((void *)&r->counter, sizeof r->counter);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("pm %llu, dram %llu\n", (unsigned long long)r->counter, (unsigned long long)dram);
    return 0;
}
