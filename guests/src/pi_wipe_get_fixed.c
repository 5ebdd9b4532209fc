/* pi_wipe_get_fixed: FIXED twin of pi_wipe_get.c.  The put persists the slot before it sets the
 * slot's key bit, and persists the bitmap before it releases the node's lock, so the put is
 * durable before it completes; the lock-free gets, which run after the put (barriers, as in the
 * buggy version), only see durable bits and values.  Same threads, keys and barriers.
 * Usage: pi_wipe_get_fixed [POOL]; prints how many gets found their key and the sum, exits 0. */
#include <pthread.h>

#include "pm.h"

#define NSLOTS 8
#define ROUNDS 4

struct slot {
    uint64_t key;
    uint64_t val;
};

struct node {
    volatile uint64_t bitmap; /* line 0: bit i set = slot i holds a key */
    uint64_t pad[7];
    struct slot s[NSLOTS]; /* lines 1 and 2 */
};

_Static_assert(sizeof(struct node) == 192, "three lines");

static char *pool;
static pthread_mutex_t locks[ROUNDS]; /* one per node */
static pthread_barrier_t bar;
static uint64_t found, sum;

static struct node *node_at(int r) { return (struct node *)(pool + 64 + r * sizeof(struct node)); }
static uint64_t key_of(int r, int k) { return (uint64_t)r * 100 + (uint64_t)k; }

/* A new node with keys 1 and 2 of round r, persisted before it is published. */
static void build(int r)
{
    struct node *n = node_at(r);
    for (int k = 0; k < 2; k++) {
        n->s[k].key = key_of(r, k + 1);
        n->s[k].val = key_of(r, k + 1) * 7;
    }
    n->bitmap = 3;
    persist(n, 128); /* the bitmap's line and the first slots' line */
}

static void put(int r, uint64_t key, uint64_t val)
{
    struct node *n = node_at(r);
    pthread_mutex_lock(&locks[r]);
    int i = 0;
    while (n->bitmap >> i & 1)
        i++;
    struct slot *s = &n->s[i];
    s->key = key; s->val = val; /* SLOT: the key and value */
    PM_CLWB(s); PM_SFENCE(); /* ORDER: the slot is durable before its key bit is set */
    n->bitmap |= 1ull << i; /* STORE: the key bit, under the lock */
    PM_CLWB(&n->bitmap); PM_SFENCE(); /* FIX: the bitmap is durable before the put completes */
    pthread_mutex_unlock(&locks[r]);
}

static void *writer(void *arg)
{
    (void)arg;
    for (int r = 0; r < ROUNDS; r++) {
        build(r);
        put(r, key_of(r, 3), key_of(r, 3) * 7);
        pthread_barrier_wait(&bar); /* the gets run now */
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

/* Lock-free (noinline: the value's load stays on the GET line). */
static __attribute__((noinline)) int get(int r, uint64_t key, uint64_t *val)
{
    struct node *n = node_at(r);
    uint64_t bm = n->bitmap; /* LOAD: the key bits, no lock */
    for (int i = 0; i < NSLOTS; i++) {
        if (!(bm >> i & 1))
            continue;
        struct slot *s = &n->s[i];
        if (s->key == key) { *val = s->val; return 1; } /* GET: the slot's key and value */
    }
    return 0;
}

static void *reader(void *arg)
{
    (void)arg;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&bar);
        for (int k = 1; k <= 4; k++) { /* keys 1..3 are there, 4 is not */
            uint64_t v;
            if (get(r, key_of(r, k), &v)) {
                found++;
                sum += v;
            }
        }
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    pool = pm_map(path, 4096);
    for (int r = 0; r < ROUNDS; r++)
        pthread_mutex_init(&locks[r], NULL);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t w, rd;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&rd, NULL, reader, NULL);
    pthread_join(w, NULL);
    pthread_join(rd, NULL);
    printf("nodes %d, gets found %llu of %d, sum %llu\n", ROUNDS, (unsigned long long)found, ROUNDS * 4,
           (unsigned long long)sum);
    return 0;
}
