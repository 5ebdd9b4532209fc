/* sig_repeat: guest semantics a hostile probe found wrong, each compared with the native run.
 *   1. SIGFPE handled again and again: three integer divisions by zero, each caught by a
 *      handler that siglongjmps out (the CPU must not turn the second into a double fault).
 *   2. A write to a pipe whose read end is closed raises SIGPIPE (handled: the handler runs,
 *      the write fails with EPIPE; ignored: EPIPE alone).
 *   3. XGETBV and RDPKRU/WRPKRU agree with CPUID: XGETBV only where CPUID.1:ECX.OSXSAVE says
 *      the OS enabled it, WRPKRU only where XCR0 has the PKRU state and CPUID.7:ECX.OSPKE is
 *      set; otherwise both raise #UD (SIGILL). Prints whether each agrees, not the host's bits.
 *   4. Finally SIGPIPE with its default action kills the process (status: signal 13). */
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static sigjmp_buf env;
static volatile sig_atomic_t fpe_count, pipe_count, ill_count;

static void on_fpe(int sig)
{
    (void)sig;
    fpe_count++;
    siglongjmp(env, 1);
}

static void on_pipe(int sig)
{
    (void)sig;
    pipe_count++;
}

static void on_ill(int sig)
{
    (void)sig;
    ill_count++;
    siglongjmp(env, 1);
}

static volatile int zero = 0, one = 1;

/* Writes to a pipe with no reader: the write's result and errno. */
static int write_broken_pipe(int *err)
{
    int p[2];
    if (pipe(p) != 0)
        return -2;
    close(p[0]);
    int r = write(p[1], "x", 1);
    *err = errno;
    close(p[1]);
    return r;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fpe;
    sigaction(SIGFPE, &sa, NULL);
    for (volatile int i = 0; i < 3; i++) {
        if (sigsetjmp(env, 1) == 0) {
            volatile int r = one / zero;
            (void)r;
            printf("1. division %d did not fault\n", i);
        }
    }
    printf("1. SIGFPE handled %d time(s)\n", (int)fpe_count);

    sa.sa_handler = on_pipe;
    sigaction(SIGPIPE, &sa, NULL);
    int err = 0;
    int r = write_broken_pipe(&err);
    printf("2. handled: write %d (%s), SIGPIPE handled %d time(s)\n", r, strerrorname_np(err), (int)pipe_count);
    signal(SIGPIPE, SIG_IGN);
    r = write_broken_pipe(&err);
    printf("2. ignored: write %d (%s), handler ran %d time(s)\n", r, strerrorname_np(err), (int)pipe_count);

    sa.sa_handler = on_ill;
    sigaction(SIGILL, &sa, NULL);
    unsigned a, b, c, d;
    __cpuid(1, a, b, c, d);
    int osxsave = (c >> 27) & 1;
    volatile uint64_t xcr0 = 0;
    volatile int xgetbv_ok = 0;
    ill_count = 0;
    if (sigsetjmp(env, 1) == 0) {
        uint32_t lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((uint64_t)hi << 32) | lo;
        xgetbv_ok = 1;
    }
    printf("3. xgetbv %s CPUID's OSXSAVE\n", xgetbv_ok == osxsave ? "agrees with" : "DISAGREES with");
    __cpuid_count(7, 0, a, b, c, d);
    int ospke = (c >> 4) & 1;
    int pkru_state = (xcr0 >> 9) & 1;
    volatile int rdpkru_ok = 0, wrpkru_ok = 0;
    if (sigsetjmp(env, 1) == 0) {
        uint32_t pkru;
        __asm__ volatile("rdpkru" : "=a"(pkru) : "c"(0) : "rdx");
        rdpkru_ok = 1;
    }
    if (sigsetjmp(env, 1) == 0) {
        /* All keys allowed: harmless where it runs. */
        __asm__ volatile("wrpkru" : : "a"(0), "c"(0), "d"(0));
        wrpkru_ok = 1;
    }
    int pku = pkru_state && ospke;
    printf("3. rdpkru %s XCR0 and OSPKE\n", rdpkru_ok == pku ? "agrees with" : "DISAGREES with");
    printf("3. wrpkru %s XCR0 and OSPKE\n", wrpkru_ok == pku ? "agrees with" : "DISAGREES with");
    int refused = !xgetbv_ok + !rdpkru_ok + !wrpkru_ok;
    printf("3. where refused, by SIGILL: %s\n", (int)ill_count == refused ? "yes" : "NO");

    signal(SIGPIPE, SIG_DFL);
    printf("4. default SIGPIPE next\n");
    write_broken_pipe(&err);
    printf("4. still alive after SIGPIPE\n");
    return 0;
}
