/* drb_009_semaphore_no: category SYN (semaphore handoff).  Ping-pong: each
 * thread writes the shared slot, posts the other's semaphore and waits on
 * its own.  Race: no. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>

static sem_t s0, s1;
static long slot;

static void *ping(void *arg)
{
    for (int i = 0; i < 50; i++) {
        sem_wait(&s0);
        slot = slot * 3 + 1;
        sem_post(&s1);
    }
    return NULL;
}

static void *pong(void *arg)
{
    for (int i = 0; i < 50; i++) {
        sem_wait(&s1);
        slot = slot % 1000003;
        sem_post(&s0);
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    sem_init(&s0, 0, 1);
    sem_init(&s1, 0, 0);
    pthread_create(&a, NULL, ping, NULL);
    pthread_create(&b, NULL, pong, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("slot: %ld\n", slot);
    return 0;
}
