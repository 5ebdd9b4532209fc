/* drb_006_missinglock_yes: category SYN (missing lock).  One thread updates
 * a counter under a mutex, the other without it.  Race: yes, the locked
 * update against the unlocked one. */
#include <pthread.h>
#include <stdio.h>

static pthread_barrier_t start; /* the workers run together */
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile long counter;

static void *locked(void *arg)
{
    pthread_barrier_wait(&start);
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&m);
        counter++; /* RACE: locked update */
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

static void *unlocked(void *arg)
{
    pthread_barrier_wait(&start);
    for (int i = 0; i < 200; i++)
        counter++; /* RACE: unlocked update */
    return NULL;
}

int main(void)
{
    pthread_barrier_init(&start, NULL, 2);
    pthread_t a, b;
    pthread_create(&a, NULL, locked, NULL);
    pthread_create(&b, NULL, unlocked, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("done\n");
    return 0;
}
