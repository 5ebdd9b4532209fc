/* pv_irh_pair: HawkSet's two simplest shapes of a persistence-induced race, in a configuration
 * record of three fields, built -O2, for the initialization removal heuristic (IRH): a store
 * persisted before a second thread touched its bytes is initialisation; a location one thread
 * writes and another reads is shared whichever comes first, and is no initialisation.
 *   `pv_irh_pair POOL lock`: a writer thread stores the record under a pthread spinlock and
 *     persists it after unlocking; main, right after creating it, reads under the spinlock.
 *   `pv_irh_pair POOL free`: no lock at all: main reads while the writer stores and persists.
 *   - BUG (this file): STORE against LOAD in both modes.
 *   - FIXED (pv_irh_pair_fixed, built with -DFIXED): `lock` persists before unlocking, `free`
 *     joins the writer before reading.
 * Usage: pv_irh_pair POOL lock|free; prints what main read, exits 0. */
#include <pthread.h>

#include "pm.h"

struct config {
    uint32_t version;
    uint32_t flags;
    volatile uint64_t limit;
    char name[16];
};

static struct config *cfg;
static pthread_spinlock_t sl;
static int locked;

static void *writer(void *arg)
{
    (void)arg;
    if (locked)
        pthread_spin_lock(&sl);
    cfg->limit = 4096; /* STORE: the record's limit */
#ifdef FIXED
    if (locked) {
        PM_CLWB(&cfg->limit); PM_SFENCE(); /* FIX: persisted before the unlock */
        pthread_spin_unlock(&sl);
    } else {
        PM_CLWB(&cfg->limit); PM_SFENCE();
    }
#else
    if (locked)
        pthread_spin_unlock(&sl);
    PM_CLWB(&cfg->limit); PM_SFENCE(); /* BUG: persisted after the unlock (or with no lock at all) */
#endif
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    locked = argc > 2 && strcmp(argv[2], "lock") == 0;
    cfg = pm_map(path, 4096);
    pthread_spin_init(&sl, PTHREAD_PROCESS_PRIVATE);
    pthread_t w;
    pthread_create(&w, NULL, writer, NULL);
#ifdef FIXED
    if (!locked)
        pthread_join(w, NULL);
#endif
    uint64_t seen;
    if (locked)
        pthread_spin_lock(&sl);
    seen = cfg->limit; /* LOAD: main's read of the limit */
    if (locked)
        pthread_spin_unlock(&sl);
#ifdef FIXED
    if (locked)
        pthread_join(w, NULL);
#else
    pthread_join(w, NULL);
#endif
    printf("limit %s\n", seen == 4096 ? "set" : "unset");
    return 0;
}
