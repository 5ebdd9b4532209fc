/* thr_dekker: the store-buffering (SB / Dekker) litmus test.  Two threads,
 * 10000 rounds:
 *     thread 0: x = 1; r1 = y;        thread 1: y = 1; r2 = x;
 * with plain volatile int accesses (no fences, no atomics).  The outcome
 * r1 == 0 && r2 == 0 is forbidden under sequential consistency but allowed by
 * x86-TSO (each store can sit in its core's store buffer while the following
 * load reads memory).  Prints "sb observed: yes" or "sb observed: no".
 *
 * Each round ends with pthread_barrier_wait (futex based); thread 0 then
 * checks r1/r2 and resets x and y.  Each round starts with a short spin
 * rendezvous on an atomic arrival counter (pause in the loop, sched_yield
 * every 64 spins) so that natively both threads run the two accesses within
 * nanoseconds of each other -- a futex wake alone desynchronises them by
 * microseconds and the window is never hit.  Under a scheduler that runs one
 * thread at a time the sched_yield hands over to the other thread quickly.
 * If sched_getaffinity reports at least 2 CPUs, thread 0 pins itself to the
 * first and thread 1 to the second allowed CPU (sched_setaffinity; errors
 * ignored): without that, on a 2-vCPU VM the two threads often share a CPU and
 * SB is then seen in only ~1 run in 4.  With a single allowed CPU (taskset -c
 * 0) the answer is natively "no" as well.
 *
 * OUTPUT DIFFERS NATIVELY BY DESIGN: on real multi-core x86 it is usually
 * observed (how often depends on the machine), under a sequentially consistent
 * emulator it never is.  `thr_dekker -v` also prints the number of SB rounds
 * to stderr.  Always exits 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>

#define ROUNDS 10000

static volatile int x, y;
static volatile int r1, r2;
static pthread_barrier_t bar;
static atomic_int arrived;
static int observed; /* rounds with r1 == 0 && r2 == 0; used by thread 0 only */

/* Both threads arrive once per round: wait until 2*(round+1) arrivals. */
static void rendezvous(int round)
{
    int target = 2 * (round + 1);
    atomic_fetch_add(&arrived, 1);
    for (unsigned n = 1; atomic_load_explicit(&arrived, memory_order_acquire) < target; n++) {
        __builtin_ia32_pause();
        if (n % 64 == 0)
            sched_yield();
    }
}

/* Pin the calling thread to the which-th allowed CPU, if there are >= 2. */
static void pin(int which)
{
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2)
        return;
    int seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all) && seen++ == which) {
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            sched_setaffinity(0, sizeof one, &one); /* failure is harmless */
            return;
        }
}

static void *t0(void *arg)
{
    pin(0);
    for (int i = 0; i < ROUNDS; i++) {
        rendezvous(i);
        x = 1; /* SB: store x */
        r1 = y; /* SB: load y */
        pthread_barrier_wait(&bar);
        if (r1 == 0 && r2 == 0)
            observed++;
        x = 0; /* reset; thread 1 waits in the next rendezvous meanwhile */
        y = 0;
    }
    return NULL;
}

static void *t1(void *arg)
{
    pin(1);
    for (int i = 0; i < ROUNDS; i++) {
        rendezvous(i);
        y = 1; /* SB: store y */
        r2 = x; /* SB: load x */
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t a, b;
    pthread_barrier_init(&bar, NULL, 2);
    if (pthread_create(&a, NULL, t0, NULL) || pthread_create(&b, NULL, t1, NULL)) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("sb observed: %s\n", observed ? "yes" : "no");
    if (argc > 1) /* -v: the (machine- and schedule-dependent) count, to stderr */
        fprintf(stderr, "sb rounds: %d of %d\n", observed, ROUNDS);
    return 0;
}
