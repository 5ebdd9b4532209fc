/* thr_deadlock: a certain ABBA deadlock.  Thread A locks m1, thread B locks
 * m2, both meet at a barrier (so both first locks are held), then A locks m2
 * and B locks m1.  Both block forever in futex(FUTEX_WAIT_PRIVATE) on default
 * (normal) mutexes, and main blocks forever in pthread_join.  NATIVELY IT
 * HANGS FOREVER (do not run it without a timeout).  stdout: one line, printed
 * and flushed before the threads start. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t m1 = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m2 = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;

static void *thread_a(void *arg)
{
    pthread_mutex_lock(&m1);
    pthread_barrier_wait(&bar);
    pthread_mutex_lock(&m2); /* DEADLOCK A */
    pthread_mutex_unlock(&m2);
    pthread_mutex_unlock(&m1);
    return NULL;
}

static void *thread_b(void *arg)
{
    pthread_mutex_lock(&m2);
    pthread_barrier_wait(&bar);
    pthread_mutex_lock(&m1); /* DEADLOCK B */
    pthread_mutex_unlock(&m1);
    pthread_mutex_unlock(&m2);
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    printf("locking m1/m2 in opposite orders\n");
    fflush(stdout);
    pthread_barrier_init(&bar, NULL, 2);
    if (pthread_create(&a, NULL, thread_a, NULL) || pthread_create(&b, NULL, thread_b, NULL)) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("no deadlock (unexpected)\n");
    return 0;
}
