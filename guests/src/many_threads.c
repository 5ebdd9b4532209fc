// Many threads alive at once, as a server with a thread per connection keeps them:
// `many_threads N` creates N threads with 64 KiB stacks, each writing into its own stack and
// then waiting at a barrier until every one has started; the main thread then releases them,
// each adds its result, and all are joined. Prints the count and the sum. Used by
// tests/many_mappings.rs.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_barrier_t barrier;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long total;

static void *worker(void *arg) {
    unsigned long id = (unsigned long)arg;
    volatile unsigned char buf[8192];
    memset((void *)buf, (int)(id & 0xff), sizeof buf);
    pthread_barrier_wait(&barrier);
    unsigned long mine = buf[id % sizeof buf] + id;
    pthread_mutex_lock(&lock);
    total += mine;
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    pthread_t *t = malloc(n * sizeof *t);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_barrier_init(&barrier, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        int e = pthread_create(&t[i], &attr, worker, (void *)(unsigned long)i);
        if (e != 0) {
            printf("pthread_create %d: error %d\n", i, e);
            return 1;
        }
    }
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("%d threads, total %lu\n", n, total);
    return 0;
}
