/* pr_lockfree: a lock-free reader of a value that its writer publishes under a mutex and persists
 * only after unlocking (the shape of P-CLHT's lock-free search and CCEH's directory read).  The
 * reader logs what it read into its own persisted slots: a crash after a log slot is durable and
 * before the writer's persist leaves a log entry for a value the pool never held.
 *
 * Nothing forces the reader's load into the writer's short window (store, unlock, flush): a
 * seeded-random schedule hits it only by chance.  PMRace's targeted interleaving does: it holds
 * the reader at its load until the writer stores, then lets it read before the writer's flush.
 * Usage: pr_lockfree [POOL]   prints the final value, exits 0
 *        pr_lockfree POOL recover   checks every logged value was durable, prints `recovered`
 *                                   or `recovered: inconsistent`, exits 0 */
#include <pthread.h>

#include "pm.h"

#define ROUNDS 3

struct root {
    volatile uint64_t x; /* line 0 */
    uint64_t pad0[7];
    uint64_t log[ROUNDS]; /* line 1: the reader's log */
};

static struct root *p;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* DRAM work between operations, so that the threads' operations do not line up. */
static uint64_t work(uint64_t n)
{
    volatile uint64_t acc = 0;
    for (uint64_t i = 0; i < n; i++)
        acc += i * i;
    return acc;
}

static void *writer(void *arg)
{
    (void)arg;
    for (uint64_t i = 1; i <= ROUNDS; i++) {
        work(3000);
        pthread_mutex_lock(&lock);
        p->x = i * 100; /* PR: source store */
        pthread_mutex_unlock(&lock);
        PM_CLWB(&p->x); PM_SFENCE(); /* BUG: persisted after unlock */
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    for (int j = 0; j < ROUNDS; j++) {
        work(2000);
        uint64_t t = p->x; /* PR: load */
        p->log[j] = t; /* PR: side effect */
        PM_CLWB(&p->log[j]); PM_SFENCE();
    }
    return NULL;
}

static int recover(const char *path)
{
    p = pm_open(path, 4096, 0);
    int bad = 0;
    for (int j = 0; j < ROUNDS; j++)
        if (p->log[j] > p->x)
            bad = 1;
    puts(bad ? "recovered: inconsistent" : "recovered");
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2 && strcmp(argv[2], "recover") == 0)
        return recover(path);
    p = pm_map(path, 4096);
    memset(p, 0, sizeof *p);
    persist(p, sizeof *p);
    pthread_t w, r;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&r, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    printf("x %llu\n", (unsigned long long)p->x);
    return 0;
}
