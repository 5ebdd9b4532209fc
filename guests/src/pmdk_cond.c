/* pmdk_cond: libpmemobj (dynamically linked): a producer and a consumer hand ITEMS values over a
 * PM queue of CAP slots guarded by a PMEMmutex and two PMEMconds (not full, not empty).  A
 * slot is empty when it holds 0.  The producer waits (pmemobj_cond_wait) until its next slot is
 * empty, stores the item, persists it and signals; the consumer waits until its next slot is
 * full, takes the item, clears the slot, adds the item to a durable sum, persists both and
 * signals.  Every store is persisted inside the critical section that makes it, and every
 * access to a slot reads it before writing it: no persistence-induced race, no data race, no
 * order-sensitive critical sections.  Buggy twin: pmdk_cond_publish.c.
 * Usage: pmdk_cond [POOL]   removes POOL if it exists, creates a fresh pool, runs the two
 *                           threads, prints `consumed 50, sum 1275`, exits 0
 * (Default POOL /mnt/pmem0/objpool; exit 1 if the pool cannot be created.) */
#include <libpmemobj.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#define CAP 4
#define ITEMS 50

POBJ_LAYOUT_BEGIN(cond);
POBJ_LAYOUT_ROOT(cond, struct root);
POBJ_LAYOUT_END(cond);

struct root {
    PMEMmutex lock;
    PMEMcond not_full;
    PMEMcond not_empty;
    uint64_t slot[CAP];
    uint64_t sum;
    uint64_t consumed;
};

static PMEMobjpool *pop;
static struct root *r;

static void *producer(void *arg)
{
    (void)arg;
    for (uint64_t i = 1; i <= ITEMS; i++) {
        uint64_t *s = &r->slot[i % CAP];
        pmemobj_mutex_lock(pop, &r->lock);
        while (*s != 0) /* PRODUCER: read the slot */
            pmemobj_cond_wait(pop, &r->not_full, &r->lock);
        *s = i; /* PRODUCER: fill the slot */
        pmemobj_persist(pop, s, sizeof *s);
        pmemobj_cond_signal(pop, &r->not_empty);
        pmemobj_mutex_unlock(pop, &r->lock);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    for (uint64_t i = 1; i <= ITEMS; i++) {
        uint64_t *s = &r->slot[i % CAP];
        pmemobj_mutex_lock(pop, &r->lock);
        while (*s == 0) /* CONSUMER: read the slot */
            pmemobj_cond_wait(pop, &r->not_empty, &r->lock);
        uint64_t v = *s;
        *s = 0; /* CONSUMER: clear the slot */
        pmemobj_persist(pop, s, sizeof *s);
        r->sum += v;
        r->consumed += 1;
        pmemobj_persist(pop, &r->sum, 2 * sizeof(uint64_t));
        pmemobj_cond_signal(pop, &r->not_full);
        pmemobj_mutex_unlock(pop, &r->lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/objpool";
    unlink(path); /* a fresh pool every run */
    pop = pmemobj_create(path, POBJ_LAYOUT_NAME(cond), PMEMOBJ_MIN_POOL, 0644);
    if (!pop) {
        perror("pmemobj_create");
        return 1;
    }
    r = D_RW(POBJ_ROOT(pop, struct root));
    pthread_t p, c;
    pthread_create(&p, NULL, producer, NULL);
    pthread_create(&c, NULL, consumer, NULL);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    printf("consumed %lu, sum %lu\n", (unsigned long)r->consumed, (unsigned long)r->sum);
    pmemobj_close(pop);
    return 0;
}
