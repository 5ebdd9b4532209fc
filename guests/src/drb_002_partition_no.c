/* drb_002_partition_no: category LD (data-parallel loop without dependence,
 * after DRB's *-orig-no loops).  Four threads each write and then read their
 * own quarter of an array; main sums it after joining.  Race: no. */
#include <pthread.h>
#include <stdio.h>

#define NT 4
#define N 256

static int a[N];

static void *worker(void *arg)
{
    long id = (long)arg;
    for (int i = id * (N / NT); i < (id + 1) * (N / NT); i++)
        a[i] = 2 * i;
    for (int i = id * (N / NT); i < (id + 1) * (N / NT); i++)
        a[i] += 1;
    return NULL;
}

int main(void)
{
    pthread_t t[NT];
    for (long i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    long sum = 0;
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++)
        sum += a[i];
    printf("sum: %ld\n", sum);
    return 0;
}
