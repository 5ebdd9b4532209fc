/* proc_slots: many processes alive at once, and many one after another.
 * A wave of ALIVE children, all alive together (each blocks reading a pipe until the parent
 * closes it), each scribbling over its copy of the parent's memory and checking it is its own;
 * then SEQUENTIAL children one after another, each exec'ing this program in "child" mode while
 * the parent changes its own memory and checks that neither the child nor its new program
 * touched it.  A fork that fails is counted with its errno (under ferrite a machine holds a
 * bounded number of processes at once: docs/syscalls.md).
 * Usage: proc_slots ALIVE SEQUENTIAL; prints what ran, exits 0 when every check passed. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORDS 4096
static long memory[WORDS];

static int failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        printf("%s: FAILED\n", what);
        failures++;
    }
}

static int intact(long salt)
{
    for (int i = 0; i < WORDS; i++)
        if (memory[i] != i * 7 + salt)
            return 0;
    return 1;
}

static void fill(long salt)
{
    for (int i = 0; i < WORDS; i++)
        memory[i] = i * 7 + salt;
}

/* The exec'ed side: its own program's memory, a status the parent checks. */
static int child(long k)
{
    fill(1000 + k);
    return intact(1000 + k) ? (int)(k % 50) : 99;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "child") == 0)
        return child(atol(argv[2]));
    int alive = argc > 1 ? atoi(argv[1]) : 8;
    int sequential = argc > 2 ? atoi(argv[2]) : 8;
    fill(1);
    int fds[2];
    if (pipe(fds) != 0)
        return 2;
    pid_t kids[1024];
    int forked = 0, refused = 0, refused_errno = 0;
    for (int i = 0; i < alive && i < 1024; i++) {
        pid_t p = fork();
        if (p < 0) {
            refused++;
            refused_errno = errno;
            continue;
        }
        if (p == 0) {
            close(fds[1]);
            fill(100 + i);
            char c;
            /* Blocks until the parent closes the pipe: every child is alive at once. */
            ssize_t n = read(fds[0], &c, 1);
            _exit(n == 0 && intact(100 + i) ? 0 : 1);
        }
        kids[forked++] = p;
    }
    close(fds[0]);
    check(intact(1), "the parent's memory after the wave of forks");
    fill(2);
    close(fds[1]);
    int good = 0;
    for (int i = 0; i < forked; i++) {
        int st;
        if (waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0)
            good++;
    }
    check(good == forked, "every child of the wave kept its own memory");
    printf("alive at once: %d forked, %d refused", forked, refused);
    if (refused)
        printf(" (%s)", refused_errno == EAGAIN ? "EAGAIN" : "another errno");
    printf("\n");
    int ran = 0;
    for (int k = 0; k < sequential; k++) {
        pid_t p = fork();
        if (p < 0) {
            check(0, "a fork after the wave");
            break;
        }
        if (p == 0) {
            fill(500 + k);
            char arg[32];
            snprintf(arg, sizeof arg, "%d", k);
            execl("/proc/self/exe", argv[0], "child", arg, (char *)NULL);
            _exit(98);
        }
        /* While the child execs and runs its program, the parent's memory is its own. */
        check(intact(2 + k), "the parent's memory while a child execs");
        fill(3 + k);
        int st;
        if (waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == k % 50)
            ran++;
        check(intact(3 + k), "the parent's memory after a child exec'd");
    }
    printf("one after another: %d of %d ran their program\n", ran, sequential);
    printf("%s\n", failures ? "FAILED" : "all ok");
    return failures != 0;
}
