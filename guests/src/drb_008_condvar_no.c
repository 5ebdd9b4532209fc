/* drb_008_condvar_no: category SYN (wait/signal handoff).  The producer
 * fills a buffer without any lock, then sets a flag under the mutex and
 * signals; the consumer waits for the flag and reads the buffer after
 * unlocking.  The signal orders the writes before the reads.  Race: no. */
#include <pthread.h>
#include <stdio.h>

#define N 32

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready;
static int buf[N];

static void *producer(void *arg)
{
    for (int i = 0; i < N; i++)
        buf[i] = i * i;
    pthread_mutex_lock(&m);
    ready = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *consumer(void *arg)
{
    pthread_mutex_lock(&m);
    while (!ready)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
    long s = 0;
    for (int i = 0; i < N; i++)
        s += buf[i];
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
