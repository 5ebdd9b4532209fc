/* thr_spin_sem: (1) 4 threads x 5000 increments of a counter under a
 * pthread_spinlock_t (PTHREAD_PROCESS_PRIVATE); (2) a POSIX semaphore
 * ping-pong: two unnamed semaphores (sem_init pshared 0, value 0), the ping
 * thread posts `ping` and waits on `pong` 1000 times, the pong thread waits
 * on `ping` and posts `pong`; a shared token is incremented by each side and
 * each side checks it sees the value the other just wrote (strict
 * alternation).  Also sem_trywait on an empty semaphore -> EAGAIN and
 * sem_getvalue at the end (0).  Output is deterministic.  Exit status 0. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPIN_THREADS 4
#define SPIN_ITERS 5000
#define ROUNDS 1000

static pthread_spinlock_t spin;
static long spin_counter;
static pthread_barrier_t start; /* the spinners begin together */

static sem_t ping, pong;
static volatile long token;
static int ping_errors, pong_errors;

#define CK(call)                                                              \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != 0) {                                                       \
            fprintf(stderr, "%s failed: %s\n", #call, strerror(rc_));         \
            exit(1);                                                          \
        }                                                                     \
    } while (0)
#define CKE(call)                                                             \
    do {                                                                      \
        if ((call) != 0) {                                                    \
            fprintf(stderr, "%s failed: %s\n", #call, strerror(errno));       \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static void *spinner(void *arg)
{
    pthread_barrier_wait(&start);
    for (int i = 0; i < SPIN_ITERS; i++) {
        CK(pthread_spin_lock(&spin));
        spin_counter++;
        CK(pthread_spin_unlock(&spin));
    }
    return NULL;
}

static void *ping_thread(void *arg)
{
    for (int i = 0; i < ROUNDS; i++) {
        if (token != 2 * i)
            ping_errors++;
        token = token + 1;
        CKE(sem_post(&ping));
        while (sem_wait(&pong) != 0)
            if (errno != EINTR) {
                perror("sem_wait");
                exit(1);
            }
    }
    return NULL;
}

static void *pong_thread(void *arg)
{
    for (int i = 0; i < ROUNDS; i++) {
        while (sem_wait(&ping) != 0)
            if (errno != EINTR) {
                perror("sem_wait");
                exit(1);
            }
        if (token != 2 * i + 1)
            pong_errors++;
        token = token + 1;
        CKE(sem_post(&pong));
    }
    return NULL;
}

int main(void)
{
    CK(pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE));
    pthread_t t[SPIN_THREADS];
    CK(pthread_barrier_init(&start, NULL, SPIN_THREADS));
    for (int i = 0; i < SPIN_THREADS; i++)
        CK(pthread_create(&t[i], NULL, spinner, NULL));
    for (int i = 0; i < SPIN_THREADS; i++)
        CK(pthread_join(t[i], NULL));
    printf("spinlock counter: %ld (expected %d)\n", spin_counter, SPIN_THREADS * SPIN_ITERS);
    printf("spin_trylock when free: %d\n", pthread_spin_trylock(&spin));
    int held = pthread_spin_trylock(&spin);
    printf("spin_trylock when held: %s\n", held == EBUSY ? "EBUSY" : "other");
    CK(pthread_spin_unlock(&spin));
    CK(pthread_spin_destroy(&spin));

    CKE(sem_init(&ping, 0, 0));
    CKE(sem_init(&pong, 0, 0));
    int r = sem_trywait(&ping);
    printf("sem_trywait on empty: %s\n", r == -1 && errno == EAGAIN ? "EAGAIN" : "other");
    pthread_t a, b;
    CK(pthread_create(&b, NULL, pong_thread, NULL));
    CK(pthread_create(&a, NULL, ping_thread, NULL));
    CK(pthread_join(a, NULL));
    CK(pthread_join(b, NULL));
    int vp = -1, vq = -1;
    sem_getvalue(&ping, &vp);
    sem_getvalue(&pong, &vq);
    printf("ping-pong rounds: %d, token: %ld\n", ROUNDS, token);
    printf("alternation errors: ping %d, pong %d\n", ping_errors, pong_errors);
    printf("final semaphore values: %d %d\n", vp, vq);
    CKE(sem_destroy(&ping));
    CKE(sem_destroy(&pong));
    int ok = spin_counter == SPIN_THREADS * SPIN_ITERS && token == 2 * ROUNDS &&
             ping_errors == 0 && pong_errors == 0 && vp == 0 && vq == 0;
    printf("result: %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
