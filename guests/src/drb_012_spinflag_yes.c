/* drb_012_spinflag_yes: category SYN (ad-hoc synchronisation on a plain
 * volatile flag: a data race under C11, and the payload is not ordered
 * either).  Race: yes, the flag's store against its spinning load, and the
 * payload's store against its load. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

static volatile int flag;
static int payload;

static void *producer(void *arg)
{
    payload = 42; /* RACE: payload store */
    flag = 1; /* RACE: flag store */
    return NULL;
}

static void *consumer(void *arg)
{
    while (!flag) /* RACE: flag load */
        sched_yield();
    return (void *)(long)payload; /* RACE: payload load */
}

int main(void)
{
    pthread_t p, c;
    void *r;
    pthread_create(&c, NULL, consumer, NULL);
    pthread_create(&p, NULL, producer, NULL);
    pthread_join(c, &r);
    pthread_join(p, NULL);
    printf("payload: %ld\n", (long)r);
    return 0;
}
