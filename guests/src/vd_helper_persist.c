/* vd_helper_persist: a PM segment filled by two threads, persisted whole by one of them.
 * A builder and a helper thread each fill half of a fresh 4-line PM segment; the builder then
 * flushes every line of the segment (its half and the helper's) and fences, and records the
 * segment as complete in the PM header. The helper never flushes what it wrote: the builder's
 * persist makes it durable. (P-CLHT's resize helpers copy into the new table the same way: the
 * resizing thread persists the whole table.) Threads meet at a barrier three times; a reader
 * reads the segment after the third.
 *   - BUG (this file): the builder persists the segment only after the third barrier, while the
 *     reader already reads it: the reader can act on the helper's values before anybody made
 *     them durable (store and load lines).
 *   - FIXED (vd_helper_persist_fixed, built with -DFIXED): the builder persists the segment
 *     before the second barrier; after it the helper logs its progress (its own store, flushed
 *     and fenced) and both meet the reader at the third. Every load of the reader is ordered
 *     after the builder's persist. Under the writer-only rule the helper's stores, persisted by
 *     another thread, stayed open to the end and overlapped the reader's loads.
 * Usage: vd_helper_persist [POOL]; exits 0. */
#include <pthread.h>

#include "pm.h"

#define SLOTS 32 /* 4 lines of 8-byte slots: the builder fills 0..15, the helper 16..31 */

struct seg {
    uint64_t slot[SLOTS];
    uint64_t complete; /* the builder's: the segment is durable */
    uint64_t helper_log; /* the helper's own progress record */
    uint64_t pad[6];
};

static struct seg *s;
static pthread_barrier_t bar;
static volatile uint64_t sink;

static void persist_segment(void)
{
    for (int i = 0; i < SLOTS; i += 8)
        PM_CLWB(&s->slot[i]);
    PM_SFENCE();
    s->complete = 1;
    PM_CLWB(&s->complete);
    PM_SFENCE();
}

static void *builder(void *arg)
{
    (void)arg;
    for (int i = 0; i < SLOTS / 2; i++)
        s->slot[i] = 1000 + (uint64_t)i;
    pthread_barrier_wait(&bar); /* 1: both halves written */
#ifdef FIXED
    persist_segment(); /* FIX: the whole segment is durable before the reader may read it */
#endif
    pthread_barrier_wait(&bar); /* 2 */
    pthread_barrier_wait(&bar); /* 3: the reader starts */
#ifndef FIXED
    persist_segment(); /* BUG: persisted while the reader reads */
#endif
    return NULL;
}

static void *helper(void *arg)
{
    (void)arg;
    for (int i = SLOTS / 2; i < SLOTS; i++)
        s->slot[i] = 2000 + (uint64_t)i; /* STORE: the helper's half, persisted by the builder */
    pthread_barrier_wait(&bar); /* 1 */
    pthread_barrier_wait(&bar); /* 2 */
    s->helper_log = SLOTS / 2;
    PM_CLWB(&s->helper_log);
    PM_SFENCE();
    pthread_barrier_wait(&bar); /* 3 */
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&bar); /* 1 */
    pthread_barrier_wait(&bar); /* 2 */
    pthread_barrier_wait(&bar); /* 3 */
    uint64_t sum = 0;
    for (int i = 0; i < SLOTS; i++)
        sum += *(volatile uint64_t *)&s->slot[i]; /* LOAD: the reader, after the third barrier */
    sink = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    s = pm_map(path, 4096);
    pthread_barrier_init(&bar, NULL, 3);
    pthread_t t[3];
    pthread_create(&t[0], NULL, builder, NULL);
    pthread_create(&t[1], NULL, helper, NULL);
    pthread_create(&t[2], NULL, reader, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("sum %lu\n", (unsigned long)sink);
    return 0;
}
