/* snap_touch: 4 threads, each writing every page of its own heap buffer of MIB MiB, then ROUNDS
 * rounds of a checksum over it with a mutex-protected shared total. The machine
 * `ferrite bench --snapshots` snapshots and restores: 4 threads and 4 × MIB MiB of touched
 * memory. Usage: snap_touch [MIB] [ROUNDS]; prints the total, exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4

static long mib = 16;
static long rounds = 4;
static unsigned long total;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg)
{
    long id = (long)arg;
    size_t len = (size_t)mib << 20;
    unsigned char *buf = malloc(len);
    if (!buf)
        return NULL;
    for (size_t i = 0; i < len; i += 4096)
        buf[i] = (unsigned char)(i >> 12) ^ (unsigned char)id;
    for (long r = 0; r < rounds; r++) {
        unsigned long sum = 0;
        for (size_t i = 0; i < len; i += 4096)
            sum += buf[i];
        pthread_mutex_lock(&lock);
        total += sum;
        pthread_mutex_unlock(&lock);
    }
    free(buf);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        mib = atol(argv[1]);
    if (argc > 2)
        rounds = atol(argv[2]);
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("total %lu\n", total);
    return 0;
}
