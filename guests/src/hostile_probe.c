// Hostile shapes of a guest (docs/testing.md, "A third sweep"), one per argument:
//   segv-loop    a SIGSEGV handler that returns to the faulting store, which faults again forever
//   block-pause  every signal blocked, then pause() forever
//   spin         an endless loop without a system call
//   mmap47       mmap of 2^47 bytes and other impossible sizes and places (ENOMEM, as natively)
//   brk          brk below its start, past the address space, shrinking and growing again
//   clone3       clone3 with struct sizes from 0 to two pages and bytes past the known fields
//   rlimits      setrlimit read back, soft above hard, RLIMIT_AS bounding mmap
// The last four print what they meet; tests/native_equivalence.rs compares that with Linux.
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile unsigned long handled;

static void returns(int s) {
    (void)s;
    handled++;
}

static const char *res(void *p) {
    return p == MAP_FAILED ? strerror(errno) : "ok";
}

static void mmap47(void) {
    size_t big = 1UL << 47;
    void *p = mmap(0, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("2^47 read-write: %s\n", res(p));
    p = mmap(0, big, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    printf("2^47 PROT_NONE, MAP_NORESERVE: %s\n", res(p));
    p = mmap(0, (size_t)-4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("2^64 - 4096: %s\n", res(p));
    p = mmap((void *)big, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    printf("MAP_FIXED at 2^47: %s\n", res(p));
}

static void brk_games(void) {
    long b0 = syscall(SYS_brk, 0);
    long a = syscall(SYS_brk, b0 + (1L << 20));
    printf("grow by 1 MiB: %d\n", a == b0 + (1L << 20));
    ((volatile char *)b0)[(1 << 20) - 1] = 7;
    printf("below its start: unchanged %d\n", syscall(SYS_brk, b0 - (1L << 30)) == a);
    printf("to 2^47: unchanged %d\n", syscall(SYS_brk, 1L << 47) == a);
    printf("to -4096: unchanged %d\n", syscall(SYS_brk, -4096L) == a);
    printf("shrink: %d\n", syscall(SYS_brk, b0 + 100) == b0 + 100);
    long g = syscall(SYS_brk, b0 + (1L << 20));
    printf("grow again: %d, the old byte gone: %d\n", g == b0 + (1L << 20), ((volatile char *)b0)[(1 << 20) - 1] == 0);
    printf("back to its start: %d\n", syscall(SYS_brk, b0) == b0);
}

static void clone3_sizes(void) {
    static unsigned char buf[8192];
    size_t sizes[] = {0, 63, 64, 80, 88, 96, 4096, 4097, 8192};
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        memset(buf, 0, sizeof buf);
        ((uint64_t *)buf)[4] = SIGCHLD; // exit_signal
        fflush(stdout);
        long r = syscall(SYS_clone3, buf, sizes[i]);
        int e = errno;
        if (r == 0)
            _exit(3);
        if (r > 0) {
            int st;
            waitpid(r, &st, 0);
            printf("size %zu: a child, status %d\n", sizes[i], WEXITSTATUS(st));
        } else {
            printf("size %zu: %s\n", sizes[i], strerror(e));
        }
    }
    memset(buf, 0, sizeof buf);
    ((uint64_t *)buf)[4] = SIGCHLD;
    buf[100] = 1;
    long r = syscall(SYS_clone3, buf, 128);
    int e = errno;
    if (r == 0)
        _exit(3);
    if (r > 0)
        waitpid(r, 0, 0);
    printf("size 128, a byte set past the known fields: %s\n", r > 0 ? "a child" : strerror(e));
    r = syscall(SYS_clone3, (void *)8, 88);
    e = errno;
    printf("unreadable: %s\n", r < 0 ? strerror(e) : "?");
}

static void rlimits(void) {
    struct rlimit r = {1 << 20, 2 << 20};
    int rc = setrlimit(RLIMIT_FSIZE, &r);
    getrlimit(RLIMIT_FSIZE, &r);
    printf("RLIMIT_FSIZE set %d, read back %lu %lu\n", rc, (unsigned long)r.rlim_cur, (unsigned long)r.rlim_max);
    r.rlim_cur = 3 << 20;
    rc = setrlimit(RLIMIT_FSIZE, &r);
    printf("soft above hard: %d %s\n", rc, strerror(errno));
    struct rlimit as = {64 << 20, 64 << 20};
    rc = setrlimit(RLIMIT_AS, &as);
    void *p = mmap(0, 128 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("RLIMIT_AS 64 MiB set %d; mmap of 128 MiB: %s\n", rc, res(p));
    p = mmap(0, 8 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("mmap of 8 MiB: %s\n", res(p));
    getrlimit(RLIMIT_AS, &as);
    printf("RLIMIT_AS read back: %lu MiB %lu MiB\n", (unsigned long)as.rlim_cur >> 20, (unsigned long)as.rlim_max >> 20);
}

int main(int argc, char **argv) {
    static char out[4096];
    // No malloc for stdout's buffer: `brk` moves the heap under malloc's feet.
    setvbuf(stdout, out, _IOFBF, sizeof out);
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "segv-loop")) {
        signal(SIGSEGV, returns);
        *(volatile int *)0 = 1;
    } else if (!strcmp(what, "block-pause")) {
        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, 0);
        for (;;)
            pause();
    } else if (!strcmp(what, "spin")) {
        for (volatile unsigned long x = 0;; x++)
            ;
    } else if (!strcmp(what, "mmap47")) {
        mmap47();
    } else if (!strcmp(what, "brk")) {
        brk_games();
    } else if (!strcmp(what, "clone3")) {
        clone3_sizes();
    } else if (!strcmp(what, "rlimits")) {
        rlimits();
    } else {
        fprintf(stderr, "usage: hostile_probe segv-loop|block-pause|spin|mmap47|brk|clone3|rlimits\n");
        return 2;
    }
    return 0;
}
