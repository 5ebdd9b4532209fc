/* thr_spin_flag: main creates a thread and spins on a plain (non-atomic, volatile) flag that
 * the thread sets; no system call, locked instruction or `pause` in the spin unless the first
 * argument is `pause`. The shape of benchmark drivers and lock-free code: natively it ends in
 * microseconds; an emulator that never preempts a spinning thread hangs on it.
 * Usage: thr_spin_flag [pause]; prints "spin: ready after the child" and exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static volatile int ready;
static volatile long payload;

static void *child(void *arg)
{
    payload = 42;
    ready = 1;
    return NULL;
}

int main(int argc, char **argv)
{
    int use_pause = argc > 1 && strcmp(argv[1], "pause") == 0;
    pthread_t t;
    pthread_create(&t, NULL, child, NULL);
    if (use_pause) {
        while (!ready)
            __asm__ volatile("pause");
    } else {
        while (!ready)
            ;
    }
    pthread_join(t, NULL);
    printf("spin: ready after the child, payload %ld\n", payload);
    return payload == 42 ? 0 : 1;
}
