/* Edge-triggered epoll (EPOLLET), EPOLLONESHOT and EPOLLEXCLUSIVE as Linux has them: an
 * edge-triggered entry is reported when something arrives for the side it watches (bytes written
 * into a pipe or socket, an eventfd raised, a connection queued, a hang-up), not while its
 * descriptor merely stays ready; a read that leaves bytes behind is no new edge for EPOLLIN; a
 * pipe's write end gets an EPOLLOUT edge when a read makes room in a full pipe; EPOLL_CTL_MOD
 * re-arms; EPOLLEXCLUSIVE is refused where Linux refuses it. A thread blocked in epoll_wait on an
 * edge-triggered entry is woken by the write. Every answer is printed; the output is the same
 * natively and under ferrite. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

static int ep;

/* Waits without blocking and prints what came back: the count and each event's mask and data. */
static void show(const char *what) {
    struct epoll_event ev[8];
    int n = epoll_wait(ep, ev, 8, 0);
    printf("%-44s %d", what, n);
    for (int i = 0; i < n; i++)
        printf(" [%s%s%s%s data %d]", ev[i].events & EPOLLIN ? "IN " : "", ev[i].events & EPOLLOUT ? "OUT " : "",
               ev[i].events & EPOLLHUP ? "HUP " : "", ev[i].events & EPOLLERR ? "ERR " : "", (int)ev[i].data.u32);
    printf("\n");
}

static int add(int fd, unsigned events, int data) {
    struct epoll_event e = {.events = events, .data.u32 = data};
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}

static int mod(int fd, unsigned events, int data) {
    struct epoll_event e = {.events = events, .data.u32 = data};
    return epoll_ctl(ep, EPOLL_CTL_MOD, fd, &e);
}

static void result(const char *what, int r) {
    printf("%-44s %d%s%s\n", what, r, r < 0 ? " " : "", r < 0 ? strerror(errno) : "");
}

static int blocked_ep, blocked_pipe[2];

static void *waiter(void *arg) {
    struct epoll_event ev;
    int n = epoll_wait(blocked_ep, &ev, 1, -1);
    char c;
    ssize_t r = read(blocked_pipe[0], &c, 1);
    printf("the blocked waiter woke with %d event(s), data %d, and read %zd byte '%c'\n", n, (int)ev.data.u32, r, c);
    return NULL;
}

int main(void) {
    char buf[4096];
    ep = epoll_create1(EPOLL_CLOEXEC);

    /* A pipe's read end, edge-triggered. */
    int p[2];
    pipe2(p, O_NONBLOCK);
    add(p[0], EPOLLIN | EPOLLET, 1);
    show("ET read end, empty:");
    write(p[1], "a", 1);
    show("after a write:");
    show("again, still readable:");
    write(p[1], "b", 1);
    show("after a second write:");
    read(p[0], buf, 1);
    show("after a read that leaves a byte:");
    mod(p[0], EPOLLIN | EPOLLET, 2);
    show("after EPOLL_CTL_MOD (ready, so queued):");
    read(p[0], buf, sizeof buf);
    printf("%-44s %zd %s\n", "read until EAGAIN:", read(p[0], buf, 1), strerror(errno));
    write(p[1], "c", 1);
    show("after a write into the drained pipe:");
    close(p[1]);
    show("after the writer closed:");
    show("again:");
    epoll_ctl(ep, EPOLL_CTL_DEL, p[0], NULL);
    close(p[0]);

    /* The same with level triggering, for contrast. */
    pipe2(p, O_NONBLOCK);
    add(p[0], EPOLLIN, 3);
    write(p[1], "a", 1);
    show("level-triggered, after a write:");
    show("again, still readable:");
    epoll_ctl(ep, EPOLL_CTL_DEL, p[0], NULL);

    /* A pipe's write end, edge-triggered: room made in a full pipe is the edge. */
    add(p[1], EPOLLOUT | EPOLLET, 4);
    show("ET write end, room:");
    show("again:");
    write(p[1], "b", 1);
    show("after a write (an edge for readers only):");
    read(p[0], buf, sizeof buf);
    memset(buf, 'x', sizeof buf);
    int filled = 0;
    while (write(p[1], buf, sizeof buf) > 0)
        filled++;
    printf("%-44s %d KiB, then %s\n", "filled the pipe:", filled * 4, strerror(errno));
    show("full:");
    read(p[0], buf, sizeof buf);
    show("after a read from the full pipe:");
    read(p[0], buf, sizeof buf);
    show("after another read:");
    epoll_ctl(ep, EPOLL_CTL_DEL, p[1], NULL);
    close(p[0]);
    close(p[1]);

    /* A socket pair, edge-triggered for both directions. */
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv);
    add(sv[0], EPOLLIN | EPOLLOUT | EPOLLET, 5);
    show("ET socket, writable:");
    show("again:");
    write(sv[1], "hello", 5);
    show("after the peer wrote:");
    show("again:");
    shutdown(sv[1], SHUT_WR);
    show("after the peer's shutdown(SHUT_WR):");
    epoll_ctl(ep, EPOLL_CTL_DEL, sv[0], NULL);
    close(sv[0]);
    close(sv[1]);

    /* An eventfd. */
    int efd = eventfd(0, EFD_NONBLOCK);
    add(efd, EPOLLIN | EPOLLET, 6);
    show("ET eventfd at 0:");
    eventfd_write(efd, 1);
    show("after a write:");
    show("again:");
    eventfd_write(efd, 2);
    show("after a second write:");
    eventfd_t v;
    eventfd_read(efd, &v);
    show("after a read (an edge for writers only):");
    epoll_ctl(ep, EPOLL_CTL_DEL, efd, NULL);

    /* A listening socket: each queued connection is an edge. */
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    bind(l, (struct sockaddr *)&a, sizeof a);
    listen(l, 8);
    getsockname(l, (struct sockaddr *)&a, &alen);
    add(l, EPOLLIN | EPOLLET, 7);
    show("ET listener, nobody connecting:");
    int c1 = socket(AF_INET, SOCK_STREAM, 0);
    connect(c1, (struct sockaddr *)&a, sizeof a);
    show("after a connection:");
    show("again, not accepted yet:");
    int c2 = socket(AF_INET, SOCK_STREAM, 0);
    connect(c2, (struct sockaddr *)&a, sizeof a);
    show("after a second connection:");
    close(c1);
    close(c2);
    close(l);

    /* EPOLLONESHOT: reported once, then disarmed until EPOLL_CTL_MOD. */
    add(efd, EPOLLIN | EPOLLONESHOT, 8);
    show("one-shot eventfd, readable:");
    eventfd_write(efd, 1);
    show("after another write, disarmed:");
    mod(efd, EPOLLIN | EPOLLONESHOT, 9);
    show("after EPOLL_CTL_MOD:");
    epoll_ctl(ep, EPOLL_CTL_DEL, efd, NULL);

    /* EPOLLEXCLUSIVE: only with EPOLL_CTL_ADD, only with IN/OUT/ERR/HUP/ET/WAKEUP, never on an
     * epoll set. */
    result("EPOLLEXCLUSIVE add:", add(efd, EPOLLIN | EPOLLEXCLUSIVE, 10));
    show("exclusive eventfd, readable:");
    result("EPOLL_CTL_MOD of an exclusive entry:", mod(efd, EPOLLIN, 10));
    result("EPOLL_CTL_MOD with EPOLLEXCLUSIVE:", mod(efd, EPOLLIN | EPOLLEXCLUSIVE, 10));
    int efd2 = eventfd(0, 0);
    result("EPOLLEXCLUSIVE with EPOLLONESHOT:", add(efd2, EPOLLIN | EPOLLEXCLUSIVE | EPOLLONESHOT, 11));
    result("EPOLLEXCLUSIVE with EPOLLRDHUP:", add(efd2, EPOLLIN | EPOLLEXCLUSIVE | EPOLLRDHUP, 11));
    int ep2 = epoll_create1(0);
    result("EPOLLEXCLUSIVE on an epoll set:", add(ep2, EPOLLIN | EPOLLEXCLUSIVE, 12));
    result("EPOLLEXCLUSIVE | EPOLLET | EPOLLOUT:", add(efd2, EPOLLOUT | EPOLLEXCLUSIVE | EPOLLET, 11));
    result("EPOLL_CTL_ADD of it again:", add(efd2, EPOLLOUT, 11));
    result("an unknown op:", epoll_ctl(ep, 7, efd2, &(struct epoll_event){0}));

    /* A thread blocked in epoll_wait on an edge-triggered entry is woken by a write. */
    blocked_ep = epoll_create1(0);
    pipe(blocked_pipe);
    struct epoll_event e = {.events = EPOLLIN | EPOLLET, .data.u32 = 13};
    epoll_ctl(blocked_ep, EPOLL_CTL_ADD, blocked_pipe[0], &e);
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    write(blocked_pipe[1], "z", 1);
    pthread_join(t, NULL);
    return 0;
}
