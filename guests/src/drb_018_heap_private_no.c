/* drb_018_heap_private_no: category SH (private heap objects and allocator
 * reuse).  Each thread repeatedly mallocs, fills, sums and frees its own
 * buffers; main frees the results each thread returns.  Memory moves between
 * threads only through malloc/free and pthread_join.  Race: no. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NT 3

static void *worker(void *arg)
{
    long id = (long)arg, *res = malloc(sizeof *res);
    *res = 0;
    for (int round = 0; round < 20; round++) {
        int n = 8 + round;
        int *buf = malloc(n * sizeof *buf);
        for (int i = 0; i < n; i++)
            buf[i] = i + id;
        for (int i = 0; i < n; i++)
            *res += buf[i];
        free(buf);
    }
    return res;
}

int main(void)
{
    pthread_t t[NT];
    long total = 0;
    for (long i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NT; i++) {
        void *r;
        pthread_join(t[i], &r);
        total += *(long *)r;
        free(r);
    }
    printf("total: %ld\n", total);
    return 0;
}
