// sigqueue(3) and real-time signal queues, compared with the native run: queued instances of a
// real-time signal each keep their si_value and arrive in the order sent, a standard signal is
// pending once however often it is sent, sigtimedwait takes the lowest-numbered first, a
// SA_SIGINFO handler and a signalfd see si_value, rt_tgsigqueueinfo reaches a thread, and
// rt_sigqueueinfo refuses a kernel code for another process (EPERM).
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile int handled_value = -1, handled_code, handled_count;

static void on_rt(int sig, siginfo_t *si, void *ctx) {
    handled_value = si->si_value.sival_int;
    handled_code = si->si_code;
    handled_count++;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    int rt = SIGRTMIN;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, rt);
    sigaddset(&set, rt + 2);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);

    // Three instances of SIGRTMIN and SIGRTMIN+2, two of SIGUSR1 (pending once).
    for (int i = 1; i <= 3; i++) {
        sigqueue(getpid(), rt + 2, (union sigval){.sival_int = 200 + i});
        sigqueue(getpid(), rt, (union sigval){.sival_int = 100 + i});
    }
    sigqueue(getpid(), SIGUSR1, (union sigval){.sival_int = 1});
    sigqueue(getpid(), SIGUSR1, (union sigval){.sival_int = 2});
    struct timespec zero = {0, 0};
    siginfo_t si;
    int sig;
    while ((sig = sigtimedwait(&set, &si, &zero)) > 0)
        printf("sigtimedwait: %s%d code %d value %d from self %d\n", sig >= rt ? "SIGRTMIN+" : "signal ",
               sig >= rt ? sig - rt : sig, si.si_code, si.si_value.sival_int, si.si_pid == getpid());
    printf("then: %s\n", errno == EAGAIN ? "EAGAIN" : strerror(errno));

    // A signalfd reads queued instances with their values.
    int sfd = signalfd(-1, &set, SFD_NONBLOCK);
    sigqueue(getpid(), rt, (union sigval){.sival_int = 7});
    sigqueue(getpid(), rt, (union sigval){.sival_int = 8});
    struct signalfd_siginfo ssi[4];
    ssize_t n = read(sfd, ssi, sizeof ssi);
    for (int i = 0; i < n / (ssize_t)sizeof ssi[0]; i++)
        printf("signalfd: SIGRTMIN+%d code %d int %d ptr %llu\n", (int)ssi[i].ssi_signo - rt, ssi[i].ssi_code,
               ssi[i].ssi_int, (unsigned long long)ssi[i].ssi_ptr);

    // A handler with SA_SIGINFO gets the value (sent to itself: delivered when the call returns).
    struct sigaction sa = {.sa_sigaction = on_rt, .sa_flags = SA_SIGINFO};
    sigaction(rt + 1, &sa, NULL);
    sigqueue(getpid(), rt + 1, (union sigval){.sival_int = 4242});
    printf("handler: count %d value %d code %d\n", handled_count, handled_value, handled_code);

    // rt_tgsigqueueinfo to the calling thread, with a code of the caller's.
    siginfo_t q;
    memset(&q, 0, sizeof q);
    q.si_code = SI_QUEUE;
    q.si_pid = getpid();
    q.si_uid = getuid();
    q.si_value.sival_int = 99;
    long r = syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), rt + 1, &q);
    printf("rt_tgsigqueueinfo: %ld, handler count %d value %d\n", r, handled_count, handled_value);

    // A kernel code (SI_USER) for another process: EPERM.
    q.si_code = SI_USER;
    r = syscall(SYS_rt_sigqueueinfo, getppid(), SIGUSR2, &q);
    printf("SI_USER to another process: %s\n", r < 0 && errno == EPERM ? "EPERM" : "sent");

    // RLIMIT_SIGPENDING: sigqueue fails with EAGAIN once that many signals are queued (the
    // user's, every process's); kill's SI_USER is still sent; SIG_IGN discards the queue.
    struct rlimit rl = {16, 16};
    if (setrlimit(RLIMIT_SIGPENDING, &rl) != 0)
        perror("setrlimit");
    struct rlimit up = {16, 17};
    printf("raising the hard limit: %s\n", setrlimit(RLIMIT_SIGPENDING, &up) == 0 ? "ok" : strerror(errno));
    sigset_t b;
    sigemptyset(&b);
    sigaddset(&b, rt + 5);
    sigprocmask(SIG_BLOCK, &b, NULL);
    int queued = 0;
    while (queued < 100 && sigqueue(getpid(), rt + 5, (union sigval){.sival_int = queued}) == 0)
        queued++;
    int e = errno;
    // Natively the count is the user's, so another process of the user with a signal queued
    // makes it less: the exact count goes to standard error.
    printf("RLIMIT_SIGPENDING 16: at most 16 queued, then %s\n",
           queued > 0 && queued <= 16 ? (e == EAGAIN ? "EAGAIN" : strerror(e)) : "no limit");
    fprintf(stderr, "sig_queue: %d signals queued under RLIMIT_SIGPENDING 16\n", queued);
    printf("kill beyond it: %d\n", kill(getpid(), rt + 5));
    signal(rt + 5, SIG_IGN);
    sigset_t p;
    sigpending(&p);
    sigaddset(&b, rt + 6);
    sigprocmask(SIG_BLOCK, &b, NULL);
    int again = sigqueue(getpid(), rt + 6, (union sigval){.sival_int = 0}) == 0;
    printf("after SIG_IGN: pending %d, sigqueue %d\n", sigismember(&p, rt + 5), again);
    signal(rt + 6, SIG_IGN);
    return 0;
}
