/* proc_exec: execve as Linux does it.  The errors a program gets back (ENOENT, EACCES for a
 * directory, a file without an execute bit and a generated /proc file, ENOEXEC for an
 * executable that is no program, E2BIG); what a program keeps and loses across execve
 * (descriptors without FD_CLOEXEC kept, with it closed; caught signals back to their default
 * action, ignored ones still ignored, the signal mask kept; the pid, parent and working
 * directory kept; the arguments and environment it was given); a vfork parent going on once
 * its child execs; a `#!` script run through its interpreter with the interpreter's argument;
 * an execve from a process with a second thread, which goes.  Signals between processes: a
 * handler runs for a signal another process sent, SIGCHLD with the child's pid, code and status
 * ends a sigsuspend, and a wait4 under SA_RESTART is made again after the handler.  The program execs itself
 * (/proc/self/exe) in its "child" modes.
 * Prints only what is the same natively and under ferrite.
 * Usage: proc_exec [all]; exits 0 when every check passed, 1 otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;

static void check(int ok, const char *what)
{
    printf("%s: %s\n", what, ok ? "ok" : "FAILED");
    if (!ok)
        failures++;
}

static void on_usr1(int s) { (void)s; }

static char self[4096];

/* The exec'ed side: checks what it kept and lost, exits with a status the parent checks. */
static int child(int argc, char **argv)
{
    if (argc < 5)
        return 90;
    pid_t pid = (pid_t)atol(argv[2]);
    pid_t ppid = (pid_t)atol(argv[3]);
    int ok = 1;
    ok &= getpid() == pid;
    ok &= getppid() == ppid;
    ok &= fcntl(5, F_GETFD) == -1 && errno == EBADF;       /* FD_CLOEXEC: closed */
    ok &= fcntl(6, F_GETFD) == 0;                          /* kept */
    ok &= write(6, "x", 1) == 1;                           /* the same pipe */
    struct sigaction sa;
    sigaction(SIGUSR1, NULL, &sa);
    ok &= sa.sa_handler == SIG_DFL;                        /* caught: back to default */
    sigaction(SIGUSR2, NULL, &sa);
    ok &= sa.sa_handler == SIG_IGN;                        /* ignored: still ignored */
    sigset_t set;
    sigprocmask(SIG_BLOCK, NULL, &set);
    ok &= sigismember(&set, SIGTERM) == 1;                 /* the mask is kept */
    const char *e = getenv("PROC_EXEC");
    ok &= e && strcmp(e, "given") == 0 && getenv("HOME") == NULL;
    ok &= strcmp(argv[4], "last arg") == 0;
    char cwd[4096];
    ok &= getcwd(cwd, sizeof cwd) && strcmp(cwd + strlen(cwd) - 4, "/sub") == 0;
    return ok ? 7 : 91;
}

static void errors(void)
{
    char *argv[] = {"x", NULL};
    char *envp[] = {NULL};
    execve("/nonexistent/program", argv, envp);
    check(errno == ENOENT, "a missing program: ENOENT");
    execve("/", argv, envp);
    check(errno == EACCES, "a directory: EACCES");
    int fd = open("plain", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    write(fd, "\x7f" "ELF", 4);
    close(fd);
    execve("plain", argv, envp);
    check(errno == EACCES, "no execute bit: EACCES");
    fd = open("junk", O_WRONLY | O_CREAT | O_TRUNC, 0755);
    write(fd, "neither ELF nor script\n", 23);
    close(fd);
    execve("junk", argv, envp);
    check(errno == ENOEXEC, "not a program: ENOEXEC");
    execve("/proc/cpuinfo", argv, envp);
    check(errno == EACCES, "a generated /proc file: EACCES");
    size_t big = 1 << 20;
    char *huge = malloc(big + 1);
    memset(huge, 'a', big);
    huge[big] = 0;
    char *bigv[] = {"x", huge, huge, huge, NULL};
    execve(self, bigv, envp);
    check(errno == E2BIG, "arguments too large: E2BIG");
    free(huge);
    char **volatile bad = (char **)8;
    check(execve(self, argv, bad) == -1 && errno == EFAULT, "a bad environment: EFAULT");
}

static void keeps_and_loses(void)
{
    int p[2];
    pipe(p);
    dup3(p[1], 5, O_CLOEXEC);
    dup2(p[1], 6);
    close(p[1]);
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGUSR2, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    mkdir("sub", 0755);
    fflush(stdout);
    pid_t me = getpid();
    pid_t c = fork();
    if (c == 0) {
        chdir("sub");
        char a2[32], a3[32];
        snprintf(a2, sizeof a2, "%d", (int)getpid());
        snprintf(a3, sizeof a3, "%d", (int)me);
        char *argv[] = {"proc_exec", "child", a2, a3, "last arg", NULL};
        char *envp[] = {"PROC_EXEC=given", NULL};
        execve("/proc/self/exe", argv, envp);
        _exit(92);
    }
    close(5);
    close(6);
    int st = 0;
    waitpid(c, &st, 0);
    check(WIFEXITED(st) && WEXITSTATUS(st) == 7, "the exec'ed child kept and lost what Linux says");
    char b[4];
    check(read(p[0], b, sizeof b) == 1 && b[0] == 'x', "it wrote into the pipe it kept");
    close(p[0]);
    signal(SIGUSR1, SIG_DFL);
    signal(SIGUSR2, SIG_DFL);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

static void vfork_exec(void)
{
    fflush(stdout);
    pid_t c = vfork();
    if (c == 0) {
        char *argv[] = {"proc_exec", "exit", "3", NULL};
        char *envp[] = {NULL};
        execve(self, argv, envp);
        _exit(93);
    }
    int st = 0;
    check(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 3, "vfork then exec: the parent goes on");
}

static void script(void)
{
    int fd = open("script", O_WRONLY | O_CREAT | O_TRUNC, 0755);
    dprintf(fd, "#!  %s   exit  \n", self);
    close(fd);
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        /* argv becomes: self, "exit", "./script", "4" */
        char *argv[] = {"script", "4", NULL};
        char *envp[] = {NULL};
        execve("./script", argv, envp);
        _exit(94);
    }
    int st = 0;
    waitpid(c, &st, 0);
    check(WIFEXITED(st) && WEXITSTATUS(st) == 4, "a #! script runs through its interpreter");
}

/* Blocks for good on a pipe no one writes. */
static void *sleeper(void *arg)
{
    char b;
    read(*(int *)arg, &b, 1);
    return NULL;
}

static void threaded(void)
{
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        static int p[2];
        pipe(p);
        pthread_t t;
        pthread_create(&t, NULL, sleeper, &p[0]);
        char *argv[] = {"proc_exec", "exit", "5", NULL};
        char *envp[] = {NULL};
        execve(self, argv, envp);
        _exit(95);
    }
    int st = 0;
    waitpid(c, &st, 0);
    check(WIFEXITED(st) && WEXITSTATUS(st) == 5, "exec from a process with two threads");
}

static volatile sig_atomic_t got_usr1, got_chld, chld_pid, chld_code, chld_status;

static void on_usr1_count(int s) { (void)s; got_usr1++; }

static void on_chld(int s, siginfo_t *si, void *uc)
{
    (void)s;
    (void)uc;
    got_chld++;
    chld_pid = si->si_pid;
    chld_code = si->si_code;
    chld_status = si->si_status;
}

static void signals(void)
{
    struct sigaction sa = {0};
    sa.sa_sigaction = on_chld;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGCHLD, &sa, NULL);
    struct sigaction su = {0};
    su.sa_handler = on_usr1_count;
    sigaction(SIGUSR1, &su, NULL);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &old);
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        kill(getppid(), SIGUSR1);
        _exit(9);
    }
    int rounds = 0;
    while ((!got_usr1 || !got_chld) && rounds++ < 4) {
        int r = sigsuspend(&old);
        if (r != -1 || errno != EINTR)
            failures++;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    check(got_usr1 == 1, "a handler runs for another process's kill");
    check(got_chld == 1 && chld_pid == c && chld_code == CLD_EXITED && chld_status == 9,
          "SIGCHLD ends sigsuspend with the child's pid, code and status");
    int st;
    check(waitpid(c, &st, 0) == c && WEXITSTATUS(st) == 9, "the child is still there to reap");

    su.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &su, NULL);
    signal(SIGCHLD, SIG_DFL);
    got_usr1 = 0;
    fflush(stdout);
    c = fork();
    if (c == 0) {
        kill(getppid(), SIGUSR1);
        _exit(8);
    }
    pid_t r = waitpid(c, &st, 0);
    check(r == c && WEXITSTATUS(st) == 8 && got_usr1 == 1, "SA_RESTART: wait4 is made again after the handler");
    signal(SIGUSR1, SIG_DFL);

    signal(SIGCHLD, SIG_IGN);
    fflush(stdout);
    c = fork();
    if (c == 0)
        _exit(0);
    check(waitpid(c, &st, 0) == -1 && errno == ECHILD, "SIGCHLD ignored: children are not kept to reap");
    signal(SIGCHLD, SIG_DFL);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0)
        return child(argc, argv);
    if (argc > 1 && strcmp(argv[1], "exit") == 0) {
        /* From a script: self exit ./script N */
        const char *n = argc > 3 ? argv[3] : argv[2];
        return atoi(n);
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = 0;
    errors();
    keeps_and_loses();
    vfork_exec();
    script();
    threaded();
    signals();
    printf("failures: %d\n", failures);
    return failures ? 1 : 0;
}
