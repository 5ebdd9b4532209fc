/* drb_022_nojoin_yes: category TJ (result read before the join).  Main reads
 * the worker's result while the worker may still be writing it, and joins
 * only afterwards.  Race: yes, the worker's write against main's read. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

static volatile long result;

static void *worker(void *arg)
{
    for (int i = 0; i < 50; i++) {
        result = i; /* RACE: worker writes */
        sched_yield();
    }
    return NULL;
}

int main(void)
{
    pthread_t t;
    long seen = 0;
    pthread_create(&t, NULL, worker, NULL);
    for (int i = 0; i < 20; i++) {
        seen += result; /* RACE: main reads before join */
        sched_yield();
    }
    pthread_join(t, NULL);
    printf("done\n");
    return seen < 0;
}
