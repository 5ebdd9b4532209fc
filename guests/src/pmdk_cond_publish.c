/* pmdk_cond_publish: libpmemobj (dynamically linked): a value published under a PMEMmutex and
 * persisted only after a pmemobj_cond_wait that releases the mutex (HawkSet's persistence-induced
 * race through a condition variable).  The producer stores a value into the root and signals
 * the consumer, then waits for the consumer's acknowledgement and persists the value only after
 * the wait returns, still "under the mutex" as the source reads, but the wait released and
 * reacquired it.  The consumer, woken, loads the value before the producer's persist and records
 * durably that it saw it: a crash between the two leaves the acknowledgement of a value the pool
 * no longer holds.  The protocol puts the consumer's load between the producer's store and its
 * persist in every schedule.  Fixed producer/consumer: pmdk_cond.c.
 * Usage: pmdk_cond_publish [POOL]   removes POOL if it exists, creates a fresh pool, runs the two
 *                                   threads, prints `value 42, consumer saw 42`, exits 0
 * (Default POOL /mnt/pmem0/objpool; exit 1 if the pool cannot be created.) */
#include <libpmemobj.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

POBJ_LAYOUT_BEGIN(condpub);
POBJ_LAYOUT_ROOT(condpub, struct root);
POBJ_LAYOUT_END(condpub);

struct root {
    PMEMmutex lock;
    PMEMcond full;
    PMEMcond acked;
    uint64_t value;
    uint64_t pad[7];
    uint64_t ack; /* the value the consumer saw, persisted */
};

static PMEMobjpool *pop;
static struct root *r;

static void *producer(void *arg)
{
    (void)arg;
    pmemobj_mutex_lock(pop, &r->lock);
    r->value = 42; /* BUG: published, then the wait releases the mutex before the persist */
    pmemobj_cond_signal(pop, &r->full);
    while (r->ack == 0)
        pmemobj_cond_wait(pop, &r->acked, &r->lock); /* WAIT: releases the mutex */
    pmemobj_persist(pop, &r->value, sizeof r->value); /* PERSIST: after the wait */
    pmemobj_mutex_unlock(pop, &r->lock);
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    uint64_t v;
    pmemobj_mutex_lock(pop, &r->lock);
    while ((v = r->value) == 0) /* LOAD: while the producer waits, before its persist */
        pmemobj_cond_wait(pop, &r->full, &r->lock);
    r->ack = v;
    pmemobj_persist(pop, &r->ack, sizeof r->ack);
    pmemobj_cond_signal(pop, &r->acked);
    pmemobj_mutex_unlock(pop, &r->lock);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/objpool";
    unlink(path); /* a fresh pool every run */
    pop = pmemobj_create(path, POBJ_LAYOUT_NAME(condpub), PMEMOBJ_MIN_POOL, 0644);
    if (!pop) {
        perror("pmemobj_create");
        return 1;
    }
    r = D_RW(POBJ_ROOT(pop, struct root));
    pthread_t p, c;
    pthread_create(&c, NULL, consumer, NULL);
    pthread_create(&p, NULL, producer, NULL);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    printf("value %lu, consumer saw %lu\n", (unsigned long)r->value, (unsigned long)r->ack);
    pmemobj_close(pop);
    return 0;
}
