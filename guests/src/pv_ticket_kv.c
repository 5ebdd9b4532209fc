/* pv_ticket_kv: a key-value table in PM whose slots each carry a *ticket lock* in PM (two 32-bit
 * counters after the slot's data), built -O2.  The lock functions take a context first and the
 * lock second (`lock_arg: 1`); writers take it with a try-lock that reports success through an
 * out-parameter (argument 2, an int set to 1 on success: `result_arg: 2, result_size: 4`),
 * readers with the blocking acquire.  Keys are looked up lock-free with strncmp and memcmp over
 * the PM keys (written and persisted before the threads start): glibc's vector routines read
 * past the key's length into the slot's value and lock, which writers change; those bytes are
 * outside the routines' contract.  configs/pv_ticket_kv.ron declares the lock; without it the
 * ticket counters race with every other thread's attempt (the lock word in PM).
 *   - BUG (this file): a writer persists the slot's value after releasing its lock, so a
 *     reader's locked load can read it before it is durable (the STORE and LOAD lines).
 *   - FIXED (pv_ticket_kv_fixed, built with -DFIXED): persisted before the release.
 * Usage: pv_ticket_kv [POOL]; prints the sum of the values read, exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define NSLOTS 6
#define THREADS 3
#define ROUNDS 12

struct tlock {
    volatile uint32_t next;    /* the next ticket to hand out */
    volatile uint32_t serving; /* the ticket being served */
};

struct slot {
    char key[6];
    uint16_t klen;
    volatile uint64_t val;
    struct tlock lk;
    uint64_t pad[4];
};

struct ctx {
    unsigned id;
    unsigned failed; /* failed try-lock attempts */
};

static struct slot *tab;
static volatile uint64_t sink;

__attribute__((noinline)) void ticket_acquire(struct ctx *c, struct tlock *l)
{
    (void)c;
    uint32_t t = __atomic_fetch_add(&l->next, 1, __ATOMIC_RELAXED);
    while (__atomic_load_n(&l->serving, __ATOMIC_ACQUIRE) != t)
        sched_yield();
}

/* Takes the lock only if nobody holds or waits for it; *ok says whether it did. */
__attribute__((noinline)) void ticket_try(struct ctx *c, struct tlock *l, int *ok)
{
    uint32_t s = __atomic_load_n(&l->serving, __ATOMIC_ACQUIRE);
    uint32_t n = s;
    *ok = __atomic_compare_exchange_n(&l->next, &n, s + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
    if (!*ok)
        c->failed++;
}

__attribute__((noinline)) void ticket_release(struct ctx *c, struct tlock *l)
{
    (void)c;
    __atomic_store_n(&l->serving, l->serving + 1, __ATOMIC_RELEASE);
}

static int find(const char *probe, size_t n)
{
    for (int i = 0; i < NSLOTS; i++) {
        /* Lock-free: the keys never change once the threads run. */
        if (i % 2 == 0 ? strncmp(tab[i].key, probe, n) == 0 : memcmp(tab[i].key, probe, n) == 0)
            return i;
    }
    return -1;
}

static void *worker(void *arg)
{
    struct ctx c = {(unsigned)(uintptr_t)arg, 0};
    char probe[16];
    for (unsigned r = 0; r < ROUNDS; r++) {
        unsigned k = (c.id * 5 + r) % NSLOTS;
        size_t n = (size_t)snprintf(probe, sizeof probe, "k%04u", k);
        int i = find(probe, n);
        if (i < 0)
            abort();
        struct slot *s = &tab[i];
        if ((r + c.id) % 3 == 0) {
            int ok = 0;
            for (;;) {
                ticket_try(&c, &s->lk, &ok);
                if (ok)
                    break;
                sched_yield();
            }
            s->val = s->val * 7 + r; /* STORE: the slot's value, under its ticket lock */
#ifdef FIXED
            PM_CLWB(&s->val); PM_SFENCE(); /* FIX: persisted before the release */
            ticket_release(&c, &s->lk);
#else
            ticket_release(&c, &s->lk);
            PM_CLWB(&s->val); PM_SFENCE(); /* BUG: persisted after the release */
#endif
        } else {
            ticket_acquire(&c, &s->lk);
            sink += s->val; /* LOAD: the slot's value, under its ticket lock */
            ticket_release(&c, &s->lk);
        }
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    tab = pm_map(path, NSLOTS * sizeof(struct slot));
    for (int i = 0; i < NSLOTS; i++) {
        memset(&tab[i], 0, sizeof tab[i]);
        tab[i].klen = (uint16_t)snprintf(tab[i].key, sizeof tab[i].key, "k%04d", i);
        tab[i].val = (uint64_t)i;
    }
    persist(tab, NSLOTS * sizeof(struct slot));
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    uint64_t sum = 0;
    for (int i = 0; i < NSLOTS; i++)
        sum += tab[i].val;
    printf("sum %llu\n", (unsigned long long)sum);
    return 0;
}
