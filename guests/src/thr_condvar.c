/* thr_condvar: producer/consumer over a bounded queue (capacity 8) protected
 * by one mutex and two condition variables (not_full / not_empty).  2
 * producers put the items 1..1000 (producer p: p*500+1 .. p*500+500); 2
 * consumers take them until all 1000 are consumed.  pthread_cond_wait and
 * pthread_cond_signal on every put/take; pthread_cond_broadcast when the last
 * item is consumed (wakes the other consumer so it can finish).  Prints the
 * number and sum of consumed items and whether every item was consumed exactly
 * once (per-consumer counts are schedule-dependent and NOT printed).
 * Output is deterministic.  Exit status 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP 8
#define NPROD 2
#define NCONS 2
#define NITEMS 1000
#define PER_PROD (NITEMS / NPROD)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static int queue[CAP];
static int head, count;
static int consumed;      /* items taken so far (under mu) */
static long sum;          /* sum of taken items (under mu) */
static int seen[NITEMS + 1];
static int max_fill;

#define CK(call)                                                              \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != 0) {                                                       \
            fprintf(stderr, "%s failed: %s\n", #call, strerror(rc_));         \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static void *producer(void *arg)
{
    int p = (int)(long)arg;
    for (int i = 1; i <= PER_PROD; i++) {
        int item = p * PER_PROD + i;
        CK(pthread_mutex_lock(&mu));
        while (count == CAP)
            CK(pthread_cond_wait(&not_full, &mu));
        queue[(head + count) % CAP] = item;
        count++;
        if (count > max_fill)
            max_fill = count;
        CK(pthread_cond_signal(&not_empty));
        CK(pthread_mutex_unlock(&mu));
    }
    return NULL;
}

static void *consumer(void *arg)
{
    CK(pthread_mutex_lock(&mu));
    for (;;) {
        while (count == 0 && consumed < NITEMS)
            CK(pthread_cond_wait(&not_empty, &mu));
        if (consumed == NITEMS)
            break;
        int item = queue[head];
        head = (head + 1) % CAP;
        count--;
        consumed++;
        sum += item;
        if (item >= 1 && item <= NITEMS)
            seen[item]++;
        CK(pthread_cond_signal(&not_full));
        if (consumed == NITEMS) {
            CK(pthread_cond_broadcast(&not_empty)); /* release the other consumer */
            break;
        }
    }
    CK(pthread_mutex_unlock(&mu));
    return NULL;
}

int main(void)
{
    pthread_t prod[NPROD], cons[NCONS];
    for (long i = 0; i < NCONS; i++)
        CK(pthread_create(&cons[i], NULL, consumer, (void *)i));
    for (long i = 0; i < NPROD; i++)
        CK(pthread_create(&prod[i], NULL, producer, (void *)i));
    for (int i = 0; i < NPROD; i++)
        CK(pthread_join(prod[i], NULL));
    for (int i = 0; i < NCONS; i++)
        CK(pthread_join(cons[i], NULL));

    int once = 1;
    for (int i = 1; i <= NITEMS; i++)
        if (seen[i] != 1)
            once = 0;
    printf("producers: %d, consumers: %d, capacity: %d\n", NPROD, NCONS, CAP);
    printf("consumed: %d\n", consumed);
    printf("sum: %ld (expected %ld)\n", sum, (long)NITEMS * (NITEMS + 1) / 2);
    printf("each item exactly once: %s\n", once ? "yes" : "no");
    printf("queue left: %d\n", count);
    printf("queue bound respected: %s\n", max_fill <= CAP ? "yes" : "no");
    int ok = consumed == NITEMS && sum == (long)NITEMS * (NITEMS + 1) / 2 && once && count == 0;
    printf("result: %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
