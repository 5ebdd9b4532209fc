/* pr_pthread_mutex_pm: a pthread mutex placed in PM (PMRace's synchronization inconsistency with
 * a standard lock).  The counter it protects shares its cache line, so persisting the counter
 * inside the critical section makes the held mutex durable too: after a crash there, the mutex
 * comes back locked by a thread that no longer exists.  The recovery of this guest takes the
 * lock with pthread_mutex_trylock and reports `lock stuck` (exit 3) when it cannot; with
 * `RESET_ON_OPEN` (the _fixed twin) recovery first reinitialises the mutex, as PMDK does for its
 * own locks.
 * Usage: pr_pthread_mutex_pm [POOL]          prints `counter 6`, exits 0
 *        pr_pthread_mutex_pm POOL recover    prints `recovered: counter N` (or `lock stuck`, 3) */
#include <errno.h>
#include <pthread.h>

#include "pm.h"

#define ROUNDS 3

struct root {
    pthread_mutex_t m; /* 40 bytes: the counter is on the same line */
    uint64_t counter;
};

static struct root *p;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&p->m); /* PR: pthread lock in PM */
        p->counter++;
        persist(&p->counter, sizeof p->counter); /* BUG: persists the held mutex with the counter */
        pthread_mutex_unlock(&p->m);
    }
    return NULL;
}

static int recover(const char *path)
{
    p = pm_open(path, 4096, 0);
#ifdef RESET_ON_OPEN
    pthread_mutex_init(&p->m, NULL); /* FIX: recovery reinitialises the mutex */
    persist(&p->m, sizeof p->m);
#endif
    if (pthread_mutex_trylock(&p->m) == EBUSY) {
        puts("lock stuck");
        return 3;
    }
    printf("recovered: counter %llu\n", (unsigned long long)p->counter);
    pthread_mutex_unlock(&p->m);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2 && strcmp(argv[2], "recover") == 0)
        return recover(path);
    p = pm_map(path, 4096);
    pthread_mutex_init(&p->m, NULL);
    p->counter = 0;
    persist(p, sizeof *p);
    pthread_t a, b;
    pthread_create(&a, NULL, worker, NULL);
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("counter %llu\n", (unsigned long long)p->counter);
    return 0;
}
