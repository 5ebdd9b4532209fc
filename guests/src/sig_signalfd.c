// signalfd(2) with epoll, compared with the native run: a signalfd reads blocked signals as
// struct signalfd_siginfo (kill and tgkill to itself, a timer's SIGALRM, a child's SIGCHLD and a
// child's kill of its parent), is readable in poll and epoll when one is pending, blocks a read
// until one arrives, takes a new mask, and gives the errors man 2 signalfd lists.
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;

static void check(const char *what, int ok) {
    printf("%s: %s\n", what, ok ? "ok" : "FAILED");
    failures += !ok;
}

static const char *err_name(int e) {
    switch (e) {
    case EAGAIN: return "EAGAIN";
    case EINVAL: return "EINVAL";
    case EBADF: return "EBADF";
    case EFAULT: return "EFAULT";
    default: return strerror(e);
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGUSR1);
    sigaddset(&mask, SIGUSR2);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGALRM);
    sigaddset(&mask, SIGTERM);
    sigprocmask(SIG_BLOCK, &mask, NULL);

    int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    check("signalfd", sfd >= 0);
    struct signalfd_siginfo si[4];

    // Errors.
    errno = 0;
    printf("read with nothing pending: %s\n", read(sfd, si, sizeof si) < 0 ? err_name(errno) : "data");
    printf("read of 100 bytes: %s\n", read(sfd, si, 100) < 0 ? err_name(errno) : "data");
    printf("bad flags: %s\n", signalfd(-1, &mask, 0x1234) < 0 ? err_name(errno) : "fd");
    printf("sizemask 4: %s\n", syscall(SYS_signalfd4, -1, &mask, 4, 0) < 0 ? err_name(errno) : "fd");
    int pfd[2];
    pipe(pfd);
    printf("not a signalfd: %s\n", signalfd(pfd[0], &mask, 0) < 0 ? err_name(errno) : "fd");
    printf("not open: %s\n", signalfd(99, &mask, 0) < 0 ? err_name(errno) : "fd");
    printf("bad mask pointer: %s\n", syscall(SYS_signalfd4, -1, (void *)8, 8, 0) < 0 ? err_name(errno) : "fd");
    printf("write: %s\n", write(sfd, si, sizeof si[0]) < 0 ? err_name(errno) : "wrote");

    // kill and tgkill to itself: both pending (not delivered, not fatal), both read at once.
    kill(getpid(), SIGUSR1);
    raise(SIGUSR2);
    struct pollfd p = {.fd = sfd, .events = POLLIN};
    check("poll sees a pending signal", poll(&p, 1, 0) == 1 && (p.revents & POLLIN));
    ssize_t n = read(sfd, si, sizeof si);
    printf("read %zd bytes\n", n);
    for (int i = 0; i < n / (ssize_t)sizeof si[0]; i++)
        printf("  signal %u code %d from self %d uid ok %d\n", si[i].ssi_signo, si[i].ssi_code,
               si[i].ssi_pid == (unsigned)getpid(), si[i].ssi_uid == getuid());
    check("taken: nothing pending", read(sfd, si, sizeof si) < 0 && errno == EAGAIN);

    // An epoll event loop: a timer's SIGALRM, then a child's SIGCHLD.
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 7};
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
    struct itimerval it = {.it_value = {.tv_usec = 20000}};
    setitimer(ITIMER_REAL, &it, NULL);
    struct epoll_event got;
    int k = epoll_wait(ep, &got, 1, 5000);
    check("epoll_wait wakes for SIGALRM", k == 1 && got.data.u32 == 7);
    n = read(sfd, si, sizeof si);
    printf("timer: %zd bytes, signal %u\n", n, si[0].ssi_signo);

    pid_t child = fork();
    if (child == 0)
        _exit(5);
    k = epoll_wait(ep, &got, 1, 5000);
    check("epoll_wait wakes for SIGCHLD", k == 1);
    n = read(sfd, si, sizeof si);
    printf("child: signal %u code %d status %d pid ok %d\n", si[0].ssi_signo, si[0].ssi_code, si[0].ssi_status,
           si[0].ssi_pid == (unsigned)child);
    int st;
    check("child reaped", waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 5);

    // A blocking read waits until a child's kill arrives (SIGTERM, whose default is fatal,
    // blocked: pending, not fatal).
    int bfd = signalfd(-1, &mask, 0);
    child = fork();
    if (child == 0) {
        kill(getppid(), SIGTERM);
        _exit(0);
    }
    n = read(bfd, si, sizeof si[0]);
    printf("blocking read: %zd bytes, signal %u from child %d\n", n, si[0].ssi_signo, si[0].ssi_pid == (unsigned)child);
    waitpid(child, &st, 0);
    // Its SIGCHLD may or may not be pending yet: take it if it is.
    while (read(sfd, si, sizeof si) > 0)
        ;

    // A new mask: SIGUSR1 is no longer read (it stays pending), SIGUSR2 is.
    sigset_t only2;
    sigemptyset(&only2);
    sigaddset(&only2, SIGUSR2);
    sigaddset(&only2, SIGKILL); // dropped silently
    check("re-mask returns the same fd", signalfd(sfd, &only2, 0) == sfd);
    kill(getpid(), SIGUSR1);
    check("masked out: EAGAIN", read(sfd, si, sizeof si) < 0 && errno == EAGAIN);
    check("masked out: not readable", poll(&p, 1, 0) == 0);
    kill(getpid(), SIGUSR2);
    n = read(sfd, si, sizeof si);
    printf("after re-mask: %zd bytes, signal %u\n", n, si[0].ssi_signo);
    sigset_t pend;
    sigpending(&pend);
    check("SIGUSR1 still pending", sigismember(&pend, SIGUSR1));
    // The other descriptor still reads it.
    n = read(bfd, si, sizeof si);
    printf("other fd: %zd bytes, signal %u\n", n, si[0].ssi_signo);
    sigpending(&pend);
    check("nothing pending", !sigismember(&pend, SIGUSR1));

    printf("failures: %d\n", failures);
    return failures != 0;
}
