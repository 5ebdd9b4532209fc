/* drb_013_rwlock_no: category SYN (reader-writer lock).  One writer updates
 * a pair under the write lock, three readers read it under the read lock.
 * Race: no. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static long x, y;

static void *writer(void *arg)
{
    for (int i = 1; i <= 100; i++) {
        pthread_rwlock_wrlock(&rw);
        x = i;
        y = 2 * i;
        pthread_rwlock_unlock(&rw);
        sched_yield();
    }
    return NULL;
}

static void *reader(void *arg)
{
    long bad = 0;
    for (int i = 0; i < 100; i++) {
        pthread_rwlock_rdlock(&rw);
        bad += y != 2 * x;
        pthread_rwlock_unlock(&rw);
    }
    return (void *)bad;
}

int main(void)
{
    pthread_t w, r[3];
    long bad = 0;
    pthread_create(&w, NULL, writer, NULL);
    for (int i = 0; i < 3; i++)
        pthread_create(&r[i], NULL, reader, NULL);
    for (int i = 0; i < 3; i++) {
        void *b;
        pthread_join(r[i], &b);
        bad += (long)b;
    }
    pthread_join(w, NULL);
    printf("violations: %ld\n", bad);
    return 0;
}
