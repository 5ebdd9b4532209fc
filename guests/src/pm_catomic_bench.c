/* pm_catomic_bench: pm_bench with C11 `_Atomic` objects in DRAM on every update, for the cost of
 * hooking them (docs/performance.md): 4 threads, each doing OPS persistent updates of its own
 * region of a PM pool (store 8 bytes, clwb the line, sfence every 8 updates), then publishing
 * the update's index through a global `_Atomic long` (release store) and reading it back
 * (acquire load) with a global `_Atomic` generation (relaxed load): three plain `mov`s on
 * atomic objects per update, found from DWARF. Usage: pm_catomic_bench
 * [OPS_PER_THREAD] [POOL]; exits 0. */
#include <pthread.h>
#include <stdatomic.h>

#include "pm.h"

#define THREADS 4
#define REGION (64 * 1024)

static char *pool;
static long ops = 100000;
static _Atomic long progress;
static _Atomic long generation;
static long seen[THREADS];

static void *worker(void *arg)
{
    long id = (long)arg;
    uint64_t *base = (uint64_t *)(pool + id * REGION);
    size_t words = REGION / sizeof(uint64_t);
    long sum = 0;
    for (long i = 0; i < ops; i++) {
        uint64_t *p = &base[(i * 8) % words];
        *p = (uint64_t)i ^ (uint64_t)id;
        PM_CLWB(p);
        if (i % 8 == 7)
            PM_SFENCE();
        atomic_store_explicit(&progress, i, memory_order_release);
        sum += atomic_load_explicit(&progress, memory_order_acquire);
        sum += atomic_load_explicit(&generation, memory_order_relaxed);
    }
    if (ops % 8 != 0)
        PM_SFENCE();
    seen[id] = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        ops = atol(argv[1]);
    const char *path = argc > 2 ? argv[2] : "/mnt/pmem0/catomic_bench";
    pool = pm_map(path, THREADS * REGION);
    atomic_store(&generation, 1);
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (long i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("done %ld\n", ops);
    return 0;
}
