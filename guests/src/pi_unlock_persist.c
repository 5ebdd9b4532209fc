/* pi_unlock_persist: a persistence-induced race (HawkSet Fig. 1c, Vardalith Fig. 1's common
 * branch).  The writer stores a PM value under a mutex but persists it only after unlocking; the
 * reader loads it under the same mutex.  The accesses are correctly locked (no data race), yet
 * the reader can act on a value that a crash would still lose.
 *
 * Two barriers put the reader's critical section between the writer's unlock and its persist
 * in every schedule, so Vardalith sees the windows overlap; HawkSet predicts the race from any
 * schedule (the effective lockset of the store is empty: its persist is outside the lock).
 * FIXED twin: pi_unlock_persist_fixed.c.
 * Usage: pi_unlock_persist [POOL]; prints the value, exits 0. */
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
    r->value = 42; /* BUG: stored under the lock, persisted after unlocking */
    pthread_mutex_unlock(&lock);
    pthread_barrier_wait(&bar); /* the reader runs its critical section now */
    pthread_barrier_wait(&bar);
    PM_CLWB(&r->value); PM_SFENCE(); /* PERSIST: after the unlock */
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&bar);
    pthread_mutex_lock(&lock);
    seen = r->value; /* LOAD: under the lock, before the writer's persist */
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
