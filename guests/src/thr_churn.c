/* thr_churn: a program that creates and joins threads without end (a server's per-request
 * threads, a pool that is torn down and rebuilt): N rounds, each creating two threads that add
 * to a shared counter under a mutex and fill a heap block of their own, then joining them.
 * Race-free. Usage: thr_churn N (default 100). Prints `rounds N, counter C` and exits 0; 2 on a
 * bad argument. tests/hmtrace.rs runs it to check that hmtrace's record contexts (thread,
 * clock slot, locks held) are freed once no record names them. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static void *worker(void *arg)
{
    long id = (long)arg;
    char *block = malloc(256);
    if (block == NULL)
        return NULL;
    memset(block, (int)(id & 0x7f), 256);
    pthread_mutex_lock(&lock);
    counter += block[id % 256];
    pthread_mutex_unlock(&lock);
    free(block);
    return NULL;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 100;
    if (rounds < 1) {
        fprintf(stderr, "thr_churn: bad argument\n");
        return 2;
    }
    for (long r = 0; r < rounds; r++) {
        pthread_t t[2];
        for (long i = 0; i < 2; i++) {
            if (pthread_create(&t[i], NULL, worker, (void *)(2 * r + i)) != 0) {
                fprintf(stderr, "thr_churn: pthread_create failed\n");
                return 1;
            }
        }
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
    }
    printf("rounds %ld, counter %ld\n", rounds, counter);
    return 0;
}
