/* thr_once_tls: 4 threads each call pthread_once(&once, init) (init runs
 * exactly once); pthread_key_create with a destructor that counts its calls
 * (each thread sets a non-NULL value, so the destructor runs 4 times, at
 * thread exit, before pthread_join returns; thread 3 sets the key twice and
 * only the second value reaches the destructor); a `__thread` counter (TLS
 * .tbss, starts at 0 in each thread) that thread i increments (i+1)*100
 * times, and an initialised `__thread` variable (TLS .tdata, initial value 7
 * in every thread).  A barrier makes the 4 threads race into pthread_once.
 * Threads return their counts via pthread_join; main joins in order and
 * prints.  Main's own TLS copies are checked to be untouched.  Output is
 * deterministic.  Exit status 0. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NT 4

static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_int init_runs;
static atomic_int once_returns;
static pthread_key_t key;
static pthread_barrier_t start; /* the 4 threads race into pthread_once */
static atomic_int dtor_calls;
static atomic_long dtor_sum;
static __thread long tls_counter;        /* .tbss */
static __thread long tls_init = 7;       /* .tdata */

#define CK(call)                                                              \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != 0) {                                                       \
            fprintf(stderr, "%s failed: %s\n", #call, strerror(rc_));         \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static void init(void)
{
    atomic_fetch_add(&init_runs, 1);
}

static void dtor(void *v)
{
    atomic_fetch_add(&dtor_calls, 1);
    atomic_fetch_add(&dtor_sum, *(long *)v);
    free(v);
}

struct result {
    long counter, init_seen, init_after, specific_ok;
};

static void *worker(void *arg)
{
    int i = (int)(long)arg;
    struct result *res = malloc(sizeof *res);
    pthread_barrier_wait(&start);
    CK(pthread_once(&once, init));
    atomic_fetch_add(&once_returns, 1);
    res->init_seen = tls_init;
    for (int k = 0; k < (i + 1) * 100; k++)
        tls_counter++;
    tls_init += i;
    long *v = malloc(sizeof *v);
    *v = 1000 * (i + 1);
    if (i == 3) { /* replace the value: the destructor sees only the last one */
        long *old = malloc(sizeof *old);
        *old = 99999;
        CK(pthread_setspecific(key, old));
        free(old);
    }
    CK(pthread_setspecific(key, v));
    res->specific_ok = pthread_getspecific(key) == v;
    res->counter = tls_counter;
    res->init_after = tls_init;
    return res;
}

int main(void)
{
    CK(pthread_key_create(&key, dtor));
    CK(pthread_barrier_init(&start, NULL, NT));
    pthread_t t[NT];
    for (long i = 0; i < NT; i++)
        CK(pthread_create(&t[i], NULL, worker, (void *)i));
    int ok = 1;
    for (int i = 0; i < NT; i++) {
        void *r;
        CK(pthread_join(t[i], &r));
        struct result *res = r;
        printf("thread %d: __thread counter %ld, __thread init seen %ld -> %ld, getspecific %s\n",
               i, res->counter, res->init_seen, res->init_after,
               res->specific_ok ? "ok" : "WRONG");
        ok &= res->counter == (i + 1) * 100 && res->init_seen == 7 && res->init_after == 7 + i &&
              res->specific_ok;
        free(res);
    }
    CK(pthread_once(&once, init)); /* already done: must not run init again */
    printf("pthread_once init runs: %d (callers returned: %d)\n", atomic_load(&init_runs),
           atomic_load(&once_returns));
    printf("key destructor calls: %d, sum of destroyed values: %ld\n", atomic_load(&dtor_calls),
           atomic_load(&dtor_sum));
    printf("main: __thread counter %ld, __thread init %ld, getspecific %s\n", tls_counter, tls_init,
           pthread_getspecific(key) == NULL ? "NULL" : "set");
    CK(pthread_key_delete(key));
    ok &= atomic_load(&init_runs) == 1 && atomic_load(&once_returns) == NT &&
          atomic_load(&dtor_calls) == NT && atomic_load(&dtor_sum) == 10000 && tls_counter == 0 &&
          tls_init == 7;
    printf("result: %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
