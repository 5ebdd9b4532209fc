/* pm_cross_thread_persist: thread A stores to a PM line; thread B (after joining A) flushes
 * and fences that line.  Durable under the hardware rule (durable_hw: any thread's clwb plus that
 * thread's sfence writes the line back), not under the writer-only rule (durable_own) that
 * HawkSet and Vardalith assume.  `unpersisted` (durable_hw) reports nothing.
 * Usage: pm_cross_thread_persist [POOL]; exits 0. */
#include <pthread.h>

#include "pm.h"

static uint64_t *slot;

static void *writer(void *arg)
{
    (void)arg;
    *slot = 42; /* STORE: by thread A */
    return NULL;
}

static void *persister(void *arg)
{
    (void)arg;
    PM_CLWB(slot); /* FLUSH: by thread B */
    PM_SFENCE();
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    char *pool = pm_map(path, 4096);
    slot = (uint64_t *)(pool + 64);
    pthread_t a, b;
    pthread_create(&a, NULL, writer, NULL);
    pthread_join(a, NULL);
    pthread_create(&b, NULL, persister, NULL);
    pthread_join(b, NULL);
    printf("slot = %llu\n", (unsigned long long)*slot);
    return 0;
}
