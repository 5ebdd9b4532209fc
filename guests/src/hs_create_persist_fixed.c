/* hs_create_persist_fixed: FIXED twin of hs_create_persist.c.  The main thread persists the
 * value before creating the reader: the store's window ends before the reader exists, so its
 * clock happens before the reader's load.  No persistence-induced race.
 * Usage: hs_create_persist_fixed [POOL]; exits 0. */
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
    seen = r->value; /* LOAD: by the thread created after the persist */
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    r = pm_map(path, 4096);
    pthread_t f, rd;
    pthread_create(&f, NULL, format, NULL);
    pthread_join(f, NULL);
    r->value = 1; /* STORE: before pthread_create */
    PM_CLWB(&r->value); PM_SFENCE(); /* FIX: persist before creating the reader */
    pthread_create(&rd, NULL, reader, NULL);
    pthread_join(rd, NULL);
    printf("value %llu\n", (unsigned long long)r->value);
    return 0;
}
