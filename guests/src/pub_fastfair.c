/* pub_fastfair: the shape of FAST_FAIR's concurrent B+-tree (DICL/FAST_FAIR, concurrent_pmdk,
 * HawkSet's Table 2 bugs #1 and #2), written small.  Nodes live in PM, each with a read-write
 * lock (in DRAM, as FAST_FAIR's hdr.rwlock points to one); inserts write-lock the leaf,
 * shifting its sorted entries FAST-style (each shift persisted in place), and split full nodes
 * (a sibling gets the upper half and is linked through the node's sibling pointer, then the
 * split key goes to the parent).  Searches of internal nodes take no lock (FAST_FAIR's
 * linear_search of internal nodes: the switch counter and the entries are read lock-free and
 * the read retried if the counter moved); leaf searches read-lock the leaf.
 *   - Bug #1's shape: the split publishes the sibling through the node's sibling pointer and
 *     persists it only after the write lock is released (RACE-1: sibling pointer).
 *   - Bug #2's shape: the split's new last index, read by every search, is persisted after the
 *     unlock too (RACE-2: last index).
 *   Both are loaded by the lock-free internal searches and the leaf searches (RACE-LOAD).
 * THREADS threads (4) insert KEYS keys each and look each one up.
 * Usage: pub_fastfair [POOL [KEYS [THREADS]]]; prints the keys found, exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define POOL_SIZE (8 << 20)
#define CARD 7 /* entries per node */
#define MAX_NODES 4096
#define MAX_THREADS 8

struct entry {
    volatile uint64_t key;
    volatile uint64_t ptr; /* value (leaf) or child offset (internal); 0: end */
};

struct node {
    volatile uint64_t leftmost; /* internal: the leftmost child (offset); 0 in a leaf */
    volatile uint64_t sibling;  /* right sibling (offset), 0: none */
    volatile uint32_t level;
    volatile uint32_t id;       /* index of the node's rwlock */
    volatile uint8_t switch_counter;
    uint8_t pad0[1];
    volatile int16_t last_index; /* index of the last entry, -1: empty */
    uint8_t pad1[36];
    struct entry e[CARD + 1];   /* sorted; e[last_index + 1].ptr == 0 */
};

struct root {
    volatile uint64_t root; /* offset of the root node */
    volatile uint64_t next_free;
    volatile uint32_t nodes;
    uint32_t pad[11];
};

static char *pool;
static struct root *meta;
static pthread_rwlock_t locks[MAX_NODES];
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t root_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t keys = 60;
static int threads = 4;
static uint64_t found[MAX_THREADS];

#define N(off) ((struct node *)(pool + (off)))

static uint64_t new_node(uint32_t level)
{
    pthread_mutex_lock(&alloc_lock);
    uint64_t off = meta->next_free;
    uint32_t id = meta->nodes++;
    meta->next_free = off + sizeof(struct node);
    persist((void *)meta, sizeof *meta);
    pthread_mutex_unlock(&alloc_lock);
    if (off + sizeof(struct node) > POOL_SIZE || id >= MAX_NODES) {
        fprintf(stderr, "pool full\n");
        exit(1);
    }
    struct node *n = N(off);
    memset(n, 0, sizeof *n);
    n->level = level;
    n->id = id;
    n->last_index = -1;
    persist(n, sizeof *n);
    return off;
}

/* FAST_FAIR's lock-free search of an internal node: the child to follow for `key`. */
static uint64_t internal_search(struct node *n, uint64_t key)
{
    uint8_t sc;
    uint64_t ret;
    do {
        sc = n->switch_counter; /* RACE-LOAD: the lock-free search's reads */
        ret = n->leftmost;
        int last = n->last_index; /* RACE-LOAD: the last index, lock-free */
        for (int i = 0; i <= last; i++) {
            if (key < n->e[i].key)
                break;
            ret = n->e[i].ptr;
        }
    } while (sc != n->switch_counter);
    uint64_t s = n->sibling; /* RACE-LOAD: the sibling pointer, lock-free */
    if (s && key >= N(s)->e[0].key)
        return s;
    return ret;
}

static uint64_t leaf_of(uint64_t key)
{
    uint64_t off = meta->root;
    while (N(off)->leftmost)
        off = internal_search(N(off), key);
    return off;
}

/* Inserts (key, ptr) into the non-full node `n` (write-locked), FAST-style: entries move right
 * one at a time, each move persisted, so a lock-free reader never misses a key. */
static void insert_key(struct node *n, uint64_t key, uint64_t ptr)
{
    int i = n->last_index;
    n->e[i + 2].ptr = 0;
    for (; i >= 0 && n->e[i].key > key; i--) {
        n->e[i + 1].ptr = n->e[i].ptr; /* shift (persisted in place) */
        n->e[i + 1].key = n->e[i].key;
        persist((void *)&n->e[i + 1], sizeof n->e[i + 1]);
    }
    n->e[i + 1].key = key;
    n->e[i + 1].ptr = ptr;
    persist((void *)&n->e[i + 1], sizeof n->e[i + 1]);
    n->last_index++;
    persist((void *)&n->last_index, sizeof n->last_index);
}

static void insert_at(uint32_t level, uint64_t key, uint64_t ptr);

/* Splits the full, write-locked node `off` and inserts (key, ptr); unlocks it. */
static void split(uint64_t off, uint64_t key, uint64_t ptr)
{
    struct node *n = N(off);
    uint64_t soff = new_node(n->level);
    struct node *s = N(soff);
    int m = (CARD + 1) / 2;
    uint64_t split_key = n->e[m].key;
    int j = 0;
    if (n->leftmost) {
        s->leftmost = n->e[m].ptr;
        m++;
    }
    for (int i = m; i <= n->last_index; i++, j++)
        s->e[j] = n->e[i];
    s->e[j].ptr = 0;
    s->last_index = (int16_t)(j - 1);
    s->sibling = n->sibling;
    persist(s, sizeof *s);
    n->sibling = soff; /* RACE-1: sibling pointer, stored under the write lock */
    n->switch_counter++;
    int newlast = n->leftmost ? (CARD + 1) / 2 - 1 : (CARD + 1) / 2 - 1;
    n->e[newlast + 1].ptr = 0;
    persist((void *)&n->e[newlast + 1], sizeof n->e[newlast + 1]);
    n->last_index = (int16_t)newlast; /* RACE-2: last index, stored under the write lock */
    if (key < split_key)
        insert_key(n, key, ptr);
    else
        insert_key(s, key, ptr);
    pthread_rwlock_unlock(&locks[n->id]);
    persist((void *)&n->sibling, sizeof n->sibling); /* ... both persisted after the unlock */
    persist((void *)&n->last_index, sizeof n->last_index);
    pthread_mutex_lock(&root_lock);
    if (meta->root == off) {
        uint64_t r = new_node(n->level + 1);
        N(r)->leftmost = off;
        N(r)->e[0].key = split_key;
        N(r)->e[0].ptr = soff;
        N(r)->e[1].ptr = 0;
        N(r)->last_index = 0;
        persist(N(r), sizeof(struct node));
        meta->root = r;
        persist((void *)&meta->root, sizeof meta->root);
        pthread_mutex_unlock(&root_lock);
        return;
    }
    pthread_mutex_unlock(&root_lock);
    insert_at(n->level + 1, split_key, soff);
}

/* Inserts (key, ptr) into the node of `level` that covers key. */
static void insert_at(uint32_t level, uint64_t key, uint64_t ptr)
{
    for (;;) {
        uint64_t off = meta->root;
        while (N(off)->level > level)
            off = internal_search(N(off), key);
        struct node *n = N(off);
        pthread_rwlock_wrlock(&locks[n->id]);
        /* Moved right since (a concurrent split): follow the sibling. */
        uint64_t s = n->sibling;
        if (s && key >= N(s)->e[0].key) {
            pthread_rwlock_unlock(&locks[n->id]);
            continue;
        }
        if (n->last_index < CARD - 1) {
            insert_key(n, key, ptr);
            pthread_rwlock_unlock(&locks[n->id]);
        } else {
            split(off, key, ptr);
        }
        return;
    }
}

static uint64_t search(uint64_t key)
{
    uint64_t off = leaf_of(key);
    for (;;) {
        struct node *n = N(off);
        pthread_rwlock_rdlock(&locks[n->id]);
        int last = n->last_index; /* RACE-LOAD: the last index, read-locked */
        for (int i = 0; i <= last; i++) {
            if (n->e[i].key == key) {
                uint64_t v = n->e[i].ptr;
                pthread_rwlock_unlock(&locks[n->id]);
                return v;
            }
        }
        uint64_t s = n->sibling; /* RACE-LOAD: the sibling pointer, read-locked */
        pthread_rwlock_unlock(&locks[n->id]);
        if (!s || key < N(s)->e[0].key)
            return 0;
        off = s;
    }
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 1; i <= keys; i++) {
        uint64_t k = (i * 7919 + id * 104729) % 1000003 + 1;
        insert_at(0, k, k * 3);
        if (search(k) == k * 3)
            found[id]++;
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2)
        keys = strtoull(argv[2], NULL, 10);
    if (argc > 3)
        threads = atoi(argv[3]);
    if (threads < 1 || threads > MAX_THREADS)
        threads = 4;
    pool = pm_map(path, POOL_SIZE);
    meta = (struct root *)pool;
    meta->next_free = 64;
    meta->nodes = 0;
    persist(meta, sizeof *meta);
    for (int i = 0; i < MAX_NODES; i++)
        pthread_rwlock_init(&locks[i], NULL);
    meta->root = new_node(0);
    persist((void *)&meta->root, sizeof meta->root);
    pthread_t th[MAX_THREADS];
    for (uintptr_t i = 0; i < (uintptr_t)threads; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    uint64_t total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        total += found[i];
    }
    printf("found %llu of %llu keys\n", (unsigned long long)total, (unsigned long long)(keys * threads));
    return 0;
}
