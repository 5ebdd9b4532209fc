/* pr_control: a NEGATIVE for PMRace's inconsistency check: pure control dependence.  The
 * writer is pr_copy's (x stored under a mutex, persisted after unlocking), so the reader's load
 * of x is a candidate; but the reader only BRANCHES on x and stores a constant (7 or 9) into y
 * in either branch.  No byte of y is computed from x by data flow, so no inter-thread
 * inconsistency must be reported (the candidate alone may be).  The stored constants are
 * volatile stores in two real branches (no cmov/setcc: checked in the disassembly).
 * The writer stores 1, 10, 11, 20, 21, so both branches run.  No twin.
 * Usage: pr_control [POOL]            prints the final x and y, exits 0
 *        pr_control POOL recover      opens the existing pool, reads y and x, prints
 *                                     `recovered` (or `recovered: inconsistent` if y does not
 *                                     match x's parity), exits 0 */
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
        uint64_t v = (i / 2) * 10 + i % 2; /* 1, 10, 11, 20, 21: odd and even */
        pthread_mutex_lock(&lock);
        p->x = v; /* PR: source store */
        pthread_mutex_unlock(&lock);
        pthread_barrier_wait(&bar); /* the reader's critical section runs now */
        pthread_barrier_wait(&bar);
        PM_CLWB(&p->x); PM_SFENCE(); /* BUG: persisted after unlock */
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_barrier_wait(&bar);
        pthread_mutex_lock(&lock);
        if (p->x & 1) /* PR: load */
            p->y = 7; /* PR: control-dependent store */
        else
            p->y = 9;
        PM_CLWB(&p->y); PM_SFENCE();
        pthread_mutex_unlock(&lock);
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

static int recover(const char *path)
{
    p = pm_open(path, 4096, 0);
    uint64_t y = p->y;
    uint64_t x = p->x;
    puts(y == ((x & 1) ? 7 : 9) ? "recovered" : "recovered: inconsistent");
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2 && strcmp(argv[2], "recover") == 0)
        return recover(path);
    p = pm_map(path, 4096);
    p->x = 0;
    p->y = 9;
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
