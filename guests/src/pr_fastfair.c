/* pr_fastfair: a FAST_FAIR-like B+-tree in a PM pool under a YCSB-like load, with PMRace's
 * published split race (ASPLOS'22 Table 2 #8).
 *
 * The leaves live in PM and form a B-link list: each leaf holds up to 8 sorted records, the
 * smallest key it takes (`low`) and the offset of its right sibling.  The inner level is a DRAM
 * index of the leaves' low keys (rebuilt from the leaf list after a crash, as FPTree-style
 * hybrids do), guarded by a rwlock; each leaf has a lock (DRAM).  As in FAST_FAIR, searches take
 * no lock, and an insert finds its leaf without locks, moving right through sibling links while
 * the key belongs further right (FAST_FAIR's linear_search), then locks the leaf and inserts.  A
 * full leaf splits under its lock: allocate a sibling, copy the upper half into it and persist
 * it, link it (`sibling`) and persist the link, truncate the leaf, insert, unlock, add the
 * sibling to the index.
 *
 * The race: an insert that moves right through the link between its store and its persist puts
 * its key into the new leaf (durable at once); a crash before the link is durable forgets the
 * leaf and the key with it.  The insert's stores are addressed through the unpersisted link
 * (PMRace's address flow).  FIXED twin: pr_fastfair_fixed.c (inserts move right only under the
 * leaf's lock, which the split releases once the link is durable).
 *
 * 4 threads; each inserts OPS/8 keys (load phase, many splits), then runs OPS/2 operations
 * (half lock-free reads, half updates, one insert in eight).  Allocation is a bump allocator over
 * chunks whose header line is persisted first.
 * Usage: pr_fastfair POOL [OPS [POOL_MB]]   prints the leaf and key counts, exits 0
 *        pr_fastfair POOL recover           walks the leaf list, prints `recovered: N keys in L
 *                                           leaves` (`recovered: bad link`), exits 0 */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#ifndef FIXED
#define FIXED 0
#endif

#define MAGIC 0x464146524d500001ull
#define CAP 8
#define THREADS 4
#define MAX_LEAVES 65536
#define FIRST_LEAF 128 /* after the header line and the first chunk header */

struct leaf {
    volatile uint64_t sibling; /* line 0: offset of the right sibling, 0 for none */
    uint64_t low;              /* the smallest key this leaf takes */
    uint64_t pad[6];
    struct {
        volatile uint64_t key; /* 0: unused (records are packed and sorted) */
        volatile uint64_t val;
    } rec[CAP]; /* lines 1..2 */
};

_Static_assert(sizeof(struct leaf) == 192, "three lines");

struct header {
    uint64_t magic;
    uint64_t pad[7];
};

static char *pool;
static uint64_t pool_size;
static uint64_t next_free; /* bump allocator (DRAM, atomic) */
static uint64_t ops = 512;

/* DRAM inner level: leaves by low key, sorted. */
static pthread_rwlock_t index_lock = PTHREAD_RWLOCK_INITIALIZER;
static uint64_t index_low[MAX_LEAVES], index_off[MAX_LEAVES];
static uint64_t index_n;
static pthread_mutex_t leaf_locks[MAX_LEAVES];

static struct leaf *leaf_at(uint64_t off) { return (struct leaf *)(pool + off); }
static pthread_mutex_t *lock_of(uint64_t off) { return &leaf_locks[(off - FIRST_LEAF) / 256 % MAX_LEAVES]; }

static uint64_t alloc_leaf(void)
{
    uint64_t off = __atomic_fetch_add(&next_free, 256, __ATOMIC_RELAXED);
    if (off + 256 > pool_size || (off + 64 - FIRST_LEAF) / 256 >= MAX_LEAVES) {
        fprintf(stderr, "pool full\n");
        exit(1);
    }
    uint64_t *chunk = (uint64_t *)(pool + off);
    chunk[0] = sizeof(struct leaf);
    persist(chunk, 64);
    return off + 64;
}

static uint64_t find_leaf(uint64_t key)
{
    pthread_rwlock_rdlock(&index_lock);
    uint64_t lo = 0, hi = index_n; /* the last leaf whose low <= key */
    while (hi - lo > 1) {
        uint64_t mid = (lo + hi) / 2;
        if (index_low[mid] <= key)
            lo = mid;
        else
            hi = mid;
    }
    uint64_t off = index_off[lo];
    pthread_rwlock_unlock(&index_lock);
    return off;
}

static void index_add(uint64_t low, uint64_t off)
{
    pthread_rwlock_wrlock(&index_lock);
    uint64_t i = index_n++;
    while (i > 0 && index_low[i - 1] > low) {
        index_low[i] = index_low[i - 1];
        index_off[i] = index_off[i - 1];
        i--;
    }
    index_low[i] = low;
    index_off[i] = off;
    pthread_rwlock_unlock(&index_lock);
}

static int count(struct leaf *l)
{
    int n = 0;
    while (n < CAP && l->rec[n].key != 0)
        n++;
    return n;
}

/* Under the leaf's lock, with room: update in place, or shift right and insert (persisted). */
static void leaf_store(struct leaf *l, uint64_t key, uint64_t val)
{
    int n = count(l), i = n;
    for (int j = 0; j < n; j++)
        if (l->rec[j].key == key) {
            l->rec[j].val = val; /* LF: read by lock-free searches before its persist */
            persist((void *)&l->rec[j].val, 8);
            return;
        }
    while (i > 0 && l->rec[i - 1].key > key) {
        l->rec[i].val = l->rec[i - 1].val; /* LF: read by lock-free searches before its persist */
        l->rec[i].key = l->rec[i - 1].key; /* LF: read by lock-free searches before its persist */
        i--;
    }
    l->rec[i].val = val; /* PR: side effect */
    l->rec[i].key = key; /* LF: read by lock-free searches before its persist */
    persist((void *)l->rec, sizeof l->rec);
}

/* Under the leaf's lock, the leaf full: returns the new sibling's offset. */
static uint64_t split(uint64_t off)
{
    struct leaf *l = leaf_at(off);
    uint64_t sib_off = alloc_leaf();
    struct leaf *sib = leaf_at(sib_off);
    for (int j = 0; j < CAP / 2; j++) {
        sib->rec[j].key = l->rec[CAP / 2 + j].key;
        sib->rec[j].val = l->rec[CAP / 2 + j].val;
    }
    sib->low = l->rec[CAP / 2].key;
    sib->sibling = l->sibling;
    persist(sib, sizeof *sib);
    l->sibling = sib_off; /* PR: source store */
#if FIXED
    PM_CLWB(&l->sibling); PM_SFENCE(); /* FIX: durable before the unlock that lets inserts follow it */
#else
    PM_CLWB(&l->sibling); PM_SFENCE(); /* BUG: lock-free inserts follow the link before this persist */
#endif
    for (int j = CAP / 2; j < CAP; j++)
        l->rec[j].key = 0; /* LF: read by lock-free searches before its persist */
    persist((void *)&l->rec[CAP / 2], sizeof l->rec[0] * (CAP / 2));
    return sib_off;
}

static void insert(uint64_t key, uint64_t val)
{
    uint64_t off = find_leaf(key);
    for (;;) {
        struct leaf *l = leaf_at(off);
#if !FIXED
        uint64_t next = l->sibling; /* PR: load */
        if (next != 0 && key >= leaf_at(next)->low) { /* move right without a lock, as FAST_FAIR */
            off = next;
            continue;
        }
#endif
        pthread_mutex_lock(lock_of(off));
        uint64_t sib = l->sibling; /* under the lock: durable (the split persists it before unlocking) */
        if (sib != 0 && key >= leaf_at(sib)->low) {
            pthread_mutex_unlock(lock_of(off));
            off = sib;
            continue;
        }
        if (count(l) < CAP) {
            leaf_store(l, key, val);
            pthread_mutex_unlock(lock_of(off));
            return;
        }
        uint64_t s = split(off);
        struct leaf *sl = leaf_at(s);
        uint64_t low = sl->low;
        if (key >= low) { /* the sibling is reachable now: its lock too */
            pthread_mutex_lock(lock_of(s));
            leaf_store(sl, key, val);
            pthread_mutex_unlock(lock_of(s));
        } else {
            leaf_store(l, key, val);
        }
        pthread_mutex_unlock(lock_of(off));
        index_add(low, s);
        return;
    }
}

/* Lock-free search. */
static uint64_t search(uint64_t key)
{
    uint64_t off = find_leaf(key);
    for (;;) {
        struct leaf *l = leaf_at(off);
        uint64_t next = l->sibling;
        if (next != 0 && key >= leaf_at(next)->low) {
            off = next;
            continue;
        }
        for (int j = 0; j < CAP; j++)
            if (l->rec[j].key == key)
                return l->rec[j].val;
        return 0;
    }
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg, loaded = ops / 8, x = 0x9e3779b97f4a7c15ull * (id + 1);
    uint64_t found = 0;
    for (uint64_t k = 0; k < loaded; k++) /* load phase: keys id+1, id+1+THREADS, ... */
        insert(1 + id + k * THREADS, k + 1);
    for (uint64_t i = 0; i < ops / 2; i++) { /* run phase */
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        uint64_t key = 1 + (x >> 8) % (loaded * THREADS);
        if (x % 8 == 0)
            insert(1 + id + (loaded + i) * THREADS, i + 1);
        else if (x & 1)
            insert(key, i + 1);
        else
            found += search(key) != 0;
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

static int recover(const char *path)
{
    pool_size = file_size(path);
    pool = pm_open(path, pool_size, 0);
    if (((struct header *)pool)->magic != MAGIC) {
        puts("recovered: no tree");
        return 0;
    }
    uint64_t keys = 0, leaves = 0;
    for (uint64_t off = FIRST_LEAF; off; off = leaf_at(off)->sibling) {
        if (off < FIRST_LEAF || off + sizeof(struct leaf) > pool_size || leaves > pool_size / 256) {
            puts("recovered: bad link");
            return 0;
        }
        leaves++;
        keys += (uint64_t)count(leaf_at(off));
    }
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
    if (ops < 16 || ops > 10000000 || mb < 1 || mb > 4096) {
        fprintf(stderr, "OPS must be 16..10000000, POOL_MB 1..4096\n");
        return 2;
    }
    pool_size = mb << 20;
    pool = pm_map(path, pool_size);
    for (int i = 0; i < MAX_LEAVES; i++)
        pthread_mutex_init(&leaf_locks[i], NULL);
    next_free = 64;
    uint64_t first = alloc_leaf(); /* FIRST_LEAF */
    persist(leaf_at(first), sizeof(struct leaf));
    ((struct header *)pool)->magic = MAGIC;
    persist(pool, 64);
    index_add(0, first);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
    uint64_t found = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(th[i], &r);
        found += (uint64_t)(uintptr_t)r;
    }
    uint64_t keys = 0, leaves = 0;
    for (uint64_t off = first; off; off = leaf_at(off)->sibling) {
        leaves++;
        keys += (uint64_t)count(leaf_at(off));
    }
    printf("leaves %llu, keys %llu, searches found %llu\n", (unsigned long long)leaves, (unsigned long long)keys,
           (unsigned long long)found);
    return 0;
}
