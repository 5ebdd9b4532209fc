/* os_preempt: counter++ under a mutex, split by a sched_yield between its read
 * and its write so the scheduler can switch threads in the middle of the
 * critical section.  Every section is a read-write sequence: OSCS must stay
 * silent (the other thread's read finds this thread's section not yet
 * complete only through the deferred detection list).  Prints 600.  Exit 0. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#define NT 3
#define ITERS 200

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile long counter;

static void *worker(void *arg)
{
    for (int i = 0; i < ITERS; i++) {
        pthread_mutex_lock(&m);
        long tmp = counter; /* OSCS: read */
        sched_yield();
        counter = tmp + 1; /* OSCS: write */
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[NT];
    for (int i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    printf("counter: %ld\n", counter);
    return counter == NT * ITERS ? 0 : 1;
}
