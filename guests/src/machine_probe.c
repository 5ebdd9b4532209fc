/* machine_probe: what a guest does to the machine itself (docs/testing.md, "A sixth sweep"),
 * one case per argument; each prints what it meets, and tests/native_equivalence.rs compares
 * that with Linux:
 *   syscalls  system call numbers Linux has none of (-1, 1000, the x32 ABI's), a number with
 *             bits above 32 (Linux ignores them), clone flags Linux refuses, futex wakes and
 *             requeues on bad words, and what a requeue returns
 *   prctl     prctl's settings read back (parent-death signal, subreaper, no_new_privs, timer
 *             slack, THP, keepcaps, seccomp, TSC, bounding set), personality, arch_prctl's
 *             CPUID and GS controls
 *   reaper    a subreaper adopts its orphaned grandchild; a child's parent-death signal
 *   mem       mincore, mlockall, madvise's unknown advice, membarrier
 *   alias     one memfd mapped shared twice, read-write and read-only: stores through one and
 *             write(2) show through the other
 *   jit       one memfd mapped shared read-write and read-execute (a JIT's dual mapping): code
 *             written through the first, run through the second, rewritten and run again
 *   leftover  the sixth sweep's leftovers: sendto/recvfrom of a bad buffer on a pipe,
 *             PR_SET_VMA, membarrier before registering, int $n for every kind of vector,
 *             MADV_WIPEONFORK and MADV_DONTFORK seen from a child
 *   seventh   the seventh sweep's finds: sched_setaffinity then sched_getcpu (also in a
 *             thread), fadvise's advice checked, a pipe's /proc/self/fd link and inode,
 *             RLIMIT_AS lowered with the hard limit left unlimited
 * Exits 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/futex.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* A raw system call: its result, or -errno. */
static long sys(long n, long a, long b, long c, long d, long e, long f)
{
    long v = syscall(n, a, b, c, d, e, f);
    return v < 0 ? -errno : v;
}

static int q1, q2;

static void *requeue_waiter(void *arg)
{
    (void)arg;
    syscall(SYS_futex, &q1, FUTEX_WAIT_PRIVATE, 0, 0, 0, 0);
    return 0;
}

static void syscalls(void)
{
    const long none[] = {-1, 400, 1000, 0x40000000 | 39, 0x7fffffff};
    for (unsigned i = 0; i < sizeof none / sizeof *none; i++)
        printf("syscall %#lx -> %ld\n", none[i], sys(none[i], 0, 0, 0, 0, 0, 0));
    printf("syscall 2^32+getpid is getpid: %d\n", sys(0x100000000L | SYS_getpid, 0, 0, 0, 0, 0, 0) == getpid());
    printf("clone CLONE_SIGHAND alone %ld\n", sys(SYS_clone, CLONE_SIGHAND | SIGCHLD, 0, 0, 0, 0, 0));
    printf("clone CLONE_THREAD alone %ld\n", sys(SYS_clone, CLONE_THREAD | SIGCHLD, 0, 0, 0, 0, 0));
    printf("clone CLONE_FS|CLONE_NEWNS %ld\n", sys(SYS_clone, CLONE_FS | CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0, 0));
    int word = 0;
    const long bad[] = {0x1000, (long)0x8000000000000000UL, -4096, (long)&word + 1};
    for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++)
        printf("futex at bad word %u: wake %ld wake_private %ld requeue %ld\n", i,
               sys(SYS_futex, bad[i], FUTEX_WAKE, 1, 0, 0, 0), sys(SYS_futex, bad[i], FUTEX_WAKE_PRIVATE, 1, 0, 0, 0),
               sys(SYS_futex, (long)&word, FUTEX_REQUEUE, 1, 1, bad[i], 0));
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], 0, requeue_waiter, 0);
    /* Wait until all three wait: a requeue of all of them to q2 and back counts them. */
    for (int moved = 0; moved < 3;) {
        usleep(1000);
        moved = (int)sys(SYS_futex, (long)&q1, FUTEX_REQUEUE_PRIVATE, 0, 10, (long)&q2, 0);
        sys(SYS_futex, (long)&q2, FUTEX_REQUEUE_PRIVATE, 0, 10, (long)&q1, 0);
    }
    printf("cmp_requeue of a changed word %ld\n", sys(SYS_futex, (long)&q1, FUTEX_CMP_REQUEUE_PRIVATE, 1, 1, (long)&q2, 1));
    printf("cmp_requeue wakes 1, moves 1: %ld\n", sys(SYS_futex, (long)&q1, FUTEX_CMP_REQUEUE_PRIVATE, 1, 1, (long)&q2, 0));
    printf("requeue moves 1: %ld\n", sys(SYS_futex, (long)&q1, FUTEX_REQUEUE_PRIVATE, 0, 5, (long)&q2, 0));
    printf("wake the two moved: %ld\n", sys(SYS_futex, (long)&q2, FUTEX_WAKE_PRIVATE, 10, 0, 0, 0));
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], 0);
}

static void prctls(void)
{
    int x = -7;
    printf("pdeathsig set %ld", sys(SYS_prctl, PR_SET_PDEATHSIG, SIGUSR2, 0, 0, 0, 0));
    printf(" get %ld", sys(SYS_prctl, PR_GET_PDEATHSIG, (long)&x, 0, 0, 0, 0));
    printf(" -> %d", x);
    printf(" bad %ld\n", sys(SYS_prctl, PR_SET_PDEATHSIG, 65, 0, 0, 0, 0));
    x = -7;
    printf("subreaper get %ld", sys(SYS_prctl, PR_GET_CHILD_SUBREAPER, (long)&x, 0, 0, 0, 0));
    printf(" -> %d", x);
    printf(" set %ld", sys(SYS_prctl, PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0, 0));
    printf(" get %ld", sys(SYS_prctl, PR_GET_CHILD_SUBREAPER, (long)&x, 0, 0, 0, 0));
    printf(" -> %d\n", x);
    printf("no_new_privs %ld", sys(SYS_prctl, PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0, 0));
    printf(" unset %ld", sys(SYS_prctl, PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0, 0));
    printf(" set %ld", sys(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0));
    printf(" -> %ld\n", sys(SYS_prctl, PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0, 0));
    printf("timerslack %ld", sys(SYS_prctl, PR_GET_TIMERSLACK, 0, 0, 0, 0, 0));
    printf(" set %ld", sys(SYS_prctl, PR_SET_TIMERSLACK, 1000, 0, 0, 0, 0));
    printf(" -> %ld", sys(SYS_prctl, PR_GET_TIMERSLACK, 0, 0, 0, 0, 0));
    printf(" reset %ld", sys(SYS_prctl, PR_SET_TIMERSLACK, 0, 0, 0, 0, 0));
    printf(" -> %ld\n", sys(SYS_prctl, PR_GET_TIMERSLACK, 0, 0, 0, 0, 0));
    printf("thp %ld", sys(SYS_prctl, PR_GET_THP_DISABLE, 0, 0, 0, 0, 0));
    printf(" set %ld", sys(SYS_prctl, PR_SET_THP_DISABLE, 1, 0, 0, 0, 0));
    printf(" -> %ld", sys(SYS_prctl, PR_GET_THP_DISABLE, 0, 0, 0, 0, 0));
    printf(" get with an argument %ld\n", sys(SYS_prctl, PR_GET_THP_DISABLE, 1, 0, 0, 0, 0));
    printf("keepcaps %ld", sys(SYS_prctl, PR_GET_KEEPCAPS, 0, 0, 0, 0, 0));
    printf(" set %ld", sys(SYS_prctl, PR_SET_KEEPCAPS, 1, 0, 0, 0, 0));
    printf(" -> %ld", sys(SYS_prctl, PR_GET_KEEPCAPS, 0, 0, 0, 0, 0));
    printf(" bad %ld\n", sys(SYS_prctl, PR_SET_KEEPCAPS, 2, 0, 0, 0, 0));
    x = -7;
    printf("seccomp %ld timing %ld", sys(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0, 0), sys(SYS_prctl, PR_GET_TIMING, 0, 0, 0, 0, 0));
    printf(" tsc %ld", sys(SYS_prctl, PR_GET_TSC, (long)&x, 0, 0, 0, 0));
    printf(" -> %d", x);
    printf(" tsc enable %ld\n", sys(SYS_prctl, PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0, 0));
    /* (Which capabilities the bounding set holds, and the secure bits, are the host's.) */
    printf("capbset 99 %ld; no such option %ld\n", sys(SYS_prctl, PR_CAPBSET_READ, 99, 0, 0, 0, 0),
           sys(SYS_prctl, 1000, 0, 0, 0, 0, 0));
    printf("personality %#lx", sys(SYS_personality, 0xffffffff, 0, 0, 0, 0, 0));
    printf(" set %#lx", sys(SYS_personality, ADDR_NO_RANDOMIZE, 0, 0, 0, 0, 0));
    printf(" -> %#lx", sys(SYS_personality, 0xffffffff, 0, 0, 0, 0, 0));
    pid_t c = fork();
    if (c == 0)
        _exit((int)sys(SYS_personality, 0xffffffff, 0, 0, 0, 0, 0) >> 16);
    int st;
    waitpid(c, &st, 0);
    printf(" child's %#x", WEXITSTATUS(st) << 16);
    printf(" reset %#lx\n", sys(SYS_personality, 0, 0, 0, 0, 0, 0));
    printf("arch GET_CPUID %ld SET_CPUID(1) %ld\n", sys(SYS_arch_prctl, 0x1011, 0, 0, 0, 0, 0),
           sys(SYS_arch_prctl, 0x1012, 1, 0, 0, 0, 0));
    printf("arch SET_GS non-canonical %ld SET_FS non-canonical %ld\n",
           sys(SYS_arch_prctl, 0x1001, (long)0x8000000000000000UL, 0, 0, 0, 0),
           sys(SYS_arch_prctl, 0x1002, (long)0x8000000000000000UL, 0, 0, 0, 0));
}

static volatile sig_atomic_t deathsig;

static void on_death(int s)
{
    deathsig = s;
}

static void reaper(void)
{
    pid_t top = getpid();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    int fds[2];
    pipe(fds);
    pid_t a = fork();
    if (a == 0) {
        pid_t b = fork();
        if (b == 0) {
            signal(SIGUSR1, on_death);
            prctl(PR_SET_PDEATHSIG, SIGUSR1);
            write(fds[1], "r", 1); /* ready */
            for (int i = 0; i < 2000 && getppid() != top; i++)
                usleep(1000);
            for (int i = 0; i < 1000 && !deathsig; i++)
                usleep(1000);
            char m[2] = {deathsig == SIGUSR1 ? 'S' : 'n', getppid() == top ? 'A' : 'o'};
            write(fds[1], m, 2);
            _exit(0);
        }
        char r;
        read(fds[0], &r, 1);
        _exit(3);
    }
    int st;
    waitpid(a, &st, 0);
    char m[2];
    read(fds[0], m, 2);
    printf("middle child exit %d; grandchild: %s, %s\n", WEXITSTATUS(st),
           m[0] == 'S' ? "got its parent-death signal" : "no parent-death signal",
           m[1] == 'A' ? "adopted by the subreaper" : "not adopted");
    pid_t w = waitpid(-1, &st, 0);
    printf("subreaper reaps it: %d, status %d\n", w > 0, WEXITSTATUS(st));
}

static void mem(void)
{
    char *p = mmap(0, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(p, 'a', 3 * 4096);
    unsigned char vec[3] = {7, 7, 7};
    int r = mincore(p, 3 * 4096, vec) ? -errno : 0; /* before vec is read below */
    printf("mincore %d resident %d%d%d\n", r, vec[0] & 1, vec[1] & 1, vec[2] & 1);
    printf("mincore unaligned %d\n", mincore(p + 1, 4096, vec) ? -errno : 0);
    munmap(p + 4096, 4096);
    printf("mincore over a hole %d\n", mincore(p, 3 * 4096, vec) ? -errno : 0);
    printf("mincore bad vector %d\n", mincore(p, 4096, (unsigned char *)8) ? -errno : 0);
    /* (MCL_CURRENT may exceed an unprivileged RLIMIT_MEMLOCK natively.) */
    printf("mlockall %d", mlockall(MCL_FUTURE) ? -errno : 0);
    printf(" munlockall %d", munlockall() ? -errno : 0);
    printf(" mlockall(0) %d\n", mlockall(0) ? -errno : 0);
    printf("madvise unknown advice %d, MADV_NORMAL %d\n", madvise(p, 4096, 12345) ? -errno : 0,
           madvise(p, 4096, MADV_NORMAL) ? -errno : 0);
    long q = sys(SYS_membarrier, 0, 0, 0, 0, 0, 0);
    printf("membarrier query has global, private expedited and its registration: %d\n", q > 0 && (q & 0x19) == 0x19);
    printf("membarrier register %ld", sys(SYS_membarrier, 16, 0, 0, 0, 0, 0));
    printf(" private expedited %ld", sys(SYS_membarrier, 8, 0, 0, 0, 0, 0));
    printf(" global %ld", sys(SYS_membarrier, 1, 0, 0, 0, 0, 0));
    printf(" bad %ld\n", sys(SYS_membarrier, 3, 0, 0, 0, 0, 0));
}

static void alias(void)
{
    int fd = memfd_create("alias", 0);
    ftruncate(fd, 4096);
    char *rw = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *ro = mmap(0, 4096, PROT_READ, MAP_SHARED, fd, 0);
    rw[0] = 'x';
    printf("store through one view, read through the other: %c\n", ro[0] ? ro[0] : '0');
    pwrite(fd, "y", 1, 1);
    printf("pwrite, read through the read-only view: %c\n", ro[1] ? ro[1] : '0');
    printf("mprotect of the read-only view to write %d\n", mprotect(ro, 4096, PROT_READ | PROT_WRITE) ? -errno : 0);
    ro[2] = 'z';
    printf("store through it, read through the first: %c\n", rw[2] ? rw[2] : '0');
}

/* Code for x86-64 that returns `v`: mov eax, imm32; ret. */
static void put_ret(unsigned char *at, unsigned v)
{
    at[0] = 0xb8;
    memcpy(at + 1, &v, 4);
    at[5] = 0xc3;
}

static void jit(void)
{
    int fd = memfd_create("jit", 0);
    ftruncate(fd, 2 * 4096);
    unsigned char *w = mmap(0, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    unsigned char *x = mmap(0, 2 * 4096, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
    int (*f)(void) = (int (*)(void))x, (*g)(void) = (int (*)(void))(x + 4096 + 64);
    put_ret(w, 1);
    printf("written through the writable view, run through the other: %d\n", f());
    for (unsigned i = 2; i <= 5; i++) {
        put_ret(w, i);
        printf("rewritten, run again: %d\n", f());
    }
    /* Code in the executable view first run before the writable view wrote it anew. */
    put_ret(w + 4096 + 64, 7);
    int a = g();
    put_ret(w + 4096 + 64, 8);
    printf("second page: %d then %d\n", a, g());
    /* Rewritten by pwrite(2), and through a third mapping made after the code first ran. */
    unsigned char code[6];
    put_ret(code, 9);
    pwrite(fd, code, sizeof code, 0);
    printf("pwrite, run: %d\n", f());
    unsigned char *w2 = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    put_ret(w2, 10);
    printf("a third view's store, run: %d\n", f());
    munmap(w, 2 * 4096);
    put_ret(w2, 11);
    printf("the first writable view gone, the third's store, run: %d\n", f());
}

static sigjmp_buf jb;
static volatile int got_sig, got_code;
static volatile unsigned long got_addr, got_rip, int_at;

static void on_fault(int s, siginfo_t *si, void *uc)
{
    got_sig = s;
    got_code = si->si_code;
    got_addr = (unsigned long)si->si_addr;
    got_rip = ((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
    siglongjmp(jb, 1);
}

/* `int $n`, the address of the instruction in int_at. */
#define INT(n)                                                                                                 \
    do {                                                                                                       \
        got_sig = 0;                                                                                           \
        if (!sigsetjmp(jb, 1))                                                                                 \
            __asm__ volatile("lea 1f(%%rip), %%rax; mov %%rax, %0; 1: int $" #n : "=m"(int_at) : : "rax", "memory"); \
        printf("int $%#x: signal %d code %#x addr %s rip %s\n", n, got_sig, got_code, got_addr ? "set" : "0",     \
               got_rip == int_at ? "at it" : got_rip == int_at + 2 ? "after it" : "elsewhere");                  \
    } while (0)

static void leftover(void)
{
    int p[2];
    pipe(p);
    printf("pipe: sendto non-canonical buffer %ld, unmapped %ld; recvfrom -4096 %ld, unmapped %ld\n",
           sys(SYS_sendto, p[1], (long)0x8000000000000000UL, 1, 0, 0, 0), sys(SYS_sendto, p[1], 0x1000, 1, 0, 0, 0),
           sys(SYS_recvfrom, p[0], -4096, 1, 0, 0, 0), sys(SYS_recvfrom, p[0], 0x1000, 1, 0, 0, 0));
    char *a = mmap(0, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("PR_SET_VMA anon name %ld\n", sys(SYS_prctl, 0x53564d41, 0, (long)a, 4096, (long)"probe", 0));
    printf("membarrier private expedited %ld", sys(SYS_membarrier, 8, 0, 0, 0, 0, 0));
    printf(" sync_core %ld", sys(SYS_membarrier, 32, 0, 0, 0, 0, 0));
    printf(" register %ld", sys(SYS_membarrier, 16, 0, 0, 0, 0, 0));
    printf(" private expedited %ld", sys(SYS_membarrier, 8, 0, 0, 0, 0, 0));
    printf(" sync_core %ld\n", sys(SYS_membarrier, 32, 0, 0, 0, 0, 0));
    struct sigaction sa = {0};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    for (int s = 1; s < 32; s++)
        sigaction(s, &sa, 0);
    INT(0);
    INT(1);
    INT(2);
    INT(3);
    INT(4);
    INT(5);
    INT(6);
    INT(7);
    INT(8);
    INT(13);
    INT(14);
    INT(16);
    INT(17);
    INT(18);
    INT(19);
    INT(0x21);
    INT(0xff);
    /* A divide error whose instruction follows one ending in the bytes of `int $0` (CD 00, the
       top of an immediate): an exception, not an interrupt. */
    got_sig = 0;
    if (!sigsetjmp(jb, 1))
        __asm__ volatile("xor %%edx, %%edx; xor %%esi, %%esi; mov $1, %%eax; mov $0x00cd0000, %%ecx; div %%esi"
                         :
                         :
                         : "rax", "rcx", "rdx", "rsi", "memory");
    printf("div by zero after bytes CD 00: signal %d code %#x\n", got_sig, got_code);
    sa.sa_handler = SIG_DFL;
    sa.sa_flags = 0;
    for (int s = 1; s < 32; s++)
        sigaction(s, &sa, 0);
    memset(a, 'a', 3 * 4096);
    printf("WIPEONFORK %d", madvise(a, 4096, MADV_WIPEONFORK) ? -errno : 0);
    printf(" DONTFORK %d", madvise(a + 4096, 4096, MADV_DONTFORK) ? -errno : 0);
    char *sh = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    printf(" WIPEONFORK of shared memory %d\n", madvise(sh, 4096, MADV_WIPEONFORK) ? -errno : 0);
    pid_t c = fork();
    if (c == 0) {
        unsigned char v;
        printf("child: wiped page %s, not-forked page %s, the third page %c\n", a[0] || a[4095] ? "kept" : "zeros",
               mincore(a + 4096, 4096, &v) && errno == ENOMEM ? "absent" : "present", a[2 * 4096]);
        a[1] = 'c';
        pid_t g = fork();
        if (g == 0) {
            printf("grandchild: wiped page %s\n", a[1] ? "kept" : "zeros");
            _exit(0);
        }
        waitpid(g, 0, 0);
        _exit(0);
    }
    waitpid(c, 0, 0);
    printf("parent: pages %c %c %c\n", a[0], a[4096], a[2 * 4096]);
    printf("KEEPONFORK %d DOFORK %d\n", madvise(a, 4096, MADV_KEEPONFORK) ? -errno : 0,
           madvise(a + 4096, 4096, MADV_DOFORK) ? -errno : 0);
    c = fork();
    if (c == 0) {
        printf("child after KEEPONFORK/DOFORK: %c %c\n", a[0], a[4096]);
        _exit(0);
    }
    waitpid(c, 0, 0);
}

static void *on_cpu(void *arg)
{
    (void)arg;
    cpu_set_t s;
    CPU_ZERO(&s);
    sched_getaffinity(0, sizeof s, &s);
    printf("a new thread: %d CPU(s), on CPU %d\n", CPU_COUNT(&s), sched_getcpu());
    return 0;
}

static void seventh(void)
{
    cpu_set_t s, all;
    CPU_ZERO(&all);
    sched_getaffinity(0, sizeof all, &all);
    CPU_ZERO(&s);
    CPU_SET(1000, &s);
    printf("setaffinity to no CPU that exists %d\n", sched_setaffinity(0, sizeof s, &s) ? -errno : 0);
    CPU_ZERO(&s);
    CPU_SET(1, &s);
    printf("setaffinity to CPU 1 %d", sched_setaffinity(0, sizeof s, &s) ? -errno : 0);
    CPU_ZERO(&s);
    sched_getaffinity(0, sizeof s, &s);
    printf(": %d CPU(s), CPU 1 among them %d, on CPU %d\n", CPU_COUNT(&s), CPU_ISSET(1, &s), sched_getcpu());
    pthread_t t;
    pthread_create(&t, 0, on_cpu, 0);
    pthread_join(t, 0);
    printf("setaffinity of no such thread %ld\n", sys(SYS_sched_setaffinity, 999999, sizeof s, (long)&s, 0, 0, 0));
    /* (Which CPU a thread free to run anywhere is on is the host's.) */
    printf("back to all %d\n", sched_setaffinity(0, sizeof all, &all) ? -errno : 0);
    int p[2];
    pipe(p);
    int f = open("/proc/self/exe", O_RDONLY);
    printf("fadvise sequential %d unknown %d negative length %d; pipe %d\n", posix_fadvise(f, 0, 0, POSIX_FADV_SEQUENTIAL),
           posix_fadvise(f, 0, 0, 99), posix_fadvise(f, 0, -1, 0), posix_fadvise(p[0], 0, 0, 0));
    struct stat a, b;
    fstat(p[0], &a);
    fstat(p[1], &b);
    char path[64], link[64] = {0}, want[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", p[1]);
    readlink(path, link, sizeof link - 1);
    snprintf(want, sizeof want, "pipe:[%lu]", (unsigned long)a.st_ino);
    printf("a pipe's two ends one inode %d, its link names it %d\n", a.st_ino == b.st_ino, !strcmp(link, want));
    struct rlimit as, lower = {64 << 20, RLIM_INFINITY};
    getrlimit(RLIMIT_AS, &as);
    printf("RLIMIT_AS hard unlimited %d; soft 64 MiB, hard unlimited %d", as.rlim_max == RLIM_INFINITY,
           setrlimit(RLIMIT_AS, &lower) ? -errno : 0);
    void *m = mmap(0, 128 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("; mmap of 128 MiB %d\n", m == MAP_FAILED ? -errno : 0);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, 0, _IOLBF, 0);
    const char *c = argc > 1 ? argv[1] : "";
    if (!strcmp(c, "syscalls"))
        syscalls();
    else if (!strcmp(c, "prctl"))
        prctls();
    else if (!strcmp(c, "reaper"))
        reaper();
    else if (!strcmp(c, "mem"))
        mem();
    else if (!strcmp(c, "alias"))
        alias();
    else if (!strcmp(c, "jit"))
        jit();
    else if (!strcmp(c, "leftover"))
        leftover();
    else if (!strcmp(c, "seventh"))
        seventh();
    else {
        fprintf(stderr, "usage: machine_probe syscalls|prctl|reaper|mem|alias|jit|leftover|seventh\n");
        return 2;
    }
    return 0;
}
