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
    return 0;
}
