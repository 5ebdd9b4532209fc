/* os_condflag: the OSCS paper's main false positive (Section 5.3, Radix
 * slave_sort, Figure 12): a flag set under a mutex and waited on with a
 * condition variable.  The consumer reads `ready` in a critical section and
 * waits while it is 0; the producer sets it in another and broadcasts.  The
 * flag is ad-hoc ordering, but OSCS sees two unordered sections without
 * read-write sequences: reported by default (an expected false positive),
 * silent with `--analyses oscs:condflag=on`.  Prints the value handed over
 * (always 7).  Exit 0. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready, value;

static void *consumer(void *arg)
{
    pthread_mutex_lock(&m);
    while (!ready) /* OSCS: wait on flag */
        pthread_cond_wait(&cv, &m);
    int v = value;
    pthread_mutex_unlock(&m);
    return (void *)(long)v;
}

static void *producer(void *arg)
{
    pthread_mutex_lock(&m);
    value = 7;
    ready = 1; /* OSCS: set flag */
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    pthread_t c, p;
    void *r;
    pthread_create(&c, NULL, consumer, NULL);
    pthread_create(&p, NULL, producer, NULL);
    pthread_join(c, &r);
    pthread_join(p, NULL);
    printf("value: %ld\n", (long)r);
    return 0;
}
