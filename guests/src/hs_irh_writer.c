/* hs_irh_writer: the simplest persistence-induced race, with HawkSet's initialization removal
 * heuristic (IRH) on.  A writer thread stores a PM value under a mutex and persists it after
 * unlocking; the main thread, right after creating it, reads the value under the same mutex.
 * The location is written by one thread and read by another: it is shared, and the store is no
 * initialisation, whichever thread touches it first.  The IRH removes only stores persisted
 * before a second thread accessed their bytes (HawkSet §3.1.3), never the loads.
 *   - BUG (this file): persisted after the unlock (the store and load lines).
 *   - FIXED (hs_irh_writer_fixed, built with -DFIXED): persisted before the unlock.
 * Usage: hs_irh_writer [POOL]; exits 0. */
#include <pthread.h>

#include "pm.h"

struct root {
    volatile uint64_t x;
    uint64_t pad[7];
};

static struct root *r;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t sink;

static void *writer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    r->x = 42; /* STORE: under the mutex */
#ifdef FIXED
    PM_CLWB(&r->x); PM_SFENCE(); /* FIX: persisted before the unlock */
    pthread_mutex_unlock(&lock);
#else
    pthread_mutex_unlock(&lock);
    PM_CLWB(&r->x); PM_SFENCE(); /* BUG: persisted after the unlock */
#endif
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    r = pm_map(path, 4096);
    pthread_t w;
    pthread_create(&w, NULL, writer, NULL);
    pthread_mutex_lock(&lock);
    sink = r->x; /* LOAD: under the mutex */
    pthread_mutex_unlock(&lock);
    pthread_join(w, NULL);
    puts("done");
    return 0;
}
