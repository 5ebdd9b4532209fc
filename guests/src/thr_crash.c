/* thr_crash: a second thread stores through NULL while main is blocked in
 * pthread_join on it.  Main prints and flushes a line, sets `joining` and
 * calls pthread_join; the thread waits (sched_yield) until `joining` is set,
 * sleeps 20 ms (nanosleep, so main gets to block in futex(FUTEX_WAIT) for the
 * join natively; under a deterministic scheduler the sleep blocks the thread
 * and lets main run), then faults in crash().  The SIGSEGV kills the whole
 * process: natively exit status 139.  stdout: exactly the first line. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

int *volatile target_ptr; /* zero-initialised; volatile so the compiler can't see it is NULL */
static atomic_int joining;

__attribute__((noinline)) void crash(int *p, int v)
{
    *p = v; /* THREAD FAULT */
}

static void *faulter(void *arg)
{
    while (!atomic_load(&joining))
        sched_yield();
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    crash(target_ptr, 42);
    return NULL;
}

int main(void)
{
    pthread_t t;
    printf("main: joining a thread that will dereference NULL\n");
    fflush(stdout);
    if (pthread_create(&t, NULL, faulter, NULL)) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    atomic_store(&joining, 1);
    pthread_join(t, NULL);
    printf("main: join returned (unexpected)\n");
    return 0;
}
