/* drb_024_stack_no: category ST (thread stacks and stack reuse).  Two
 * batches of threads work on arrays on their own stacks; the second batch
 * is created after the first is joined, so glibc reuses the cached stacks
 * of the first.  Race: no. */
#include <pthread.h>
#include <stdio.h>

#define NT 3

static void *worker(void *arg)
{
    volatile long local[64];
    long id = (long)arg, s = 0;
    for (int i = 0; i < 64; i++)
        local[i] = i * id;
    for (int i = 0; i < 64; i++)
        s += local[i];
    return (void *)s;
}

int main(void)
{
    long total = 0;
    for (int batch = 0; batch < 2; batch++) {
        pthread_t t[NT];
        for (long i = 0; i < NT; i++)
            pthread_create(&t[i], NULL, worker, (void *)(i + batch));
        for (int i = 0; i < NT; i++) {
            void *r;
            pthread_join(t[i], &r);
            total += (long)r;
        }
    }
    printf("total: %ld\n", total);
    return 0;
}
