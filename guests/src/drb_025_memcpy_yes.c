/* drb_025_memcpy_yes: category LIB (a race through a library copy).  One
 * thread copies a message into a shared buffer with libc's memcpy (a
 * run-time size keeps the call), while the other reads the buffer's first
 * word.  Race: yes, the memcpy (attributed to its caller's line) against the
 * read. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static char src[256];
static char buf[256];
static volatile size_t len = sizeof buf;
static volatile long sink;
static pthread_barrier_t start;

static void *writer(void *arg)
{
    pthread_barrier_wait(&start);
    for (int i = 0; i < 10; i++)
        memcpy(buf, src, len); /* RACE: memcpy into buf */
    return NULL;
}

static void *reader(void *arg)
{
    pthread_barrier_wait(&start);
    for (int i = 0; i < 10; i++)
        sink += *(volatile long *)buf; /* RACE: read of buf */
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    memset(src, 'x', sizeof src);
    pthread_barrier_init(&start, NULL, 2);
    pthread_create(&a, NULL, writer, NULL);
    pthread_create(&b, NULL, reader, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("done\n");
    return 0;
}
