/* drb_019_tls_no: category TS (thread-specific data, after DRB's
 * threadprivate kernels).  Each thread counts in a __thread variable and
 * stores its count in its own slot.  Race: no. */
#include <pthread.h>
#include <stdio.h>

#define NT 4

static __thread long tls_count;
static long result[NT];

static void *worker(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i <= id * 50; i++)
        tls_count++;
    result[id] = tls_count;
    return NULL;
}

int main(void)
{
    pthread_t t[NT];
    for (long i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    printf("%ld %ld %ld %ld\n", result[0], result[1], result[2], result[3]);
    return 0;
}
