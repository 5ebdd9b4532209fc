/* os_balance: a lock-protected atomicity violation (not a data race).  Two
 * threads deposit into a shared balance; each reads the balance in one
 * critical section and writes the new value in a second one, so a deposit
 * can be lost although every access holds the mutex.  OSCS reports the pair
 * (read in one critical section, write in another, no read-write sequence);
 * a data-race detector must stay silent.  Prints the number of deposits
 * only.  Exit 0. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#define DEPOSITS 50

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile long balance;

static void *depositor(void *arg)
{
    for (int i = 0; i < DEPOSITS; i++) {
        pthread_mutex_lock(&m);
        long b = balance; /* OSCS: read */
        pthread_mutex_unlock(&m);
        sched_yield();
        pthread_mutex_lock(&m);
        balance = b + 10; /* OSCS: write */
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, depositor, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("deposits: %d\n", 2 * DEPOSITS);
    return 0;
}
