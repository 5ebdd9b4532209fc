/* drb_017_heap_yes: category SH (shared heap object).  Main mallocs a
 * buffer and passes it to two threads, which both write its first element.
 * Race: yes, the two writes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_barrier_t start; /* the workers run together */

static void *worker(void *arg)
{
    long *p = arg;
    pthread_barrier_wait(&start);
    for (int i = 0; i < 100; i++)
        p[0] = p[1] + i; /* RACE: shared heap write */
    return NULL;
}

int main(void)
{
    pthread_barrier_init(&start, NULL, 2);
    long *p = calloc(8, sizeof *p);
    pthread_t a, b;
    pthread_create(&a, NULL, worker, p);
    pthread_create(&b, NULL, worker, p);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    free(p);
    printf("done\n");
    return 0;
}
