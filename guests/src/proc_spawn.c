// posix_spawn and its users, compared with the native run: system(3), popen(3), posix_spawnp(3)
// with file actions (dup2, open, close) and waitpid, and a spawn of a program that does not
// exist, whose errno reaches the parent through the child's shared memory (glibc's spawni uses
// clone(CLONE_VM|CLONE_VFORK) and writes the exec's error where the parent reads it); vfork(2),
// whose child's store the parent sees, and a pattern on the parent's stack that none of these
// children may change.
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

// clone(CLONE_VM) without CLONE_VFORK: parent and child run at once in one address space.
static volatile int shared_flag, shared_val;

static int clone_child(void *arg) {
    shared_val = *(int *)arg;
    while (!shared_flag)
        sched_yield();
    return 7;
}

static void check_status(const char *what, int st) {
    if (WIFEXITED(st))
        printf("%s: exited %d\n", what, WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        printf("%s: killed by %d\n", what, WTERMSIG(st));
    else
        printf("%s: status %#x\n", what, st);
}

// vfork(2): the child runs on the parent's memory until it exits or execs, so its store is the
// parent's (Linux shares the address space; a copy would leave it 0). In a function of its own, so
// that no variable of main's lives in a register the child may change.
static void __attribute__((noinline)) vfork_checks(void) {
    static volatile int vfork_val;
    int st;
    pid_t v = vfork();
    if (v == 0) {
        vfork_val = 1234;
        _exit(5);
    }
    if (v < 0) {
        perror("vfork");
        exit(1);
    }
    if (waitpid(v, &st, 0) != v)
        printf("waitpid vfork: %s\n", strerror(errno));
    check_status("vfork child", st);
    printf("vfork child's store seen by the parent: %d\n", vfork_val);

    // A vfork child that execs: the parent goes on when the exec succeeds, its memory as it was.
    v = vfork();
    if (v == 0) {
        execlp("sh", "sh", "-c", "echo from a vfork child; exit 6", (char *)NULL);
        _exit(127);
    }
    if (waitpid(v, &st, 0) != v)
        printf("waitpid vfork exec: %s\n", strerror(errno));
    check_status("vfork+exec child", st);
}

// The sum of `n` bytes at `p`.
static unsigned sum(const volatile unsigned char *p, size_t n) {
    unsigned s = 0;
    for (size_t i = 0; i < n; i++)
        s = s * 31 + p[i];
    return s;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    // A pattern on this frame's stack: children that run on this memory (posix_spawn's, system's,
    // popen's, vfork's) must leave it as it is.
    volatile unsigned char frame[4096];
    for (size_t i = 0; i < sizeof frame; i++)
        frame[i] = (unsigned char)(i * 7 + 3);
    const unsigned frame_sum = sum(frame, sizeof frame);

    // system(3): /bin/sh -c, its output on our stdout, its status back.
    int st = system("echo from system; exit 3");
    check_status("system", st);

    // popen(3): a child's output through a pipe.
    FILE *p = popen("echo one; echo two", "r");
    if (!p) {
        perror("popen");
        return 1;
    }
    char line[128];
    int lines = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        printf("popen read: [%s]\n", line);
        lines++;
    }
    check_status("pclose", pclose(p));
    printf("popen lines: %d\n", lines);

    // popen for writing: the child reads what we write.
    FILE *w = popen("tr a-z A-Z", "w");
    fputs("shouted through a pipe\n", w);
    check_status("pclose w", pclose(w));

    // posix_spawnp with file actions: stdout into one pipe and stdin from another (dup2), stderr
    // to /dev/null (open), every pipe end closed in the child (close).
    int out[2], in[2];
    if (pipe(out) != 0 || pipe(in) != 0)
        return 1;
    const char *msg = "line b\nline a\nline c\n";
    if (write(in[1], msg, strlen(msg)) != (ssize_t)strlen(msg))
        return 1;
    close(in[1]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    posix_spawn_file_actions_addclose(&fa, out[1]);
    posix_spawn_file_actions_addclose(&fa, in[0]);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {"sort", NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "sort", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    printf("posix_spawnp sort: %s\n", rc == 0 ? "ok" : strerror(rc));
    close(out[1]);
    close(in[0]);
    char buf[256];
    ssize_t n, total = 0;
    while ((n = read(out[0], buf + total, sizeof buf - 1 - total)) > 0)
        total += n;
    buf[total] = 0;
    close(out[0]);
    printf("sorted:\n%s", buf);
    if (waitpid(pid, &st, 0) != pid)
        printf("waitpid: %s\n", strerror(errno));
    check_status("sort", st);

    // A program that does not exist: posix_spawn reports ENOENT to the parent, no child is left.
    char *missing[] = {"no-such-program", NULL};
    rc = posix_spawnp(&pid, "ferrite-no-such-program", NULL, NULL, missing, environ);
    printf("posix_spawnp missing: %s\n", strerror(rc));
    rc = posix_spawn(&pid, "/nonexistent/prog", NULL, NULL, missing, environ);
    printf("posix_spawn missing: %s\n", strerror(rc));
    printf("children left: %s\n", waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD ? "none" : "some");

    // clone(CLONE_VM|SIGCHLD): the child's store is seen by the parent, the parent's by the child.
    static char stack[64 * 1024] __attribute__((aligned(16)));
    int arg = 42;
    pid_t c = clone(clone_child, stack + sizeof stack, CLONE_VM | SIGCHLD, &arg);
    if (c < 0) {
        perror("clone");
        return 1;
    }
    while (shared_val != 42)
        sched_yield();
    shared_flag = 1;
    if (waitpid(c, &st, 0) != c)
        printf("waitpid clone: %s\n", strerror(errno));
    check_status("clone(CLONE_VM) child", st);

    vfork_checks();

    // Every child above ran on this process's memory: the pattern on its stack is intact.
    printf("parent stack after its children: %s\n", sum(frame, sizeof frame) == frame_sum ? "intact" : "CHANGED");
    return 0;
}
