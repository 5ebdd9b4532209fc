/* hs_rf_publish: fresh nodes initialised, persisted and then published by a plain pointer store
 * in PM, followed by a lock-free reader (main), in two shapes:
 *   - neighbouring slots: thread A publishes its node in slot 0 of a table line, and thread C
 *     then publishes one of its own in slot 1 of the same line; main reads slot 0 and A's node;
 *   - relay: C reads A's pointer from slot 16, copies it into a node of its own, persists that
 *     node and publishes it in slot 24; main follows slot 24 to C's node and on to A's.
 * The threads hand over through DRAM flags, which no pass sees as synchronisation: only what the
 * loads read orders the reader after the writers (a store on x86 releases, a load acquires).
 * Every pointer store is itself a persistence-induced race (main or C can load the pointer
 * before its writer's persist: the PUBLISH line).
 *   - BUG (this file): A publishes its first node before persisting the node's value (the STORE
 *     and LOAD lines): main can read the value before it is durable.
 *   - FIXED (hs_rf_publish_fixed, built with -DFIXED): A persists the node first. Its
 *     initialisation (the INIT line) is then removed by the IRH in both shapes: the reads-from
 *     edge must follow the bytes main read (slot 0, not C's later store to slot 1 of the same
 *     line) and carry what C had learnt from A (the relay).
 * Usage: hs_rf_publish [POOL]; exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

struct node {
    volatile uint64_t val;
    struct node *volatile next;
    uint64_t pad[6];
};

struct area {
    struct node *volatile slot[32];
    struct node nodes[4];
};

static struct area *a;
static volatile int a_done, c_done;
static volatile uint64_t sink;

static void persist_line(const volatile void *p)
{
    PM_CLWB(p);
    PM_SFENCE();
}

static struct node *make(int i, uint64_t v, struct node *next)
{
    struct node *n = &a->nodes[i];
    n->val = v; /* INIT: a node's value, persisted before it is published */
    n->next = next;
    persist_line(n);
    return n;
}

static void publish(int s, struct node *n)
{
    a->slot[s] = n; /* PUBLISH: the pointer, persisted after it is visible */
    persist_line(&a->slot[s]);
}

static void *thread_a(void *arg)
{
    (void)arg;
#ifdef FIXED
    publish(0, make(0, 42, NULL));
#else
    struct node *n = &a->nodes[0];
    n->val = 42; /* STORE: published before it is persisted */
    publish(0, n);
    persist_line(n);
#endif
    publish(16, make(1, 43, NULL));
    a_done = 1;
    return NULL;
}

static void *thread_c(void *arg)
{
    (void)arg;
    while (!a_done)
        sched_yield();
    publish(1, make(2, 44, NULL));
    struct node *from_a = a->slot[16];
    publish(24, make(3, 45, from_a));
    c_done = 1;
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    a = pm_map(path, 4096);
    pthread_t ta, tc;
    pthread_create(&ta, NULL, thread_a, NULL);
    pthread_create(&tc, NULL, thread_c, NULL);
    while (!c_done)
        sched_yield();
    struct node *first = a->slot[0]; /* POINTER: main loads the pointer in slot 0 */
    sink = first->val; /* LOAD: main reads A's node through slot 0 */
    struct node *relay = a->slot[24];
    sink = relay->next->val;
    pthread_join(ta, NULL);
    pthread_join(tc, NULL);
    puts("done");
    return 0;
}
