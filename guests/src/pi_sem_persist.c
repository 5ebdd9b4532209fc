/* pi_sem_persist: a persist ordered by semaphores.  The writer stores a PM value, persists it and
 * only then posts a semaphore; the reader waits on that semaphore before loading the value, and
 * posts another one back.  Every load is ordered after the persist of the value it reads: there
 * is no persistence-induced race.
 *   - Vardalith: silent.  Its windows end at releases and start at acquires (sem_post, sem_wait),
 *     so the writer's store window always closes before the reader's load window opens.
 *   - HawkSet: reports it, a documented false positive: its happens-before relation has only
 *     create/join edges, and no lock is held, so the effective locksets are empty.
 * Usage: pi_sem_persist [POOL]; exits 0. */
#include <pthread.h>
#include <semaphore.h>

#include "pm.h"

#define ROUNDS 4

struct root {
    volatile uint64_t value;
    uint64_t pad[7];
};

static struct root *r;
static sem_t full, empty;
static uint64_t sum;

static void *writer(void *arg)
{
    (void)arg;
    for (uint64_t i = 1; i <= ROUNDS; i++) {
        r->value = i; /* STORE: persisted before the sem_post that publishes it */
        PM_CLWB(&r->value); PM_SFENCE(); /* PERSIST: before the post */
        sem_post(&full);
        sem_wait(&empty);
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        sem_wait(&full);
        sum += r->value; /* LOAD: after the sem_wait */
        sem_post(&empty);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    r = pm_map(path, 4096);
    r->value = 0;
    persist((void *)&r->value, sizeof r->value);
    sem_init(&full, 0, 0);
    sem_init(&empty, 0, 0);
    pthread_t w, rd;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&rd, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(rd, NULL);
    printf("sum %llu\n", (unsigned long long)sum);
    return 0;
}
