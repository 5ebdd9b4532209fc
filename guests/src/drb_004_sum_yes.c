/* drb_004_sum_yes: category LD (reduction without a reduction, after DRB's
 * sum/plusplus kernels).  Three threads add their slice into a shared sum
 * with no synchronisation.  Race: yes, the read-modify-write of sum. */
#include <pthread.h>
#include <stdio.h>

#define NT 3
#define N 96

static pthread_barrier_t start; /* the workers run together */
static int a[N];
static volatile long sum;

static void *worker(void *arg)
{
    long id = (long)arg;
    pthread_barrier_wait(&start);
    for (int i = id * (N / NT); i < (id + 1) * (N / NT); i++)
        sum += a[i]; /* RACE: sum += a[i] */
    return NULL;
}

int main(void)
{
    pthread_barrier_init(&start, NULL, NT);
    pthread_t t[NT];
    for (int i = 0; i < N; i++)
        a[i] = 1;
    for (long i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    printf("done\n");
    return 0;
}
