/* drb_015_barrier_no: category EB (explicit barrier).  Phase 1: each thread
 * writes its element; barrier; phase 2: each reads its neighbour's.  Race:
 * no. */
#include <pthread.h>
#include <stdio.h>

#define NT 4

static pthread_barrier_t b;
static long a[NT], out[NT];

static void *worker(void *arg)
{
    long id = (long)arg;
    for (int round = 0; round < 3; round++) {
        a[id] = id * 10 + round;
        pthread_barrier_wait(&b);
        out[id] += a[(id + 1) % NT];
        pthread_barrier_wait(&b);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[NT];
    pthread_barrier_init(&b, NULL, NT);
    for (long i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    printf("%ld %ld %ld %ld\n", out[0], out[1], out[2], out[3]);
    return 0;
}
