/* drb_003_adjacent_no: category LD (false sharing, no race).  Four threads
 * each increment their own int of a 16-byte struct: all four share one
 * 16-byte granule but no byte.  Race: no. */
#include <pthread.h>
#include <stdio.h>

#define NT 4

static struct { volatile int c[NT]; } s __attribute__((aligned(16)));

static void *worker(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < 500; i++)
        s.c[id]++;
    return NULL;
}

int main(void)
{
    pthread_t t[NT];
    for (long i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    printf("%d %d %d %d\n", s.c[0], s.c[1], s.c[2], s.c[3]);
    return 0;
}
