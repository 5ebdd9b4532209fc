/* pr_rootsplit: a two-level B+-tree in a PM pool whose root offset lives in the pool's header
 * and whose workers each look a key up (loading the root) before they meet at a start barrier;
 * PMRace's split race (ASPLOS'22 Table 2 #8, FAST_FAIR's split that links a new node) in the
 * shape where the new node is a new root.
 *
 * A node is a leaf (up to 8 records, the key range [lo, hi) it takes, a record count) or the
 * inner root (up to 256 children, each with the smallest key it takes, appended, never moved, and
 * a child count).  The tree starts as one leaf.  Descents take no lock (as FAST_FAIR's): load the
 * root, pick the child with the greatest low key not above the key.  An insert locks the leaf
 * (DRAM locks), checks its range (retrying when a split moved it), appends the record and
 * persists it.  A full leaf splits under its lock: a new leaf takes the upper half and is
 * persisted; under the tree lock the new leaf is appended to the inner root (count persisted
 * after the entry), or, when the leaf was the root, a new inner root with both leaves is
 * persisted and swapped into the header, and the header persisted; then the old leaf's range and
 * records are truncated and persisted.
 *
 * The race: an insert that loads the root between the swap and its persist descends into the new
 * root and inserts into one of its leaves (durable at once); a crash before the root is durable
 * brings back the old root, a leaf whose range no longer holds the key.  FIXED twin
 * (pr_rootsplit_fixed): both leaves stay locked until the root is durable.
 *
 * 4 threads; each looks its first key up, waits at the start barrier, inserts OPS/8 keys, then
 * runs OPS/2 operations (half lock-free reads, half updates, one insert in eight).
 * Usage: pr_rootsplit POOL [OPS [POOL_MB]]   prints the leaf and key counts, exits 0
 *        pr_rootsplit POOL recover           follows the root, prints `recovered: N keys in L
 *                                            leaves` (`recovered: bad root`), exits 0 */
#include <pthread.h>

#include "pm.h"

#ifndef FIXED
#define FIXED 0
#endif

#define MAGIC 0x52545350504d0001ull
#define CAP 8
#define FANOUT 256
#define THREADS 4
#define LEAF 1
#define INNER 2
#define NODE 4096 /* bytes per node (a chunk's header line comes before it) */
#define MAX_NODES 4096

struct leaf {
    uint64_t kind, lo, hi;
    volatile uint64_t n;
    uint64_t pad[4];
    struct {
        volatile uint64_t key, val;
    } rec[CAP];
};

struct inner {
    uint64_t kind;
    volatile uint64_t n;
    uint64_t pad[6];
    volatile uint64_t low[FANOUT];
    volatile uint64_t child[FANOUT];
};

struct header {
    uint64_t magic;
    volatile uint64_t root;
    uint64_t pad[6];
};

static char *pool;
static uint64_t pool_size;
static uint64_t next_free; /* bump allocator (DRAM, atomic) */
static uint64_t ops = 512;
static pthread_mutex_t tree_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t leaf_locks[MAX_NODES];
static pthread_barrier_t start;

static struct header *hdr(void) { return (struct header *)pool; }
static void *at(uint64_t off) { return pool + off; }
static pthread_mutex_t *lock_of(uint64_t off) { return &leaf_locks[off / (NODE + 64) % MAX_NODES]; }

/* A zeroed node after a persisted chunk header. */
static uint64_t alloc_node(uint64_t kind)
{
    uint64_t off = __atomic_fetch_add(&next_free, NODE + 64, __ATOMIC_RELAXED);
    if (off + NODE + 64 > pool_size) {
        fprintf(stderr, "pool full\n");
        exit(1);
    }
    uint64_t *chunk = (uint64_t *)(pool + off);
    chunk[0] = NODE;
    chunk[1] = kind;
    persist(chunk, 64);
    memset(pool + off + 64, 0, NODE);
    *(uint64_t *)(pool + off + 64) = kind;
    return off + 64;
}

/* The leaf that takes `key`, found without locks (not inlined: lookups and inserts descend with
 * the same loads). */
static __attribute__((noinline)) uint64_t descend(uint64_t key)
{
    uint64_t r = hdr()->root; /* PR: load */
    struct inner *in = at(r);
    if (in->kind == LEAF)
        return r;
    uint64_t best = 0, best_low = 0;
    for (uint64_t i = 0, n = in->n; i < n; i++) /* LF: read by lock-free descents before its persist */
        if (in->low[i] <= key && in->low[i] >= best_low) {
            best_low = in->low[i];
            best = in->child[i];
        }
    return best;
}

static uint64_t lookup(uint64_t key)
{
    struct leaf *l = at(descend(key));
    for (uint64_t i = 0, n = l->n; i < n && i < CAP; i++) /* LF: read by lock-free lookups before its persist */
        if (l->rec[i].key == key)
            return l->rec[i].val;
    return 0;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Under the leaf's lock, the leaf full. */
static void split(uint64_t off)
{
    struct leaf *l = at(off);
    uint64_t keys[CAP];
    for (int i = 0; i < CAP; i++)
        keys[i] = l->rec[i].key;
    qsort(keys, CAP, sizeof keys[0], cmp);
    uint64_t mid = keys[CAP / 2];
    uint64_t sib_off = alloc_node(LEAF);
    struct leaf *sib = at(sib_off);
    sib->lo = mid;
    sib->hi = l->hi;
    for (int i = 0; i < CAP; i++)
        if (l->rec[i].key >= mid) {
            sib->rec[sib->n].key = l->rec[i].key;
            sib->rec[sib->n].val = l->rec[i].val;
            sib->n++;
        }
    persist(sib, sizeof *sib);
    pthread_mutex_lock(&tree_lock);
    if (hdr()->root == off) {
        uint64_t r = alloc_node(INNER);
        struct inner *in = at(r);
        in->low[0] = l->lo;
        in->child[0] = off;
        in->low[1] = mid;
        in->child[1] = sib_off;
        in->n = 2;
        persist(in, sizeof *in);
#if FIXED
        pthread_mutex_lock(lock_of(sib_off));
#endif
        hdr()->root = r; /* PR: source store */
#if FIXED
        PM_CLWB(&hdr()->root); PM_SFENCE(); /* FIX: descents into the new root wait at its leaves' locks until it is durable */
        pthread_mutex_unlock(lock_of(sib_off));
#else
        PM_CLWB(&hdr()->root); PM_SFENCE(); /* BUG: lock-free descents reach the new root before this persist */
#endif
    } else {
        struct inner *in = at(hdr()->root);
        if (in->n == FANOUT) {
            fprintf(stderr, "tree full\n");
            exit(1);
        }
        in->low[in->n] = mid; /* LF: read by lock-free descents before its persist */
        in->child[in->n] = sib_off; /* LF: read by lock-free descents before its persist */
        persist((void *)&in->low[in->n], 8);
        persist((void *)&in->child[in->n], 8);
        in->n++; /* LF: read by lock-free descents before its persist */
        persist((void *)&in->n, 8);
    }
    pthread_mutex_unlock(&tree_lock);
    /* The old leaf keeps the lower half. */
    uint64_t n = 0;
    for (int i = 0; i < CAP; i++)
        if (l->rec[i].key < mid) {
            l->rec[n].key = l->rec[i].key; /* LF: read by lock-free lookups before its persist */
            l->rec[n].val = l->rec[i].val; /* LF: read by lock-free lookups before its persist */
            n++;
        }
    l->hi = mid;
    l->n = n; /* LF: read by lock-free lookups before its persist */
    persist(l, sizeof *l);
}

static void insert(uint64_t key, uint64_t val)
{
    for (;;) {
        uint64_t off = descend(key);
        struct leaf *l = at(off);
        pthread_mutex_lock(lock_of(off));
        if (key < l->lo || key >= l->hi) { /* a split moved the key's range meanwhile */
            pthread_mutex_unlock(lock_of(off));
            continue;
        }
        uint64_t n = l->n;
        for (uint64_t i = 0; i < n; i++)
            if (l->rec[i].key == key) {
                l->rec[i].val = val; /* LF: read by lock-free lookups before its persist */
                persist((void *)&l->rec[i].val, 8);
                pthread_mutex_unlock(lock_of(off));
                return;
            }
        if (n < CAP) {
            l->rec[n].val = val; /* PR: side effect */
            l->rec[n].key = key; /* LF: read by lock-free lookups before its persist */
            persist((void *)&l->rec[n], 16);
            l->n = n + 1; /* LF: read by lock-free lookups before its persist */
            persist((void *)&l->n, 8);
            pthread_mutex_unlock(lock_of(off));
            return;
        }
        split(off);
        pthread_mutex_unlock(lock_of(off));
    }
}

/* YCSB's hashed key of record n (FNV-1a, 64 bits; 0 is never a key). */
static uint64_t key_of(uint64_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 8; i++, n >>= 8)
        h = (h ^ (n & 0xff)) * 0x100000001b3ull;
    return h ? h : 1;
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg, loaded = ops / 8, x = 0x9e3779b97f4a7c15ull * (id + 1);
    uint64_t found = 0;
    /* Is this worker's first key there already (a run over an existing tree)?  Then all start
     * together. */
    found += lookup(key_of(1 + id)) != 0;
    pthread_barrier_wait(&start);
    for (uint64_t k = 0; k < loaded; k++) /* load phase */
        insert(key_of(1 + id + k * THREADS), k + 1);
    for (uint64_t i = 0; i < ops / 2; i++) { /* run phase */
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        uint64_t key = key_of(1 + (x >> 8) % (loaded * THREADS));
        if (x % 8 == 0)
            insert(key_of(1 + id + (loaded + i) * THREADS), i + 1);
        else if (x & 1)
            insert(key, i + 1);
        else
            found += lookup(key) != 0;
    }
    return (void *)(uintptr_t)found;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror("stat");
        exit(2);
    }
    return (uint64_t)st.st_size;
}

static int valid(uint64_t off, uint64_t kind)
{
    return off >= 128 && off + NODE <= pool_size && ((struct leaf *)at(off))->kind == kind;
}

/* Keys and leaves under the root (0 leaves: a bad root). */
static uint64_t count(uint64_t *leaves)
{
    uint64_t r = hdr()->root, keys = 0;
    *leaves = 0;
    if (valid(r, LEAF)) {
        *leaves = 1;
        return ((struct leaf *)at(r))->n;
    }
    if (!valid(r, INNER))
        return 0;
    struct inner *in = at(r);
    for (uint64_t i = 0; i < in->n && i < FANOUT; i++) {
        if (!valid(in->child[i], LEAF)) {
            *leaves = 0;
            return 0;
        }
        ++*leaves;
        keys += ((struct leaf *)at(in->child[i]))->n;
    }
    return keys;
}

static int recover(const char *path)
{
    pool_size = file_size(path);
    pool = pm_open(path, pool_size, 0);
    if (hdr()->magic != MAGIC) {
        puts("recovered: no tree");
        return 0;
    }
    uint64_t leaves, keys = count(&leaves);
    if (leaves == 0)
        puts("recovered: bad root");
    else
        printf("recovered: %llu keys in %llu leaves\n", (unsigned long long)keys, (unsigned long long)leaves);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2 && strcmp(argv[2], "recover") == 0)
        return recover(path);
    uint64_t mb = 1;
    if (argc > 2)
        ops = strtoull(argv[2], NULL, 10);
    if (argc > 3)
        mb = strtoull(argv[3], NULL, 10);
    if (ops < 16 || ops > 100000 || mb < 1 || mb > 4096) {
        fprintf(stderr, "OPS must be 16..100000, POOL_MB 1..4096\n");
        return 2;
    }
    pool_size = mb << 20;
    pool = pm_map(path, pool_size);
    for (int i = 0; i < MAX_NODES; i++)
        pthread_mutex_init(&leaf_locks[i], NULL);
    next_free = sizeof(struct header);
    uint64_t first = alloc_node(LEAF);
    struct leaf *l = at(first);
    l->lo = 0;
    l->hi = UINT64_MAX;
    persist(l, sizeof *l);
    hdr()->root = first;
    hdr()->magic = MAGIC;
    persist(pool, sizeof(struct header));
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
    uint64_t found = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(th[i], &r);
        found += (uint64_t)(uintptr_t)r;
    }
    uint64_t leaves, keys = count(&leaves);
    printf("leaves %llu, keys %llu, lookups found %llu\n", (unsigned long long)leaves, (unsigned long long)keys,
           (unsigned long long)found);
    return 0;
}
