/* drb_007_twolocks_yes: category SYN (inconsistent synchronisation: two
 * different locks for one variable).  Race: yes, the update under lock A
 * against the update under lock B. */
#include <pthread.h>
#include <stdio.h>

static pthread_barrier_t start; /* the workers run together */
static pthread_mutex_t la = PTHREAD_MUTEX_INITIALIZER, lb = PTHREAD_MUTEX_INITIALIZER;
static volatile long counter;

static void *ta(void *arg)
{
    pthread_barrier_wait(&start);
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&la);
        counter++; /* RACE: under lock A */
        pthread_mutex_unlock(&la);
    }
    return NULL;
}

static void *tb(void *arg)
{
    pthread_barrier_wait(&start);
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&lb);
        counter++; /* RACE: under lock B */
        pthread_mutex_unlock(&lb);
    }
    return NULL;
}

int main(void)
{
    pthread_barrier_init(&start, NULL, 2);
    pthread_t a, b;
    pthread_create(&a, NULL, ta, NULL);
    pthread_create(&b, NULL, tb, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("done\n");
    return 0;
}
