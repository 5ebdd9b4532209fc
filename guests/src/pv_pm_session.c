/* pv_pm_session: sessions in PM, each with a recursive pthread mutex stored in PM *after* the
 * data it guards, built -O2.  Workers take the mutex with pthread_mutex_trylock in a loop (and
 * once more, recursively, to audit), update the balance, and release it; readers lock it with
 * pthread_mutex_lock.  glibc's lock, trylock and unlock read and write the mutex's words in PM
 * against the other threads' attempts: synchronisation, which the race passes leave out.
 *   - BUG (this file): the balance is persisted after the last unlock (STORE/LOAD).
 *   - FIXED (pv_pm_session_fixed, built with -DFIXED): persisted before it.
 * Usage: pv_pm_session [POOL]; prints the total balance, exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define NSESS 3
#define THREADS 4
#define ROUNDS 9

struct session {
    uint32_t id;
    uint32_t state;
    volatile int64_t balance;
    pthread_mutex_t m; /* recursive, in PM */
    uint64_t pad[2];
};

static struct session *ss;
static volatile int64_t sink;

static void audit(struct session *s)
{
    pthread_mutex_lock(&s->m); /* recursive: already held */
    if (s->balance < -1000000)
        abort();
    pthread_mutex_unlock(&s->m);
}

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    for (unsigned r = 0; r < ROUNDS; r++) {
        struct session *s = &ss[(id * 2 + r) % NSESS];
        if (id % 2 == 0) {
            while (pthread_mutex_trylock(&s->m) != 0)
                sched_yield();
            s->balance += (int64_t)(r * 3 + 1) * (id ? -1 : 1); /* STORE: the balance, under the session's mutex */
            audit(s);
#ifdef FIXED
            PM_CLWB((void *)&s->balance); PM_SFENCE(); /* FIX: durable before the unlock */
            pthread_mutex_unlock(&s->m);
#else
            pthread_mutex_unlock(&s->m);
            PM_CLWB((void *)&s->balance); PM_SFENCE(); /* BUG: durable only after the unlock */
#endif
        } else {
            pthread_mutex_lock(&s->m);
            sink += s->balance; /* LOAD: the balance, under the session's mutex */
            pthread_mutex_unlock(&s->m);
        }
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    ss = pm_map(path, NSESS * sizeof(struct session));
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    for (int i = 0; i < NSESS; i++) {
        ss[i].id = (uint32_t)i;
        ss[i].state = 1;
        ss[i].balance = 100;
        pthread_mutex_init(&ss[i].m, &a);
    }
    persist(ss, NSESS * sizeof(struct session));
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    int64_t total = 0;
    for (int i = 0; i < NSESS; i++)
        total += ss[i].balance;
    printf("total %lld\n", (long long)total);
    return 0;
}
