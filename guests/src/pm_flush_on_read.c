/* pm_flush_on_read: BUG-FREE: a reader that flushes what it reads.  The writer stores x under a
 * mutex and persists it only after unlocking (as pi_unlock_persist and pr_copy do).  The reader
 * takes the mutex and loads x before the writer's persist, but before it acts on the value it
 * flushes and fences x's line itself (`clwb` + `sfence` of the line it read), and only then
 * stores the value it derived, y = x + 1, and persists y.  Under the hardware durability rule
 * (any thread's flush followed by that thread's fence writes the line back) x is durable before
 * y is stored, so no crash image holds y without the x it came from: not an inconsistency.
 * Detectors that assume only the writer's own flush persists a store (HawkSet, Vardalith by
 * default) still see x read before its writer persisted it.
 *
 * x and y are on different cache lines.  Two barriers per round put the reader's critical
 * section between the writer's unlock and its persist in every schedule; 5 rounds.  The
 * writer's own persist comes after the reader's and finds the line already written back.
 * Usage: pm_flush_on_read [POOL]          prints the final x and y, exits 0
 *        pm_flush_on_read POOL recover    opens the existing pool, reads y (first) and x, prints
 *                                         `recovered`, exits 0 (or `recovered: inconsistent` if
 *                                         y > x + 1, exits 1) */
#include <pthread.h>

#include "pm.h"

#define ROUNDS 5

struct root {
    volatile uint64_t x; /* line 0 */
    uint64_t pad0[7];
    volatile uint64_t y; /* line 1 */
    uint64_t pad1[7];
};

static struct root *p;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;

static void *writer(void *arg)
{
    (void)arg;
    for (uint64_t i = 1; i <= ROUNDS; i++) {
        uint64_t v = i * 10;
        pthread_mutex_lock(&lock);
        p->x = v; /* STORE: x, persisted by its writer only after unlocking */
        pthread_mutex_unlock(&lock);
        pthread_barrier_wait(&bar); /* the reader's critical section runs now */
        pthread_barrier_wait(&bar);
        PM_CLWB(&p->x); PM_SFENCE(); /* PERSIST: the writer's own persist, after the reader's */
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_barrier_wait(&bar);
        pthread_mutex_lock(&lock);
        uint64_t t = p->x; /* LOAD: x, before its writer persisted it */
        PM_CLWB(&p->x); PM_SFENCE(); /* FLUSH ON READ: the reader makes what it read durable */
        p->y = t + 1; /* EFFECT: derived from a value that is durable by now */
        PM_CLWB(&p->y); PM_SFENCE();
        pthread_mutex_unlock(&lock);
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

static int recover(const char *path)
{
    p = pm_open(path, 4096, 0);
    uint64_t y = p->y; /* the derived value is read before anything is written */
    uint64_t x = p->x;
    puts(y <= x + 1 ? "recovered" : "recovered: inconsistent");
    return y <= x + 1 ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2 && strcmp(argv[2], "recover") == 0)
        return recover(path);
    p = pm_map(path, 4096);
    p->x = 0;
    p->y = 1;
    persist(p, sizeof *p);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t w, r;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&r, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    printf("x %llu, y %llu\n", (unsigned long long)p->x, (unsigned long long)p->y);
    return 0;
}
