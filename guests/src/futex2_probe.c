/* The futex2 system calls (Linux 6.7: futex_wake 454, futex_wait 455, futex_requeue 456) and
 * FUTEX2_NUMA (Linux 6.16; also in futex_waitv): their errors in Linux's order, a wake by mask,
 * a wake of 0, a requeue between a private and a NUMA word, the node id written back, absolute
 * timeouts on both clocks. Every line is the same natively and under ferrite: a thread is known
 * to be queued when a wake of one waiter on its word reports one. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NR_futex_wake 454
#define NR_futex_wait 455
#define NR_futex_requeue 456
#define F2_U8 0
#define F2_U16 1
#define F2_U32 2
#define F2_U64 3
#define F2_NUMA 4
#define F2_MPOL 8
#define F2_PRIVATE 128

static long wake(void *w, unsigned long mask, int nr, unsigned flags) {
    return syscall(NR_futex_wake, w, mask, nr, flags);
}

static long wait2(void *w, unsigned long val, unsigned long mask, unsigned flags, struct timespec *ts, int clk) {
    return syscall(NR_futex_wait, w, val, mask, flags, ts, clk);
}

static long requeue(struct futex_waitv *w, unsigned flags, int nr_wake, int nr_requeue) {
    return syscall(NR_futex_requeue, w, flags, nr_wake, nr_requeue);
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

/* A NUMA word: the futex, then its node id (8-byte aligned). */
struct numa_word {
    uint32_t val;
    int32_t node;
} __attribute__((aligned(8)));

static uint32_t plain[4] __attribute__((aligned(8)));
static struct numa_word nw, nw2;

struct waiter {
    void *word;
    uint32_t val;
    unsigned long mask;
    unsigned flags;
    long ret;
    int err;
};

static void *wait_thread(void *arg) {
    struct waiter *w = arg;
    w->ret = wait2(w->word, w->val, w->mask, w->flags, NULL, 0);
    w->err = w->ret < 0 ? errno : 0;
    return NULL;
}

/* Wakes one waiter on `word` (mask all) until one is reported: the thread is queued then. */
static void until_woken(void *word, unsigned flags) {
    while (wake(word, 0xffffffff, 1, flags) != 1)
        sched_yield();
}

/* Waits until a waiter is queued on `word` without waking it: a requeue of up to one waiter
 * onto the word itself reports a waiter found (futex_requeue counts those it moved). */
static void until_queued(void *word, unsigned flags) {
    struct futex_waitv v[2];
    memset(v, 0, sizeof v);
    for (;;) {
        v[0].uaddr = (uintptr_t)word;
        v[0].val = *(uint32_t *)word;
        v[0].flags = flags;
        v[1].uaddr = (uintptr_t)word;
        v[1].flags = flags;
        /* Requeue onto the word itself: moves the waiter nowhere and reports it. */
        if (requeue(v, 0, 0, 1) == 1)
            return;
        sched_yield();
    }
}

static void errors(void) {
    struct timespec ts = {0, 0};
    printf("wake: unknown flag: %s\n", res(wake(plain, 1, 1, F2_U32 | 0x10)));
    printf("wake: U8: %s, U16: %s, U64: %s\n", res(wake(plain, 1, 1, F2_U8)), res(wake(plain, 1, 1, F2_U16)),
           res(wake(plain, 1, 1, F2_U64)));
    printf("wake: mask wider than 32 bits: %s\n", res(wake(plain, 1UL << 32, 1, F2_U32)));
    printf("wake: mask 0: %s\n", res(wake(plain, 0, 1, F2_U32)));
    printf("wake: misaligned: %s\n", res(wake((char *)plain + 2, 1, 1, F2_U32)));
    printf("wake: NUMA at 4 mod 8: %s\n", res(wake(&plain[1], 1, 1, F2_U32 | F2_NUMA)));
    printf("wake: NULL: %s\n", res(wake(NULL, 1, 1, F2_U32 | F2_PRIVATE)));
    printf("wake: NULL NUMA: %s\n", res(wake(NULL, 1, 1, F2_U32 | F2_NUMA)));
    printf("wake: nobody, nr 0: %s, nr 1: %s, nr -1: %s\n", res(wake(plain, 1, 0, F2_U32)),
           res(wake(plain, 1, 1, F2_U32)), res(wake(plain, 1, -1, F2_U32)));
    nw.node = 5;
    printf("wake: NUMA node 5: %s\n", res(wake(&nw, 1, 1, F2_U32 | F2_NUMA)));
    nw.node = -2;
    printf("wake: NUMA node -2: %s\n", res(wake(&nw, 1, 1, F2_U32 | F2_NUMA)));
    nw.node = -1;
    long r = wake(&nw, 1, 1, F2_U32 | F2_NUMA | F2_PRIVATE);
    printf("wake: NUMA node -1: %s, node now %d\n", res(r), nw.node);
    nw.node = -1;
    r = wake(&nw, 1, 1, F2_U32 | F2_NUMA | F2_MPOL);
    printf("wake: NUMA|MPOL node -1: %s, node now %d\n", res(r), nw.node);
    r = wake(&nw, 1, 1, F2_U32 | F2_MPOL);
    printf("wake: MPOL alone: %s\n", res(r));

    plain[0] = 7;
    printf("wait: unknown flag: %s\n", res(wait2(plain, 7, 1, F2_U32 | 0x20, NULL, 0)));
    printf("wait: U64: %s\n", res(wait2(plain, 7, 1, F2_U64, NULL, 0)));
    printf("wait: value wider than 32 bits: %s\n", res(wait2(plain, 1UL << 32, 1, F2_U32, NULL, 0)));
    printf("wait: mask wider than 32 bits: %s\n", res(wait2(plain, 7, 1UL << 33, F2_U32, NULL, 0)));
    printf("wait: bad clock: %s\n", res(wait2(plain, 7, 1, F2_U32, &ts, CLOCK_BOOTTIME)));
    printf("wait: bad clock, no timeout: %s\n", res(wait2(plain, 8, 1, F2_U32, NULL, CLOCK_BOOTTIME)));
    printf("wait: unreadable timeout: %s\n", res(wait2(plain, 7, 1, F2_U32, (struct timespec *)8, CLOCK_MONOTONIC)));
    struct timespec bad = {0, 1000000000};
    printf("wait: bad timespec: %s\n", res(wait2(plain, 7, 1, F2_U32, &bad, CLOCK_MONOTONIC)));
    printf("wait: mask 0: %s\n", res(wait2(plain, 7, 0, F2_U32, NULL, 0)));
    printf("wait: misaligned: %s\n", res(wait2((char *)plain + 1, 7, 1, F2_U32, NULL, 0)));
    printf("wait: NULL: %s\n", res(wait2(NULL, 7, 1, F2_U32, NULL, 0)));
    printf("wait: other value: %s\n", res(wait2(plain, 8, 1, F2_U32, NULL, 0)));
    printf("wait: past deadline, MONOTONIC: %s\n", res(wait2(plain, 7, 1, F2_U32, &ts, CLOCK_MONOTONIC)));
    printf("wait: past deadline, REALTIME: %s\n", res(wait2(plain, 7, 1, F2_U32, &ts, CLOCK_REALTIME)));
    struct timespec soon;
    clock_gettime(CLOCK_MONOTONIC, &soon);
    soon.tv_nsec += 2000000;
    if (soon.tv_nsec >= 1000000000) {
        soon.tv_sec++;
        soon.tv_nsec -= 1000000000;
    }
    printf("wait: 2 ms from now, MONOTONIC: %s\n", res(wait2(plain, 7, 1, F2_U32 | F2_PRIVATE, &soon, CLOCK_MONOTONIC)));
    nw.val = 3;
    nw.node = 1;
    printf("wait: NUMA node 1: %s\n", res(wait2(&nw, 3, 1, F2_U32 | F2_NUMA, NULL, 0)));
    nw.node = -1;
    r = wait2(&nw, 4, 1, F2_U32 | F2_NUMA, NULL, 0);
    printf("wait: NUMA node -1, other value: %s, node now %d\n", res(r), nw.node);

    struct futex_waitv v[2];
    memset(v, 0, sizeof v);
    v[0].uaddr = (uintptr_t)&plain[0];
    v[0].val = 7;
    v[0].flags = F2_U32;
    v[1].uaddr = (uintptr_t)&plain[2];
    v[1].flags = F2_U32;
    printf("requeue: flags: %s\n", res(requeue(v, 1, 1, 1)));
    printf("requeue: NULL: %s\n", res(requeue(NULL, 0, 1, 1)));
    printf("requeue: unreadable: %s\n", res(requeue((struct futex_waitv *)16, 0, 1, 1)));
    v[1].__reserved = 1;
    printf("requeue: reserved: %s\n", res(requeue(v, 0, 1, 1)));
    v[1].__reserved = 0;
    v[1].flags = F2_U16;
    printf("requeue: second U16: %s\n", res(requeue(v, 0, 1, 1)));
    v[1].flags = F2_U32;
    v[0].val = 1UL << 32;
    printf("requeue: value wider than 32 bits: %s\n", res(requeue(v, 0, 1, 1)));
    v[0].val = 7;
    printf("requeue: nr_wake -1: %s, nr_requeue -1: %s\n", res(requeue(v, 0, -1, 1)), res(requeue(v, 0, 1, -1)));
    v[0].uaddr = (uintptr_t)&plain[0] + 2;
    printf("requeue: misaligned first: %s\n", res(requeue(v, 0, 1, 1)));
    v[0].uaddr = (uintptr_t)&plain[0];
    v[1].uaddr = (uintptr_t)&plain[1];
    v[1].flags = F2_U32 | F2_NUMA;
    printf("requeue: second NUMA at 4 mod 8: %s\n", res(requeue(v, 0, 1, 1)));
    v[1].uaddr = (uintptr_t)&plain[2];
    v[1].flags = F2_U32 | F2_PRIVATE;
    printf("requeue: flags differ: %s\n", res(requeue(v, 0, -1, 1)));
    v[1].flags = F2_U32;
    v[0].val = 6;
    printf("requeue: other value: %s\n", res(requeue(v, 0, 1, 1)));
    v[0].val = 7;
    printf("requeue: nobody: %s\n", res(requeue(v, 0, 1, 1)));
}

static void semantics(void) {
    /* A waiter with mask 0x2 is not woken by mask 0x1, is by 0x3. */
    plain[0] = 1;
    struct waiter w = {plain, 1, 0x2, F2_U32 | F2_PRIVATE, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, wait_thread, &w);
    until_queued(plain, F2_U32 | F2_PRIVATE);
    printf("mask: wake 0x1: %s, wake nr 0: %s\n", res(wake(plain, 0x1, 1, F2_U32 | F2_PRIVATE)),
           res(wake(plain, 0x2, 0, F2_U32 | F2_PRIVATE)));
    printf("mask: wake 0x3: %s\n", res(wake(plain, 0x3, 1, F2_U32 | F2_PRIVATE)));
    pthread_join(t, NULL);
    printf("mask: the waiter returned %s\n", w.ret == 0 ? "0" : strerror(w.err));

    /* A legacy FUTEX_WAKE wakes a futex2 waiter (same key: private word). */
    struct waiter w2 = {plain, 1, 0xffffffff, F2_U32 | F2_PRIVATE, 0, 0};
    pthread_create(&t, NULL, wait_thread, &w2);
    while (syscall(SYS_futex, plain, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) != 1)
        sched_yield();
    pthread_join(t, NULL);
    printf("legacy FUTEX_WAKE woke the futex2 waiter: %s\n", w2.ret == 0 ? "yes" : strerror(w2.err));

    /* A NUMA waiter (node -1, set to 0 by its wait) requeued to another NUMA word (futex2's
     * requeue wants the same flags on both), then woken there. */
    nw.val = 9;
    nw.node = -1;
    struct waiter w3 = {&nw, 9, 0xffffffff, F2_U32 | F2_NUMA, 0, 0};
    pthread_create(&t, NULL, wait_thread, &w3);
    until_queued(&nw, F2_U32 | F2_NUMA);
    printf("numa: node after the wait: %d\n", nw.node);
    struct futex_waitv v[2];
    memset(v, 0, sizeof v);
    v[0].uaddr = (uintptr_t)&nw;
    v[0].val = 9;
    v[0].flags = F2_U32 | F2_NUMA;
    nw2.node = -1;
    v[1].uaddr = (uintptr_t)&nw2;
    v[1].flags = F2_U32 | F2_NUMA;
    long moved = requeue(v, 0, 0, 1);
    printf("numa: requeue 0 woken, 1 moved: %s, the target's node now %d\n", res(moved), nw2.node);
    printf("numa: wake on the old word: %s\n", res(wake(&nw, 0xffffffff, 1, F2_U32 | F2_NUMA)));
    until_woken(&nw2, F2_U32 | F2_NUMA);
    pthread_join(t, NULL);
    printf("numa: the waiter returned %s\n", w3.ret == 0 ? "0" : strerror(w3.err));

    /* futex_waitv with a NUMA entry. */
    struct futex_waitv wv[1];
    memset(wv, 0, sizeof wv);
    nw.node = -1;
    wv[0].uaddr = (uintptr_t)&nw;
    wv[0].val = 10;
    wv[0].flags = F2_U32 | F2_NUMA | F2_PRIVATE;
    long r = syscall(SYS_futex_waitv, wv, 1, 0, NULL, 0);
    printf("waitv: NUMA entry, other value: %s, node now %d\n", res(r), nw.node);
    nw.node = 3;
    r = syscall(SYS_futex_waitv, wv, 1, 0, NULL, 0);
    printf("waitv: NUMA entry node 3: %s\n", res(r));
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    errors();
    semantics();
    return 0;
}
