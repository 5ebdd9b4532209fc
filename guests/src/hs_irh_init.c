/* hs_irh_init: HawkSet's initialization removal heuristic (§3.1.3).  A writer thread
 * initialises a fresh PM node without holding any lock, persists it, and only then publishes it
 * by storing its offset into the root under a mutex (persisted inside the critical section).
 * A reader takes the mutex, follows the root to the node and loads it.  The initialising stores
 * have an empty lockset and are not ordered with the reader by create/join, so plain PM-aware
 * lockset analysis reports them; but they were persisted before any second thread touched the
 * node, so they cannot be observed unpersisted.  With --irh 1 (the default) HawkSet drops them;
 * with --irh 0 it reports the pair (INIT, LOAD).  Vardalith never reports it (the writer's
 * windows close at the unlock that publishes the node, before the reader's critical section).
 * Usage: hs_irh_init [POOL]; exits 0. */
#include <pthread.h>

#include "pm.h"

struct node {
    volatile uint64_t key;
    volatile uint64_t val;
    uint64_t pad[6];
};

struct root {
    volatile uint64_t node_off; /* 0: no node yet */
    uint64_t pad[7];
};

static char *pool;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;
static uint64_t seen;

static void *writer(void *arg)
{
    (void)arg;
    struct root *r = (struct root *)pool;
    struct node *n = (struct node *)(pool + 256);
    n->key = 5;
    n->val = 500; /* INIT: unlocked initialisation of a fresh node, persisted before publication */
    persist(n, sizeof *n);
    pthread_mutex_lock(&lock);
    r->node_off = 256;
    persist((void *)&r->node_off, sizeof r->node_off);
    pthread_mutex_unlock(&lock);
    pthread_barrier_wait(&bar);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    struct root *r = (struct root *)pool;
    pthread_barrier_wait(&bar);
    pthread_mutex_lock(&lock);
    uint64_t off = r->node_off;
    if (off != 0) {
        struct node *n = (struct node *)(pool + off);
        seen = n->val; /* LOAD: the published node */
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    pool = pm_map(path, 4096);
    struct root *r = (struct root *)pool;
    r->node_off = 0;
    persist((void *)&r->node_off, sizeof r->node_off);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t w, rd;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&rd, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(rd, NULL);
    printf("reader saw %llu\n", (unsigned long long)seen);
    return 0;
}
