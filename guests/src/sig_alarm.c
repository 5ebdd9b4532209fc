/* Timers and signals that interrupt blocked calls, as Linux does them: alarm + pause,
 * a periodic setitimer counted by a busy loop and by pause, ITIMER_VIRTUAL, POSIX timers
 * (SIGEV_SIGNAL with si_value, overruns while the signal is blocked, glibc's SIGEV_THREAD),
 * sigtimedwait, a nanosleep and a sem_wait interrupted by pthread_kill from another thread
 * (with and without SA_RESTART), a read of an empty pipe interrupted, ppoll/pselect/epoll_pwait
 * whose mask lets a pending signal through, and SIGALRM's default action in a child.
 * Everything printed is the same on any Linux and under ferrite (no times, only facts about
 * them). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t alarms, usr1, usr2, vtalrms;
static volatile int last_code, last_value;

static void on_alrm(int s) { (void)s; alarms++; }
static void on_vtalrm(int s) { (void)s; vtalrms++; }
static void on_usr2(int s) { (void)s; usr2++; }
static void on_usr1_info(int s, siginfo_t *si, void *uc) {
    (void)s; (void)uc;
    usr1++;
    last_code = si->si_code;
    last_value = si->si_value.sival_int;
}

static void handle(int sig, void (*fn)(int), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

static void ms_sleep(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void alarm_and_pause(void) {
    handle(SIGALRM, on_alrm, 0);
    unsigned first = alarm(5);
    unsigned left = alarm(1);
    int r = pause();
    printf("alarm: first %u, left %u, pause %d %s, alarms %d\n", first, left, r, strerror(errno), (int)alarms);
}

static void itimer_periodic(void) {
    alarms = 0;
    struct itimerval it = {{0, 10000}, {0, 10000}};
    setitimer(ITIMER_REAL, &it, NULL);
    struct itimerval cur;
    getitimer(ITIMER_REAL, &cur);
    while (alarms < 3) {
        /* Busy: the timer must interrupt code that makes no system call. */
    }
    while (alarms < 6)
        pause();
    struct itimerval off = {{0, 0}, {0, 0}}, old;
    setitimer(ITIMER_REAL, &off, &old);
    getitimer(ITIMER_REAL, &cur);
    printf("itimer: %d alarms, interval was %ld us, armed %d, after disarm %ld.%06ld\n", (int)alarms,
           (long)old.it_interval.tv_usec, old.it_value.tv_sec > 0 || old.it_value.tv_usec > 0,
           (long)cur.it_value.tv_sec, (long)cur.it_value.tv_usec);
}

static void itimer_virtual(void) {
    handle(SIGVTALRM, on_vtalrm, 0);
    struct itimerval it = {{0, 0}, {0, 2000}};
    setitimer(ITIMER_VIRTUAL, &it, NULL);
    volatile unsigned long spin = 0;
    while (!vtalrms)
        spin++;
    printf("itimer virtual: fired %d after spinning\n", (int)vtalrms);
}

/* ITIMER_VIRTUAL counts the calling process's own CPU time: a child computing while the parent
 * waits for it does not make the parent's timer expire; the parent's own computing does. */
static void itimer_virtual_own_process(void) {
    handle(SIGVTALRM, on_vtalrm, 0);
    vtalrms = 0;
    struct itimerval it = {{0, 0}, {0, 3000}};
    setitimer(ITIMER_VIRTUAL, &it, NULL);
    pid_t pid = fork();
    if (pid == 0) {
        volatile unsigned long spin = 0;
        for (unsigned long i = 0; i < 5000000; i++)
            spin++;
        _exit(0);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    int during = vtalrms;
    volatile unsigned long spin = 0;
    while (!vtalrms)
        spin++;
    printf("itimer virtual: %d expiries while a child computed, %d after the parent's own\n", during,
           (int)vtalrms);
}

static void posix_signal_timer(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr1_info;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR1, &sa, NULL);
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGUSR1;
    ev.sigev_value.sival_int = 77;
    timer_t t;
    if (timer_create(CLOCK_MONOTONIC, &ev, &t) != 0) {
        printf("timer_create: %s\n", strerror(errno));
        return;
    }
    struct itimerspec its = {{0, 5000000}, {0, 5000000}};
    timer_settime(t, 0, &its, NULL);
    sigset_t none;
    sigemptyset(&none);
    while (usr1 < 3)
        sigsuspend(&none);
    struct itimerspec cur;
    timer_gettime(t, &cur);
    printf("posix timer: %d signals, SI_TIMER %d, value %d, interval %ld ns\n", (int)usr1, last_code == SI_TIMER,
           last_value, (long)cur.it_interval.tv_nsec);
    timer_delete(t);
    errno = 0;
    int r = timer_gettime(t, &cur);
    printf("after delete: %d %s\n", r, strerror(errno));
}

static void posix_overrun(void) {
    sigset_t s, old;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR2);
    sigprocmask(SIG_BLOCK, &s, &old);
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGUSR2;
    timer_t t;
    timer_create(CLOCK_REALTIME, &ev, &t);
    struct itimerspec its = {{0, 1000000}, {0, 1000000}};
    timer_settime(t, 0, &its, NULL);
    ms_sleep(30);
    siginfo_t si;
    int sig = sigwaitinfo(&s, &si);
    int over = timer_getoverrun(t);
    printf("overrun: sig %d, si_overrun >= 10 %d, getoverrun matches %d\n", sig, si.si_overrun >= 10,
           over == si.si_overrun);
    timer_delete(t);
    struct timespec tmo = {0, 20000000};
    errno = 0;
    int r = sigtimedwait(&s, &si, &tmo);
    printf("sigtimedwait nothing pending: %d %s\n", r, strerror(errno));
    sigprocmask(SIG_SETMASK, &old, NULL);
}

static sem_t callbacks;
static volatile int cb_value;
static void on_timer_thread(union sigval v) {
    cb_value = v.sival_int;
    sem_post(&callbacks);
}

static void posix_thread_timer(void) {
    sem_init(&callbacks, 0, 0);
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD;
    ev.sigev_notify_function = on_timer_thread;
    ev.sigev_value.sival_int = 42;
    timer_t t;
    if (timer_create(CLOCK_MONOTONIC, &ev, &t) != 0) {
        printf("timer_create SIGEV_THREAD: %s\n", strerror(errno));
        return;
    }
    struct itimerspec its = {{0, 20000000}, {0, 20000000}};
    timer_settime(t, 0, &its, NULL);
    for (int i = 0; i < 3; i++)
        while (sem_wait(&callbacks) != 0) {
        }
    timer_delete(t);
    printf("SIGEV_THREAD: 3 callbacks, value %d\n", cb_value);
}

static volatile int phase;
static sem_t never;
static int pipefd[2];

static void *sleeper(void *arg) {
    (void)arg;
    struct timespec req = {10, 0}, rem = {0, 0};
    int r = nanosleep(&req, &rem);
    int e = errno;
    printf("nanosleep interrupted: %d %s, rem between 9 and 10 s: %d\n", r, strerror(e),
           rem.tv_sec == 9 || (rem.tv_sec == 10 && rem.tv_nsec == 0));
    r = sem_wait(&never);
    e = errno;
    printf("sem_wait without SA_RESTART: %d %s\n", r, strerror(e));
    r = sem_wait(&never);
    printf("sem_wait with SA_RESTART: %d after the post\n", r);
    char c;
    ssize_t n = read(pipefd[0], &c, 1);
    e = errno;
    printf("read of an empty pipe: %zd %s\n", n, strerror(e));
    return NULL;
}

static void interrupted_by_pthread_kill(void) {
    usr2 = 0;
    handle(SIGUSR2, on_usr2, 0);
    sem_init(&never, 0, 0);
    if (pipe(pipefd) != 0)
        return;
    pthread_t th;
    pthread_create(&th, NULL, sleeper, NULL);
    ms_sleep(100);
    pthread_kill(th, SIGUSR2); /* the nanosleep */
    ms_sleep(100);
    pthread_kill(th, SIGUSR2); /* the first sem_wait */
    ms_sleep(100);
    handle(SIGUSR2, on_usr2, SA_RESTART);
    pthread_kill(th, SIGUSR2); /* the second sem_wait: restarted */
    ms_sleep(100);
    sem_post(&never);
    ms_sleep(100);
    handle(SIGUSR2, on_usr2, 0);
    pthread_kill(th, SIGUSR2); /* the read */
    pthread_join(th, NULL);
    printf("handler ran %d times\n", (int)usr2);
    close(pipefd[0]);
    close(pipefd[1]);
}

static void masks_of_waits(void) {
    handle(SIGUSR2, on_usr2, 0);
    sigset_t s, empty, now;
    sigemptyset(&s);
    sigemptyset(&empty);
    sigaddset(&s, SIGUSR2);
    sigprocmask(SIG_BLOCK, &s, NULL);

    usr2 = 0;
    raise(SIGUSR2);
    int before = usr2;
    struct timespec tmo = {1, 0};
    int r = ppoll(NULL, 0, &tmo, &empty);
    int e = errno;
    sigprocmask(SIG_BLOCK, NULL, &now);
    printf("ppoll: pending while blocked ran %d, ppoll %d %s, handler %d, blocked after %d\n", before, r, strerror(e),
           (int)usr2, sigismember(&now, SIGUSR2));

    usr2 = 0;
    raise(SIGUSR2);
    r = pselect(0, NULL, NULL, NULL, &tmo, &empty);
    e = errno;
    sigprocmask(SIG_BLOCK, NULL, &now);
    printf("pselect: %d %s, handler %d, blocked after %d\n", r, strerror(e), (int)usr2, sigismember(&now, SIGUSR2));

    usr2 = 0;
    raise(SIGUSR2);
    int ep = epoll_create1(0);
    struct epoll_event ev;
    r = epoll_pwait(ep, &ev, 1, 1000, &empty);
    e = errno;
    sigprocmask(SIG_BLOCK, NULL, &now);
    printf("epoll_pwait: %d %s, handler %d, blocked after %d\n", r, strerror(e), (int)usr2,
           sigismember(&now, SIGUSR2));

    /* A mask that keeps blocking it: the wait times out, the signal stays pending. */
    usr2 = 0;
    raise(SIGUSR2);
    struct timespec short_tmo = {0, 10000000};
    r = ppoll(NULL, 0, &short_tmo, &s);
    sigset_t pend;
    sigpending(&pend);
    printf("ppoll keeping it blocked: %d, handler %d, pending %d\n", r, (int)usr2, sigismember(&pend, SIGUSR2));
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    printf("unblocked: handler %d\n", (int)usr2);
    close(ep);
}

static void default_action_in_child(void) {
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        signal(SIGALRM, SIG_DFL);
        alarm(1);
        for (;;)
            pause();
    }
    int st;
    waitpid(p, &st, 0);
    printf("child: signalled %d, by SIGALRM %d\n", WIFSIGNALED(st), WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm_and_pause();
    itimer_periodic();
    itimer_virtual();
    itimer_virtual_own_process();
    posix_signal_timer();
    posix_overrun();
    posix_thread_timer();
    interrupted_by_pthread_kill();
    masks_of_waits();
    default_action_in_child();
    return 0;
}
