/* drb_014_rdlock_write_yes: category SYN (write under a read lock).  Two
 * threads update a counter holding only the read lock of a rwlock, which
 * does not exclude the other reader.  Race: yes, the two updates. */
#include <pthread.h>
#include <stdio.h>

static pthread_barrier_t start; /* the workers run together */
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static volatile long counter;

static void *worker(void *arg)
{
    pthread_barrier_wait(&start);
    for (int i = 0; i < 200; i++) {
        pthread_rwlock_rdlock(&rw);
        counter++; /* RACE: update under rdlock */
        pthread_rwlock_unlock(&rw);
    }
    return NULL;
}

int main(void)
{
    pthread_barrier_init(&start, NULL, 2);
    pthread_t a, b;
    pthread_create(&a, NULL, worker, NULL);
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("done\n");
    return 0;
}
