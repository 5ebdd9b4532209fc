/* hs_relock: HawkSet Fig. 2b/2d.  The writer stores under a mutex, unlocks, locks the same mutex
 * again and only then persists.  The store and its persist both hold the mutex, so an untimed
 * lockset analysis sees {lock} and misses the race; but a reader can take the mutex between the
 * unlock and the relock and load the unpersisted value.  Timed locksets (a new timestamp per
 * acquisition) give the store an empty effective lockset.  The barriers put the reader's
 * critical section in that gap in every schedule, so Vardalith reports it too.
 * FIXED twin: hs_relock_fixed.c.
 * Usage: hs_relock [POOL]; exits 0. */
#include <pthread.h>

#include "pm.h"

struct root {
    volatile uint64_t value;
    uint64_t pad[7];
};

static struct root *r;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;
static uint64_t seen;

static void *writer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    r->value = 7; /* BUG: stored, then the lock is released before the persist */
    pthread_mutex_unlock(&lock);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    pthread_mutex_lock(&lock);
    PM_CLWB(&r->value); PM_SFENCE(); /* PERSIST: under the lock again, a different acquisition */
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&bar);
    pthread_mutex_lock(&lock);
    seen = r->value; /* LOAD: between the writer's unlock and relock */
    pthread_mutex_unlock(&lock);
    pthread_barrier_wait(&bar);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    r = pm_map(path, 4096);
    r->value = 0;
    persist((void *)&r->value, sizeof r->value);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t w, rd;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&rd, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(rd, NULL);
    printf("value %llu, reader saw %llu\n", (unsigned long long)r->value, (unsigned long long)seen);
    return 0;
}
