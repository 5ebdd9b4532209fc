/* os_fig3b: OSCS paper Figure 3(b), commutative critical sections.  Each of 4
 * threads sums its slice of an array and adds the local sum into a global
 * under lock L (`global_sum += local_sum`): the sections conflict and are
 * unordered, but each is a read-write sequence, so OSCS stays silent.
 * Prints the sum (always 8128).  Exit 0. */
#include <pthread.h>
#include <stdio.h>

#define NT 4
#define N 128

static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;
static int data[N];
static long global_sum;

static void *worker(void *arg)
{
    long id = (long)arg, local_sum = 0;
    for (int i = id * (N / NT); i < (id + 1) * (N / NT); i++)
        local_sum += data[i];
    pthread_mutex_lock(&L);
    global_sum += local_sum; /* OSCS: add */
    pthread_mutex_unlock(&L);
    return NULL;
}

int main(void)
{
    pthread_t t[NT];
    for (int i = 0; i < N; i++)
        data[i] = i;
    for (long i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    printf("sum: %ld\n", global_sum);
    return global_sum == N * (N - 1) / 2 ? 0 : 1;
}
