// Job control as Linux has it: stop signals stop a child and SIGCONT continues it, as
// wait4/waitpid (WUNTRACED, WCONTINUED), waitid (WSTOPPED, WCONTINUED, WNOWAIT) and the parent's
// SIGCHLD (CLD_STOPPED, CLD_CONTINUED; none under SA_NOCLDSTOP) report them; SIGTSTP stops a
// process in a group with a parent in another group of its session, and is discarded in an
// orphaned group; a handled SIGTSTP does not stop; SIGCONT discards a pending stop signal and a
// stop signal a pending SIGCONT; a child stops itself with raise(SIGSTOP); a stopped child's
// threads do not run; wait4's rusage and getrusage(RUSAGE_CHILDREN) count a reaped child's CPU
// time. The process makes itself a session leader first, as ferrite's first process is, so
// that its group is orphaned both natively and under ferrite. Every line is the same natively
// and under ferrite.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/times.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// SIGCHLD stays blocked: the probe takes it with sigtimedwait, at points where Linux has sent it
// already (a child's stop or end, before the wait that reports it returns) or waiting for it (a
// continue, which Linux's child reports when it next runs).
static sigset_t chld_set;

// The SIGCHLD pending now (one at most: a standard signal), as "code/status".
static void show_chld(const char *what) {
    struct timespec zero = {0, 0};
    siginfo_t si;
    printf("%s: SIGCHLD", what);
    if (sigtimedwait(&chld_set, &si, &zero) == SIGCHLD)
        printf(" %d/%d", si.si_code, si.si_status);
    else
        printf(" none");
    printf("\n");
}

// Waits for the next SIGCHLD and shows it.
static void await_chld(const char *what) {
    siginfo_t si;
    if (sigwaitinfo(&chld_set, &si) == SIGCHLD)
        printf("%s: SIGCHLD %d/%d\n", what, si.si_code, si.si_status);
}

static void wait_show(const char *what, pid_t pid, int options) {
    int st = 0;
    pid_t got = waitpid(pid, &st, options);
    printf("%s: %s", what, got == pid ? "pid" : got == 0 ? "0" : "other");
    if (got == pid) {
        printf(" status %#x", st);
        if (WIFSTOPPED(st))
            printf(" stopped by %d", WSTOPSIG(st));
        if (WIFCONTINUED(st))
            printf(" continued");
        if (WIFEXITED(st))
            printf(" exited %d", WEXITSTATUS(st));
        if (WIFSIGNALED(st))
            printf(" killed by %d", WTERMSIG(st));
    }
    printf("\n");
}

// A child that reads one byte from `in` and exits with it (0 at end of file).
static pid_t reader_child(int in[2], int own_group) {
    pid_t pid = fork();
    if (pid == 0) {
        if (own_group)
            setpgid(0, 0);
        close(in[1]);
        char c = 0;
        if (read(in[0], &c, 1) != 1)
            c = 0;
        _exit(c);
    }
    close(in[0]);
    if (own_group)
        setpgid(pid, pid);
    return pid;
}

static void sigstop_and_sigcont(void) {
    int in[2];
    pipe(in);
    pid_t pid = reader_child(in, 0);
    kill(pid, SIGSTOP);
    wait_show("SIGSTOP, waitpid(WUNTRACED)", pid, WUNTRACED);
    show_chld("  after the stop");
    wait_show("  again, with WNOHANG", pid, WUNTRACED | WNOHANG);
    kill(pid, SIGCONT);
    wait_show("SIGCONT, waitpid(WCONTINUED)", pid, WCONTINUED);
    await_chld("  the continue");
    wait_show("  again, with WNOHANG", pid, WCONTINUED | WNOHANG);
    char c = 7;
    write(in[1], &c, 1);
    close(in[1]);
    wait_show("then waitpid(0)", pid, 0);
    show_chld("  after the end");
}

static void no_cldstop(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sa.sa_flags = SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    int in[2];
    pipe(in);
    pid_t pid = reader_child(in, 0);
    kill(pid, SIGSTOP);
    wait_show("SA_NOCLDSTOP: SIGSTOP, waitpid(WUNTRACED)", pid, WUNTRACED);
    kill(pid, SIGCONT);
    wait_show("  SIGCONT, waitpid(WCONTINUED)", pid, WCONTINUED);
    show_chld("  after both");
    kill(pid, SIGKILL);
    wait_show("  SIGKILL, waitpid(0)", pid, 0);
    show_chld("  after the end");
    close(in[1]);
    sa.sa_flags = 0;
    sigaction(SIGCHLD, &sa, NULL);
}

static void tstp_and_waitid(void) {
    int in[2];
    pipe(in);
    pid_t pid = reader_child(in, 1);
    siginfo_t si;
    kill(pid, SIGTSTP);
    memset(&si, 0, sizeof si);
    int r = waitid(P_PID, pid, &si, WSTOPPED | WNOWAIT);
    printf("SIGTSTP (own group), waitid(WSTOPPED|WNOWAIT): %d code %d status %d pid %s\n", r, si.si_code, si.si_status,
           si.si_pid == pid ? "child" : "other");
    memset(&si, 0, sizeof si);
    r = waitid(P_PID, pid, &si, WSTOPPED | WNOHANG);
    printf("  again, WSTOPPED|WNOHANG: %d code %d status %d\n", r, si.si_code, si.si_status);
    memset(&si, 0, sizeof si);
    r = waitid(P_PID, pid, &si, WSTOPPED | WNOHANG);
    printf("  reported, WSTOPPED|WNOHANG: %d code %d pid %d\n", r, si.si_code, si.si_pid != 0);
    show_chld("  after the stop");
    kill(pid, SIGCONT);
    memset(&si, 0, sizeof si);
    r = waitid(P_PID, pid, &si, WCONTINUED);
    printf("  SIGCONT, waitid(WCONTINUED): %d code %d status %d\n", r, si.si_code, si.si_status);
    await_chld("  the continue");
    char c = 3;
    write(in[1], &c, 1);
    close(in[1]);
    memset(&si, 0, sizeof si);
    r = waitid(P_PID, pid, &si, WEXITED);
    printf("  waitid(WEXITED): %d code %d status %d\n", r, si.si_code, si.si_status);
    show_chld("  after the end");
    errno = 0;
    r = waitid(P_PID, pid, &si, WNOHANG);
    printf("waitid without WEXITED/WSTOPPED/WCONTINUED: %d %s\n", r, strerror(errno));
}

static void tstp_in_orphaned_group(void) {
    int in[2];
    pipe(in);
    pid_t pid = reader_child(in, 0);
    kill(pid, SIGTSTP);
    kill(pid, SIGTTIN);
    kill(pid, SIGTTOU);
    char c = 4;
    write(in[1], &c, 1);
    close(in[1]);
    wait_show("SIGTSTP/SIGTTIN/SIGTTOU (orphaned group), waitpid(WUNTRACED)", pid, WUNTRACED);
    show_chld("  after");
}

static int hpipe[2];
static void on_tstp(int sig) {
    char c = 'h';
    write(hpipe[1], &c, 1);
}

static void handled_tstp(void) {
    int in[2];
    pipe(in);
    pipe(hpipe);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGTSTP, on_tstp);
        char c = 'r';
        write(hpipe[1], &c, 1);
        close(in[1]);
        if (read(in[0], &c, 1) != 1)
            c = 0;
        _exit(c);
    }
    close(in[0]);
    setpgid(pid, pid);
    char c;
    read(hpipe[0], &c, 1);
    kill(pid, SIGTSTP);
    read(hpipe[0], &c, 1);
    printf("handled SIGTSTP: the handler wrote '%c'\n", c);
    c = 5;
    write(in[1], &c, 1);
    close(in[1]);
    wait_show("  waitpid(WUNTRACED)", pid, WUNTRACED);
    show_chld("  after");
    close(hpipe[0]);
    close(hpipe[1]);
}

// A child blocking SIGTSTP and SIGCONT is sent `first` then `second`: which stay pending.
static void cancel(int first, int second) {
    int in[2], out[2];
    pipe(in);
    pipe(out);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTSTP);
        sigaddset(&set, SIGCONT);
        sigprocmask(SIG_BLOCK, &set, NULL);
        char c = 'r';
        write(out[1], &c, 1);
        read(in[0], &c, 1);
        sigpending(&set);
        c = (sigismember(&set, SIGTSTP) ? 1 : 0) | (sigismember(&set, SIGCONT) ? 2 : 0);
        write(out[1], &c, 1);
        _exit(0);
    }
    setpgid(pid, pid);
    char c;
    read(out[0], &c, 1);
    kill(pid, first);
    kill(pid, second);
    write(in[1], &c, 1);
    read(out[0], &c, 1);
    printf("blocked, sent %s then %s: pending SIGTSTP %d SIGCONT %d\n", first == SIGTSTP ? "SIGTSTP" : "SIGCONT",
           second == SIGTSTP ? "SIGTSTP" : "SIGCONT", c & 1, (c >> 1) & 1);
    wait_show("  waitpid(WUNTRACED)", pid, WUNTRACED);
    show_chld("  after");
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
}

static void stops_itself(void) {
    int go[2];
    pipe(go);
    pid_t pid = fork();
    if (pid == 0) {
        raise(SIGSTOP);
        // Ends only once its parent has taken the SIGCHLD of the continue (a second one would
        // be lost while that one is pending).
        char c;
        read(go[0], &c, 1);
        _exit(6);
    }
    wait_show("raise(SIGSTOP) in the child, waitpid(WUNTRACED)", pid, WUNTRACED);
    show_chld("  after the stop");
    kill(pid, SIGCONT);
    await_chld("  the continue");
    write(go[1], "g", 1);
    close(go[0]);
    close(go[1]);
    wait_show("  SIGCONT, waitpid(0)", pid, 0);
    show_chld("  after");
}

static atomic_long *counter;
static void *spin(void *arg) {
    for (;;) {
        atomic_fetch_add(counter, 1);
        sched_yield();
    }
    return NULL;
}

static void stopped_threads(void) {
    counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t pid = fork();
    if (pid == 0) {
        pthread_t t;
        pthread_create(&t, NULL, spin, NULL);
        for (;;)
            pause();
    }
    while (atomic_load(counter) < 100)
        sched_yield();
    int st = 0;
    kill(pid, SIGSTOP);
    wait_show("a spinning thread's process stopped", pid, WUNTRACED);
    show_chld("  after the stop");
    long a = atomic_load(counter);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    long b = atomic_load(counter);
    printf("  its thread ran while it was stopped: %s\n", a == b ? "no" : "yes");
    kill(pid, SIGCONT);
    waitpid(pid, &st, WCONTINUED);
    await_chld("  the continue");
    while (atomic_load(counter) < b + 100)
        sched_yield();
    printf("  and runs once it is continued: yes\n");
    kill(pid, SIGKILL);
    wait_show("  SIGKILL, waitpid(0)", pid, 0);
    show_chld("  after");
}

static void children_times(void) {
    struct rusage before, ru, after;
    getrusage(RUSAGE_CHILDREN, &before);
    pid_t pid = fork();
    if (pid == 0) {
        volatile unsigned long x = 0;
        for (unsigned long i = 0; i < 20000000; i++)
            x += i;
        _exit(0);
    }
    int st = 0;
    memset(&ru, 0, sizeof ru);
    pid_t got = wait4(pid, &st, 0, &ru);
    getrusage(RUSAGE_CHILDREN, &after);
    struct tms t;
    times(&t);
    long us = ru.ru_utime.tv_sec * 1000000L + ru.ru_utime.tv_usec;
    long grew = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) * 1000000L + after.ru_utime.tv_usec -
                before.ru_utime.tv_usec;
    printf("a busy child: wait4 %s, its user time > 0: %d\n", got == pid ? "pid" : "other", us > 0);
    printf("  RUSAGE_CHILDREN grew by at least it: %d, tms_cutime is its user time in ticks: %d\n", grew >= us,
           (long)t.tms_cutime == after.ru_utime.tv_sec * 100 + after.ru_utime.tv_usec / 10000);
    show_chld("  after");
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    setsid();
    sigemptyset(&chld_set);
    sigaddset(&chld_set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld_set, NULL);
    sigstop_and_sigcont();
    no_cldstop();
    tstp_and_waitid();
    tstp_in_orphaned_group();
    handled_tstp();
    cancel(SIGCONT, SIGTSTP);
    cancel(SIGTSTP, SIGCONT);
    stops_itself();
    stopped_threads();
    children_times();
    printf("jobctl_probe done\n");
    return 0;
}
