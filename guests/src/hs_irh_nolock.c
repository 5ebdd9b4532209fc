/* hs_irh_nolock: a persistence-induced race without any lock, with HawkSet's initialization
 * removal heuristic on.  The main thread creates a writer that stores a PM value and persists
 * it, and reads the value right after pthread_create, without waiting.  The location is written
 * by one thread and read by another: shared, whichever touches it first; the IRH removes only
 * stores persisted before a second thread accessed the bytes (HawkSet §3.1.3).
 *   - BUG (this file): the read is not ordered after the persist (the store and load lines).
 *   - FIXED (hs_irh_nolock_fixed, built with -DFIXED): main joins the writer first.
 * Usage: hs_irh_nolock [POOL]; exits 0. */
#include <pthread.h>

#include "pm.h"

struct root {
    volatile uint64_t x;
    uint64_t pad[7];
};

static struct root *r;
static volatile uint64_t sink;

static void *writer(void *arg)
{
    (void)arg;
    r->x = 42; /* STORE: by the writer */
    PM_CLWB(&r->x); PM_SFENCE();
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    r = pm_map(path, 4096);
    pthread_t w;
    pthread_create(&w, NULL, writer, NULL);
#ifdef FIXED
    pthread_join(w, NULL); /* FIX: the read waits for the writer */
    sink = r->x; /* LOAD: by main */
#else
    sink = r->x; /* LOAD: by main */
    pthread_join(w, NULL);
#endif
    puts("done");
    return 0;
}
