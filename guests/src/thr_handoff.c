/* thr_handoff: a producer hands ITEMS items (default 100) to a consumer through a one-slot
 * mailbox guarded by a mutex and two condition variables, after a stretch of single-threaded
 * set-up work of SETUP rounds (default 2000); the consumer sums them. Race-free. The shape of a
 * pipeline stage: dynamic partial-order reduction asks for alternatives at the hand-offs all
 * along a run, far from where the second thread starts. Usage: thr_handoff [ITEMS [SETUP]];
 * prints the sum and exits 0 (1 if it is wrong, 2 on a bad argument). tests/snapshots.rs
 * measures exploration from snapshots on it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t filled = PTHREAD_COND_INITIALIZER;
static pthread_cond_t emptied = PTHREAD_COND_INITIALIZER;
static int full, slot, items;
static long sum;

static void *consumer(void *arg)
{
    for (int i = 0; i < items; i++) {
        pthread_mutex_lock(&mu);
        while (!full)
            pthread_cond_wait(&filled, &mu);
        sum += slot;
        full = 0;
        pthread_cond_signal(&emptied);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    items = argc > 1 ? atoi(argv[1]) : 100;
    long setup = argc > 2 ? atol(argv[2]) : 2000;
    if (items < 0 || setup < 0) {
        fprintf(stderr, "usage: thr_handoff [ITEMS [SETUP]]\n");
        return 2;
    }
    /* Set-up: a table the items come from, mixed for a while. */
    static unsigned table[256];
    for (long r = 0; r < setup; r++)
        table[r & 255] = table[(r * 7) & 255] * 2654435761u + (unsigned)r;
    pthread_t t;
    pthread_create(&t, NULL, consumer, NULL);
    long want = 0;
    for (int i = 1; i <= items; i++) {
        int v = i + (int)(table[i & 255] & 1);
        want += v;
        pthread_mutex_lock(&mu);
        while (full)
            pthread_cond_wait(&emptied, &mu);
        slot = v;
        full = 1;
        pthread_cond_signal(&filled);
        pthread_mutex_unlock(&mu);
    }
    pthread_join(t, NULL);
    printf("sum: %ld of %d items\n", sum, items);
    return sum == want ? 0 : 1;
}
