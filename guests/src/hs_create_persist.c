/* hs_create_persist: HawkSet Fig. 3 (Store3/Persist3).  The main thread stores a PM value,
 * creates a reader thread, and persists the value only afterwards.  The store happens before
 * the reader exists, so a happens-before check at the store would prune the pair; but the value
 * is unpersisted until the persist, which is concurrent with the reader's load.  HawkSet takes
 * the writer's vector clock at the end of the store's window and reports.
 * A formatting thread (joined before the store) writes the value first, so the byte is already
 * shared by two threads when the main thread persists it (the initialization removal heuristic
 * would otherwise drop a store persisted before a second thread touched its bytes).
 * FIXED twin: hs_create_persist_fixed.c.
 * Usage: hs_create_persist [POOL]; exits 0. */
#include <pthread.h>

#include "pm.h"

struct root {
    volatile uint64_t value;
    uint64_t pad[7];
};

static struct root *r;
static uint64_t seen;

static void *format(void *arg)
{
    (void)arg;
    r->value = 0;
    persist((void *)&r->value, sizeof r->value);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    seen = r->value; /* LOAD: by the thread created after the store */
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    r = pm_map(path, 4096);
    pthread_t f, rd;
    pthread_create(&f, NULL, format, NULL);
    pthread_join(f, NULL);
    r->value = 1; /* BUG: stored before pthread_create, persisted after it */
    pthread_create(&rd, NULL, reader, NULL);
    PM_CLWB(&r->value); PM_SFENCE(); /* PERSIST: after the reader exists */
    pthread_join(rd, NULL);
    printf("value %llu\n", (unsigned long long)r->value);
    return 0;
}
