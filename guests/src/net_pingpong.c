/* net_pingpong: a client thread and a server thread exchange N small messages over loopback
 * TCP (each a round trip), for the round-trip benchmark. Usage: net_pingpong [N] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static int listener;

static void *server(void *arg)
{
    int c = accept(listener, NULL, NULL);
    char buf[64];
    ssize_t n;
    while ((n = recv(c, buf, sizeof buf, 0)) > 0)
        send(c, buf, (size_t)n, 0);
    close(c);
    return NULL;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (bind(listener, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(listener, 1) != 0 ||
        getsockname(listener, (struct sockaddr *)&sa, &len) != 0)
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, server, NULL);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, (struct sockaddr *)&sa, sizeof sa) != 0)
        return 1;
    long ok = 0;
    char msg[32] = "ping", back[32];
    for (long i = 0; i < n; i++) {
        if (send(c, msg, 16, 0) != 16)
            break;
        ssize_t got = 0;
        while (got < 16) {
            ssize_t r = recv(c, back + got, (size_t)(16 - got), 0);
            if (r <= 0)
                break;
            got += r;
        }
        ok += got == 16;
    }
    close(c);
    pthread_join(t, NULL);
    printf("%ld round trips\n", ok);
    return ok != n;
}
