/* pi_pm_strcmp: short string keys in PM, looked up with strcmp.  Each record is a value
 * followed by an 8-byte key, so a record's key is followed by the next record's value.  Each
 * record has its own mutex; THREADS threads update values and look keys up, every access under
 * the record's mutex.  glibc's vector strcmp reads 16 or 32 bytes at a time, past the key's
 * terminating NUL, into the next record's value, which another thread updates under that
 * record's mutex: a load of bytes the comparison never uses, under a mutex that does not
 * protect them.  Those bytes are outside strcmp's contract (the key through its NUL) and the
 * race passes leave them out (strings=off reports them).
 *   - BUG (this file): an update persists the value after unlocking, so a lookup's locked read
 *     of the value can load it before it is durable (the store and load lines).
 *   - FIXED (pi_pm_strcmp_fixed, built with -DFIXED): persisted before unlocking: no race.
 * Usage: pi_pm_strcmp [POOL]; prints the record count, exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define NRECS 8
#define THREADS 4
#define ROUNDS 16

struct rec {
    volatile uint64_t val;
    char key[8];
};

static struct rec *recs;
static pthread_mutex_t locks[NRECS];
static volatile uint64_t sink;

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    char probe[8];
    for (uint64_t i = 0; i < ROUNDS; i++) {
        uint64_t r = (id * 3 + i / 2) % NRECS;
        if (i % 2 == 0) {
            pthread_mutex_lock(&locks[r]);
            recs[r].val = id * 1000 + i; /* STORE: the record's value, under its mutex */
#ifdef FIXED
            PM_CLWB(&recs[r].val); PM_SFENCE(); /* FIX: persisted before unlocking */
            pthread_mutex_unlock(&locks[r]);
#else
            pthread_mutex_unlock(&locks[r]);
            PM_CLWB(&recs[r].val); PM_SFENCE(); /* BUG: persisted after unlocking */
#endif
        } else {
            snprintf(probe, sizeof probe, "key%llu", (unsigned long long)r);
            for (int j = 0; j < NRECS; j++) {
                pthread_mutex_lock(&locks[j]);
                if (strcmp(recs[j].key, probe) == 0) /* strcmp reads past the key into record j+1 */
                    sink += recs[j].val; /* LOAD: the record's value, under its mutex */
                pthread_mutex_unlock(&locks[j]);
            }
        }
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    /* One more record past the last, so that every key is followed by a value. */
    recs = pm_map(path, (NRECS + 1) * sizeof(struct rec));
    for (int i = 0; i < NRECS + 1; i++) {
        recs[i].val = 0;
        snprintf(recs[i].key, sizeof recs[i].key, "key%d", i);
        pthread_mutex_init(&locks[i % NRECS], NULL);
    }
    persist(recs, (NRECS + 1) * sizeof(struct rec));
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("%d records\n", NRECS);
    return 0;
}
