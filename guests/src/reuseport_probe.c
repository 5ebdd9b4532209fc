// SO_REUSEPORT and the descriptor controls a pre-forking server (nginx's master and workers)
// uses: two listeners on one loopback port, each set SO_REUSEPORT before bind, share its
// connections (a third without the option is EADDRINUSE); the group outlives its first socket;
// FIOASYNC, FIOCLEX/FIONCLEX and F_SETOWN on a socket pair, as nginx sets up each worker's
// channel. What it prints is the same natively and under ferrite (where connections go among
// the listeners is the kernel's choice: only their sum is printed).
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int listener(int port, int reuse, int *err) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    if (reuse)
        setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 16)) {
        *err = errno;
        close(s);
        return -1;
    }
    *err = 0;
    return s;
}

static int port_of(int s) {
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &l);
    return ntohs(a.sin_port);
}

static int dial(int port) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c, (struct sockaddr *)&a, sizeof a)) {
        int e = errno;
        close(c);
        errno = e;
        return -1;
    }
    return c;
}

static int drain(int l) {
    int n = 0, a;
    while ((a = accept(l, 0, 0)) >= 0) {
        n++;
        close(a);
    }
    return n;
}

int main(int argc, char **argv) {
    int e;
    int a = listener(0, 1, &e);
    int port = port_of(a);
    int b = listener(port, 1, &e);
    printf("second SO_REUSEPORT listener: %s\n", b >= 0 ? "ok" : strerror(e));
    int c = listener(port, 0, &e);
    printf("third without SO_REUSEPORT: %s\n", c >= 0 ? "ok" : strerror(e));
    int plain = listener(0, 0, &e);
    int d = listener(port_of(plain), 1, &e);
    printf("SO_REUSEPORT on a port held without it: %s\n", d >= 0 ? "ok" : strerror(e));
    int conns[8];
    for (int i = 0; i < 8; i++)
        conns[i] = dial(port);
    int na = drain(a), nb = drain(b);
    printf("8 connections, accepted by the two: %d\n", na + nb);
    // The split is the kernel's choice (a hash of addresses and ports): shown only on request.
    if (argc > 1 && !strcmp(argv[1], "split"))
        printf("split: %d %d\n", na, nb);
    for (int i = 0; i < 8; i++)
        close(conns[i]);
    close(a);
    int k = dial(port);
    const char *how = k >= 0 ? "ok" : strerror(errno);
    printf("after the first closed, connect: %s, accepted by the second: %d\n", how, drain(b));
    close(k);
    close(b);
    k = dial(port);
    printf("after both closed: %s\n", k >= 0 ? "ok" : strerror(errno));

    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    int on = 1, r = ioctl(sv[0], FIOASYNC, &on);
    printf("FIOASYNC: %d, O_ASYNC: %d\n", r, !!(fcntl(sv[0], F_GETFL) & O_ASYNC));
    on = 0;
    r = ioctl(sv[0], FIOASYNC, &on);
    printf("FIOASYNC off: %d, O_ASYNC: %d\n", r, !!(fcntl(sv[0], F_GETFL) & O_ASYNC));
    printf("F_SETOWN: %d\n", fcntl(sv[0], F_SETOWN, getpid()));
    r = ioctl(sv[1], FIOCLEX);
    printf("FIOCLEX: %d, FD_CLOEXEC: %d\n", r, fcntl(sv[1], F_GETFD));
    r = ioctl(sv[1], FIONCLEX);
    printf("FIONCLEX: %d, FD_CLOEXEC: %d\n", r, fcntl(sv[1], F_GETFD));
    r = fcntl(99, F_SETOWN, getpid());
    printf("F_SETOWN on a closed descriptor: %d %s\n", r, strerror(errno));
    return 0;
}
