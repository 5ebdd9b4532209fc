/* drb_023_offbyone_yes: category OOB (a loop bound one too far, after DRB's
 * out-of-bounds kernels).  Each thread initialises its chunk of an array but
 * writes one element past its end, into the next thread's chunk.  Race: yes,
 * the overflowing write against the neighbour's write of its first
 * element (a start barrier makes the threads run together). */
#include <pthread.h>
#include <stdio.h>

#define NT 2
#define CHUNK 32

static volatile int a[NT * CHUNK + 1];
static pthread_barrier_t start;

static void *worker(void *arg)
{
    long id = (long)arg;
    pthread_barrier_wait(&start);
    for (int i = id * CHUNK; i <= (id + 1) * CHUNK; i++)
        a[i] = (int)id; /* RACE: chunk write one past the end */
    return NULL;
}

int main(void)
{
    pthread_t t[NT];
    pthread_barrier_init(&start, NULL, NT);
    for (long i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    printf("done\n");
    return 0;
}
