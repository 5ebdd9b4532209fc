/* Which blocking calls a handled signal restarts, with and without SA_RESTART, as Linux decides
 * (arch/x86/kernel/signal.c on the call's -ERESTARTSYS, -ERESTARTNOHAND,
 * -ERESTART_RESTARTBLOCK): each call blocks in the main thread, a helper thread sends it SIGUSR1
 * after 30 ms, then 30 ms later makes the call able to complete (a byte written, a futex woken,
 * a connection made, a lock released). A restarted call completes; one that is not returns
 * EINTR. Covered: pipe read and write, eventfd read, wait4, flock, the classic futex wait
 * without and with a timeout (relative and absolute), futex2's futex_wait and futex_waitv with
 * and without one, nanosleep and clock_nanosleep, AF_UNIX recv and send and TCP accept without
 * and with SO_RCVTIMEO/SO_SNDTIMEO, poll, epoll_wait, select and sigtimedwait; then the socket
 * timeouts on their own (EAGAIN when they pass, Linux's rounding and errors, inherited by a TCP
 * connection from its listener and not by an AF_UNIX one). Everything
 * printed is the same on any Linux and under ferrite (no times). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_futex_wait
#define SYS_futex_wait 455
#endif
#ifndef SYS_futex_wake
#define SYS_futex_wake 454
#endif
#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#define FUTEX2_SIZE_U32 2
#define FUTEX2_PRIVATE 128

struct waitv {
    uint64_t val;
    uint64_t uaddr;
    uint32_t flags;
    uint32_t reserved;
};

static pthread_t main_thread;
static volatile sig_atomic_t handled;
static int fds[2], other_fd, child;
static uint32_t word;
static char lock_path[] = "/tmp/sig_restart_lockXXXXXX";
static struct sockaddr_in listen_addr;

static void on_usr1(int s) { (void)s; handled++; }

static void ms_sleep(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void *helper(void *arg) {
    void (*complete)(void) = (void (*)(void))arg;
    ms_sleep(30);
    pthread_kill(main_thread, SIGUSR1);
    ms_sleep(30);
    complete();
    return NULL;
}

static void run(const char *name, void (*setup)(void), long (*call)(void), void (*complete)(void),
                void (*cleanup)(void)) {
    for (int restart = 0; restart < 2; restart++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr1;
        sa.sa_flags = restart ? SA_RESTART : 0;
        sigaction(SIGUSR1, &sa, NULL);
        setup();
        handled = 0;
        pthread_t h;
        pthread_create(&h, NULL, helper, (void *)complete);
        errno = 0;
        long r = call();
        int e = errno;
        pthread_join(h, NULL);
        printf("%-36s %-12s %3ld %-6s handler %d\n", name, restart ? "SA_RESTART:" : "no restart:", r,
               r < 0 ? strerrorname_np(e) : "", (int)handled);
        cleanup();
    }
}

/* Pipes and eventfds. */
static void pipe_setup(void) { pipe(fds); }
static void pipes_close(void) { close(fds[0]); close(fds[1]); }
static long pipe_read(void) { char c; return read(fds[0], &c, 1); }
static void pipe_put(void) { write(fds[1], "x", 1); }
static void full_pipe_setup(void) {
    pipe(fds);
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
    char buf[4096] = {0};
    while (write(fds[1], buf, sizeof buf) > 0) {
    }
    fcntl(fds[1], F_SETFL, 0);
}
static long pipe_write(void) { return write(fds[1], "y", 1); }
static void pipe_drain(void) {
    char buf[4096];
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    while (read(fds[0], buf, sizeof buf) > 0) {
    }
}
static void efd_setup(void) { fds[0] = eventfd(0, 0); fds[1] = -1; }
static long efd_read(void) { uint64_t v; return read(fds[0], &v, 8); }
static void efd_put(void) { uint64_t v = 1; write(fds[0], &v, 8); }
static void efd_close(void) { close(fds[0]); }

/* wait4 on a child that exits once it reads a byte. */
static void child_setup(void) {
    pipe(fds);
    child = fork();
    if (child == 0) {
        char c;
        read(fds[0], &c, 1);
        _exit(7);
    }
}
static long child_wait(void) {
    int st;
    long r = wait4(child, &st, 0, NULL);
    return r == child ? WEXITSTATUS(st) : r;
}
static void child_cleanup(void) {
    pipes_close();
    int st;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
}

/* flock: the same file opened twice; the first description holds the lock. */
static void flock_setup(void) {
    fds[0] = open(lock_path, O_RDWR);
    fds[1] = open(lock_path, O_RDWR);
    flock(fds[0], LOCK_EX);
}
static long flock_call(void) { return flock(fds[1], LOCK_EX); }
static void flock_release(void) { flock(fds[0], LOCK_UN); }

/* Futexes: the word never changes, so a restarted wait is woken by the helper's wake. */
static void word_setup(void) { word = 0; }
static void nothing(void) {}
static void futex_wake_word(void) { syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }
static long futex_wait_plain(void) { return syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0); }
static long futex_wait_relative(void) {
    struct timespec ts = {20, 0};
    return syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
}
static struct timespec in_20s(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    ts.tv_sec += 20;
    return ts;
}
static long futex_wait_bitset_abs(void) {
    struct timespec ts = in_20s(CLOCK_MONOTONIC);
    return syscall(SYS_futex, &word, FUTEX_WAIT_BITSET_PRIVATE, 0, &ts, NULL, FUTEX_BITSET_MATCH_ANY);
}
static long futex2_wait_untimed(void) {
    return syscall(SYS_futex_wait, &word, 0, 0xffffffffUL, FUTEX2_SIZE_U32 | FUTEX2_PRIVATE, NULL, CLOCK_MONOTONIC);
}
static long futex2_wait_timed(void) {
    struct timespec ts = in_20s(CLOCK_MONOTONIC);
    return syscall(SYS_futex_wait, &word, 0, 0xffffffffUL, FUTEX2_SIZE_U32 | FUTEX2_PRIVATE, &ts, CLOCK_MONOTONIC);
}
static void futex2_wake_word(void) { syscall(SYS_futex_wake, &word, 0xffffffffUL, 1, FUTEX2_SIZE_U32 | FUTEX2_PRIVATE); }
static long futex_waitv_timed(void) {
    struct waitv w = {0, (uintptr_t)&word, FUTEX2_SIZE_U32 | FUTEX2_PRIVATE, 0};
    struct timespec ts = in_20s(CLOCK_MONOTONIC);
    return syscall(SYS_futex_waitv, &w, 1, 0, &ts, CLOCK_MONOTONIC);
}
static long futex_waitv_untimed(void) {
    struct waitv w = {0, (uintptr_t)&word, FUTEX2_SIZE_U32 | FUTEX2_PRIVATE, 0};
    return syscall(SYS_futex_waitv, &w, 1, 0, NULL, 0);
}

/* Sleeps: never restarted; a relative one tells how much was left. */
static long nanosleep_call(void) {
    struct timespec ts = {20, 0}, rem = {0, 0};
    long r = nanosleep(&ts, &rem);
    if (r < 0)
        printf("  nanosleep left more than 19 s: %d\n", rem.tv_sec >= 19);
    return r;
}
static long clock_nanosleep_abs(void) {
    struct timespec ts = in_20s(CLOCK_MONOTONIC);
    int r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    errno = r;
    return r ? -1 : 0;
}

/* Sockets: an AF_UNIX stream pair, and a TCP listener on loopback. */
static void pair_setup(void) { socketpair(AF_UNIX, SOCK_STREAM, 0, fds); }
static void set_timeout(int fd, int name) {
    struct timeval tv = {20, 0};
    setsockopt(fd, SOL_SOCKET, name, &tv, sizeof tv);
}
static void pair_setup_rcvtimeo(void) { pair_setup(); set_timeout(fds[0], SO_RCVTIMEO); }
static long sock_recv(void) { char c; return recv(fds[0], &c, 1, 0); }
static void full_pair_setup(void) {
    pair_setup();
    char buf[4096] = {0};
    while (send(fds[1], buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
}
static void full_pair_setup_sndtimeo(void) { full_pair_setup(); set_timeout(fds[1], SO_SNDTIMEO); }
static long sock_send(void) { return send(fds[1], "z", 1, 0); }
static void listener_setup(void) {
    fds[0] = socket(AF_INET, SOCK_STREAM, 0);
    memset(&listen_addr, 0, sizeof listen_addr);
    listen_addr.sin_family = AF_INET;
    listen_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fds[0], (struct sockaddr *)&listen_addr, sizeof listen_addr);
    socklen_t len = sizeof listen_addr;
    getsockname(fds[0], (struct sockaddr *)&listen_addr, &len);
    listen(fds[0], 4);
    fds[1] = -1;
    other_fd = -1;
}
static void listener_setup_rcvtimeo(void) { listener_setup(); set_timeout(fds[0], SO_RCVTIMEO); }
static long sock_accept(void) {
    int c = accept(fds[0], NULL, NULL);
    if (c >= 0) {
        close(c);
        return 0;
    }
    return -1;
}
static void sock_connect(void) {
    other_fd = socket(AF_INET, SOCK_STREAM, 0);
    connect(other_fd, (struct sockaddr *)&listen_addr, sizeof listen_addr);
}
static void listener_close(void) { close(fds[0]); close(other_fd); }

/* Waits on descriptors and for signals: EINTR whatever the flags. */
static long poll_call(void) {
    struct pollfd p = {fds[0], POLLIN, 0};
    return poll(&p, 1, -1);
}
static long poll_timed(void) {
    struct pollfd p = {fds[0], POLLIN, 0};
    return poll(&p, 1, 20000);
}
static long epoll_call(void) {
    int ep = epoll_create1(0);
    struct epoll_event ev = {EPOLLIN, {0}};
    epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev);
    long r = epoll_wait(ep, &ev, 1, -1);
    int e = errno;
    close(ep);
    errno = e;
    return r;
}
static long select_call(void) {
    fd_set s;
    FD_ZERO(&s);
    FD_SET(fds[0], &s);
    return select(fds[0] + 1, &s, NULL, NULL, NULL);
}
static long sigtimedwait_call(void) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR2);
    struct timespec ts = {20, 0};
    return sigtimedwait(&s, NULL, &ts);
}

/* Socket timeouts themselves: kept in whole jiffies (20 ms is whole at any HZ), EAGAIN when
 * they pass, a negative one never waits, Linux's errors. */
static void socket_timeouts(void) {
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    struct timeval tv = {0, 20000}, got = {-1, -1};
    socklen_t len = sizeof got;
    int r = setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    getsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &got, &len);
    printf("SO_RCVTIMEO set %d, read back %ld.%06ld (%u bytes)\n", r, (long)got.tv_sec, (long)got.tv_usec, len);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char c;
    long n = recv(sv[0], &c, 1, 0);
    int e = errno;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long waited = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    printf("recv with nothing to read: %ld %s, waited >= 20 ms: %d\n", n, strerrorname_np(e), waited >= 20);
    struct timeval neg = {-1, 0};
    setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &neg, sizeof neg);
    len = sizeof got;
    getsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &got, &len);
    n = recv(sv[0], &c, 1, 0);
    printf("a negative timeout: read back %ld.%06ld, recv %ld %s\n", (long)got.tv_sec, (long)got.tv_usec, n,
           strerrorname_np(errno));
    struct timeval bad = {1, 1000000};
    r = setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &bad, sizeof bad);
    printf("tv_usec of a second: %d %s\n", r, strerrorname_np(errno));
    r = setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, 8);
    printf("8 bytes of timeval: %d %s\n", r, strerrorname_np(errno));
    setsockopt(sv[1], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    long long half[2] = {-1, -1};
    len = 8;
    getsockopt(sv[1], SOL_SOCKET, SO_SNDTIMEO, half, &len);
    printf("SO_SNDTIMEO into 8 bytes: %lld, %u bytes, the rest untouched: %d\n", half[0], len, half[1] == -1);
    char buf[4096] = {0};
    while (send(sv[1], buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
    n = send(sv[1], buf, 1, 0);
    printf("send to a full socket: %ld %s\n", n, strerrorname_np(errno));
    close(sv[0]);
    close(sv[1]);
    listener_setup_rcvtimeo();
    struct timeval short_tv = {0, 20000};
    setsockopt(fds[0], SOL_SOCKET, SO_RCVTIMEO, &short_tv, sizeof short_tv);
    n = accept(fds[0], NULL, NULL);
    printf("accept with nobody connecting: %ld %s\n", n, strerrorname_np(errno));
    /* A TCP connection inherits its listener's timeouts (a copy of it); an AF_UNIX one not. */
    sock_connect();
    int a = accept(fds[0], NULL, NULL);
    got.tv_sec = got.tv_usec = -1;
    len = sizeof got;
    getsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &got, &len);
    printf("a TCP connection accepted: SO_RCVTIMEO %ld.%06ld\n", (long)got.tv_sec, (long)got.tv_usec);
    n = recv(a, &c, 1, 0);
    printf("  its recv with nothing to read: %ld %s\n", n, strerrorname_np(errno));
    close(a);
    listener_close();
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "%s.sock", lock_path);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    bind(l, (struct sockaddr *)&un, sizeof un);
    listen(l, 1);
    setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &short_tv, sizeof short_tv);
    int uc = socket(AF_UNIX, SOCK_STREAM, 0);
    connect(uc, (struct sockaddr *)&un, sizeof un);
    a = accept(l, NULL, NULL);
    got.tv_sec = got.tv_usec = -1;
    len = sizeof got;
    getsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &got, &len);
    printf("an AF_UNIX connection accepted: SO_RCVTIMEO %ld.%06ld\n", (long)got.tv_sec, (long)got.tv_usec);
    close(a);
    close(uc);
    close(l);
    unlink(un.sun_path);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    main_thread = pthread_self();
    int lf = mkstemp(lock_path);
    close(lf);
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, NULL);

    run("read of an empty pipe", pipe_setup, pipe_read, pipe_put, pipes_close);
    run("write to a full pipe", full_pipe_setup, pipe_write, pipe_drain, pipes_close);
    run("read of an eventfd", efd_setup, efd_read, efd_put, efd_close);
    run("wait4", child_setup, child_wait, pipe_put, child_cleanup);
    run("flock", flock_setup, flock_call, flock_release, pipes_close);
    run("FUTEX_WAIT", word_setup, futex_wait_plain, futex_wake_word, nothing);
    run("FUTEX_WAIT, relative timeout", word_setup, futex_wait_relative, futex_wake_word, nothing);
    run("FUTEX_WAIT_BITSET, absolute timeout", word_setup, futex_wait_bitset_abs, futex_wake_word, nothing);
    run("futex_wait", word_setup, futex2_wait_untimed, futex2_wake_word, nothing);
    run("futex_wait, timeout", word_setup, futex2_wait_timed, futex2_wake_word, nothing);
    run("futex_waitv", word_setup, futex_waitv_untimed, futex2_wake_word, nothing);
    run("futex_waitv, timeout", word_setup, futex_waitv_timed, futex2_wake_word, nothing);
    run("nanosleep", nothing, nanosleep_call, nothing, nothing);
    run("clock_nanosleep, absolute", nothing, clock_nanosleep_abs, nothing, nothing);
    run("recv", pair_setup, sock_recv, pipe_put, pipes_close);
    run("recv, SO_RCVTIMEO", pair_setup_rcvtimeo, sock_recv, pipe_put, pipes_close);
    run("send to a full socket", full_pair_setup, sock_send, pipe_drain, pipes_close);
    run("send to a full socket, SO_SNDTIMEO", full_pair_setup_sndtimeo, sock_send, pipe_drain, pipes_close);
    run("accept", listener_setup, sock_accept, sock_connect, listener_close);
    run("accept, SO_RCVTIMEO", listener_setup_rcvtimeo, sock_accept, sock_connect, listener_close);
    run("poll", pipe_setup, poll_call, pipe_put, pipes_close);
    run("poll, timeout", pipe_setup, poll_timed, pipe_put, pipes_close);
    run("epoll_wait", pipe_setup, epoll_call, pipe_put, pipes_close);
    run("select", pipe_setup, select_call, pipe_put, pipes_close);
    run("sigtimedwait", nothing, sigtimedwait_call, nothing, nothing);
    socket_timeouts();
    unlink(lock_path);
    return 0;
}
