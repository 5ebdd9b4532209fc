/* Priority-inheritance futexes, through glibc's PTHREAD_PRIO_INHERIT mutexes and the raw
 * futex(2) operations (FUTEX_LOCK_PI, LOCK_PI2, TRYLOCK_PI, UNLOCK_PI, WAIT_REQUEUE_PI,
 * CMP_REQUEUE_PI). Every line it prints is the same natively and under ferrite: it waits for a
 * thread to be blocked by watching the futex word's FUTEX_WAITERS bit, which the kernel sets
 * before the thread sleeps. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef FUTEX_LOCK_PI2
#define FUTEX_LOCK_PI2 13
#endif

static long fx(_Atomic uint32_t *w, int op, uint32_t val, const void *ts, _Atomic uint32_t *w2, uint32_t val3) {
    return syscall(SYS_futex, w, op, val, ts, w2, val3);
}

static const char *res(long r) {
    static char buf[8][64];
    static int i;
    char *b = buf[i++ % 8];
    if (r < 0)
        snprintf(b, 64, "-1 %s", strerror(errno));
    else
        snprintf(b, 64, "%ld", r);
    return b;
}

static pid_t tid(void) { return (pid_t)syscall(SYS_gettid); }

/* The word with the owner's tid shown as "me", "T" (another thread) or a number. */
static void show(const char *what, uint32_t v, pid_t me, pid_t other) {
    uint32_t t = v & FUTEX_TID_MASK;
    const char *who = t == 0 ? "0" : t == (uint32_t)me ? "me" : t == (uint32_t)other ? "T" : "?";
    printf("%-44s owner %s%s%s\n", what, who, v & FUTEX_WAITERS ? " |WAITERS" : "",
           v & FUTEX_OWNER_DIED ? " |OWNER_DIED" : "");
}

static void wait_waiters(_Atomic uint32_t *w) {
    while (!(atomic_load(w) & FUTEX_WAITERS))
        usleep(1000);
}

/* --- 1: a PTHREAD_PRIO_INHERIT mutex under contention, and a condition variable on it. --- */
static pthread_mutex_t pim;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long counter;
static int items, done_producing;

static void *adder(void *arg) {
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        pthread_mutex_lock(&pim);
        long c = counter;
        if (i % 100 == 0)
            sched_yield();
        counter = c + 1;
        pthread_mutex_unlock(&pim);
    }
    return NULL;
}

static void *producer(void *arg) {
    (void)arg;
    for (int i = 0; i < 50; i++) {
        pthread_mutex_lock(&pim);
        items++;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&pim);
    }
    pthread_mutex_lock(&pim);
    done_producing = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&pim);
    return NULL;
}

/* --- raw operations --- */
static _Atomic uint32_t la, lb, f1, word;
static pid_t main_tid;
static _Atomic pid_t t_tid;
static _Atomic long t_ret;

static void *lock_b_then_a(void *arg) {
    (void)arg;
    t_tid = tid();
    fx(&lb, FUTEX_LOCK_PI, 0, NULL, NULL, 0);
    t_ret = fx(&la, FUTEX_LOCK_PI, 0, NULL, NULL, 0); /* waits for main */
    uint32_t v = atomic_load(&la);
    fx(&la, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0);
    fx(&lb, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0);
    return (void *)(uintptr_t)v;
}

static void *hold_word(void *arg) {
    /* Takes `word` and keeps it until `f1` says go. */
    (void)arg;
    t_tid = tid();
    fx(&word, FUTEX_LOCK_PI, 0, NULL, NULL, 0);
    atomic_store(&f1, 1);
    while (atomic_load(&f1) != 2)
        usleep(1000);
    fx(&word, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0);
    return NULL;
}

static void *requeue_waiter(void *arg) {
    (void)arg;
    t_tid = tid();
    long r = fx(&f1, FUTEX_WAIT_REQUEUE_PI, 0, NULL, &la, 0);
    uint32_t v = atomic_load(&la);
    t_ret = r;
    if (r == 0)
        fx(&la, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0);
    return (void *)(uintptr_t)v;
}

/* --- robust PI mutex whose owner ends holding it --- */
static pthread_mutex_t robust;
static _Atomic int robust_locked;

static void *die_holding(void *arg) {
    (void)arg;
    pthread_mutex_lock(&robust);
    atomic_store(&robust_locked, 1);
    return NULL; /* ends without unlocking */
}

int main(void) {
    main_tid = tid();
    pid_t me = main_tid;
    setvbuf(stdout, NULL, _IONBF, 0);

    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
    pthread_mutex_init(&pim, &a);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, adder, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    printf("4 threads x 2000 increments under a PI mutex: %ld\n", counter);
    printf("trylock of a free PI mutex: %d\n", pthread_mutex_trylock(&pim));
    printf("its word names the owner: %s\n", (*(uint32_t *)&pim & FUTEX_TID_MASK) == (uint32_t)me ? "yes" : "no");
    pthread_mutex_unlock(&pim);

    pthread_t p;
    pthread_create(&p, NULL, producer, NULL);
    int consumed = 0;
    pthread_mutex_lock(&pim);
    for (;;) {
        while (items == 0 && !done_producing)
            pthread_cond_wait(&cv, &pim);
        if (items == 0 && done_producing)
            break;
        consumed += items;
        items = 0;
    }
    pthread_mutex_unlock(&pim);
    pthread_join(p, NULL);
    printf("condition variable on a PI mutex: consumed %d\n", consumed);

    pthread_mutexattr_t ea;
    pthread_mutexattr_init(&ea);
    pthread_mutexattr_setprotocol(&ea, PTHREAD_PRIO_INHERIT);
    pthread_mutexattr_settype(&ea, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_t em;
    pthread_mutex_init(&em, &ea);
    pthread_mutex_lock(&em);
    printf("error-checking PI mutex locked twice: %s\n", strerror(pthread_mutex_lock(&em)));
    pthread_mutex_unlock(&em);
    printf("unlocked again (errorcheck): %s\n", strerror(pthread_mutex_unlock(&em)));

    /* Raw: uncontended lock and unlock. */
    printf("LOCK_PI of a free word:                      %s\n", res(fx(&word, FUTEX_LOCK_PI, 0, NULL, NULL, 0)));
    show("  the word", atomic_load(&word), me, 0);
    printf("LOCK_PI again by its owner:                  %s\n", res(fx(&word, FUTEX_LOCK_PI, 0, NULL, NULL, 0)));
    printf("TRYLOCK_PI by its owner:                     %s\n", res(fx(&word, FUTEX_TRYLOCK_PI, 0, NULL, NULL, 0)));
    printf("UNLOCK_PI, no waiters:                       %s\n", res(fx(&word, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0)));
    show("  the word", atomic_load(&word), me, 0);
    printf("UNLOCK_PI of a free word:                    %s\n", res(fx(&word, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0)));
    atomic_store(&word, FUTEX_OWNER_DIED);
    printf("LOCK_PI of OWNER_DIED without owner:         %s\n", res(fx(&word, FUTEX_LOCK_PI, 0, NULL, NULL, 0)));
    show("  the word", atomic_load(&word), me, 0);
    atomic_store(&word, 0x3ffffff0);
    printf("LOCK_PI of a word naming no thread:          %s\n", res(fx(&word, FUTEX_LOCK_PI, 0, NULL, NULL, 0)));
    printf("  the word: %#x\n", atomic_load(&word));
    atomic_store(&word, 0x3ffffff0);
    printf("TRYLOCK_PI of a word naming no thread:       %s\n", res(fx(&word, FUTEX_TRYLOCK_PI, 0, NULL, NULL, 0)));
    atomic_store(&word, 0);
    printf("LOCK_PI of a misaligned word:                %s\n",
           res(fx((_Atomic uint32_t *)((char *)&word + 1), FUTEX_LOCK_PI, 0, NULL, NULL, 0)));
    printf("UNLOCK_PI of a word not its own:             %s\n",
           res((atomic_store(&word, 0x3ffffff0), fx(&word, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0))));
    atomic_store(&word, 0);
    printf("WAKE with FUTEX_CLOCK_REALTIME:              %s\n",
           res(fx(&word, FUTEX_WAKE | FUTEX_CLOCK_REALTIME, 1, NULL, NULL, 0)));
    printf("LOCK_PI with FUTEX_CLOCK_REALTIME:           %s\n",
           res(fx(&word, FUTEX_LOCK_PI | FUTEX_CLOCK_REALTIME, 0, NULL, NULL, 0)));
    printf("LOCK_PI2 with FUTEX_CLOCK_REALTIME, free:    %s\n",
           res(fx(&word, FUTEX_LOCK_PI2 | FUTEX_CLOCK_REALTIME, 0, NULL, NULL, 0)));
    fx(&word, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0);

    /* Held by another thread: trylock, timeouts, FUTEX_WAKE on it. */
    pthread_t h;
    atomic_store(&f1, 0);
    pthread_create(&h, NULL, hold_word, NULL);
    while (atomic_load(&f1) != 1)
        usleep(1000);
    show("a word another thread locked", atomic_load(&word), me, t_tid);
    printf("TRYLOCK_PI of it:                            %s\n", res(fx(&word, FUTEX_TRYLOCK_PI, 0, NULL, NULL, 0)));
    show("  the word", atomic_load(&word), me, t_tid);
    struct timespec past = {1, 0};
    printf("LOCK_PI with a timeout passed (realtime):    %s\n", res(fx(&word, FUTEX_LOCK_PI, 0, &past, NULL, 0)));
    printf("LOCK_PI2 with a timeout passed (monotonic):  %s\n", res(fx(&word, FUTEX_LOCK_PI2, 0, &past, NULL, 0)));
    struct timespec soon;
    clock_gettime(CLOCK_MONOTONIC, &soon);
    soon.tv_nsec += 20 * 1000 * 1000;
    if (soon.tv_nsec >= 1000000000) {
        soon.tv_sec++;
        soon.tv_nsec -= 1000000000;
    }
    printf("LOCK_PI2 until 20 ms from now:               %s\n", res(fx(&word, FUTEX_LOCK_PI2, 0, &soon, NULL, 0)));
    atomic_store(&f1, 2);
    printf("LOCK_PI, released by its owner later:        %s\n", res(fx(&word, FUTEX_LOCK_PI, 0, NULL, NULL, 0)));
    /* Whether WAITERS is set depends on who came first: only the owner is shown. */
    printf("  the word names me: %s\n", (atomic_load(&word) & FUTEX_TID_MASK) == (uint32_t)me ? "yes" : "no");
    pthread_join(h, NULL);
    printf("UNLOCK_PI:                                   %s\n", res(fx(&word, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0)));
    show("  the word", atomic_load(&word), me, t_tid);

    /* A waiter handed the lock at unlock; and a cycle of PI waits (EDEADLK). */
    fx(&la, FUTEX_LOCK_PI, 0, NULL, NULL, 0);
    pthread_t ab;
    pthread_create(&ab, NULL, lock_b_then_a, NULL);
    wait_waiters(&la);
    show("la, its waiter queued", atomic_load(&la), me, t_tid);
    printf("FUTEX_WAKE of a PI futex with a waiter:      %s\n", res(fx(&la, FUTEX_WAKE, 1, NULL, NULL, 0)));
    printf("LOCK_PI of lb, held by la's waiter:          %s\n", res(fx(&lb, FUTEX_LOCK_PI, 0, NULL, NULL, 0)));
    printf("UNLOCK_PI of la:                             %s\n", res(fx(&la, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0)));
    void *seen;
    pthread_join(ab, &seen);
    printf("the waiter's LOCK_PI:                        %s\n", res(t_ret));
    show("  the word it found", (uint32_t)(uintptr_t)seen, me, t_tid);
    show("la at the end", atomic_load(&la), me, t_tid);

    /* Requeue-PI: the lock held (the waiter moved), then free (the waiter handed it). */
    atomic_store(&f1, 0);
    printf("CMP_REQUEUE_PI with nr_wake 2:               %s\n", res(fx(&f1, FUTEX_CMP_REQUEUE_PI, 2, (void *)1, &la, 0)));
    printf("CMP_REQUEUE_PI onto the same futex:          %s\n", res(fx(&f1, FUTEX_CMP_REQUEUE_PI, 1, (void *)1, &f1, 0)));
    printf("CMP_REQUEUE_PI, value changed:               %s\n", res(fx(&f1, FUTEX_CMP_REQUEUE_PI, 1, (void *)1, &la, 5)));
    printf("CMP_REQUEUE_PI, nobody waits:                %s\n", res(fx(&f1, FUTEX_CMP_REQUEUE_PI, 1, (void *)1, &la, 0)));
    printf("WAIT_REQUEUE_PI, value changed:              %s\n", res(fx(&f1, FUTEX_WAIT_REQUEUE_PI, 7, NULL, &la, 0)));
    printf("WAIT_REQUEUE_PI onto the same futex:         %s\n", res(fx(&f1, FUTEX_WAIT_REQUEUE_PI, 0, NULL, &f1, 0)));
    for (int round = 0; round < 2; round++) {
        if (round == 0)
            fx(&la, FUTEX_LOCK_PI, 0, NULL, NULL, 0);
        pthread_t rq;
        t_tid = 0;
        pthread_create(&rq, NULL, requeue_waiter, NULL);
        long r;
        /* Until the waiter is queued on f1 (0 while nobody waits). */
        while ((r = fx(&f1, FUTEX_CMP_REQUEUE_PI, 1, (void *)1, &la, 0)) == 0)
            usleep(1000);
        printf("%s: CMP_REQUEUE_PI: %s\n", round == 0 ? "la held" : "la free", res(r));
        if (round == 0)
            show("  la", atomic_load(&la), me, t_tid);
        if (round == 0)
            printf("  UNLOCK_PI of la: %s\n", res(fx(&la, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0)));
        pthread_join(rq, &seen);
        printf("  the waiter's WAIT_REQUEUE_PI: %s\n", res(t_ret));
        show("  la as it found it", (uint32_t)(uintptr_t)seen, me, t_tid);
    }

    /* A robust PI mutex whose owner ends holding it. */
    pthread_mutexattr_t ra;
    pthread_mutexattr_init(&ra);
    pthread_mutexattr_setprotocol(&ra, PTHREAD_PRIO_INHERIT);
    pthread_mutexattr_setrobust(&ra, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&robust, &ra);
    pthread_t d;
    pthread_create(&d, NULL, die_holding, NULL);
    while (!atomic_load(&robust_locked))
        usleep(1000);
    int e = pthread_mutex_lock(&robust);
    printf("robust PI mutex, its owner ended: %s\n", strerror(e));
    int c = pthread_mutex_consistent(&robust);
    printf("  consistent: %d, unlock: %d\n", c, pthread_mutex_unlock(&robust));
    printf("  lock again: %d\n", pthread_mutex_lock(&robust));
    pthread_mutex_unlock(&robust);
    pthread_join(d, NULL);
    return 0;
}
