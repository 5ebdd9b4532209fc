/* POSIX timers on CPU-time clocks other than the process's own: CLOCK_THREAD_CPUTIME_ID, another
 * thread's pthread_getcpuclockid clock, a child process's clock_getcpuclockid clock, and Linux's
 * errors for clock ids a timer cannot use. Prints only what holds natively and under ferrite
 * whatever the machine's speed (Linux looks at CPU timers at its ticks, so counts are ranges). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static void burn(long n) {
    uint64_t x = sink;
    for (long i = 0; i < n; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
}

static long long cpu_ns(clockid_t c) {
    struct timespec t;
    if (clock_gettime(c, &t) != 0)
        return -1;
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Linux's encodings (kernel/time/posix-cpu-timers.h). */
#define CPUCLOCK_SCHED 2
#define MAKE_PROCESS_CPUCLOCK(pid, clock) ((int)((~(unsigned)(pid)) << 3) | (clock))
#define MAKE_THREAD_CPUCLOCK(tid, clock) (MAKE_PROCESS_CPUCLOCK(tid, clock) | 4)

static timer_t make(clockid_t clock, int notify, int signo, pid_t tid, int value, int *error) {
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = notify;
    ev.sigev_signo = signo;
    ev.sigev_value.sival_int = value;
    ev._sigev_un._tid = tid;
    int id = -1;
    long r = syscall(SYS_timer_create, clock, &ev, &id);
    *error = r == 0 ? 0 : errno;
    return (timer_t)(intptr_t)id;
}

static int settime(timer_t t, long long value_ns, long long interval_ns) {
    struct itimerspec its = {{interval_ns / 1000000000, interval_ns % 1000000000},
                             {value_ns / 1000000000, value_ns % 1000000000}};
    return syscall(SYS_timer_settime, (long)(intptr_t)t, 0, &its, NULL) == 0 ? 0 : errno;
}

static long long remaining(timer_t t, long long *interval) {
    struct itimerspec cur;
    memset(&cur, 0xff, sizeof cur);
    if (syscall(SYS_timer_gettime, (long)(intptr_t)t, &cur) != 0)
        return -errno;
    if (interval)
        *interval = cur.it_interval.tv_sec * 1000000000LL + cur.it_interval.tv_nsec;
    return cur.it_value.tv_sec * 1000000000LL + cur.it_value.tv_nsec;
}

static int delete(timer_t t) { return syscall(SYS_timer_delete, (long)(intptr_t)t) == 0 ? 0 : errno; }

static int overrun(timer_t t) { return syscall(SYS_timer_getoverrun, (long)(intptr_t)t); }

static __thread volatile int own_expiries;
static __thread volatile int own_overruns;

static void on_usr1(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)uc;
    own_expiries++;
    own_overruns += si->si_overrun;
}

/* A thread's timer on its own CPU clock, its signal to itself: periodic every 5 ms of the
 * thread's CPU time while it computes 50 ms; a second thread computes at the same time and its
 * time does not count. */
struct own {
    int expiries, overruns, error;
    long long cpu;
};

static void *own_clock(void *arg) {
    struct own *o = arg;
    int e;
    timer_t t = make(CLOCK_THREAD_CPUTIME_ID, SIGEV_THREAD_ID, SIGUSR1, gettid(), 5, &e);
    o->error = e;
    if (e)
        return NULL;
    settime(t, 5000000, 5000000);
    while (cpu_ns(CLOCK_THREAD_CPUTIME_ID) < 50000000)
        burn(10000);
    settime(t, 0, 0);
    o->cpu = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
    o->expiries = own_expiries;
    o->overruns = own_overruns;
    delete(t);
    return NULL;
}

static volatile int stop_burning;

static void *burner(void *arg) {
    (void)arg;
    while (!stop_burning)
        burn(10000);
    return NULL;
}

static void thread_clock_of_its_own(void) {
    pthread_t a, b;
    struct own o = {0};
    stop_burning = 0;
    pthread_create(&b, NULL, burner, NULL);
    pthread_create(&a, NULL, own_clock, &o);
    pthread_join(a, NULL);
    stop_burning = 1;
    pthread_join(b, NULL);
    if (o.error) {
        printf("own thread clock: timer_create: %s\n", strerror(o.error));
        return;
    }
    int total = o.expiries + o.overruns;
    printf("own thread clock: 5 ms periods over 50 ms of its CPU time: between 7 and 11 expiries: %s\n",
           total >= 7 && total <= 11 ? "yes" : "no");
}

/* The main thread's own CPU clock does not advance while it waits for a thread that computes. */
static void thread_clock_stands_while_waiting(void) {
    int e;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    timer_t t = make(CLOCK_THREAD_CPUTIME_ID, SIGEV_THREAD_ID, SIGUSR2, gettid(), 0, &e);
    if (e) {
        printf("waiting thread: timer_create: %s\n", strerror(e));
        return;
    }
    settime(t, 20000000, 0);
    long long before = remaining(t, NULL);
    stop_burning = 0;
    pthread_t b;
    pthread_create(&b, NULL, burner, NULL);
    struct timespec wait = {0, 100000000};
    nanosleep(&wait, NULL); /* the burner computes about 100 ms meanwhile */
    stop_burning = 1;
    pthread_join(b, NULL);
    long long after = remaining(t, NULL);
    sigset_t pending;
    sigpending(&pending);
    printf("waiting thread: armed %s, expired while it waited: %s, still more than 10 ms left: %s\n",
           before > 0 && before <= 20000000 ? "yes" : "no", sigismember(&pending, SIGUSR2) ? "yes" : "no",
           after > 10000000 ? "yes" : "no");
    /* Its own computing does expire it. */
    struct timespec zero = {0, 0};
    siginfo_t si;
    int got;
    while ((got = sigtimedwait(&set, &si, &zero)) < 0)
        burn(10000);
    printf("waiting thread: after its own computing: signal %s, SI_TIMER %s\n", got == SIGUSR2 ? "SIGUSR2" : "?",
           si.si_code == SI_TIMER ? "yes" : "no");
    delete(t);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

/* A timer on another thread's clock (pthread_getcpuclockid), its signal to the main thread;
 * once that thread is gone the timer reads disarmed and cannot be set. */
static int gate[2];

static void *compute_then_end(void *arg) {
    (void)arg;
    char x;
    if (read(gate[0], &x, 1) != 1)
        return NULL;
    while (cpu_ns(CLOCK_THREAD_CPUTIME_ID) < 40000000)
        burn(10000);
    return NULL;
}

static void another_threads_clock(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    /* The thread waits for its start until the timer is armed. */
    if (pipe(gate) != 0)
        return;
    pthread_t w;
    pthread_create(&w, NULL, compute_then_end, NULL);
    clockid_t wc;
    pthread_getcpuclockid(w, &wc);
    int e;
    timer_t t = make(wc, SIGEV_THREAD_ID, SIGUSR2, gettid(), 31, &e);
    if (e) {
        printf("another thread's clock: timer_create: %s\n", strerror(e));
        close(gate[1]);
        pthread_join(w, NULL);
        return;
    }
    settime(t, 10000000, 10000000);
    if (write(gate[1], "g", 1) != 1)
        return;
    siginfo_t si;
    int got = sigwaitinfo(&set, &si);
    printf("another thread's clock: signal %s to the waiting thread, value %d, SI_TIMER %s\n",
           got == SIGUSR2 ? "SIGUSR2" : "?", si.si_value.sival_int, si.si_code == SI_TIMER ? "yes" : "no");
    pthread_join(w, NULL);
    struct timespec settle = {0, 20000000};
    nanosleep(&settle, NULL);
    /* Whatever expired meanwhile is taken. */
    struct timespec zero = {0, 0};
    while (sigtimedwait(&set, &si, &zero) > 0)
        ;
    long long interval = -1;
    long long left = remaining(t, &interval);
    int err_set = settime(t, 10000000, 0);
    printf("another thread's clock, the thread gone: reads %lld/%lld, settime %s, delete %s\n", left, interval,
           err_set ? strerror(err_set) : "ok", delete(t) == 0 ? "ok" : "failed");
    close(gate[0]);
    close(gate[1]);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

/* A child process's CPU clock: the parent's timer fires as the child computes. */
static void child_process_clock(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    int go[2];
    if (pipe(go) != 0)
        return;
    pid_t c = fork();
    if (c == 0) {
        char x;
        if (read(go[0], &x, 1) != 1)
            _exit(1);
        while (cpu_ns(CLOCK_PROCESS_CPUTIME_ID) < 60000000)
            burn(10000);
        _exit(0);
    }
    clockid_t cc;
    clock_getcpuclockid(c, &cc);
    int e;
    timer_t t = make(cc, SIGEV_SIGNAL, SIGUSR2, 0, 44, &e);
    if (e) {
        printf("child's clock: timer_create: %s\n", strerror(e));
    } else {
        settime(t, 20000000, 0);
    }
    if (write(go[1], "g", 1) != 1)
        return;
    siginfo_t si;
    int got = e ? 0 : sigwaitinfo(&set, &si);
    int st;
    waitpid(c, &st, 0);
    if (!e) {
        printf("child's clock: parent got %s, value %d\n", got == SIGUSR2 ? "SIGUSR2" : "?", si.si_value.sival_int);
        int err_set = settime(t, 10000000, 0);
        printf("child's clock, the child reaped: settime %s\n", err_set ? strerror(err_set) : "ok");
        delete(t);
    }
    close(go[0]);
    close(go[1]);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static void errors(void) {
    pid_t c = fork();
    if (c == 0) {
        pause();
        _exit(0);
    }
    int e;
    struct {
        const char *what;
        clockid_t clock;
    } cases[] = {
        {"another process's thread clock", MAKE_THREAD_CPUCLOCK(c, CPUCLOCK_SCHED)},
        {"another process's process clock", MAKE_PROCESS_CPUCLOCK(c, CPUCLOCK_SCHED)},
        {"own thread clock by tid", MAKE_THREAD_CPUCLOCK(gettid(), CPUCLOCK_SCHED)},
        {"own thread clock, pid 0", MAKE_THREAD_CPUCLOCK(0, CPUCLOCK_SCHED)},
        {"own process clock, pid 0, PROF", MAKE_PROCESS_CPUCLOCK(0, 0)},
        {"a fourth kind of CPU clock", MAKE_PROCESS_CPUCLOCK(0, 3)},
        {"no such process", MAKE_PROCESS_CPUCLOCK(999999, CPUCLOCK_SCHED)},
        {"CLOCK_MONOTONIC_RAW", CLOCK_MONOTONIC_RAW},
        {"CLOCK_REALTIME_COARSE", CLOCK_REALTIME_COARSE},
        {"clock 12", 12},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        timer_t t = make(cases[i].clock, SIGEV_NONE, 0, 0, 0, &e);
        struct timespec ts;
        long g = syscall(SYS_clock_gettime, cases[i].clock, &ts);
        int ge = g == 0 ? 0 : errno;
        printf("errors: %s: timer_create %s, clock_gettime %s\n", cases[i].what, e ? strerror(e) : "ok",
               ge ? strerror(ge) : "ok");
        if (!e)
            delete(t);
    }
    struct timespec req = {0, 1000};
    long r = syscall(SYS_clock_nanosleep, CLOCK_THREAD_CPUTIME_ID, 0, &req, NULL);
    printf("errors: clock_nanosleep on CLOCK_THREAD_CPUTIME_ID: %s\n", r == 0 ? "ok" : strerror(errno));
    r = syscall(SYS_clock_nanosleep, MAKE_THREAD_CPUCLOCK(0, CPUCLOCK_SCHED), 0, &req, NULL);
    printf("errors: clock_nanosleep on the own thread clock by id: %s\n", r == 0 ? "ok" : strerror(errno));
    /* A SIGEV_NONE timer on the thread's clock counts down only as the thread computes. */
    timer_t t = make(CLOCK_THREAD_CPUTIME_ID, SIGEV_NONE, 0, 0, 0, &e);
    settime(t, 5000000, 0);
    while (remaining(t, NULL) > 0)
        burn(10000);
    printf("errors: SIGEV_NONE on the thread clock ran out; overrun %d\n", overrun(t));
    delete(t);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr1;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    thread_clock_of_its_own();
    thread_clock_stands_while_waiting();
    another_threads_clock();
    child_process_clock();
    errors();
    return 0;
}
