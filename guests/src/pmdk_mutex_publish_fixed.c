/* pmdk_mutex_publish_fixed: pmdk_mutex_publish with the writer persisting the root's pointer
 * before pmemobj_mutex_unlock: whatever the reader sees under the mutex is durable.
 * Usage and output as pmdk_mutex_publish's.
 * (Default POOL /mnt/pmem0/objpool; exit 1 if the pool cannot be created.) */
#include <libpmemobj.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

POBJ_LAYOUT_BEGIN(publish);
POBJ_LAYOUT_ROOT(publish, struct root);
POBJ_LAYOUT_TOID(publish, struct node);
POBJ_LAYOUT_END(publish);

struct node {
    uint64_t value;
};

struct root {
    PMEMmutex lock;
    TOID(struct node) node; /* published by the writer */
    TOID(struct node) held; /* the node the reader holds */
};

static PMEMobjpool *pop;
static struct root *r;
static pthread_barrier_t bar;
static uint64_t seen;

static void *writer(void *arg)
{
    (void)arg;
    TOID(struct node) n;
    if (POBJ_NEW(pop, &n, struct node, NULL, NULL) != 0) {
        perror("POBJ_NEW");
        return NULL;
    }
    D_RW(n)->value = 42;
    pmemobj_persist(pop, &D_RW(n)->value, sizeof(uint64_t));
    pmemobj_mutex_lock(pop, &r->lock);
    r->node = n; /* STORE: published under the mutex */
    pmemobj_persist(pop, &r->node, sizeof r->node); /* FIX: persisted before unlocking */
    pmemobj_mutex_unlock(pop, &r->lock);
    pthread_barrier_wait(&bar); /* the reader runs its critical section now */
    pthread_barrier_wait(&bar);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&bar);
    pmemobj_mutex_lock(pop, &r->lock);
    TOID(struct node) n = r->node; /* LOAD: under the mutex */
    if (!TOID_IS_NULL(n)) {
        seen = D_RO(n)->value;
        r->held = n; /* EFFECT: the reader's durable record of the node it holds */
        pmemobj_persist(pop, &r->held, sizeof r->held);
    }
    pmemobj_mutex_unlock(pop, &r->lock);
    pthread_barrier_wait(&bar);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/objpool";
    if (argc > 2 && strcmp(argv[2], "recover") == 0) {
        pop = pmemobj_open(path, POBJ_LAYOUT_NAME(publish));
        if (!pop) {
            printf("recovered: no pool\n");
            return 0;
        }
        r = D_RW(POBJ_ROOT(pop, struct root));
        pmemobj_mutex_lock(pop, &r->lock);
        int ok = TOID_IS_NULL(r->held) || TOID_EQUALS(r->held, r->node);
        if (!ok)
            printf("recovered: inconsistent\n");
        else if (TOID_IS_NULL(r->node))
            printf("recovered: no node\n");
        else
            printf("recovered: node %lu%s\n", (unsigned long)D_RO(r->node)->value,
                   TOID_IS_NULL(r->held) ? "" : ", held");
        pmemobj_mutex_unlock(pop, &r->lock);
        pmemobj_close(pop);
        return ok ? 0 : 1;
    }
    unlink(path); /* a fresh pool every run */
    pop = pmemobj_create(path, POBJ_LAYOUT_NAME(publish), PMEMOBJ_MIN_POOL, 0644);
    if (!pop) {
        perror("pmemobj_create");
        return 1;
    }
    r = D_RW(POBJ_ROOT(pop, struct root));
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t w, rd;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&rd, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(rd, NULL);
    printf("node %lu, reader saw %lu\n", (unsigned long)D_RO(r->node)->value, (unsigned long)seen);
    pmemobj_close(pop);
    return 0;
}
