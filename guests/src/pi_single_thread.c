/* pi_single_thread: a single-threaded PM program with every pattern the race detectors look
 * at, none of which can race: a store under a mutex persisted after unlocking, an unlock and
 * relock before the persist, a store overwritten before its persist, a store never persisted,
 * 8-byte stores read back 4 bytes at a time.  With no second thread there is no
 * persistence-induced race: hawkset and vardalith report nothing.
 * Usage: pi_single_thread [POOL]; prints a checksum, exits 0. */
#include <pthread.h>

#include "pm.h"

struct data {
    volatile uint64_t a;
    volatile uint64_t b;
    volatile uint64_t c;
    volatile uint64_t never;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    struct data *d = pm_map(path, 4096);
    uint64_t sum = 0;
    for (uint64_t i = 1; i <= 4; i++) {
        pthread_mutex_lock(&lock);
        d->a = i; /* STORE: under the lock */
        pthread_mutex_unlock(&lock);
        persist((void *)&d->a, 8);
        pthread_mutex_lock(&lock);
        d->b = i * 10;
        pthread_mutex_unlock(&lock);
        pthread_mutex_lock(&lock);
        persist((void *)&d->b, 8);
        pthread_mutex_unlock(&lock);
        d->c = i;
        d->c = i + 100;
        persist((void *)&d->c, 8);
        pthread_mutex_lock(&lock);
        sum += d->a + d->b + d->c + *(volatile uint32_t *)((char *)&d->a + 4);
        pthread_mutex_unlock(&lock);
    }
    d->never = sum;
    printf("sum %llu\n", (unsigned long long)(sum + d->never));
    return 0;
}
