/* drb_011_atomic_counter_no: category SYN (atomic update, after DRB's atomic
 * kernels).  Four threads increment a counter with atomic_fetch_add (lock
 * xadd).  Race: no. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#define NT 4

static atomic_long counter;

static void *worker(void *arg)
{
    for (int i = 0; i < 300; i++)
        atomic_fetch_add(&counter, 1);
    return NULL;
}

int main(void)
{
    pthread_t t[NT];
    for (int i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    printf("counter: %ld\n", (long)atomic_load(&counter));
    return 0;
}
