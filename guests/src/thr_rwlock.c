/* thr_rwlock: one pthread_rwlock_t, 1 writer and 3 readers.  The writer does
 * 1000 updates under wrlock, each keeping the invariant b == 2*a and bumping a
 * (with a sched_yield between the two stores, inside the critical section,
 * every 8th update).  Each reader does 2000 reads under rdlock (sched_yield
 * while holding it every 16th read) and checks the invariant and that a never
 * decreases.  A barrier starts all four threads together.  Afterwards main
 * checks trywrlock/tryrdlock from another thread while it holds a read lock
 * (EBUSY / 0) and a write lock (EBUSY / EBUSY).  Prints the final value and
 * the violation counts (always 0).  Output is deterministic.  Exit status 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NREADERS 3
#define WRITES 1000
#define READS 2000

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_barrier_t start; /* all 4 threads begin together */
static volatile long a, b;
static int violations[NREADERS];

#define CK(call)                                                              \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != 0) {                                                       \
            fprintf(stderr, "%s failed: %s\n", #call, strerror(rc_));         \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static void *writer(void *arg)
{
    pthread_barrier_wait(&start);
    for (int i = 0; i < WRITES; i++) {
        CK(pthread_rwlock_wrlock(&rw));
        a = a + 1;
        if (i % 8 == 0)
            sched_yield(); /* readers must stay blocked meanwhile */
        b = 2 * a;
        CK(pthread_rwlock_unlock(&rw));
    }
    return NULL;
}

static void *reader(void *arg)
{
    int r = (int)(long)arg;
    long last = 0;
    pthread_barrier_wait(&start);
    for (int i = 0; i < READS; i++) {
        CK(pthread_rwlock_rdlock(&rw));
        long va = a, vb = b;
        if (i % 16 == 0)
            sched_yield(); /* hold the read lock a while: the writer must wait */
        CK(pthread_rwlock_unlock(&rw));
        if (vb != 2 * va || va < last)
            violations[r]++;
        last = va;
    }
    return NULL;
}

static const char *errname(int e)
{
    return e == 0 ? "0" : e == EBUSY ? "EBUSY" : e == EDEADLK ? "EDEADLK" : "other";
}

static void *try_locks(void *arg)
{
    int *res = arg;
    res[0] = pthread_rwlock_trywrlock(&rw);
    res[1] = pthread_rwlock_tryrdlock(&rw);
    if (res[1] == 0)
        pthread_rwlock_unlock(&rw);
    return NULL;
}

int main(void)
{
    pthread_t w, r[NREADERS];
    CK(pthread_barrier_init(&start, NULL, NREADERS + 1));
    for (long i = 0; i < NREADERS; i++)
        CK(pthread_create(&r[i], NULL, reader, (void *)i));
    CK(pthread_create(&w, NULL, writer, NULL));
    CK(pthread_join(w, NULL));
    for (int i = 0; i < NREADERS; i++)
        CK(pthread_join(r[i], NULL));

    printf("writer: %d updates, readers: %d x %d reads\n", WRITES, NREADERS, READS);
    printf("final value: a=%ld b=%ld\n", a, b);
    int bad = 0;
    for (int i = 0; i < NREADERS; i++) {
        printf("reader %d violations: %d\n", i, violations[i]);
        bad += violations[i];
    }

    int res[2];
    pthread_t t;
    CK(pthread_rwlock_rdlock(&rw));
    CK(pthread_create(&t, NULL, try_locks, res));
    CK(pthread_join(t, NULL));
    CK(pthread_rwlock_unlock(&rw));
    printf("trywrlock while read-locked: %s\n", errname(res[0]));
    printf("tryrdlock while read-locked: %s\n", errname(res[1]));
    CK(pthread_rwlock_wrlock(&rw));
    CK(pthread_create(&t, NULL, try_locks, res));
    CK(pthread_join(t, NULL));
    CK(pthread_rwlock_unlock(&rw));
    printf("trywrlock while write-locked: %s\n", errname(res[0]));
    printf("tryrdlock while write-locked: %s\n", errname(res[1]));

    int ok = a == WRITES && b == 2 * WRITES && bad == 0;
    printf("result: %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
