/* drb_016_nobarrier_yes: category EB (missing barrier: drb_015 without the
 * barrier between the phases).  Race: yes, a thread's write of its element
 * against its neighbour's read. */
#include <pthread.h>
#include <stdio.h>

#define NT 4

static pthread_barrier_t start; /* the workers run together */
static volatile long a[NT];
static long out[NT];

static void *worker(void *arg)
{
    long id = (long)arg;
    pthread_barrier_wait(&start);
    for (int round = 0; round < 3; round++) {
        a[id] = id * 10 + round; /* RACE: write own element */
        out[id] += a[(id + 1) % NT]; /* RACE: read neighbour's element */
    }
    return NULL;
}

int main(void)
{
    pthread_barrier_init(&start, NULL, NT);
    pthread_t t[NT];
    for (long i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    printf("done\n");
    return 0;
}
