/* hs_relock_fixed: FIXED twin of hs_relock.c.  The store and its persist are in one critical
 * section (the same acquisition: equal timestamps, effective lockset {lock}); the writer still
 * takes the lock a second time afterwards, for a read.  No persistence-induced race.
 * Usage: hs_relock_fixed [POOL]; exits 0. */
#include <pthread.h>

#include "pm.h"

struct root {
    volatile uint64_t value;
    uint64_t pad[7];
};

static struct root *r;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;
static uint64_t seen, again;

static void *writer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    r->value = 7; /* STORE: under the lock */
    PM_CLWB(&r->value); PM_SFENCE(); /* FIX: persist in the same critical section */
    pthread_mutex_unlock(&lock);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    pthread_mutex_lock(&lock);
    again = r->value;
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&bar);
    pthread_mutex_lock(&lock);
    seen = r->value; /* LOAD: under the lock */
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
    printf("value %llu, reader saw %llu, writer read %llu\n", (unsigned long long)r->value,
           (unsigned long long)seen, (unsigned long long)again);
    return 0;
}
