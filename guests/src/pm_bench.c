/* pm_bench: 4 threads, each doing OPS persistent updates of its own region of a PM pool:
 * store 8 bytes, clwb the line, sfence every 8 updates (a batched log append). Used by
 * `ferrite bench` and docs/performance.md.  Usage: pm_bench [OPS_PER_THREAD] [POOL]; exits 0. */
#include <pthread.h>

#include "pm.h"

#define THREADS 4
#define REGION (64 * 1024)

static char *pool;
static long ops = 100000;

static void *worker(void *arg)
{
    long id = (long)arg;
    uint64_t *base = (uint64_t *)(pool + id * REGION);
    size_t words = REGION / sizeof(uint64_t);
    for (long i = 0; i < ops; i++) {
        uint64_t *p = &base[(i * 8) % words];
        *p = (uint64_t)i ^ (uint64_t)id;
        PM_CLWB(p);
        if (i % 8 == 7)
            PM_SFENCE();
    }
    if (ops % 8 != 0)
        PM_SFENCE();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        ops = atol(argv[1]);
    const char *path = argc > 2 ? argv[2] : PM_DEFAULT_POOL;
    pool = pm_map(path, THREADS * REGION);
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    uint64_t sum = 0;
    for (size_t i = 0; i < THREADS * REGION / sizeof(uint64_t); i++)
        sum += ((uint64_t *)pool)[i];
    printf("pm_bench: %d threads x %ld updates, checksum %llu\n", THREADS, ops, (unsigned long long)sum);
    return 0;
}
