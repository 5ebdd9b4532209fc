/* When a continued child's SIGCHLD (CLD_CONTINUED) arrives: Linux has the child send it once
 * it runs again (get_signal), while waitpid(WCONTINUED) reports the continue at once. A busy
 * child is stopped and continued; right after the SIGCONT the parent looks whether SIGCHLD is
 * pending and what waitpid(WCONTINUED|WNOHANG) says, then waits for the SIGCHLD. On a host
 * with several CPUs the first answer depends on timing; under ferrite's FIFO schedule (no
 * preemption) the child has not run yet, so it is not. A child blocked in a call is continued
 * the same way. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

static void drain(sigset_t *set) {
    struct timespec zero = {0, 0};
    while (sigtimedwait(set, NULL, &zero) > 0)
        ;
}

static void round_of(const char *what, pid_t child) {
    sigset_t chld, pend;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int st;
    kill(child, SIGSTOP);
    waitpid(child, &st, WUNTRACED);
    printf("%s: stopped %d\n", what, WIFSTOPPED(st) ? WSTOPSIG(st) : -1);
    drain(&chld);
    kill(child, SIGCONT);
    sigpending(&pend);
    printf("  SIGCHLD pending right after SIGCONT: %s\n", sigismember(&pend, SIGCHLD) ? "yes" : "no");
    pid_t w = waitpid(child, &st, WCONTINUED | WNOHANG);
    printf("  waitpid(WCONTINUED|WNOHANG) right after: %s\n", w == child && WIFCONTINUED(st) ? "continued" : "nothing");
    siginfo_t si;
    int s = sigwaitinfo(&chld, &si);
    printf("  then SIGCHLD: %s, code %d, status %d\n", s == SIGCHLD ? "taken" : strerror(errno), si.si_code,
           si.si_status);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    volatile unsigned long *counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t busy = fork();
    if (busy == 0)
        for (;;)
            (*counter)++;
    while (*counter == 0)
        sched_yield();
    round_of("a busy child", busy);
    kill(busy, SIGKILL);
    waitpid(busy, NULL, 0);
    drain(&chld);

    int p[2];
    if (pipe(p))
        return 1;
    pid_t blocked = fork();
    if (blocked == 0) {
        char c;
        close(p[1]);
        read(p[0], &c, 1);
        _exit(7);
    }
    close(p[0]);
    /* Blocked in its read: sleeping in /proc/CHILD/stat. */
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", blocked);
    for (int i = 0; i < 5000; i++) {
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = 0;
        char *rp = strrchr(buf, ')');
        if (rp && rp[1] == ' ' && rp[2] == 'S')
            break;
        usleep(1000);
    }
    round_of("a child blocked in read", blocked);
    close(p[1]);
    int st;
    waitpid(blocked, &st, 0);
    printf("  it ended: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return 0;
}
