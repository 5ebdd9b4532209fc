/* pm_service_race: a PM service that never ends.  An updater thread bumps a persistent counter
 * under a mutex and persists it only after unlocking; a reporter thread reads the counter under
 * the same mutex, and can read it in that gap, before it is durable (HawkSet's Fig. 1c shape).
 * Given a second argument, both loop for ever, as a server does: a run stops at the instruction
 * budget or when ferrite is interrupted, and the races seen by then stand.
 * FIXED twin: pm_service_race_fixed.c, this source built with FIXED (persists before the unlock).
 * Usage: pm_service_race [POOL [forever]]. */
#include <pthread.h>

#include "pm.h"

struct root {
    volatile uint64_t count;
    uint64_t pad[7];
};

static struct root *r;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long rounds = 200;
static uint64_t seen;

static void *updater(void *arg)
{
    (void)arg;
    for (long n = 0; n != rounds; n++) {
        pthread_mutex_lock(&lock);
#ifdef FIXED
        r->count = r->count + 1;
        PM_CLWB(&r->count); PM_SFENCE(); /* FIX: persisted before the unlock */
        pthread_mutex_unlock(&lock);
#else
        r->count = r->count + 1; /* BUG: stored under the lock, persisted after the unlock */
        pthread_mutex_unlock(&lock);
        PM_CLWB(&r->count); PM_SFENCE();
#endif
    }
    return NULL;
}

static void *reporter(void *arg)
{
    (void)arg;
    for (long n = 0; n != rounds; n++) {
        pthread_mutex_lock(&lock);
        seen += r->count; /* LOAD: may read the count before it is durable */
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2)
        rounds = -1; /* for ever */
    r = pm_map(path, 4096);
    r->count = 0;
    persist((void *)&r->count, sizeof r->count);
    pthread_t u, p;
    pthread_create(&u, NULL, updater, NULL);
    pthread_create(&p, NULL, reporter, NULL);
    pthread_join(u, NULL);
    pthread_join(p, NULL);
    printf("count %llu\n", (unsigned long long)r->count);
    return 0;
}
