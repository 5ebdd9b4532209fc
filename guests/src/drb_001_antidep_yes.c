/* drb_001_antidep_yes: DataRaceBench category LD (loop-carried
 * anti-dependence, after DRB001 antidep1).  Two threads each update half of
 * an array with a[i] = a[i + 1] + 1; the last element of thread 0's half
 * reads the first element of thread 1's half, which thread 1 writes.
 * Race: yes, the read of a[i + 1] against the write of a[i] on one line. */
#include <pthread.h>
#include <stdio.h>

#define N 64

static pthread_barrier_t start; /* the workers run together */
static int a[N + 1];

static void *worker(void *arg)
{
    long id = (long)arg;
    pthread_barrier_wait(&start);
    for (int i = id * (N / 2); i < (id + 1) * (N / 2); i++)
        a[i] = a[i + 1] + 1; /* RACE: a[i] = a[i + 1] */
    return NULL;
}

int main(void)
{
    pthread_barrier_init(&start, NULL, 2);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("done\n");
    return 0;
}
