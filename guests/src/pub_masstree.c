/* pub_masstree: the shape of P-Masstree (RECIPE's persistent Masstree, HawkSet's Table 2 bugs
 * #5, #6 and #7), written small: a trie of B+-tree leaf layers.  Keys are two 8-byte slices;
 * layer 0 orders the first slice, and when two keys share it, the slot's value becomes a
 * pointer to a layer-1 leaf that orders the second slice (Masstree's new layer).  Each layer is
 * a chain of leaves linked by next pointers, each leaf with a version word that is its lock
 * (leaf_lock/leaf_unlock set and clear its lock bit with atomics: configs/pub_masstree.ron), a
 * permutation word (Masstree's: the count in the low nibble, then the sorted order of the
 * slots) and key/value slots.  Puts lock the leaf, write a free slot, persist it, and publish it
 * through the permutation; a full leaf splits into a new right sibling.  Gets take no lock:
 * they read the permutation, the keys and the values (Masstree's optimistic readers).
 *   - Bug #5's shape: the new permutation is persisted after the leaf is unlocked (RACE-5).
 *   - Bug #6's shape: a split links the new sibling through the next pointer and persists it
 *     after the unlock (RACE-6).
 *   - Bug #7's shape: a new layer's pointer replaces the slot's value and is persisted after the
 *     unlock (RACE-7).
 *   Gets load the permutation and the values lock-free (RACE-LOAD).
 * The slots' own stores (persisted before the unlock) are visible to the lock-free gets before
 * they are durable too.  THREADS threads (4) put KEYS keys each and get them back.
 * Usage: pub_masstree [POOL [KEYS [THREADS]]]; prints the keys found, exits 0. */
#include <pthread.h>
#include <sched.h>

#include "pm.h"

#define POOL_SIZE (8 << 20)
#define WIDTH 7 /* slots per leaf (permutation nibbles 1..7) */
#define MAX_THREADS 8
#define LAYER 1ull /* a value with this bit set is a layer pointer */

struct leaf {
    volatile uint64_t version; /* bit 0: locked */
    volatile uint64_t perm;    /* nibble 0: count; nibble i (1..count): slot of the i-th key */
    volatile uint64_t next;    /* right sibling, 0: none */
    volatile uint64_t low;     /* the leaf holds slices >= low */
    volatile uint64_t key[WIDTH];
    volatile uint64_t lo[WIDTH];  /* layer 0: the key's second slice, for a value slot */
    volatile uint64_t val[WIDTH]; /* a value, or a layer-1 leaf | LAYER */
};

static char *pool;
static volatile uint64_t *next_free;
static struct leaf *root;
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t keys = 60;
static int threads = 4;
static uint64_t found[MAX_THREADS];

static struct leaf *new_leaf(uint64_t low)
{
    pthread_mutex_lock(&alloc_lock);
    uint64_t off = *next_free;
    *next_free = off + ((sizeof(struct leaf) + 63) & ~(size_t)63);
    persist((void *)next_free, sizeof *next_free);
    pthread_mutex_unlock(&alloc_lock);
    if (off + sizeof(struct leaf) > POOL_SIZE) {
        fprintf(stderr, "pool full\n");
        exit(1);
    }
    struct leaf *l = (struct leaf *)(pool + off);
    memset(l, 0, sizeof *l);
    l->low = low;
    persist(l, sizeof *l);
    return l;
}

__attribute__((noinline)) void leaf_lock(struct leaf *l)
{
    for (;;) {
        uint64_t v = l->version;
        if (!(v & 1) && __atomic_compare_exchange_n(&l->version, &v, v | 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        sched_yield();
    }
}

__attribute__((noinline)) void leaf_unlock(struct leaf *l)
{
    __atomic_fetch_add(&l->version, 1, __ATOMIC_RELEASE); /* clears bit 0, bumps the version */
}

static int count(uint64_t perm) { return (int)(perm & 15); }
static int slot_at(uint64_t perm, int i) { return (int)((perm >> (4 * (i + 1))) & 15); }

/* The leaf of the chain starting at `l` that holds `slice` (following next pointers). */
static struct leaf *locate(struct leaf *l, uint64_t slice)
{
    for (;;) {
        struct leaf *n = (struct leaf *)(uintptr_t)l->next; /* RACE-LOAD: the next pointer, lock-free */
        if (!n || slice < n->low)
            return l;
        l = n;
    }
}

/* Lock-free get of `slice` in the layer starting at `l`: the value (0: none), *lo its slice. */
static uint64_t get_in(struct leaf *l, uint64_t slice, uint64_t *lo)
{
    l = locate(l, slice);
    uint64_t perm = l->perm; /* RACE-LOAD: the permutation, read lock-free */
    for (int i = 0; i < count(perm); i++) {
        int s = slot_at(perm, i);
        if (l->key[s] == slice) {
            *lo = l->lo[s];
            return l->val[s]; /* RACE-LOAD: a value (or layer pointer), read lock-free */
        }
    }
    return 0;
}

static uint64_t get(uint64_t hi, uint64_t lo)
{
    uint64_t lo0 = 0;
    uint64_t v = get_in(root, hi, &lo0);
    if (v & LAYER) {
        uint64_t ignored;
        return get_in((struct leaf *)(uintptr_t)(v & ~LAYER), lo, &ignored);
    }
    return lo0 == lo ? v : 0;
}

/* Inserts (slice, lo, val) into the locked leaf `l`, which has room, keeping the permutation
 * sorted; the new permutation is stored, and persisted by the caller after the unlock. */
static void insert_slot(struct leaf *l, uint64_t slice, uint64_t lo, uint64_t val)
{
    uint64_t perm = l->perm;
    int n = count(perm);
    int used = 0;
    for (int i = 0; i < n; i++)
        used |= 1 << slot_at(perm, i);
    int s = 0;
    while (used & (1 << s))
        s++;
    l->key[s] = slice;
    l->lo[s] = lo;
    l->val[s] = val; /* STORE: the slot, persisted before the unlock */
    persist((void *)&l->key[s], sizeof l->key[s]);
    persist((void *)&l->lo[s], sizeof l->lo[s]);
    persist((void *)&l->val[s], sizeof l->val[s]);
    int pos = 0;
    while (pos < n && l->key[slot_at(perm, pos)] < slice)
        pos++;
    uint64_t np = (uint64_t)(n + 1);
    for (int i = 0, j = 0; i <= n; i++)
        np |= (uint64_t)(i == pos ? s : slot_at(perm, j++)) << (4 * (i + 1));
    l->perm = np; /* RACE-5: the new permutation, stored under the leaf lock */
}

/* Splits the full, locked leaf `l`: its upper half moves to a new right sibling. */
static struct leaf *split(struct leaf *l)
{
    uint64_t perm = l->perm;
    int n = count(perm), half = n / 2;
    struct leaf *r = new_leaf(l->key[slot_at(perm, half)]);
    uint64_t rp = 0;
    for (int i = half; i < n; i++) {
        int s = slot_at(perm, i), t = i - half;
        r->key[t] = l->key[s];
        r->lo[t] = l->lo[s];
        r->val[t] = l->val[s];
        rp |= (uint64_t)t << (4 * (t + 1));
    }
    r->perm = rp | (uint64_t)(n - half);
    r->next = l->next;
    persist(r, sizeof *r);
    l->next = (uint64_t)(uintptr_t)r; /* RACE-6: the new sibling, linked under the leaf lock */
    l->perm = (perm & ~15ull & ((1ull << (4 * (half + 1))) - 1)) | (uint64_t)half;
    persist((void *)&l->perm, sizeof l->perm);
    return r;
}

/* Puts (slice, lo, val) in the layer starting at `head`; returns 1 when done, 0 to retry, or
 * stores in *layer the layer-1 leaf to continue in. */
static int put_in(struct leaf *head, uint64_t slice, uint64_t lo, uint64_t val, int top, struct leaf **layer)
{
    struct leaf *l = locate(head, slice);
    leaf_lock(l);
    if (locate(l, slice) != l) { /* split meanwhile */
        leaf_unlock(l);
        return 0;
    }
    uint64_t perm = l->perm;
    for (int i = 0; i < count(perm); i++) {
        int s = slot_at(perm, i);
        if (l->key[s] != slice)
            continue;
        uint64_t v = l->val[s];
        if (v & LAYER) {
            leaf_unlock(l);
            *layer = (struct leaf *)(uintptr_t)(v & ~LAYER);
            return 1;
        }
        if (!top || l->lo[s] == lo) {
            leaf_unlock(l);
            return 1;
        }
        /* Two keys share this slice: a new layer holds both, by their second slices. */
        struct leaf *nl = new_leaf(0);
        nl->key[0] = l->lo[s];
        nl->val[0] = v;
        nl->perm = 1;
        persist(nl, sizeof *nl);
        l->val[s] = (uint64_t)(uintptr_t)nl | LAYER; /* RACE-7: the new layer's pointer, under the leaf lock */
        leaf_unlock(l);
        persist((void *)&l->val[s], sizeof l->val[s]); /* RACE-7: ... persisted after the unlock */
        *layer = nl;
        return 1;
    }
    if (count(perm) == WIDTH) {
        struct leaf *r = split(l);
        leaf_unlock(l);
        persist((void *)&l->next, sizeof l->next); /* RACE-6: ... persisted after the unlock */
        (void)r;
        return 0;
    }
    insert_slot(l, slice, lo, val);
    leaf_unlock(l);
    persist((void *)&l->perm, sizeof l->perm); /* RACE-5: ... persisted after the unlock */
    return 1;
}

static void put(uint64_t hi, uint64_t lo, uint64_t val)
{
    struct leaf *layer = NULL;
    while (!put_in(root, hi, lo, val, 1, &layer))
        sched_yield();
    if (!layer)
        return;
    struct leaf *ignored = NULL;
    while (!put_in(layer, lo, 0, val, 0, &ignored))
        sched_yield();
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < keys; i++) {
        uint64_t k = i * (uint64_t)threads + id;
        uint64_t hi = (k * 2654435761u) % 97 + 1; /* shared first slices: new layers */
        uint64_t lo = k + 1;
        put(hi, lo, (k + 1) << 1);
        if (get(hi, lo) == (k + 1) << 1)
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
    next_free = (volatile uint64_t *)pool;
    *next_free = 64;
    persist((void *)next_free, sizeof *next_free);
    root = new_leaf(0);
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
