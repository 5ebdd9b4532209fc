/* sig_handlers: guest signal handlers, as Linux runs them.
 *  1. SIGSEGV on an alternate stack, leaving the handler with siglongjmp;
 *  2. SIGFPE from an integer division by zero, with si_code FPE_INTDIV, leaving by siglongjmp;
 *  3. a SIGSEGV handler that skips the faulting instruction by editing the saved RIP in the
 *     ucontext and returning (rt_sigreturn restores the edited context);
 *  4. raise(SIGUSR1) with SA_RESETHAND: the handler runs once, the disposition resets;
 *  5. floating-point and XMM state survive a handler that clobbers them;
 *  6. a stack overflow caught by a SIGSEGV handler on the alternate stack.
 * Prints deterministic lines; exits 0. */
#define _GNU_SOURCE
#pragma GCC diagnostic ignored "-Winfinite-recursion"
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

static sigjmp_buf env;
static volatile int hits;
static volatile void *fault_addr;
static volatile int fpe_code;
static char altstack[64 * 1024];

static void segv_jump(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    int on_alt = 0;
    char here;
    if (&here >= altstack && &here < altstack + sizeof altstack)
        on_alt = 1;
    hits++;
    fault_addr = si->si_addr;
    printf("handler: signal %d on %s stack\n", sig, on_alt ? "alternate" : "normal");
    siglongjmp(env, 1);
}

static void fpe_jump(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    fpe_code = si->si_code;
    siglongjmp(env, 2);
}

static void segv_skip(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    (void)si;
    ucontext_t *uc = ucv;
    /* The faulting instruction is `movl $7, (%rax)`: c7 00 07 00 00 00, six bytes. */
    uc->uc_mcontext.gregs[REG_RIP] += 6;
    hits++;
}

static volatile int usr1;
static void on_usr1(int sig)
{
    (void)sig;
    usr1++;
}

static void fp_clobber(int sig)
{
    (void)sig;
    volatile double x = 1.0;
    for (int i = 0; i < 10; i++)
        x = x * 3.5 + 0.25;
    __asm__ volatile("pxor %%xmm1, %%xmm1; pxor %%xmm7, %%xmm7" ::: "xmm1", "xmm7");
}

static int depth;
static int recurse(int n)
{
    volatile char pad[512];
    pad[0] = (char)n;
    depth++;
    return recurse(n + 1) + pad[0];
}

int main(int argc, char **argv)
{
    (void)argv;
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
    sigaltstack(&ss, NULL);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = segv_jump;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, NULL);
    if (sigsetjmp(env, 1) == 0) {
        *(volatile int *)(uintptr_t)0x10 = 1; /* FAULT 1 */
        puts("not reached");
    }
    printf("1. back from SIGSEGV, si_addr=%p, hits=%d\n", (void *)fault_addr, hits);

    sa.sa_sigaction = fpe_jump;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGFPE, &sa, NULL);
    volatile int zero = argc - 1;
    if (sigsetjmp(env, 1) == 0) {
        volatile int q = 10 / zero;
        (void)q;
        puts("not reached");
    }
    printf("2. back from SIGFPE, si_code=%s\n", fpe_code == FPE_INTDIV ? "FPE_INTDIV" : "other");

    sa.sa_sigaction = segv_skip;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    int before = hits;
    __asm__ volatile("movq $0x20, %%rax; movl $7, (%%rax)" ::: "rax", "memory");
    printf("3. skipped the faulting store, handler ran %d time(s)\n", hits - before);

    struct sigaction su;
    memset(&su, 0, sizeof su);
    su.sa_handler = on_usr1;
    su.sa_flags = SA_RESETHAND;
    sigaction(SIGUSR1, &su, NULL);
    raise(SIGUSR1);
    struct sigaction now;
    sigaction(SIGUSR1, NULL, &now);
    printf("4. SIGUSR1 handled %d time(s), disposition now %s\n", usr1,
           now.sa_handler == SIG_DFL ? "SIG_DFL" : "still the handler");

    struct sigaction sf;
    memset(&sf, 0, sizeof sf);
    sf.sa_handler = fp_clobber;
    sigaction(SIGUSR2, &sf, NULL);
    volatile double a = 2.5, b = 4.0;
    double kept = a * b;
    raise(SIGUSR2);
    printf("5. floating point after a clobbering handler: %.2f\n", kept + a);

    sa.sa_sigaction = segv_jump;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, NULL);
    if (sigsetjmp(env, 1) == 0)
        recurse(0);
    printf("6. stack overflow caught on the alternate stack after %s\n", depth > 1000 ? "deep recursion" : "?");
    return 0;
}
