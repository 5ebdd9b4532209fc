/* drb_010_atomic_handoff_no: category SYN (C11 release/acquire handoff).  The
 * producer writes a payload and publishes it with a sequentially consistent
 * atomic store (an xchg on x86); the consumer spins with acquire loads (plain
 * movs) and then reads the payload.  Race: no. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>

#define N 16

static atomic_int ready;
static int payload[N];

static void *producer(void *arg)
{
    for (int i = 0; i < N; i++)
        payload[i] = 3 * i;
    atomic_store(&ready, 1);
    return NULL;
}

static void *consumer(void *arg)
{
    while (!atomic_load_explicit(&ready, memory_order_acquire))
        sched_yield();
    long s = 0;
    for (int i = 0; i < N; i++)
        s += payload[i];
    return (void *)s;
}

int main(void)
{
    pthread_t p, c;
    void *r;
    pthread_create(&c, NULL, consumer, NULL);
    pthread_create(&p, NULL, producer, NULL);
    pthread_join(c, &r);
    pthread_join(p, NULL);
    printf("sum: %ld\n", (long)r);
    return 0;
}
