/* pr_server_forever: a PM service that never exits, with a PMRace inter-thread inconsistency.
 * A "set" thread stores each new record's value into the PM table under the table lock and
 * signals the "mirror" thread, which copies the value, doubled, into a PM journal and persists
 * the journal entry.  The set thread persists the record only on its next request: the journal
 * entry is durable while the value it was derived from is not, so a crash between the two keeps
 * the effect without its cause.  After its requests every thread waits for more work that never
 * comes (main blocks reading an empty pipe, as a server blocks in accept): the run ends because
 * every thread is blocked, not because the program exited.
 * FIXED twin: pr_server_forever_fixed.c (the same source with FIXED: the set thread persists the
 * record before it signals).
 * Usage: pr_server_forever [POOL]    never returns (natively: kill it) */
#include <pthread.h>
#include <unistd.h>

#include "pm.h"

#define REQUESTS 6
#define POOL_SIZE 4096

struct rec { /* one cache line each */
    uint64_t value;
    uint64_t pad[7];
};

struct table {
    struct rec recs[REQUESTS];
    uint64_t journal[REQUESTS]; /* doubled values, persisted one by one */
};

static struct table *t;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static int published; /* requests stored, under lock */

static void wait_forever(void)
{
    pthread_mutex_lock(&lock);
    for (;;)
        pthread_cond_wait(&never, &lock);
}

static void *setter(void *arg)
{
    (void)arg;
    for (int i = 0; i < REQUESTS; i++) {
        pthread_mutex_lock(&lock);
        if (i > 0) {
            PM_CLWB(&t->recs[i - 1]); /* the previous request's record, one request late */
            PM_SFENCE();
        }
        t->recs[i].value = 7u * (uint64_t)i + 1; /* PR: source store */
#ifdef FIXED
        PM_CLWB(&t->recs[i]);
        PM_SFENCE();
#endif
        published = i + 1;
        pthread_cond_signal(&ready);
        pthread_mutex_unlock(&lock);
    }
    wait_forever();
    return NULL;
}

static void *mirror(void *arg)
{
    (void)arg;
    for (int i = 0; i < REQUESTS; i++) {
        pthread_mutex_lock(&lock);
        while (published <= i)
            pthread_cond_wait(&ready, &lock);
        uint64_t v = t->recs[i].value; /* PR: load */
        pthread_mutex_unlock(&lock);
        t->journal[i] = 2 * v; /* PR: side effect */
        PM_CLWB(&t->journal[i]);
        PM_SFENCE();
    }
    wait_forever();
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    t = pm_map(path, POOL_SIZE);
    int fds[2];
    if (pipe(fds) != 0)
        return 1;
    pthread_t a, b;
    pthread_create(&a, NULL, setter, NULL);
    pthread_create(&b, NULL, mirror, NULL);
    char c;
    /* Wait for a request on a pipe whose write end this process keeps: none ever comes. */
    ssize_t n = read(fds[0], &c, 1);
    return n == 1 ? 0 : 2;
}
