/* pi_fastfair_split_fixed: FIXED twin of pi_fastfair_split.c.  The split persists the sibling
 * link inside the critical section, before it truncates the leaf and releases its lock, so an
 * inserter that follows the link (under the leaf's lock) only ever finds a durable one.  Same
 * threads, keys and barriers as the buggy version.
 * Usage: pi_fastfair_split_fixed [POOL]; prints the leaf and key counts and the key sum, exits 0. */
#include <pthread.h>

#include "pm.h"

#define CAP 8         /* keys per leaf */
#define ROUNDS 6      /* splits */
#define MAX_LEAVES 12
#define ROOT_OFF 64

struct leaf {
    volatile uint64_t sibling; /* line 0: offset of the right sibling, 0 for none */
    uint64_t pad0[7];
    uint64_t nkeys; /* line 1 */
    uint64_t low;   /* the smallest key the leaf takes (set when it is allocated) */
    uint64_t pad1[6];
    uint64_t keys[CAP]; /* line 2, sorted */
    uint64_t vals[CAP]; /* line 3 */
};

_Static_assert(sizeof(struct leaf) == 256, "four lines");

static char *pool;
static pthread_mutex_t locks[MAX_LEAVES]; /* one per leaf */
static pthread_barrier_t bar;
static uint64_t next_off; /* bump allocator (splitter only) */
static uint64_t last_key; /* the splitter's largest key, read by the inserter after a barrier */

static struct leaf *leaf_at(uint64_t off) { return (struct leaf *)(pool + off); }
static pthread_mutex_t *lock_of(uint64_t off) { return &locks[(off - ROOT_OFF) / sizeof(struct leaf)]; }

/* Under the leaf's lock: sorted insert, persisted before the lock is released. */
static void leaf_insert(struct leaf *l, uint64_t key, uint64_t val)
{
    uint64_t i = l->nkeys;
    if (i == CAP) {
        fprintf(stderr, "leaf full\n");
        exit(1);
    }
    while (i > 0 && l->keys[i - 1] > key) {
        l->keys[i] = l->keys[i - 1];
        l->vals[i] = l->vals[i - 1];
        i--;
    }
    l->keys[i] = key;
    l->vals[i] = val;
    l->nkeys++;
    persist(&l->nkeys, sizeof *l - offsetof(struct leaf, nkeys)); /* lines 1..3 */
}

/* Splits the full leaf at `off`; returns the new sibling's offset. */
static uint64_t split(uint64_t off)
{
    struct leaf *leaf = leaf_at(off);
    pthread_mutex_lock(lock_of(off));
    uint64_t sib_off = next_off;
    next_off += sizeof(struct leaf);
    struct leaf *sib = leaf_at(sib_off);
    sib->sibling = leaf->sibling;
    sib->nkeys = CAP / 2;
    for (int i = 0; i < CAP / 2; i++) {
        sib->keys[i] = leaf->keys[CAP / 2 + i];
        sib->vals[i] = leaf->vals[CAP / 2 + i];
    }
    sib->low = leaf->keys[CAP / 2];
    persist(sib, sizeof *sib);
    leaf->sibling = sib_off; /* STORE: the link, under the lock */
    PM_CLWB(&leaf->sibling); PM_SFENCE(); /* FIX: persist the link before truncating and unlocking */
    leaf->nkeys = CAP / 2;
    PM_CLWB(&leaf->nkeys); PM_SFENCE();
    pthread_mutex_unlock(lock_of(off));
    return sib_off;
}

static void *splitter(void *arg)
{
    (void)arg;
    uint64_t tail = ROOT_OFF, key = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (;;) { /* fill the tail */
            pthread_mutex_lock(lock_of(tail));
            int full = leaf_at(tail)->nkeys == CAP;
            if (!full) {
                key += 10;
                leaf_insert(leaf_at(tail), key, key * 3);
            }
            pthread_mutex_unlock(lock_of(tail));
            if (full)
                break;
        }
        last_key = key;
        tail = split(tail);
        pthread_barrier_wait(&bar); /* the inserter walks the leaves now */
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

/* Walks right from the root to the leaf that takes `key` and inserts it there. */
static void walk_insert(uint64_t key, uint64_t val)
{
    uint64_t off = ROOT_OFF;
    for (;;) {
        struct leaf *l = leaf_at(off);
        pthread_mutex_lock(lock_of(off));
        uint64_t next = l->sibling; /* LOAD: the link, durable before it was unlocked */
        if (next != 0 && key >= leaf_at(next)->low) {
            pthread_mutex_unlock(lock_of(off));
            off = next;
            continue;
        }
        leaf_insert(l, key, val);
        pthread_mutex_unlock(lock_of(off));
        return;
    }
}

static void *inserter(void *arg)
{
    (void)arg;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&bar);
        walk_insert(last_key + 5, (last_key + 5) * 3); /* lands in the new sibling */
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    pool = pm_map(path, 4096);
    for (int i = 0; i < MAX_LEAVES; i++)
        pthread_mutex_init(&locks[i], NULL);
    struct leaf *root = leaf_at(ROOT_OFF);
    root->sibling = 0;
    root->nkeys = 0;
    root->low = 0;
    persist(root, 128); /* lines 0 and 1 */
    next_off = ROOT_OFF + sizeof(struct leaf);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t s, i;
    pthread_create(&s, NULL, splitter, NULL);
    pthread_create(&i, NULL, inserter, NULL);
    pthread_join(s, NULL);
    pthread_join(i, NULL);
    uint64_t leaves = 0, keys = 0, sum = 0, prev = 0;
    int ordered = 1;
    for (uint64_t off = ROOT_OFF; off != 0; off = leaf_at(off)->sibling) {
        struct leaf *l = leaf_at(off);
        leaves++;
        for (uint64_t k = 0; k < l->nkeys; k++) {
            if (l->keys[k] <= prev || l->keys[k] < l->low || l->vals[k] != l->keys[k] * 3)
                ordered = 0;
            prev = l->keys[k];
            keys++;
            sum += l->keys[k];
        }
    }
    printf("leaves %llu, keys %llu, sum %llu, %s\n", (unsigned long long)leaves, (unsigned long long)keys,
           (unsigned long long)sum, ordered ? "ordered" : "NOT ORDERED");
    return ordered ? 0 : 1;
}
