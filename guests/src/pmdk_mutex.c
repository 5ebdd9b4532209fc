/* pmdk_mutex: libpmemobj (dynamically linked): a NEGATIVE for PMRace's synchronization check.
 * The root object holds a PMEMmutex and a counter; two threads each increment the counter 5
 * times under pmemobj_mutex_lock/unlock, persisting it with pmemobj_persist inside the critical
 * section.  The PMEMmutex lives in PM and may well be durable while held, but that is no bug:
 * libpmemobj reinitialises its locks when a pool is opened (the lock records the pool's run id),
 * so no crash image can leave it taken.
 * Usage: pmdk_mutex [POOL]          removes POOL if it exists, creates a fresh pool, runs the
 *                                   threads, prints `counter 10`, exits 0
 *        pmdk_mutex POOL recover    opens the existing pool with pmemobj_open, takes and releases
 *                                   the mutex, prints `recovered: counter N`, exits 0
 * (Default POOL /mnt/pmem0/objpool; exit 1 if the pool cannot be created or opened.) */
#include <libpmemobj.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ROUNDS 5

POBJ_LAYOUT_BEGIN(mutex);
POBJ_LAYOUT_ROOT(mutex, struct root);
POBJ_LAYOUT_END(mutex);

struct root {
    PMEMmutex lock;
    uint64_t counter;
};

static PMEMobjpool *pop;
static struct root *r;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pmemobj_mutex_lock(pop, &r->lock);
        r->counter++;
        pmemobj_persist(pop, &r->counter, sizeof r->counter);
        pmemobj_mutex_unlock(pop, &r->lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/objpool";
    if (argc > 2 && strcmp(argv[2], "recover") == 0) {
        pop = pmemobj_open(path, POBJ_LAYOUT_NAME(mutex));
        if (!pop) {
            perror("pmemobj_open");
            return 1;
        }
        r = D_RW(POBJ_ROOT(pop, struct root));
        pmemobj_mutex_lock(pop, &r->lock);
        printf("recovered: counter %lu\n", (unsigned long)r->counter);
        pmemobj_mutex_unlock(pop, &r->lock);
        pmemobj_close(pop);
        return 0;
    }
    unlink(path); /* a fresh pool every run */
    pop = pmemobj_create(path, POBJ_LAYOUT_NAME(mutex), PMEMOBJ_MIN_POOL, 0644);
    if (!pop) {
        perror("pmemobj_create");
        return 1;
    }
    r = D_RW(POBJ_ROOT(pop, struct root));
    pthread_t a, b;
    pthread_create(&a, NULL, worker, NULL);
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("counter %lu\n", (unsigned long)r->counter);
    pmemobj_close(pop);
    return 0;
}
