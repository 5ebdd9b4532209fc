/* net_workout: pipes, sockets, poll, epoll and eventfds between threads of one process. Every
 * line it prints is the same natively and under ferrite (ports and timings are not printed), so
 * tests/net.rs compares the two. Usage: net_workout (in a scratch directory: it binds ./sock). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

static int failures;
#define CHECK(c)                                                   \
    do {                                                           \
        if (!(c)) {                                                \
            printf("FAILED line %d: %s (%s)\n", __LINE__, #c, strerror(errno)); \
            failures++;                                            \
        }                                                          \
    } while (0)

/* Writes all of buf, as a blocking write to a pipe or socket may be short. */
static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads exactly len bytes (or up to end of file): how many. */
static size_t read_full(int fd, void *buf, size_t len)
{
    char *p = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, p + got, len - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return got;
}

/* 1. A pipe between threads, more than it holds at once: the writer blocks until the reader drains. */
#define PIPE_BYTES 300000
static void *pipe_writer(void *arg)
{
    int fd = *(int *)arg;
    static unsigned char chunk[10000];
    for (int i = 0; i < PIPE_BYTES / 10000; i++) {
        for (int k = 0; k < 10000; k++)
            chunk[k] = (unsigned char)(i + k);
        CHECK(write_all(fd, chunk, sizeof chunk) == 0);
    }
    close(fd);
    return NULL;
}

static void pipe_handoff(void)
{
    int p[2];
    CHECK(pipe(p) == 0);
    pthread_t t;
    pthread_create(&t, NULL, pipe_writer, &p[1]);
    unsigned long sum = 0, total = 0;
    unsigned char buf[4096];
    ssize_t n;
    while ((n = read(p[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++)
            sum += buf[i];
        total += (unsigned long)n;
    }
    pthread_join(t, NULL);
    close(p[0]);
    printf("pipe: %lu bytes, sum %lu, end %zd\n", total, sum, n);
}

/* 2. socketpair ping-pong. */
static void *pong(void *arg)
{
    int fd = *(int *)arg;
    int v;
    while (read_full(fd, &v, sizeof v) == sizeof v) {
        v += 1;
        CHECK(write_all(fd, &v, sizeof v) == 0);
    }
    close(fd);
    return NULL;
}

static void socketpair_pingpong(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pthread_t t;
    pthread_create(&t, NULL, pong, &sv[1]);
    int v = 0;
    for (int i = 0; i < 500; i++) {
        CHECK(write_all(sv[0], &v, sizeof v) == 0);
        CHECK(read_full(sv[0], &v, sizeof v) == sizeof v);
    }
    shutdown(sv[0], SHUT_WR);
    char c;
    ssize_t eof = read(sv[0], &c, 1);
    pthread_join(t, NULL);
    close(sv[0]);
    printf("socketpair: %d round trips, then end of file %zd\n", v, eof);

    int dg[2];
    CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, dg) == 0);
    CHECK(send(dg[0], "one", 3, 0) == 3);
    CHECK(send(dg[0], "three", 5, 0) == 5);
    char b[16] = {0};
    ssize_t a = recv(dg[1], b, 2, 0);
    ssize_t c2 = recv(dg[1], b + 2, sizeof b - 3, 0);
    printf("dgram pair: %zd then %zd: %s\n", a, c2, b);
    ssize_t none = recv(dg[1], b, sizeof b, MSG_DONTWAIT);
    printf("dgram pair empty: %zd %s\n", none, strerrorname_np(errno));
    close(dg[0]);
    close(dg[1]);
}

/* 3 and 4. A listener and an echo server thread; the client sends lines and reads them back. */
struct server {
    int lfd;
    int lines;
};

static void *echo_server(void *arg)
{
    struct server *s = arg;
    int c = accept(s->lfd, NULL, NULL);
    CHECK(c >= 0);
    char buf[256];
    ssize_t n;
    while ((n = read(c, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++)
            s->lines += buf[i] == '\n';
        CHECK(write_all(c, buf, (size_t)n) == 0);
    }
    close(c);
    return NULL;
}

static void echo_client(const char *what, int domain, struct sockaddr *addr, socklen_t len, int lfd)
{
    struct server s = {lfd, 0};
    pthread_t t;
    pthread_create(&t, NULL, echo_server, &s);
    int c = socket(domain, SOCK_STREAM, 0);
    CHECK(c >= 0);
    CHECK(connect(c, addr, len) == 0);
    int one = 1;
    if (domain != AF_UNIX)
        CHECK(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);
    char line[64], back[64];
    int same = 0;
    for (int i = 0; i < 100; i++) {
        int n = snprintf(line, sizeof line, "line %d of the echo test\n", i);
        CHECK(write_all(c, line, (size_t)n) == 0);
        CHECK(read_full(c, back, (size_t)n) == (size_t)n);
        same += memcmp(line, back, (size_t)n) == 0;
    }
    struct sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    CHECK(getpeername(c, (struct sockaddr *)&peer, &plen) == 0);
    int peer_ok = plen == len || (domain == AF_UNIX && plen <= len);
    if (domain == AF_INET)
        peer_ok = ((struct sockaddr_in *)&peer)->sin_port == ((struct sockaddr_in *)addr)->sin_port;
    if (domain == AF_INET6)
        peer_ok = ((struct sockaddr_in6 *)&peer)->sin6_port == ((struct sockaddr_in6 *)addr)->sin6_port;
    shutdown(c, SHUT_WR);
    char x;
    ssize_t eof = read(c, &x, 1);
    pthread_join(t, NULL);
    close(c);
    printf("%s: %d lines echoed, server counted %d, peer name %s, end %zd\n", what, same, s.lines,
           peer_ok ? "right" : "wrong", eof);
}

static void unix_and_tcp(void)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    strcpy(sun.sun_path, "sock");
    unlink("sock");
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(bind(l, (struct sockaddr *)&sun, sizeof sun) == 0);
    CHECK(listen(l, 8) == 0);
    int again = socket(AF_UNIX, SOCK_STREAM, 0);
    int br = bind(again, (struct sockaddr *)&sun, sizeof sun);
    printf("bind taken path: %d %s\n", br, strerrorname_np(errno));
    close(again);
    echo_client("unix path", AF_UNIX, (struct sockaddr *)&sun, sizeof sun, l);
    close(l);
    unlink("sock");

    struct sockaddr_un abs = {.sun_family = AF_UNIX};
    memcpy(abs.sun_path, "\0ferrite-net-workout", 20);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 20);
    l = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(bind(l, (struct sockaddr *)&abs, alen) == 0);
    CHECK(listen(l, 8) == 0);
    echo_client("unix abstract", AF_UNIX, (struct sockaddr *)&abs, alen, l);
    close(l);

    l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    CHECK(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(bind(l, (struct sockaddr *)&sin, sizeof sin) == 0);
    socklen_t slen = sizeof sin;
    CHECK(getsockname(l, (struct sockaddr *)&sin, &slen) == 0);
    printf("tcp: bound to an ephemeral port: %s\n", ntohs(sin.sin_port) >= 1024 ? "yes" : "no");
    CHECK(listen(l, 8) == 0);
    int v = 0;
    socklen_t vl = sizeof v;
    CHECK(getsockopt(l, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) == 0);
    printf("tcp: SO_ACCEPTCONN %d\n", v);
    echo_client("tcp", AF_INET, (struct sockaddr *)&sin, sizeof sin, l);
    close(l);
    int r = socket(AF_INET, SOCK_STREAM, 0);
    int cr = connect(r, (struct sockaddr *)&sin, sizeof sin);
    printf("tcp: connect to the closed port: %d %s\n", cr, strerrorname_np(errno));
    close(r);

    l = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    CHECK(bind(l, (struct sockaddr *)&s6, sizeof s6) == 0);
    slen = sizeof s6;
    CHECK(getsockname(l, (struct sockaddr *)&s6, &slen) == 0);
    CHECK(listen(l, 8) == 0);
    echo_client("tcp6", AF_INET6, (struct sockaddr *)&s6, sizeof s6, l);
    close(l);
}

/* 5. UDP on loopback. */
static void udp(void)
{
    int a = socket(AF_INET, SOCK_DGRAM, 0), b = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(bind(a, (struct sockaddr *)&sa, sizeof sa) == 0);
    socklen_t l = sizeof sa;
    CHECK(getsockname(a, (struct sockaddr *)&sa, &l) == 0);
    CHECK(sendto(b, "datagram one", 12, 0, (struct sockaddr *)&sa, sizeof sa) == 12);
    CHECK(sendto(b, "two", 3, 0, (struct sockaddr *)&sa, sizeof sa) == 3);
    struct sockaddr_in from, bname;
    socklen_t fl = sizeof from, bl = sizeof bname;
    char buf[64] = {0};
    ssize_t n = recvfrom(a, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
    CHECK(getsockname(b, (struct sockaddr *)&bname, &bl) == 0);
    printf("udp: %zd bytes \"%s\" from the sender's port: %s\n", n, buf,
           from.sin_port == bname.sin_port ? "yes" : "no");
    memset(buf, 0, sizeof buf);
    struct iovec iov = {buf, 2};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    n = recvmsg(a, &mh, 0);
    printf("udp: recvmsg %zd \"%s\" truncated %d\n", n, buf, (mh.msg_flags & MSG_TRUNC) != 0);
    n = recv(a, buf, sizeof buf, MSG_DONTWAIT);
    printf("udp: empty %zd %s\n", n, strerrorname_np(errno));
    close(a);
    close(b);
}

/* 6. poll, epoll, eventfd, select. */
static int efd;
static void *bump(void *arg)
{
    uint64_t one = 1;
    for (int i = 0; i < 5; i++)
        CHECK(write(efd, &one, sizeof one) == 8);
    return NULL;
}

static void multiplexing(void)
{
    int p[2];
    CHECK(pipe2(p, O_NONBLOCK) == 0);
    char c;
    ssize_t n = read(p[0], &c, 1);
    printf("nonblocking pipe: %zd %s\n", n, strerrorname_np(errno));
    struct pollfd pf[2] = {{p[0], POLLIN, 0}, {p[1], POLLOUT, 0}};
    int pr = poll(pf, 2, 10);
    printf("poll: %d ready, in %d out %d\n", pr, pf[0].revents, pf[1].revents);
    pf[1].fd = -1;
    pr = poll(pf, 1, 5);
    printf("poll empty pipe, 5 ms: %d\n", pr);
    CHECK(write(p[1], "x", 1) == 1);
    pr = poll(pf, 1, -1);
    printf("poll after a write: %d, in %d\n", pr, pf[0].revents);
    close(p[1]);
    CHECK(read(p[0], &c, 1) == 1);
    pr = poll(pf, 1, 0);
    printf("poll after the writer closed: %d, revents %#x\n", pr, pf[0].revents);
    close(p[0]);

    efd = eventfd(0, EFD_CLOEXEC);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0x1234};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) == 0);
    int er = epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
    printf("epoll_ctl add again: %d %s\n", er, strerrorname_np(errno));
    int ep2 = dup(ep);
    er = epoll_ctl(ep, EPOLL_CTL_ADD, ep2, &ev);
    printf("epoll_ctl add itself: %d %s\n", er, strerrorname_np(errno));
    close(ep2);
    struct epoll_event out[4];
    printf("epoll_wait nothing, 1 ms: %d\n", epoll_wait(ep, out, 4, 1));
    pthread_t t;
    pthread_create(&t, NULL, bump, NULL);
    int got = epoll_wait(ep, out, 4, -1);
    printf("epoll_wait: %d event, data %#llx, EPOLLIN %d\n", got, (unsigned long long)out[0].data.u64,
           (out[0].events & EPOLLIN) != 0);
    pthread_join(t, NULL);
    uint64_t v;
    CHECK(read(efd, &v, 8) == 8);
    printf("eventfd: %llu\n", (unsigned long long)v);
    printf("epoll_wait drained, 0 ms: %d\n", epoll_wait(ep, out, 4, 0));
    close(ep);
    close(efd);

    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fd_set rd, wr;
    FD_ZERO(&rd);
    FD_ZERO(&wr);
    FD_SET(sv[0], &rd);
    FD_SET(sv[1], &wr);
    struct timeval tv = {0, 1000};
    int r = select(sv[1] + 1, &rd, &wr, NULL, &tv);
    printf("select: %d, readable %d, writable %d\n", r, FD_ISSET(sv[0], &rd), FD_ISSET(sv[1], &wr));
    int on = 1;
    CHECK(ioctl(sv[0], FIONBIO, &on) == 0);
    n = read(sv[0], &c, 1);
    printf("read after FIONBIO: %zd %s\n", n, strerrorname_np(errno));
    on = 0;
    CHECK(ioctl(sv[0], FIONBIO, &on) == 0);
    n = recv(sv[0], &c, 1, MSG_DONTWAIT);
    printf("recv MSG_DONTWAIT: %zd %s\n", n, strerrorname_np(errno));
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(bind(l, (struct sockaddr *)&sa, sizeof sa) == 0);
    CHECK(listen(l, 1) == 0);
    int ar = accept(l, NULL, NULL);
    printf("accept nonblocking: %d %s\n", ar, strerrorname_np(errno));
    close(l);
    close(sv[0]);
    close(sv[1]);
}

/* 7. timerfds: a one-shot read blocks until it expires; a periodic one wakes epoll_wait. */
static void timers(void)
{
    int t = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec its = {.it_value = {0, 5 * 1000 * 1000}};
    CHECK(timerfd_settime(t, 0, &its, NULL) == 0);
    struct itimerspec cur;
    CHECK(timerfd_gettime(t, &cur) == 0);
    printf("timerfd armed: %d\n", cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec > 0);
    uint64_t ticks = 0;
    ssize_t n = read(t, &ticks, sizeof ticks);
    CHECK(timerfd_gettime(t, &cur) == 0);
    printf("timerfd one-shot: read %zd, %llu expiration, then disarmed %d\n", n, (unsigned long long)ticks,
           cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec == 0);
    close(t);

    t = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    n = read(t, &ticks, sizeof ticks);
    printf("timerfd disarmed, nonblocking: %zd %s\n", n, strerrorname_np(errno));
    struct itimerspec per = {.it_interval = {0, 1000 * 1000}, .it_value = {0, 1000 * 1000}};
    CHECK(timerfd_settime(t, 0, &per, NULL) == 0);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 7};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, t, &ev) == 0);
    struct epoll_event out;
    int got = 0;
    for (int i = 0; i < 3; i++) {
        if (epoll_wait(ep, &out, 1, -1) == 1 && out.data.u32 == 7 && read(t, &ticks, sizeof ticks) == 8 && ticks >= 1)
            got++;
    }
    printf("timerfd periodic through epoll: %d of 3\n", got);
    close(ep);
    close(t);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    pipe_handoff();
    socketpair_pingpong();
    unix_and_tcp();
    udp();
    multiplexing();
    timers();
    printf("failures: %d\n", failures);
    return failures != 0;
}
