/* drb_021_join_no: category TJ (create and join order accesses).  Main
 * initialises an input before creating the worker, the worker writes the
 * result, main reads it after pthread_join.  Race: no. */
#include <pthread.h>
#include <stdio.h>

static long input, result;

static void *worker(void *arg)
{
    for (int i = 0; i < 50; i++)
        result += input + i;
    return NULL;
}

int main(void)
{
    pthread_t t;
    input = 5;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    printf("result: %ld\n", result);
    return 0;
}
