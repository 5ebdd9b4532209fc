/* thr_detached: two batches of 8 detached threads.  Batch 1 is created with
 * a PTHREAD_CREATE_DETACHED attribute, batch 2 with default attributes and
 * pthread_detach() called by the thread itself.  Each thread adds (its index
 * + 1) to an atomic counter and a sum, then sem_post()s a semaphore; main
 * sem_wait()s 8 times per batch (detached threads cannot be joined).  glibc
 * keeps the stacks of exited detached threads in its stack cache, so batch 2
 * usually reuses batch-1 stacks (whether it does is timing-dependent and not
 * printed).  Main returns while batch-2 threads may still be finishing their
 * exit path.  Output is deterministic.  Exit status 0. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_BATCH 8

static atomic_int count;
static atomic_long sum;
static sem_t done;

#define CK(call)                                                              \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != 0) {                                                       \
            fprintf(stderr, "%s failed: %s\n", #call, strerror(rc_));         \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static void *batch1(void *arg)
{
    atomic_fetch_add(&count, 1);
    atomic_fetch_add(&sum, (long)arg + 1);
    sem_post(&done);
    return NULL;
}

static void *batch2(void *arg)
{
    CK(pthread_detach(pthread_self()));
    atomic_fetch_add(&count, 1);
    atomic_fetch_add(&sum, 100 * ((long)arg + 1));
    sem_post(&done);
    return NULL;
}

static void wait_all(void)
{
    for (int i = 0; i < PER_BATCH; i++)
        while (sem_wait(&done) != 0)
            if (errno != EINTR) {
                perror("sem_wait");
                exit(1);
            }
}

int main(void)
{
    if (sem_init(&done, 0, 0) != 0) {
        perror("sem_init");
        return 1;
    }
    pthread_attr_t attr;
    CK(pthread_attr_init(&attr));
    CK(pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED));
    for (long i = 0; i < PER_BATCH; i++) {
        pthread_t t;
        CK(pthread_create(&t, &attr, batch1, (void *)i));
    }
    CK(pthread_attr_destroy(&attr));
    wait_all();
    printf("batch 1 (attr detached): count %d, sum %ld\n", atomic_load(&count), atomic_load(&sum));

    for (long i = 0; i < PER_BATCH; i++) {
        pthread_t t;
        CK(pthread_create(&t, NULL, batch2, (void *)i));
    }
    wait_all();
    int c = atomic_load(&count);
    long s = atomic_load(&sum);
    printf("batch 2 (self-detached): count %d, sum %ld\n", c, s);
    int v = -1;
    sem_getvalue(&done, &v);
    printf("total threads: %d, semaphore left: %d\n", c, v);
    int ok = c == 2 * PER_BATCH && s == 36 + 3600 && v == 0;
    printf("result: %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
