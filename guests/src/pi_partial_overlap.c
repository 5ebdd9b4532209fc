/* pi_partial_overlap: size-aware matching.  The writer stores a whole 8-byte word under a mutex
 * and persists it after unlocking; the reader loads only its upper 4 bytes (offset 4) under the
 * mutex.  The accesses start at different addresses and have different sizes, but share bytes
 * 4..7: a persistence-induced race that matching by start address would miss.
 * FIXED twin: pi_partial_overlap_fixed.c.
 * Usage: pi_partial_overlap [POOL]; exits 0. */
#include <pthread.h>

#include "pm.h"

struct root {
    volatile uint64_t word;
    uint64_t pad[7];
};

static struct root *r;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;
static uint32_t seen;

static void *writer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    r->word = 0x1122334455667788ull; /* BUG: 8-byte store persisted after unlocking */
    pthread_mutex_unlock(&lock);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    PM_CLWB(&r->word);
    PM_SFENCE();
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    volatile uint32_t *hi = (volatile uint32_t *)((char *)&r->word + 4);
    pthread_barrier_wait(&bar);
    pthread_mutex_lock(&lock);
    seen = *hi; /* LOAD: 4 bytes at offset 4 of the word */
    pthread_mutex_unlock(&lock);
    pthread_barrier_wait(&bar);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    r = pm_map(path, 4096);
    r->word = 0;
    persist((void *)&r->word, sizeof r->word);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t w, rd;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&rd, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(rd, NULL);
    printf("reader saw %#x\n", (unsigned)seen);
    return 0;
}
