/* proc_fork: processes in one machine.  fork and wait4's status words, copy-on-fork memory,
 * a pipe between parent and child, vfork, kill between processes, process groups.
 * Prints only what is the same natively and under ferrite (relations between pids, never pids).
 * Usage: proc_fork [wait|pipe|kill|vfork|group|all] [N]; exits 0 when every check passed,
 * 1 otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sched.h>
#include <unistd.h>

static int failures;
static int global = 10;

static void check(int ok, const char *what)
{
    printf("%s: %s\n", what, ok ? "ok" : "FAILED");
    if (!ok)
        failures++;
}

static void do_wait(int n)
{
    pid_t me = getpid();
    pid_t kids[16];
    for (int i = 0; i < n; i++) {
        fflush(stdout);
        pid_t p = fork();
        if (p == 0) {
            global += 100 + i; /* the child's own copy */
            _exit(getppid() == me && getpid() != me && global == 110 + i ? 40 + i : 99);
        }
        kids[i] = p;
    }
    check(global == 10, "parent's memory untouched by children");
    int st = 0;
    pid_t r = waitpid(-1, &st, WNOHANG);
    check(r >= 0, "WNOHANG returns");
    int seen = 0;
    /* Whether a child has ended yet is the schedule's: counted, never printed apart. */
    if (r > 0) {
        for (int i = 0; i < n; i++)
            if (kids[i] == r) {
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 40 + i)
                    failures++;
                kids[i] = 0;
                seen++;
            }
    }
    for (int i = 0; i < n; i++) {
        if (!kids[i])
            continue;
        r = waitpid(kids[i], &st, 0);
        if (r != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 40 + i) {
            printf("child %d: status %#x\n", i, st);
            failures++;
        }
        seen++;
    }
    printf("children reaped: %d\n", seen);
    errno = 0;
    check(wait(&st) == -1 && errno == ECHILD, "no child left: ECHILD");
}

static void do_pipe(int n)
{
    int down[2], up[2];
    if (pipe(down) || pipe(up)) {
        perror("pipe");
        exit(1);
    }
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        close(down[1]);
        close(up[0]);
        char buf[64];
        long sum = 0;
        ssize_t k;
        /* Read numbers until EOF, answer each with its double. */
        while ((k = read(down[0], buf, sizeof buf - 1)) > 0) {
            buf[k] = 0;
            long v = strtol(buf, NULL, 10);
            sum += v;
            int len = snprintf(buf, sizeof buf, "%ld", 2 * v);
            if (write(up[1], buf, len) != len)
                _exit(2);
        }
        _exit(sum % 256);
    }
    close(down[0]);
    close(up[1]);
    long total = 0, expect = 0;
    for (int i = 1; i <= n; i++) {
        char buf[64];
        int len = snprintf(buf, sizeof buf, "%d", i);
        if (write(down[1], buf, len) != len)
            failures++;
        ssize_t k = read(up[0], buf, sizeof buf - 1);
        buf[k > 0 ? k : 0] = 0;
        total += strtol(buf, NULL, 10);
        expect += 2 * i;
    }
    close(down[1]); /* the child sees EOF */
    char rest[8];
    check(read(up[0], rest, sizeof rest) == 0, "EOF after the child exits");
    int st;
    waitpid(p, &st, 0);
    printf("round trips: %d, answers %ld\n", n, total);
    check(total == expect, "answers");
    check(WIFEXITED(st) && WEXITSTATUS(st) == (n * (n + 1) / 2) % 256, "child's sum as its status");
}

static void do_kill(void)
{
    int ready[2];
    if (pipe(ready))
        exit(1);
    fflush(stdout);
    pid_t a = fork();
    if (a == 0) {
        if (write(ready[1], "a", 1) != 1)
            _exit(3);
        for (;;)
            sched_yield();
    }
    fflush(stdout);
    pid_t b = fork();
    if (b == 0) {
        signal(SIGTERM, SIG_IGN);
        if (write(ready[1], "b", 1) != 1)
            _exit(3);
        for (;;)
            sched_yield();
    }
    char c[2];
    if (read(ready[0], c, 1) != 1 || read(ready[0], c + 1, 1) != 1)
        failures++;
    int st;
    check(kill(a, SIGTERM) == 0, "kill SIGTERM");
    check(waitpid(a, &st, 0) == a && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "killed by SIGTERM");
    check(kill(b, SIGTERM) == 0, "kill SIGTERM (ignored)");
    check(waitpid(b, &st, WNOHANG) == 0, "still alive");
    check(kill(b, SIGKILL) == 0, "kill SIGKILL");
    check(waitpid(b, &st, 0) == b && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "killed by SIGKILL");
    errno = 0;
    check(kill(b, 0) == -1 && errno == ESRCH, "reaped: ESRCH");
}

static void do_vfork(void)
{
    fflush(stdout);
    pid_t p = vfork();
    if (p == 0)
        _exit(7);
    int st;
    check(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 7, "vfork child's status");
}

static void do_group(void)
{
    pid_t me = getpid();
    int go[2];
    if (pipe(go))
        exit(1);
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        char c;
        if (read(go[0], &c, 1) != 1)
            _exit(5);
        _exit(getpgrp() == getpid() && getpgid(0) == getpid() && getsid(0) == getsid(getppid()) ? 0 : 6);
    }
    check(setpgid(p, p) == 0, "setpgid of a child");
    check(getpgid(p) == p, "the child leads its group");
    check(getpgrp() != p && getpgid(0) == getpgrp(), "the parent's group is its own");
    (void)me;
    if (write(go[1], "x", 1) != 1)
        failures++;
    int st;
    pid_t r = waitpid(-p, &st, 0);
    if (r != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        printf("waitpid(-group): %d, status %#x\n", (int)r, st);
    check(r == p && WIFEXITED(st) && WEXITSTATUS(st) == 0, "wait for the group");
    fflush(stdout);
    p = fork();
    if (p == 0)
        _exit(setsid() == getpid() && getsid(0) == getpid() && getpgrp() == getpid() ? 0 : 1);
    check(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0, "setsid in a child");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    int n = argc > 2 ? atoi(argv[2]) : 4;
    int all = !strcmp(mode, "all");
    if (all || !strcmp(mode, "wait"))
        do_wait(n < 16 ? n : 16);
    if (all || !strcmp(mode, "pipe"))
        do_pipe(n);
    if (all || !strcmp(mode, "kill"))
        do_kill();
    if (all || !strcmp(mode, "vfork"))
        do_vfork();
    if (all || !strcmp(mode, "group"))
        do_group();
    printf("failures: %d\n", failures);
    return failures != 0;
}
