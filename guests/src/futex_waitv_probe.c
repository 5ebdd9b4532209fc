/* futex_waitv(2) (Linux 5.16): its errors in Linux's order, and waits on several words woken by
 * FUTEX_WAKE, FUTEX_WAKE_BITSET and a requeue on any one of them, returning that word's index;
 * private and shared words (a child process woken through a shared mapping), 128 words, a
 * timeout on CLOCK_MONOTONIC and CLOCK_REALTIME, a signal with and without SA_RESTART. Every
 * line it prints is the same natively and under ferrite: it knows a thread is queued when a
 * wake (or a requeue) of one waiter on its word reports one. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef FUTEX2_SIZE_U8
#define FUTEX2_SIZE_U8 0
#define FUTEX2_SIZE_U64 3
#endif
#ifndef FUTEX_32
#define FUTEX_32 2
#endif

static long waitv(struct futex_waitv *w, unsigned n, unsigned flags, struct timespec *ts, int clk) {
    return syscall(SYS_futex_waitv, w, n, flags, ts, clk);
}

static long fx(uint32_t *w, int op, uint32_t val, long val2, uint32_t *w2, uint32_t val3) {
    return syscall(SYS_futex, w, op, val, val2, w2, val3);
}

static const char *res(long r) {
    static char buf[4][64];
    static int i;
    char *b = buf[i++ % 4];
    if (r < 0)
        snprintf(b, 64, "-1 %s", strerror(errno));
    else
        snprintf(b, 64, "%ld", r);
    return b;
}

static uint32_t words[128];
static struct futex_waitv vec[128];

static void set(struct futex_waitv *v, uint32_t *w, uint64_t val, uint32_t flags) {
    memset(v, 0, sizeof *v);
    v->uaddr = (uintptr_t)w;
    v->val = val;
    v->flags = flags;
}

/* A waiter thread: futex_waitv on the first `n` entries of `vec`. */
static unsigned nwait;
static long result;
static int result_errno;

static void *waiter(void *arg) {
    (void)arg;
    result = waitv(vec, nwait, 0, NULL, 0);
    result_errno = errno;
    return NULL;
}

/* Wakes one waiter on `w` (with `op`, FUTEX_WAKE or FUTEX_WAKE_BITSET) once one is queued. */
static void wake_when_queued(uint32_t *w, int op, uint32_t bits) {
    while (fx(w, op, 1, 0, NULL, bits) != 1)
        usleep(1000);
}

static void report(const char *what, pthread_t t) {
    pthread_join(t, NULL);
    errno = result_errno;
    printf("%-52s %s\n", what, res(result));
}

static void onsig(int s) { (void)s; }

static long plain_result = -9;

static void *plain_waiter(void *arg) {
    (void)arg;
    plain_result = fx(&words[2], FUTEX_WAIT_PRIVATE, 0, 0, NULL, 0);
    return NULL;
}

int main(void) {
    struct timespec ts;
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* --- errors, in sys_futex_waitv's order --- */
    set(&vec[0], &words[0], 0, FUTEX_32 | FUTEX_PRIVATE_FLAG);
    set(&vec[1], &words[1], 0, FUTEX_32 | FUTEX_PRIVATE_FLAG);
    printf("%-52s %s\n", "flags 1:", res(waitv(vec, 1, 1, NULL, 0)));
    printf("%-52s %s\n", "no waiters:", res(waitv(vec, 0, 0, NULL, 0)));
    printf("%-52s %s\n", "129 waiters:", res(waitv(vec, 129, 0, NULL, 0)));
    printf("%-52s %s\n", "a NULL vector:", res(waitv(NULL, 1, 0, NULL, 0)));
    ts.tv_sec = 0;
    ts.tv_nsec = 0;
    printf("%-52s %s\n", "CLOCK_BOOTTIME with a timeout:", res(waitv(vec, 1, 0, &ts, CLOCK_BOOTTIME)));
    words[1] = 7;
    printf("%-52s %s\n", "CLOCK_BOOTTIME without one (word 1 differs):", res(waitv(vec, 2, 0, NULL, CLOCK_BOOTTIME)));
    ts.tv_nsec = 1000000000;
    printf("%-52s %s\n", "tv_nsec 1e9:", res(waitv(vec, 1, 0, &ts, CLOCK_MONOTONIC)));
    printf("%-52s %s\n", "an unmapped timeout:", res(waitv(vec, 1, 0, (struct timespec *)8, CLOCK_MONOTONIC)));
    printf("%-52s %s\n", "an unmapped vector:", res(waitv((struct futex_waitv *)8, 1, 0, NULL, 0)));
    set(&vec[1], &words[1], 7, FUTEX2_SIZE_U8);
    printf("%-52s %s\n", "entry 1 FUTEX2_SIZE_U8:", res(waitv(vec, 2, 0, NULL, 0)));
    set(&vec[1], &words[1], 7, FUTEX2_SIZE_U64);
    printf("%-52s %s\n", "entry 1 FUTEX2_SIZE_U64:", res(waitv(vec, 2, 0, NULL, 0)));
    set(&vec[1], &words[1], 7, FUTEX_32 | 0x10);
    printf("%-52s %s\n", "entry 1 an unknown flag:", res(waitv(vec, 2, 0, NULL, 0)));
    set(&vec[1], &words[1], 7, FUTEX_32);
    vec[1].__reserved = 1;
    printf("%-52s %s\n", "entry 1 __reserved 1:", res(waitv(vec, 2, 0, NULL, 0)));
    set(&vec[1], &words[1], 1ull << 32, FUTEX_32);
    printf("%-52s %s\n", "entry 1 a 33-bit value:", res(waitv(vec, 2, 0, NULL, 0)));
    set(&vec[1], (uint32_t *)((char *)&words[1] + 2), 7, FUTEX_32);
    printf("%-52s %s\n", "entry 1 misaligned:", res(waitv(vec, 2, 0, NULL, 0)));
    set(&vec[1], (uint32_t *)64, 7, FUTEX_32 | FUTEX_PRIVATE_FLAG);
    printf("%-52s %s\n", "entry 1 unmapped:", res(waitv(vec, 2, 0, NULL, 0)));
    words[0] = 1;
    printf("%-52s %s\n", "entry 0 differs, entry 1 unmapped:", res(waitv(vec, 2, 0, NULL, 0)));
    words[0] = 0;
    set(&vec[1], &words[1], 8, FUTEX_32 | FUTEX_PRIVATE_FLAG);
    printf("%-52s %s\n", "entry 1 differs:", res(waitv(vec, 2, 0, NULL, 0)));

    /* --- timeouts: absolute, on the clock named --- */
    set(&vec[1], &words[1], 7, FUTEX_32 | FUTEX_PRIVATE_FLAG);
    ts.tv_sec = 0;
    ts.tv_nsec = 1;
    printf("%-52s %s\n", "CLOCK_MONOTONIC, a deadline passed:", res(waitv(vec, 2, 0, &ts, CLOCK_MONOTONIC)));
    struct timespec after;
    const int clocks[2] = {CLOCK_MONOTONIC, CLOCK_REALTIME};
    for (int c = 0; c < 2; c++) {
        clock_gettime(clocks[c], &ts);
        ts.tv_nsec += 20000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        printf("%-52s %s\n", c ? "CLOCK_REALTIME, 20 ms ahead:" : "CLOCK_MONOTONIC, 20 ms ahead:",
               res(waitv(vec, 2, 0, &ts, clocks[c])));
        clock_gettime(clocks[c], &after);
        printf("%-52s %d\n", "  and it waited until then:",
               after.tv_sec > ts.tv_sec || (after.tv_sec == ts.tv_sec && after.tv_nsec >= ts.tv_nsec));
    }

    /* --- a thread waits on three words; FUTEX_WAKE on the third --- */
    words[1] = 0;
    pthread_t t;
    for (int i = 0; i < 3; i++)
        set(&vec[i], &words[i], 0, FUTEX_32 | FUTEX_PRIVATE_FLAG);
    nwait = 3;
    pthread_create(&t, NULL, waiter, NULL);
    wake_when_queued(&words[2], FUTEX_WAKE_PRIVATE, 0);
    report("3 words, FUTEX_WAKE on word 2:", t);
    pthread_create(&t, NULL, waiter, NULL);
    wake_when_queued(&words[0], FUTEX_WAKE_BITSET_PRIVATE, 0x4);
    report("3 words, FUTEX_WAKE_BITSET 0x4 on word 0:", t);
    printf("%-52s %s\n", "  a wake on word 1 afterwards:", res(fx(&words[1], FUTEX_WAKE_PRIVATE, 1, 0, NULL, 0)));

    /* --- the same word twice: its first index --- */
    set(&vec[2], &words[0], 0, FUTEX_32 | FUTEX_PRIVATE_FLAG);
    pthread_create(&t, NULL, waiter, NULL);
    wake_when_queued(&words[1], FUTEX_WAKE_PRIVATE, 0);
    report("words 0, 1, 0; FUTEX_WAKE on word 1:", t);
    pthread_create(&t, NULL, waiter, NULL);
    wake_when_queued(&words[0], FUTEX_WAKE_PRIVATE, 0);
    report("words 0, 1, 0; FUTEX_WAKE of one on word 0:", t);

    /* --- 128 words, the last woken --- */
    for (int i = 0; i < 128; i++)
        set(&vec[i], &words[i], 0, FUTEX_32 | FUTEX_PRIVATE_FLAG);
    nwait = 128;
    pthread_create(&t, NULL, waiter, NULL);
    wake_when_queued(&words[127], FUTEX_WAKE_PRIVATE, 0);
    report("128 words, FUTEX_WAKE on word 127:", t);

    /* --- a requeue moves it from word 1 to word 5; a wake there returns 1 --- */
    nwait = 3;
    pthread_create(&t, NULL, waiter, NULL);
    while (fx(&words[1], FUTEX_CMP_REQUEUE_PRIVATE, 0, 1, &words[5], 0) != 1)
        usleep(1000);
    printf("%-52s %s\n", "  FUTEX_WAKE on word 1 after the requeue:", res(fx(&words[1], FUTEX_WAKE_PRIVATE, 1, 0, NULL, 0)));
    wake_when_queued(&words[5], FUTEX_WAKE_PRIVATE, 0);
    report("requeued from word 1 to 5, FUTEX_WAKE on word 5:", t);

    /* --- a plain FUTEX_WAIT and a futex_waitv waiter on one word: one wake of two --- */
    for (int i = 0; i < 3; i++)
        set(&vec[i], &words[i], 0, FUTEX_32 | FUTEX_PRIVATE_FLAG);
    pthread_t t2;
    pthread_create(&t, NULL, waiter, NULL);
    pthread_create(&t2, NULL, plain_waiter, NULL);
    /* Both are queued once a requeue of word 2 onto itself moves two. */
    while (fx(&words[2], FUTEX_CMP_REQUEUE_PRIVATE, 0, 2, &words[2], 0) != 2)
        usleep(1000);
    printf("%-52s %s\n", "FUTEX_WAKE of 2 on word 2 (waitv and FUTEX_WAIT):",
           res(fx(&words[2], FUTEX_WAKE_PRIVATE, 2, 0, NULL, 0)));
    report("  the futex_waitv:", t);
    pthread_join(t2, NULL);
    printf("%-52s %ld\n", "  the FUTEX_WAIT:", plain_result);

    /* --- a signal: EINTR without SA_RESTART; with it, the wait goes on --- */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = onsig;
    sigaction(SIGUSR1, &sa, NULL);
    nwait = 4;
    set(&vec[3], &words[3], 0, FUTEX_32 | FUTEX_PRIVATE_FLAG);
    pthread_create(&t, NULL, waiter, NULL);
    while (fx(&words[3], FUTEX_CMP_REQUEUE_PRIVATE, 0, 1, &words[3], 0) != 1)
        usleep(1000);
    pthread_kill(t, SIGUSR1);
    report("a handler without SA_RESTART:", t);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    pthread_create(&t, NULL, waiter, NULL);
    while (fx(&words[3], FUTEX_CMP_REQUEUE_PRIVATE, 0, 1, &words[3], 0) != 1)
        usleep(1000);
    pthread_kill(t, SIGUSR1);
    usleep(2000);
    wake_when_queued(&words[3], FUTEX_WAKE_PRIVATE, 0);
    report("SA_RESTART: signalled, then woken on word 3:", t);

    /* --- shared words: a child process waits, its parent wakes one --- */
    uint32_t *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t pid = fork();
    if (pid == 0) {
        struct futex_waitv v[2];
        set(&v[0], &sh[0], 0, FUTEX_32);
        set(&v[1], &sh[1], 0, FUTEX_32);
        long r = waitv(v, 2, 0, NULL, 0);
        _exit(r < 0 ? 100 + errno : (int)r);
    }
    wake_when_queued(&sh[1], FUTEX_WAKE, 0);
    int st;
    waitpid(pid, &st, 0);
    printf("%-52s %d\n", "a child on 2 shared words, its parent wakes word 1:", WEXITSTATUS(st));
    return 0;
}
