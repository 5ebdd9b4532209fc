/* net_deadlock: two threads each block reading what nobody will ever write (a pipe whose write
 * end the reader holds itself, a socketpair whose other end nobody writes). Natively it hangs;
 * ferrite reports a deadlock at both reads. */
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

static int sv[2];

static void *reader(void *arg)
{
    char c;
    ssize_t n = read(sv[0], &c, 1); /* BLOCKED SOCKET */
    printf("socket read %zd\n", n);
    return NULL;
}

int main(void)
{
    int p[2];
    if (pipe(p) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    printf("reading what nobody writes\n");
    fflush(stdout);
    pthread_t t;
    pthread_create(&t, NULL, reader, NULL);
    char c;
    ssize_t n = read(p[0], &c, 1); /* BLOCKED PIPE */
    printf("pipe read %zd\n", n);
    pthread_join(t, NULL);
    return 0;
}
