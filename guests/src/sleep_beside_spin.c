/* One thread spins on a flag without system calls while the main thread sleeps 50 ms and then
 * sets it: the sleeper must wake although nothing else reaches a scheduling point. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static volatile int stop;
static volatile unsigned long spins;

static void *spin(void *arg) {
    while (!stop)
        spins++;
    return arg;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, spin, NULL);
    struct timespec w = {0, 50000000};
    nanosleep(&w, NULL);
    stop = 1;
    pthread_join(t, NULL);
    puts("the sleeper woke and stopped the spinner");
    return 0;
}
