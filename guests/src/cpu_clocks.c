/* A process's own CPU time apart from other processes' and threads': CLOCK_PROCESS_CPUTIME_ID,
 * CLOCK_THREAD_CPUTIME_ID, getrusage(RUSAGE_SELF, RUSAGE_THREAD, RUSAGE_CHILDREN), times(),
 * clock_getcpuclockid and pthread_getcpuclockid. It prints only comparisons that hold natively
 * and under ferrite whatever the machine's speed. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/times.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static void burn(long n) {
    uint64_t x = 1;
    for (long i = 0; i < n; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
}

static long long ns(clockid_t c) {
    struct timespec t;
    if (clock_gettime(c, &t) != 0)
        return -1;
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long long tv_ns(struct timeval tv) { return (long long)tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL; }

static volatile int go;

static void *worker(void *arg) {
    (void)arg;
    burn(60 * 1000 * 1000);
    return NULL;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    long long p0 = ns(CLOCK_PROCESS_CPUTIME_ID);

    /* A child burns a lot; the parent only waits. */
    pid_t c = fork();
    if (c == 0) {
        burn(200 * 1000 * 1000);
        _exit(0);
    }
    clockid_t cc;
    int r = clock_getcpuclockid(c, &cc);
    printf("clock_getcpuclockid of a live child: %s\n", r == 0 ? "ok" : strerror(r));
    int st;
    struct rusage cru;
    wait4(c, &st, 0, &cru);
    long long p1 = ns(CLOCK_PROCESS_CPUTIME_ID);
    long long child = tv_ns(cru.ru_utime) + tv_ns(cru.ru_stime);
    printf("the child's CPU time is more than the parent's own while it waited: %s\n",
           child > 4 * (p1 - p0) ? "yes" : "no");
    r = clock_getcpuclockid(c, &cc);
    printf("clock_getcpuclockid of the reaped child: %s\n", r == 0 ? "ok" : strerror(r));

    struct rusage self, children;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &children);
    printf("RUSAGE_SELF is less than RUSAGE_CHILDREN: %s\n",
           tv_ns(self.ru_utime) + tv_ns(self.ru_stime) < tv_ns(children.ru_utime) ? "yes" : "no");
    struct tms t;
    times(&t);
    printf("times: own less than the children's: %s\n", t.tms_utime + t.tms_stime < t.tms_cutime ? "yes" : "no");

    /* A thread burns; the main thread only joins it. */
    long long m0 = ns(CLOCK_THREAD_CPUTIME_ID), q0 = ns(CLOCK_PROCESS_CPUTIME_ID);
    pthread_t w;
    pthread_create(&w, NULL, worker, NULL);
    clockid_t wc;
    pthread_getcpuclockid(w, &wc);
    pthread_join(w, NULL);
    long long m1 = ns(CLOCK_THREAD_CPUTIME_ID), q1 = ns(CLOCK_PROCESS_CPUTIME_ID);
    printf("the process clock counts the worker's time: %s\n", q1 - q0 > 4 * (m1 - m0) ? "yes" : "no");
    struct rusage th;
    getrusage(RUSAGE_THREAD, &th);
    getrusage(RUSAGE_SELF, &self);
    printf("RUSAGE_THREAD less than RUSAGE_SELF: %s\n",
           tv_ns(th.ru_utime) + tv_ns(th.ru_stime) < tv_ns(self.ru_utime) + tv_ns(self.ru_stime) ? "yes" : "no");

    clockid_t mine;
    pthread_getcpuclockid(pthread_self(), &mine);
    long long a = ns(mine), b = ns(CLOCK_THREAD_CPUTIME_ID);
    printf("pthread_getcpuclockid(self) reads the thread clock: %s\n", a > 0 && a <= b ? "yes" : "no");
    clock_getcpuclockid(0, &mine);
    a = ns(mine);
    b = ns(CLOCK_PROCESS_CPUTIME_ID);
    printf("clock_getcpuclockid(0) reads the process clock: %s\n", a > 0 && a <= b ? "yes" : "no");
    struct timespec res;
    printf("clock_getres of a made-up clock: %s\n", clock_getres((clockid_t)99, &res) == 0 ? "ok" : strerror(errno));
    return 0;
}
