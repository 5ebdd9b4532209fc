/* drb_020_tls_escape_yes: category TS (a thread-local variable escapes).
 * Thread 0 publishes the address of its __thread counter before a barrier;
 * after the barrier both threads update the counter, thread 1 through the
 * pointer.  Race: yes, thread 0's update against thread 1's. */
#include <pthread.h>
#include <stdio.h>

static __thread volatile long tls_count;
static volatile long *volatile escaped;
static pthread_barrier_t b;

static void *owner(void *arg)
{
    escaped = &tls_count;
    pthread_barrier_wait(&b);
    for (int i = 0; i < 100; i++)
        tls_count++; /* RACE: owner's update */
    pthread_barrier_wait(&b);
    return NULL;
}

static void *intruder(void *arg)
{
    pthread_barrier_wait(&b);
    volatile long *p = escaped;
    for (int i = 0; i < 100; i++)
        (*p)++; /* RACE: update through the escaped pointer */
    pthread_barrier_wait(&b);
    return NULL;
}

int main(void)
{
    pthread_t a, c;
    pthread_barrier_init(&b, NULL, 2);
    pthread_create(&a, NULL, owner, NULL);
    pthread_create(&c, NULL, intruder, NULL);
    pthread_join(a, NULL);
    pthread_join(c, NULL);
    printf("done\n");
    return 0;
}
