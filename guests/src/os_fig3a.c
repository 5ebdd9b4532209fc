/* os_fig3a: OSCS paper (Huang et al., ISCA'13) Figure 3(a), ordered critical
 * sections.  T1 clears a table under lock L and then reaches a barrier; T2
 * adds entries under L after the same barrier.  The sections conflict but
 * the barrier orders them: OSCS must stay silent.  Prints the table sum.
 * Exit 0. */
#include <pthread.h>
#include <stdio.h>

#define N 16

static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t B;
static int table[N];

static void *t1(void *arg)
{
    pthread_mutex_lock(&L);
    for (int i = 0; i < N; i++)
        table[i] = 0; /* OSCS: clear */
    pthread_mutex_unlock(&L);
    pthread_barrier_wait(&B);
    return NULL;
}

static void *t2(void *arg)
{
    pthread_barrier_wait(&B);
    pthread_mutex_lock(&L);
    for (int i = 0; i < N; i += 2)
        table[i] = i; /* OSCS: add */
    pthread_mutex_unlock(&L);
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    for (int i = 0; i < N; i++)
        table[i] = 100;
    pthread_barrier_init(&B, NULL, 2);
    pthread_create(&a, NULL, t1, NULL);
    pthread_create(&b, NULL, t2, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    int sum = 0;
    for (int i = 0; i < N; i++)
        sum += table[i];
    printf("sum: %d\n", sum);
    return 0;
}
