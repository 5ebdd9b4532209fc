/* pmdk_free_held: a PM object's field stored under a lock that is a CAS on a PM word (an
 * inferred lock: no function names it), read by another thread, then freed by a third thread
 * while the storing thread still holds its lock: the store's window ends at the free, in the
 * object's one life, and its race with the read belongs to that life.
 *   - writer: takes the lock (CAS 0 -> 1 on the lock word, in PM), stores the object's value,
 *     never persists it (BUG), lets the reader go, waits for the free, then releases the lock;
 *   - reader: reads the value (no lock), lets the freer go;
 *   - freer: pmemobj_free's the object.
 * The hand-offs are semaphores, so the read comes after the store and before the free in every
 * schedule: the value the reader sees was visible and not durable.
 * FIXED twin (pmdk_free_held_fixed.c): the writer persists the value before letting the reader go.
 * Usage: pmdk_free_held [POOL]   removes POOL if it exists, creates a fresh pool, prints
 *                                `read 42`, exits 0 (exit 1 if the pool cannot be created).
 * (Default POOL /mnt/pmem0/heldpool.) */
#include <libpmemobj.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

struct obj {
    uint64_t value;
    char pad[56];
};

struct root {
    uint64_t lock; /* 0 free, 1 held: a CAS lock on a PM word */
    char pad[56];
};

static PMEMobjpool *pop;
static struct root *root;
static PMEMoid oid;
static struct obj *o;
static sem_t stored, read_done, freed;
static uint64_t seen;

static void *writer(void *arg)
{
    uint64_t zero = 0;
    while (!__atomic_compare_exchange_n(&root->lock, &zero, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        zero = 0;
    o->value = 42; /* STORE: under the lock, never persisted */
#ifdef FIXED
    pmemobj_persist(pop, &o->value, sizeof o->value); /* FIX: durable before the reader goes */
#endif
    sem_post(&stored);
    sem_wait(&freed);
    __atomic_store_n(&root->lock, 0, __ATOMIC_RELEASE);
    return arg;
}

static void *reader(void *arg)
{
    sem_wait(&stored);
    seen = o->value; /* LOAD: no lock */
    sem_post(&read_done);
    return arg;
}

static void *freer(void *arg)
{
    sem_wait(&read_done);
    pmemobj_free(&oid);
    sem_post(&freed);
    return arg;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/heldpool";
    unlink(path);
    pop = pmemobj_create(path, "held", 16 << 20, 0600);
    if (!pop)
        return 1;
    root = pmemobj_direct(pmemobj_root(pop, sizeof(struct root)));
    if (pmemobj_zalloc(pop, &oid, sizeof(struct obj), 1))
        return 1;
    o = pmemobj_direct(oid);
    sem_init(&stored, 0, 0);
    sem_init(&read_done, 0, 0);
    sem_init(&freed, 0, 0);
    pthread_t w, r, f;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&r, NULL, reader, NULL);
    pthread_create(&f, NULL, freer, NULL);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    pthread_join(f, NULL);
    printf("read %lu\n", (unsigned long)seen);
    pmemobj_close(pop);
    return 0;
}
