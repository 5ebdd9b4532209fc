/* drb_025_memcpy_yes: category LIB (a race through a library copy).  One
 * thread memcpys a message into a shared buffer while the other reads the
 * buffer's first word.  Race: yes, the memcpy (attributed to its caller's
 * line) against the read. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static char src[8] = "abcdefg";
static char buf[8];
static volatile long sink;

static void *writer(void *arg)
{
    for (int i = 0; i < 20; i++)
        memcpy(buf, src, sizeof buf); /* RACE: memcpy into buf */
    return NULL;
}

static void *reader(void *arg)
{
    for (int i = 0; i < 20; i++)
        sink += *(volatile long *)buf; /* RACE: read of buf */
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, writer, NULL);
    pthread_create(&b, NULL, reader, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("done\n");
    return 0;
}
