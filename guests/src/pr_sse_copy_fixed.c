/* pr_sse_copy_fixed: FIXED twin of pr_sse_copy.c.  The writer persists the record inside its
 * critical section, so the reader's memcpy (same barriers, same rounds) only ever copies durable
 * bytes into the buffer and on into the PM copy.
 * Usage: pr_sse_copy_fixed [POOL]        prints the first words of the record and the copy and
 *                                        a checksum, exits 0
 *        pr_sse_copy_fixed POOL recover  opens the existing pool, reads the copy (first) and the
 *                                        record, prints `recovered` (or `recovered:
 *                                        inconsistent` if the copy is newer), exits 0 */
#include <pthread.h>

#include "pm.h"

#define ROUNDS 5
#define WORDS 8

struct rec { /* 64 bytes: one cache line */
    uint64_t w[WORDS];
};

struct root {
    struct rec rec;  /* line 0: the writer's record */
    struct rec copy; /* line 1: the reader's copy */
};

static struct root *p;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;
static void *(*volatile libc_memcpy)(void *, const void *, size_t) = memcpy;

static void *writer(void *arg)
{
    (void)arg;
    for (uint64_t i = 1; i <= ROUNDS; i++) {
        uint64_t v = i * 10;
        pthread_mutex_lock(&lock);
        for (int j = 0; j < WORDS; j++) p->rec.w[j] = v + j; /* PR: source store */
        PM_CLWB(&p->rec); PM_SFENCE(); /* FIX: record persisted inside the critical section */
        pthread_mutex_unlock(&lock);
        pthread_barrier_wait(&bar); /* the reader's critical section runs now */
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    uint64_t buf[WORDS]; /* DRAM */
    for (int i = 0; i < ROUNDS; i++) {
        pthread_barrier_wait(&bar);
        pthread_mutex_lock(&lock);
        libc_memcpy(buf, &p->rec, sizeof buf); /* PR: load */
        libc_memcpy(&p->copy, buf, sizeof buf); /* PR: side effect */
        PM_CLWB(&p->copy); PM_SFENCE();
        pthread_mutex_unlock(&lock);
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

/* A record as the writer makes it: w[j] == w[0] + j. */
static int well_formed(const struct rec *r)
{
    for (int j = 0; j < WORDS; j++)
        if (r->w[j] != r->w[0] + j)
            return 0;
    return 1;
}

static int recover(const char *path)
{
    p = pm_open(path, 4096, 0);
    struct rec copy = p->copy; /* the side effect is read before anything is written */
    struct rec rec = p->rec;
    int ok = well_formed(&copy) && well_formed(&rec) && copy.w[0] <= rec.w[0];
    puts(ok ? "recovered" : "recovered: inconsistent");
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2 && strcmp(argv[2], "recover") == 0)
        return recover(path);
    p = pm_map(path, 4096);
    for (int j = 0; j < WORDS; j++)
        p->rec.w[j] = p->copy.w[j] = (uint64_t)j;
    persist(p, sizeof *p);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t w, r;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&r, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    uint64_t sum = 0;
    for (int j = 0; j < WORDS; j++)
        sum += p->rec.w[j] + p->copy.w[j];
    printf("record %llu, copy %llu, sum %llu\n", (unsigned long long)p->rec.w[0],
           (unsigned long long)p->copy.w[0], (unsigned long long)sum);
    return 0;
}
