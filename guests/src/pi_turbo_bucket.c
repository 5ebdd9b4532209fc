/* pi_turbo_bucket: the shape of TurboHash's missing persist (HawkSet Table 2 #3).  A bucket is
 * two cache lines: line 0 holds the occupancy bitmap and slots 0..2, line 1 holds slots 3..6.
 * insert() takes the bucket lock, writes the slot, sets its bit and persists line 0 — the line
 * the header is on — assuming the slot is there too.  For slots 3..6 it is not: those entries are
 * never flushed, and the reader, which takes the lock after the inserts and reads every occupied
 * slot, reads values a crash would lose.  The bug shows only once a bucket holds more than three
 * entries: `pi_turbo_bucket POOL 3` is silent, `pi_turbo_bucket POOL 6` is reported.
 * FIXED twin: pi_turbo_bucket_fixed.c.
 * Usage: pi_turbo_bucket [POOL [N]] (N entries, 1..7, default 6); prints the sum, exits 0. */
#include <pthread.h>

#include "pm.h"

struct slot {
    uint64_t key;
    uint64_t val;
};

struct bucket {
    uint64_t bitmap;
    struct slot s0[3]; /* line 0 */
    uint64_t pad;
    struct slot s1[4]; /* line 1 */
};

_Static_assert(sizeof(struct bucket) == 128, "two lines");

static struct bucket *b;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;
static int n_entries = 6;
static uint64_t sum;

static struct slot *slot_at(int i) { return i < 3 ? &b->s0[i] : &b->s1[i - 3]; }

static void insert(int i, uint64_t key, uint64_t val)
{
    pthread_mutex_lock(&lock);
    struct slot *s = slot_at(i);
    s->key = key;
    s->val = val; /* BUG: on line 1 for slots 3..6, which is never flushed */
    b->bitmap |= 1ull << i;
    PM_CLWB(&b->bitmap); PM_SFENCE(); /* PERSIST: line 0 only */
    pthread_mutex_unlock(&lock);
}

static void *inserter(void *arg)
{
    (void)arg;
    for (int i = 0; i < n_entries; i++)
        insert(i, (uint64_t)i + 1, (uint64_t)(i + 1) * 100);
    pthread_barrier_wait(&bar);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&bar);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < 7; i++)
        if (b->bitmap >> i & 1)
            sum += slot_at(i)->val; /* LOAD: every occupied slot */
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2)
        n_entries = atoi(argv[2]);
    if (n_entries < 1 || n_entries > 7) {
        fprintf(stderr, "N must be 1..7\n");
        return 2;
    }
    char *pool = pm_map(path, 4096);
    b = (struct bucket *)(pool + 128);
    memset(b, 0, sizeof *b);
    persist(b, sizeof *b);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t w, r;
    pthread_create(&w, NULL, inserter, NULL);
    pthread_create(&r, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    printf("entries %d, sum %llu\n", n_entries, (unsigned long long)sum);
    return 0;
}
