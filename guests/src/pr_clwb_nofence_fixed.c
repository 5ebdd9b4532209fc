/* pr_clwb_nofence_fixed: FIXED twin of pr_clwb_nofence.c.  The writer fences its clwb before
 * releasing the spinlock, so x is durable (strict mode too) before the reader can load it.
 * Same DRAM spinlock and round hand-off as the buggy version; 5 rounds.
 * Usage: pr_clwb_nofence_fixed [POOL]        prints the final x and y, exits 0
 *        pr_clwb_nofence_fixed POOL recover  opens the existing pool, reads y (first) and x,
 *                                            prints `recovered` (or `recovered: inconsistent`
 *                                            if y > x + 1), exits 0 */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define ROUNDS 5

struct root {
    volatile uint64_t x; /* line 0 */
    uint64_t pad0[7];
    volatile uint64_t y; /* line 1 */
    uint64_t pad1[7];
};

static struct root *p;
static int lock;                    /* DRAM spinlock: CAS to take, plain store to release */
static volatile uint64_t published; /* last round the writer unlocked */
static volatile uint64_t consumed;  /* last round the reader finished */

static void spin_lock(int *l)
{
    int expected = 0;
    while (!__atomic_compare_exchange_n(l, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        expected = 0;
        sched_yield();
    }
}

static void spin_unlock(int *l)
{
    __atomic_store_n(l, 0, __ATOMIC_RELEASE); /* a plain mov on x86: no fence */
}

static void *writer(void *arg)
{
    (void)arg;
    for (uint64_t i = 1; i <= ROUNDS; i++) {
        uint64_t v = i * 10;
        spin_lock(&lock);
        p->x = v; /* PR: source store */
        PM_CLWB(&p->x);
        PM_SFENCE(); /* FIX: fenced before unlock */
        spin_unlock(&lock);
        published = i;
        while (consumed != i) /* the reader's critical section runs now */
            sched_yield();
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    for (uint64_t i = 1; i <= ROUNDS; i++) {
        while (published != i)
            sched_yield();
        spin_lock(&lock);
        uint64_t t = p->x; /* PR: load */
        p->y = t + 1; /* PR: side effect */
        PM_CLWB(&p->y); PM_SFENCE();
        spin_unlock(&lock);
        consumed = i;
    }
    return NULL;
}

static int recover(const char *path)
{
    p = pm_open(path, 4096, 0);
    uint64_t y = p->y; /* the side effect is read before anything is written */
    uint64_t x = p->x;
    puts(y <= x + 1 ? "recovered" : "recovered: inconsistent");
    return 0;
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
    pthread_t w, r;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&r, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    printf("x %llu, y %llu\n", (unsigned long long)p->x, (unsigned long long)p->y);
    return 0;
}
