/* pi_turbo_bucket_fixed: FIXED twin of pi_turbo_bucket.c: insert() persists the line of the slot
 * it wrote as well as the header's line, so every slot is durable before the lock is released.
 * Usage: pi_turbo_bucket_fixed [POOL [N]] (N entries, 1..7, default 6); prints the sum, exits 0. */
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
    s->val = val; /* STORE: the slot */
    b->bitmap |= 1ull << i;
    PM_CLWB(s); PM_CLWB(&b->bitmap); PM_SFENCE(); /* FIX: persist the slot's line too */
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
