/* thr_futex: raw futex ping-pong on one int, without any pthread sync
 * primitive.  `word` is 0 when it is ping's turn and 1 when it is pong's.
 * The ping thread waits (FUTEX_WAIT_PRIVATE, expected 1) until word == 0,
 * increments its count, stores 1 and FUTEX_WAKE_PRIVATEs 1 waiter; the pong
 * thread mirrors it (waits while word == 0, stores 0, wakes).  1000 round
 * trips.  Before that, main checks the single-threaded futex semantics:
 * FUTEX_WAIT with a stale expected value -> EAGAIN, FUTEX_WAKE with no
 * waiters -> 0, FUTEX_WAIT with a 1 ms relative timeout -> ETIMEDOUT.
 * Output is deterministic.  Exit status 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 1000

static atomic_int word; /* 0: ping's turn, 1: pong's turn */
static int pings, pongs, order_errors;

static long futex(atomic_int *uaddr, int op, int val, const struct timespec *ts)
{
    return syscall(SYS_futex, uaddr, op, val, ts, NULL, 0);
}

static void wait_until(int want)
{
    int cur;
    while ((cur = atomic_load_explicit(&word, memory_order_acquire)) != want) {
        long r = futex(&word, FUTEX_WAIT_PRIVATE, cur, NULL);
        if (r != 0 && errno != EAGAIN && errno != EINTR) {
            perror("FUTEX_WAIT");
            exit(1);
        }
    }
}

static void hand_over(int to)
{
    atomic_store_explicit(&word, to, memory_order_release);
    if (futex(&word, FUTEX_WAKE_PRIVATE, 1, NULL) < 0) {
        perror("FUTEX_WAKE");
        exit(1);
    }
}

static void *ping(void *arg)
{
    for (int i = 0; i < ROUNDS; i++) {
        wait_until(0);
        if (pings != pongs)
            order_errors++;
        pings++;
        hand_over(1);
    }
    return NULL;
}

static void *pong(void *arg)
{
    for (int i = 0; i < ROUNDS; i++) {
        wait_until(1);
        pongs++;
        if (pongs != pings)
            order_errors++;
        hand_over(0);
    }
    return NULL;
}

static const char *errname(int e)
{
    return e == EAGAIN ? "EAGAIN" : e == ETIMEDOUT ? "ETIMEDOUT" : e == EINTR ? "EINTR" : "other";
}

int main(void)
{
    long r;
    atomic_store(&word, 0);
    r = futex(&word, FUTEX_WAIT_PRIVATE, 5, NULL);
    printf("FUTEX_WAIT with stale value: %ld %s\n", r, r < 0 ? errname(errno) : "");
    r = futex(&word, FUTEX_WAKE_PRIVATE, 1, NULL);
    printf("FUTEX_WAKE with no waiters: %ld\n", r);
    struct timespec ts = {0, 1000000};
    r = futex(&word, FUTEX_WAIT_PRIVATE, 0, &ts);
    printf("FUTEX_WAIT with 1 ms timeout: %ld %s\n", r, r < 0 ? errname(errno) : "");

    pthread_t a, b;
    if (pthread_create(&b, NULL, pong, NULL) || pthread_create(&a, NULL, ping, NULL)) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("round trips: %d (pings %d, pongs %d)\n", pongs, pings, pongs);
    printf("order errors: %d, final word: %d\n", order_errors, atomic_load(&word));
    int ok = pings == ROUNDS && pongs == ROUNDS && order_errors == 0 && atomic_load(&word) == 0;
    printf("result: %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
