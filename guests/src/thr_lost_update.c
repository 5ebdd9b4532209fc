/* thr_lost_update: two threads each increment a shared counter once without a lock. Only a
 * preemption between one thread's load and its store loses an update; then the assertion on
 * the line marked LOST UPDATE fails (SIGABRT). Natively that almost never happens; the
 * exhaustive scheduler with `--preempt all` finds it with one preemption. */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>

static volatile int counter;

static void *bump(void *arg)
{
    int tmp = counter; /* RACE: read */
    counter = tmp + 1; /* RACE: write */
    return arg;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, bump, NULL);
    pthread_create(&b, NULL, bump, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    assert(counter == 2); /* LOST UPDATE */
    printf("counter %d\n", counter);
    return 0;
}
