/* pi_cas_lock: a lock built from compare-and-swap, as P-CLHT and APEX do (HawkSet §5.5).  Both
 * threads store, persist and load the PM value only inside critical sections of this lock, and
 * the writer persists before unlocking: the program has no persistence-induced race.  The lock
 * is inline atomics on a DRAM word, not a pthread call: HawkSet sees it only when cas_lock and
 * cas_unlock are named in its lock configuration.  ferrite also infers it from the word (taken
 * from 0 by a locked CAS, given back to 0 by its holder): both passes are silent by default and
 * report the store and the load with `infer_locks=off`.
 * Usage: pi_cas_lock [POOL]; exits 0. */
#include <pthread.h>

#include "pm.h"

#define ROUNDS 3

struct root {
    volatile uint64_t value;
    uint64_t pad[7];
};

static struct root *r;
static int lock_word;
static uint64_t sum;

__attribute__((noinline)) void cas_lock(int *l)
{
    int expected = 0;
    while (!__atomic_compare_exchange_n(l, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        expected = 0;
        sched_yield();
    }
}

__attribute__((noinline)) void cas_unlock(int *l)
{
    __atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

static void *writer(void *arg)
{
    (void)arg;
    for (uint64_t i = 1; i <= ROUNDS; i++) {
        cas_lock(&lock_word);
        r->value = i; /* STORE: inside the CAS lock */
        PM_CLWB(&r->value); PM_SFENCE(); /* PERSIST: before unlocking */
        cas_unlock(&lock_word);
        sched_yield();
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        cas_lock(&lock_word);
        sum += r->value; /* LOAD: inside the CAS lock */
        cas_unlock(&lock_word);
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    r = pm_map(path, 4096);
    r->value = 0;
    persist((void *)&r->value, sizeof r->value);
    pthread_t w, rd;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&rd, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(rd, NULL);
    printf("value %llu\n", (unsigned long long)r->value);
    return 0;
}
