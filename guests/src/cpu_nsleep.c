/* clock_nanosleep on CPU clocks, as Linux's posix_cpu_nsleep: a sleep on another thread's clock
 * (pthread_getcpuclockid) or a child's (clock_getcpuclockid) lasts until that thread or process
 * has run for the time asked (relative) or its clock reads the instant (TIMER_ABSTIME), however
 * long it was blocked meanwhile; the caller's own process clock counts its other threads' time;
 * a signal cuts such a sleep short with the CPU time left; the caller's own thread clock is
 * EINVAL (CLOCK_THREAD_CPUTIME_ID: EINVAL from glibc, EOPNOTSUPP from the kernel), a pid nobody
 * has is EINVAL. The spinner is blocked for a while before it computes, so a sleep counted on
 * the boot clock wakes before it has run at all. Everything printed is the same on any Linux and
 * under ferrite (no times, only comparisons). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MS 1000000LL

static int go[2];
static volatile int stop;

static long long ns_of(clockid_t c) {
    struct timespec ts;
    if (clock_gettime(c, &ts) != 0)
        return -1;
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void ms_sleep(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Waits for a byte on `go`, then computes until told to stop. */
static void *spinner(void *arg) {
    (void)arg;
    char c;
    read(go[0], &c, 1);
    volatile unsigned long n = 0;
    while (!stop)
        n++;
    return NULL;
}

/* Writes the byte that starts the spinner after 40 ms. */
static void *starter(void *arg) {
    (void)arg;
    ms_sleep(40);
    write(go[1], "g", 1);
    return NULL;
}

static void on_usr1(int s) { (void)s; }

static void *interrupter(void *arg) {
    ms_sleep(30);
    pthread_kill(*(pthread_t *)arg, SIGUSR1);
    return NULL;
}

/* Sleeps 20 ms of the clock of a thread that is blocked for 40 ms first. */
static void thread_clock(int abs) {
    pipe(go);
    stop = 0;
    pthread_t sp, st;
    pthread_create(&sp, NULL, spinner, NULL);
    clockid_t c;
    pthread_getcpuclockid(sp, &c);
    ms_sleep(5);
    long long mono0 = ns_of(CLOCK_MONOTONIC);
    long long before = ns_of(c);
    pthread_create(&st, NULL, starter, NULL);
    struct timespec ts;
    long long until = abs ? before + 20 * MS : 20 * MS;
    ts.tv_sec = until / 1000000000LL;
    ts.tv_nsec = until % 1000000000LL;
    int r = clock_nanosleep(c, abs ? TIMER_ABSTIME : 0, &ts, NULL);
    long long ran = ns_of(c) - before;
    long long waited = ns_of(CLOCK_MONOTONIC) - mono0;
    stop = 1;
    pthread_join(sp, NULL);
    pthread_join(st, NULL);
    close(go[0]);
    close(go[1]);
    printf("%s sleep on another thread's clock: %d, it ran >= 20 ms: %d, >= 55 ms passed: %d\n",
           abs ? "absolute" : "relative", r, ran >= 20 * MS, waited >= 55 * MS);
}

/* The process's own clock: its other thread's time counts. */
static void own_process_clock(void) {
    pipe(go);
    stop = 0;
    pthread_t sp, st;
    pthread_create(&sp, NULL, spinner, NULL);
    ms_sleep(5);
    long long before = ns_of(CLOCK_PROCESS_CPUTIME_ID);
    long long mono0 = ns_of(CLOCK_MONOTONIC);
    pthread_create(&st, NULL, starter, NULL);
    struct timespec ts = {0, 20 * MS};
    int r = clock_nanosleep(CLOCK_PROCESS_CPUTIME_ID, 0, &ts, NULL);
    long long ran = ns_of(CLOCK_PROCESS_CPUTIME_ID) - before;
    long long waited = ns_of(CLOCK_MONOTONIC) - mono0;
    stop = 1;
    pthread_join(sp, NULL);
    pthread_join(st, NULL);
    close(go[0]);
    close(go[1]);
    printf("sleep on the process's own clock: %d, it ran >= 20 ms: %d, >= 55 ms passed: %d\n", r,
           ran >= 20 * MS, waited >= 55 * MS);
}

/* A child's process clock: the child waits for a byte, then computes until killed. */
static void child_clock(void) {
    pipe(go);
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        read(go[0], &c, 1);
        volatile unsigned long n = 0;
        for (;;)
            n++;
    }
    clockid_t c;
    int e = clock_getcpuclockid(pid, &c);
    ms_sleep(5);
    long long before = ns_of(c);
    long long mono0 = ns_of(CLOCK_MONOTONIC);
    pthread_t st;
    pthread_create(&st, NULL, starter, NULL);
    struct timespec ts = {0, 20 * MS};
    int r = clock_nanosleep(c, 0, &ts, NULL);
    long long ran = ns_of(c) - before;
    long long waited = ns_of(CLOCK_MONOTONIC) - mono0;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    pthread_join(st, NULL);
    close(go[0]);
    close(go[1]);
    printf("sleep on a child's clock: %d %d, it ran >= 20 ms: %d, >= 55 ms passed: %d\n", e, r, ran >= 20 * MS,
           waited >= 55 * MS);
}

/* Interrupted while the thread whose clock it sleeps on is blocked: EINTR, all of it left. */
static void interrupted(int abs) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    pipe(go);
    stop = 0;
    pthread_t sp, in, self = pthread_self();
    pthread_create(&sp, NULL, spinner, NULL);
    clockid_t c;
    pthread_getcpuclockid(sp, &c);
    ms_sleep(5);
    pthread_create(&in, NULL, interrupter, &self);
    long long until = abs ? ns_of(c) + 20 * MS : 20 * MS;
    struct timespec ts = {until / 1000000000LL, until % 1000000000LL}, rem = {-1, -1};
    int r = clock_nanosleep(c, abs ? TIMER_ABSTIME : 0, &ts, &rem);
    pthread_join(in, NULL);
    stop = 1;
    write(go[1], "g", 1);
    pthread_join(sp, NULL);
    close(go[0]);
    close(go[1]);
    if (abs)
        printf("absolute sleep interrupted: %s, rem untouched: %d\n", strerrorname_np(r),
               rem.tv_sec == -1 && rem.tv_nsec == -1);
    else
        printf("relative sleep interrupted: %s, rem %lld.%09lld\n", strerrorname_np(r), (long long)rem.tv_sec,
               (long long)rem.tv_nsec);
}

static void errors(void) {
    struct timespec ts = {0, 1000};
    clockid_t own;
    pthread_getcpuclockid(pthread_self(), &own);
    printf("CLOCK_THREAD_CPUTIME_ID: %s\n", strerrorname_np(clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &ts, NULL)));
    long r = syscall(SYS_clock_nanosleep, CLOCK_THREAD_CPUTIME_ID, 0, &ts, NULL);
    printf("CLOCK_THREAD_CPUTIME_ID, the kernel's: %ld %s\n", r, strerrorname_np(errno));
    printf("own thread's clock: %s\n", strerrorname_np(clock_nanosleep(own, 0, &ts, NULL)));
    clockid_t self_by_tid = (clockid_t)((~(unsigned)gettid() << 3) | 4 | 2);
    printf("own thread's clock by tid: %s\n", strerrorname_np(clock_nanosleep(self_by_tid, 0, &ts, NULL)));
    clockid_t nobody = (clockid_t)((~4000000u << 3) | 2);
    printf("a pid nobody has: %s\n", strerrorname_np(clock_nanosleep(nobody, 0, &ts, NULL)));
    clockid_t bad_kind = (clockid_t)((~0u << 3) | 4 | 3);
    printf("a thread clock of an unknown kind: %s\n", strerrorname_np(clock_nanosleep(bad_kind, 0, &ts, NULL)));
    clockid_t fd_clock = (clockid_t)((~0u << 3) | 3);
    printf("a descriptor's clock: %s\n", strerrorname_np(clock_nanosleep(fd_clock, 0, &ts, NULL)));
    struct timespec bad = {0, 1000000000};
    printf("a bad timespec on the process clock: %s\n",
           strerrorname_np(clock_nanosleep(CLOCK_PROCESS_CPUTIME_ID, 0, &bad, NULL)));
    /* A thread that ran a little and is blocked now (one that has not run yet reads 0, and
     * Linux checks CPU timers at ticks only: a short run might never fire the sleep). */
    pipe(go);
    stop = 1;
    pthread_t t;
    pthread_create(&t, NULL, spinner, NULL);
    ms_sleep(5);
    clockid_t other;
    pthread_getcpuclockid(t, &other);
    struct timespec zero = {0, 0};
    printf("zero on another thread's clock: %d\n", clock_nanosleep(other, 0, &zero, NULL));
    struct timespec past = {0, 1};
    printf("a past instant on another thread's clock: %d\n", clock_nanosleep(other, TIMER_ABSTIME, &past, NULL));
    write(go[1], "g", 1);
    pthread_join(t, NULL);
    close(go[0]);
    close(go[1]);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    thread_clock(0);
    thread_clock(1);
    own_process_clock();
    child_clock();
    interrupted(0);
    interrupted(1);
    errors();
    return 0;
}
