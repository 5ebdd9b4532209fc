// Two clone(CLONE_VM|SIGCHLD) children meet on a private futex in the address space they share
// with their parent, after the parent (whose space it was) has ended: one waits on the word
// before the parent ends, the other wakes it after. Linux keys a private futex by the memory
// (mm), which lives as long as a process runs in it, so the wake finds the waiter.
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int out[2];
static volatile int word, waiting;
static volatile pid_t owner;
static char stack1[64 * 1024] __attribute__((aligned(16)));
static char stack2[64 * 1024] __attribute__((aligned(16)));

static long futex(volatile int *w, int op, int val) { return syscall(SYS_futex, w, op, val, NULL, NULL, 0); }

static int waiter(void *arg) {
    waiting = 1;
    while (word == 0)
        futex(&word, FUTEX_WAIT_PRIVATE, 0);
    // write(2), not stdio: the two children share one address space without CLONE_THREAD, so
    // glibc takes them for single-threaded and would let both use its buffers unlocked.
    static const char msg[] = "waiter woken\n";
    if (write(out[1], msg, sizeof msg - 1) < 0)
        return 1;
    return 0;
}

static int waker(void *arg) {
    // Until the parent that owned the memory has ended (this process is reparented).
    while (getppid() == owner)
        usleep(1000);
    word = 1;
    long n = futex(&word, FUTEX_WAKE_PRIVATE, INT_MAX);
    char msg[32] = "waker woke ?\n";
    if (n >= 0 && n <= 9)
        msg[11] = (char)('0' + n);
    if (write(out[1], msg, strlen(msg)) < 0)
        return 1;
    return 0;
}

int main(void) {
    if (pipe(out) != 0)
        return 1;
    pid_t mid = fork();
    if (mid == 0) {
        close(out[0]);
        owner = getpid();
        if (clone(waiter, stack1 + sizeof stack1, CLONE_VM | SIGCHLD, NULL) < 0)
            _exit(1);
        while (!waiting)
            sched_yield();
        usleep(20000); // the waiter is in its FUTEX_WAIT
        if (clone(waker, stack2 + sizeof stack2, CLONE_VM | SIGCHLD, NULL) < 0)
            _exit(1);
        _exit(0); // the space's owner ends while both children run in it
    }
    close(out[1]);
    int st;
    if (waitpid(mid, &st, 0) != mid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("middle process failed\n");
        return 1;
    }
    // Both children write, then end: the pipe's end of file.
    char buf[256];
    size_t total = 0;
    ssize_t n;
    while ((n = read(out[0], buf + total, sizeof buf - 1 - total)) > 0)
        total += n;
    buf[total] = 0;
    printf("waiter woken: %s\n", strstr(buf, "waiter woken\n") ? "yes" : "no");
    printf("waker: %s", strstr(buf, "waker woke 1\n") ? "woke 1\n" : buf);
    return 0;
}
