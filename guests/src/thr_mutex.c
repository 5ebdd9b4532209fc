/* thr_mutex: 4 threads (released together by a barrier) x 10000 increments
 * of three counters, each under its own mutex: a default (normal) mutex, a
 * PTHREAD_MUTEX_RECURSIVE mutex that is locked twice per increment, and a
 * PTHREAD_MUTEX_ERRORCHECK mutex.  Then, on the errorcheck mutex: relock by the
 * owner -> EDEADLK, unlock by a non-owner thread -> EPERM; trylock of a held
 * normal mutex from another thread -> EBUSY; unlock of the recursive mutex by
 * a non-owner -> EPERM.  Errno values are printed as names.  Output is
 * deterministic.  Exit status 0. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 4
#define ITERS 10000

static pthread_mutex_t m_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m_rec;
static pthread_mutex_t m_err;
static long c_normal, c_rec, c_err;
static pthread_barrier_t start; /* the 4 workers begin together */

static const char *errname(int e)
{
    switch (e) {
    case 0: return "0";
    case EDEADLK: return "EDEADLK";
    case EPERM: return "EPERM";
    case EBUSY: return "EBUSY";
    case EINVAL: return "EINVAL";
    case EAGAIN: return "EAGAIN";
    default: return "other";
    }
}

#define CK(call)                                                              \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != 0) {                                                       \
            fprintf(stderr, "%s failed: %s\n", #call, strerror(rc_));         \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static void *worker(void *arg)
{
    pthread_barrier_wait(&start);
    for (int i = 0; i < ITERS; i++) {
        CK(pthread_mutex_lock(&m_normal));
        c_normal++;
        CK(pthread_mutex_unlock(&m_normal));

        CK(pthread_mutex_lock(&m_rec));
        CK(pthread_mutex_lock(&m_rec));
        c_rec++;
        CK(pthread_mutex_unlock(&m_rec));
        CK(pthread_mutex_unlock(&m_rec));

        CK(pthread_mutex_lock(&m_err));
        c_err++;
        CK(pthread_mutex_unlock(&m_err));
    }
    return NULL;
}

/* Runs while main holds m_err, m_rec and m_normal. */
static void *non_owner(void *arg)
{
    int *res = arg;
    res[0] = pthread_mutex_unlock(&m_err);
    res[1] = pthread_mutex_trylock(&m_normal);
    res[2] = pthread_mutex_unlock(&m_rec);
    res[3] = pthread_mutex_trylock(&m_rec);
    return NULL;
}

int main(void)
{
    pthread_mutexattr_t a;
    CK(pthread_mutexattr_init(&a));
    CK(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE));
    CK(pthread_mutex_init(&m_rec, &a));
    CK(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK));
    CK(pthread_mutex_init(&m_err, &a));
    CK(pthread_mutexattr_destroy(&a));

    pthread_t t[NTHREADS];
    CK(pthread_barrier_init(&start, NULL, NTHREADS));
    for (int i = 0; i < NTHREADS; i++)
        CK(pthread_create(&t[i], NULL, worker, NULL));
    for (int i = 0; i < NTHREADS; i++)
        CK(pthread_join(t[i], NULL));

    printf("threads: %d x %d increments\n", NTHREADS, ITERS);
    printf("normal counter: %ld\n", c_normal);
    printf("recursive counter: %ld\n", c_rec);
    printf("errorcheck counter: %ld\n", c_err);

    CK(pthread_mutex_lock(&m_err));
    printf("errorcheck relock by owner: %s\n", errname(pthread_mutex_lock(&m_err)));
    printf("errorcheck trylock by owner: %s\n", errname(pthread_mutex_trylock(&m_err)));
    CK(pthread_mutex_lock(&m_normal));
    CK(pthread_mutex_lock(&m_rec));
    int res[4];
    pthread_t n;
    CK(pthread_create(&n, NULL, non_owner, res));
    CK(pthread_join(n, NULL));
    printf("errorcheck unlock by non-owner: %s\n", errname(res[0]));
    printf("normal trylock while held elsewhere: %s\n", errname(res[1]));
    printf("recursive unlock by non-owner: %s\n", errname(res[2]));
    printf("recursive trylock while held elsewhere: %s\n", errname(res[3]));
    printf("errorcheck unlock by owner: %s\n", errname(pthread_mutex_unlock(&m_err)));
    printf("errorcheck unlock when unlocked: %s\n", errname(pthread_mutex_unlock(&m_err)));
    CK(pthread_mutex_unlock(&m_rec));
    CK(pthread_mutex_unlock(&m_normal));
    int ok = c_normal == NTHREADS * ITERS && c_rec == NTHREADS * ITERS && c_err == NTHREADS * ITERS;
    printf("result: %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
