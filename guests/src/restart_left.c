/* Sleeps and timed futex waits cut short by a signal no handler takes, then made again by the
 * kernel (Linux's restart block: `hrtimer_nanosleep_restart`, `futex_wait_restart`), must wait
 * only for the time that was left, not their whole time again; a handled signal ends a
 * relative `nanosleep` with EINTR and the time left in `rem`. Each case prints how long the
 * call took as a class that host load cannot change (early, about its time, or its whole time
 * again after the interruption), so that the native run and ferrite's can be compared. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* A call of 1 s interrupted after 0.2 or 0.3 s: made again for its whole time, it ends after
 * at least 1.2 s. */
static const char *took(double s) {
    return s < 0.9 ? "early" : s < 1.15 ? "about its time" : "its whole time again";
}

static void pause_ms(int ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) < 0 && errno == EINTR)
        ;
}

static int word;

static void on_usr1(int sig) {
    (void)sig;
}

/* What a child does for one second, stopped and continued by its parent meanwhile. */
static void waiting(int how) {
    struct timespec one = {1, 0};
    double t0 = now();
    long r;
    const char *what;
    switch (how) {
    case 0:
        what = "nanosleep";
        r = nanosleep(&one, NULL);
        break;
    case 1:
        what = "clock_nanosleep";
        r = clock_nanosleep(CLOCK_MONOTONIC, 0, &one, NULL);
        if (r) {
            errno = r;
            r = -1;
        }
        break;
    default:
        what = "FUTEX_WAIT";
        r = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &one, NULL, 0);
        break;
    }
    printf("%s of 1 s, stopped and continued: %s, %s\n", what, r < 0 ? strerror(errno) : "0", took(now() - t0));
    fflush(stdout);
}

static void stopped_and_continued(int how) {
    pid_t c = fork();
    if (c == 0) {
        waiting(how);
        _exit(0);
    }
    pause_ms(200);
    kill(c, SIGSTOP);
    pause_ms(500);
    kill(c, SIGCONT);
    waitpid(c, NULL, 0);
}


static pthread_t sleeper;

/* Sends SIGUSR2 to the sleeper and at once ignores it: the sleeper is woken for a signal that
 * is gone when it looks (`do_sigaction` discards it), so its call is made again. */
static void *sender_then_ignore(void *arg) {
    (void)arg;
    pause_ms(300);
    pthread_kill(sleeper, SIGUSR2);
    signal(SIGUSR2, SIG_IGN);
    return NULL;
}

static void ignored_after_sent(int how) {
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR2, &sa, NULL);
    sleeper = pthread_self();
    pthread_t t;
    pthread_create(&t, NULL, sender_then_ignore, NULL);
    struct timespec one = {1, 0};
    double t0 = now();
    long r;
    const char *what = how ? "FUTEX_WAIT" : "nanosleep";
    if (how)
        r = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &one, NULL, 0);
    else
        r = nanosleep(&one, NULL);
    int e = errno;
    pthread_join(t, NULL);
    /* Linux may run the handler before the signal is ignored (EINTR, early); once it is
     * ignored, the call goes on for the time it had left (about its time in all). */
    printf("%s of 1 s, its signal ignored once sent: %s, %s\n", what, r < 0 ? strerror(e) : "0", took(now() - t0));
}

static void *sender(void *arg) {
    (void)arg;
    pause_ms(300);
    pthread_kill(sleeper, SIGUSR1);
    return NULL;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int how = 0; how < 3; how++)
        stopped_and_continued(how);

    /* A handled signal: EINTR and the time left. */
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sleeper = pthread_self();
    pthread_t t;
    pthread_create(&t, NULL, sender, NULL);
    struct timespec one = {1, 0}, rem = {0, 0};
    double t0 = now();
    int r = nanosleep(&one, &rem);
    double spent = now() - t0, left = rem.tv_sec + rem.tv_nsec / 1e9;
    printf("nanosleep of 1 s, a handled signal: %s, %s, the rest left: %s\n", r < 0 ? strerror(errno) : "0",
           took(spent), spent + left > 0.85 && spent + left < 1.15 ? "yes" : "no");
    pthread_join(t, NULL);
    ignored_after_sent(0);
    ignored_after_sent(1);
    return 0;
}
