/* drb_005_mutex_no: category SYN (critical section, after DRB's critical
 * kernels).  Three threads add into a shared sum under one mutex.  Race: no. */
#include <pthread.h>
#include <stdio.h>

#define NT 3

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long sum;

static void *worker(void *arg)
{
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&m);
        sum += i;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[NT];
    for (long i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    printf("sum: %ld\n", sum);
    return 0;
}
