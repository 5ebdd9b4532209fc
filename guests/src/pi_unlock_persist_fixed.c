/* pi_unlock_persist_fixed: FIXED twin of pi_unlock_persist.c.  The writer persists the value
 * inside its critical section, so no thread can load it under the lock before it is durable:
 * HawkSet's effective lockset of the store is {lock}, and Vardalith's store window closes at the
 * unlock, before the reader's critical section begins.  Same barriers as the buggy version.
 * Usage: pi_unlock_persist_fixed [POOL]; prints the value, exits 0. */
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
    r->value = 42; /* STORE: under the lock */
    PM_CLWB(&r->value); PM_SFENCE(); /* FIX: persist inside the critical section */
    pthread_mutex_unlock(&lock);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
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
    printf("value %llu, reader saw %llu\n", (unsigned long long)r->value, (unsigned long long)seen);
    return 0;
}
