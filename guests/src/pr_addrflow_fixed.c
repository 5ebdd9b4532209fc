/* pr_addrflow_fixed: FIXED twin of pr_addrflow.c.  The resizer persists the root's new table
 * offset inside its critical section, so the inserter (same barriers, same rounds) only ever
 * computes its store address from a durable offset.
 * Usage: pr_addrflow_fixed [POOL]        prints the number of tables and filled slots, exits 0
 *        pr_addrflow_fixed POOL recover  opens the existing pool, follows the root, prints
 *                                        `recovered: N slots` (`recovered: bad root` if the
 *                                        offset is out of range), exits 0 */
#include <pthread.h>

#include "pm.h"

#define ROUNDS 5
#define POOL_SIZE 4096
#define SLOTS 8

struct root {
    volatile uint64_t table_off; /* offset of the current table in the pool */
    uint64_t pad[7];
};

struct table { /* one cache line */
    volatile uint64_t slot[SLOTS];
};

static char *pool;
static uint64_t next_free; /* bump allocator, under the mutex */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;

static uint64_t new_table(void)
{
    uint64_t off = next_free;
    next_free += sizeof(struct table);
    struct table *t = (struct table *)(pool + off);
    for (int i = 0; i < SLOTS; i++)
        t->slot[i] = 0;
    return off;
}

static void *resizer(void *arg)
{
    (void)arg;
    struct root *root = (struct root *)pool;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&lock);
        struct table *old = (struct table *)(pool + root->table_off);
        uint64_t new_off = new_table();
        struct table *n = (struct table *)(pool + new_off);
        for (int j = 0; j < SLOTS; j++)
            n->slot[j] = old->slot[j];
        persist(n, sizeof *n);
        root->table_off = new_off; /* PR: source store */
        PM_CLWB(&root->table_off); PM_SFENCE(); /* FIX: root persisted inside the critical section */
        pthread_mutex_unlock(&lock);
        pthread_barrier_wait(&bar); /* the inserter's critical section runs now */
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

static void *inserter(void *arg)
{
    (void)arg;
    struct root *root = (struct root *)pool;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_barrier_wait(&bar);
        pthread_mutex_lock(&lock);
        struct table *t = (struct table *)(pool + root->table_off); /* PR: load */
        t->slot[i] = 1; /* PR: side effect */
        PM_CLWB(&t->slot[i]); PM_SFENCE();
        pthread_mutex_unlock(&lock);
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

static int count_slots(uint64_t off)
{
    struct table *t = (struct table *)(pool + off);
    int n = 0;
    for (int i = 0; i < SLOTS; i++)
        n += t->slot[i] == 1;
    return n;
}

static int recover(const char *path)
{
    pool = pm_open(path, POOL_SIZE, 0);
    uint64_t off = ((struct root *)pool)->table_off;
    if (off < sizeof(struct root) || off > POOL_SIZE - sizeof(struct table) || off % sizeof(struct table) != 0) {
        puts("recovered: bad root");
        return 0;
    }
    printf("recovered: %d slots\n", count_slots(off));
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2 && strcmp(argv[2], "recover") == 0)
        return recover(path);
    pool = pm_map(path, POOL_SIZE);
    struct root *root = (struct root *)pool;
    next_free = sizeof(struct root);
    uint64_t off = new_table();
    persist(pool + off, sizeof(struct table));
    root->table_off = off;
    persist(root, sizeof *root);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t a, b;
    pthread_create(&a, NULL, resizer, NULL);
    pthread_create(&b, NULL, inserter, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("tables %llu, slots %d\n", (unsigned long long)((next_free - sizeof(struct root)) / sizeof(struct table)),
           count_slots(root->table_off));
    return 0;
}
