/* os_balance_fixed: os_balance with the read and the write of each deposit in
 * one critical section: a read-write sequence in every section, so the
 * deposits commute and OSCS stays silent.  Prints the final balance (always
 * 1000).  Exit 0. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#define DEPOSITS 50

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long balance;

static void *depositor(void *arg)
{
    for (int i = 0; i < DEPOSITS; i++) {
        pthread_mutex_lock(&m);
        long b = balance; /* OSCS: read */
        b += 10;
        balance = b; /* OSCS: write */
        pthread_mutex_unlock(&m);
        sched_yield();
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
    printf("balance: %ld\n", balance);
    return balance == 2 * DEPOSITS * 10 ? 0 : 1;
}
