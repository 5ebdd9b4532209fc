/* pm_msync_unlock: a writer thread stores a PM record under a mutex and persists it with
 * msync(MS_SYNC); main polls under the same mutex and reads the record once it is marked ready.
 * BUG: the writer persists after it unlocks, so main can read the record while it is not yet
 * durable (a persistence-induced race, HawkSet's definition). FIXED twin
 * (pm_msync_unlock_fixed, this source built with FIXED): msync before the unlock; the record
 * is durable before any other thread can take the lock and read it.
 * Usage: pm_msync_unlock [POOL]; prints the record and exits 0. */
#include <pthread.h>

#include "pm.h"

struct rec {
    volatile uint64_t key;
    volatile uint64_t value;
};

static struct rec *rec;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ready;

static void *writer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    rec->key = 7, rec->value = 700; /* STORE: the record */
#ifdef FIXED
    msync(rec, 4096, MS_SYNC); /* FIX: persisted while the lock is held */
#endif
    ready = 1;
    pthread_mutex_unlock(&lock);
#ifndef FIXED
    msync(rec, 4096, MS_SYNC); /* BUG: persisted after the unlock */
#endif
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    rec = pm_map(path, 4096);
    pthread_t t;
    pthread_create(&t, NULL, writer, NULL);
    uint64_t k = 0, v = 0;
    for (;;) {
        pthread_mutex_lock(&lock);
        if (ready) {
            k = rec->key, v = rec->value; /* LOAD: under the lock, once ready */
            pthread_mutex_unlock(&lock);
            break;
        }
        pthread_mutex_unlock(&lock);
        usleep(10);
    }
    pthread_join(t, NULL);
    printf("%llu=%llu\n", (unsigned long long)k, (unsigned long long)v);
    return 0;
}
