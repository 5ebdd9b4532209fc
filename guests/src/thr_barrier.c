/* thr_barrier: 4 threads run 5 phases separated by pthread_barrier_wait.  In
 * phase p thread t computes val[p][t] from its neighbour's phase p-1 value
 * (val[p][t] = 3*val[p-1][(t+1)%4] + 7*p + t, val[0][t] = t+1), waits at the
 * barrier, then checks all four phase-p values against a sequential
 * recomputation.  Also counts PTHREAD_BARRIER_SERIAL_THREAD returns per phase
 * (exactly 1).  Main prints, per phase, the values, the check result and the
 * serial-thread count.  Output is deterministic.  Exit status 0. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NT 4
#define PHASES 5

static pthread_barrier_t bar;
static long val[PHASES + 1][NT];
static int check_ok[PHASES + 1][NT];
static atomic_int serial[PHASES + 1];

#define CK(call)                                                              \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != 0) {                                                       \
            fprintf(stderr, "%s failed: %s\n", #call, strerror(rc_));         \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static long step(long prev_neighbour, int p, int t)
{
    return 3 * prev_neighbour + 7 * p + t;
}

static void *worker(void *arg)
{
    int t = (int)(long)arg;
    for (int p = 1; p <= PHASES; p++) {
        val[p][t] = step(val[p - 1][(t + 1) % NT], p, t);
        int rc = pthread_barrier_wait(&bar);
        if (rc == PTHREAD_BARRIER_SERIAL_THREAD)
            atomic_fetch_add(&serial[p], 1);
        else if (rc != 0) {
            fprintf(stderr, "pthread_barrier_wait: %s\n", strerror(rc));
            exit(1);
        }
        /* every thread verifies the whole phase */
        int ok = 1;
        for (int u = 0; u < NT; u++) {
            long exp = step(val[p - 1][(u + 1) % NT], p, u);
            if (val[p][u] != exp)
                ok = 0;
        }
        check_ok[p][t] = ok;
    }
    return NULL;
}

int main(void)
{
    for (int t = 0; t < NT; t++)
        val[0][t] = t + 1;
    CK(pthread_barrier_init(&bar, NULL, NT));
    pthread_t th[NT];
    for (long t = 0; t < NT; t++)
        CK(pthread_create(&th[t], NULL, worker, (void *)t));
    for (int t = 0; t < NT; t++)
        CK(pthread_join(th[t], NULL));
    CK(pthread_barrier_destroy(&bar));

    /* sequential reference */
    long ref[PHASES + 1][NT];
    for (int t = 0; t < NT; t++)
        ref[0][t] = t + 1;
    for (int p = 1; p <= PHASES; p++)
        for (int t = 0; t < NT; t++)
            ref[p][t] = step(ref[p - 1][(t + 1) % NT], p, t);

    int all = 1;
    for (int p = 1; p <= PHASES; p++) {
        int ok = 1;
        for (int t = 0; t < NT; t++)
            ok &= check_ok[p][t] && val[p][t] == ref[p][t];
        int s = atomic_load(&serial[p]);
        printf("phase %d: values %ld %ld %ld %ld, checks %s, serial threads %d\n", p,
               val[p][0], val[p][1], val[p][2], val[p][3], ok ? "ok" : "FAILED", s);
        all &= ok && s == 1;
    }
    printf("result: %s\n", all ? "ok" : "WRONG");
    return all ? 0 : 1;
}
