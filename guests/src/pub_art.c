/* pub_art: the shape of P-ART (RECIPE's persistent adaptive radix tree with ROWEX locks,
 * HawkSet's Table 2 bugs #8 and #9), written small.  Inner nodes of three types live in PM:
 * N4 and N16 (sorted key bytes and child pointers) and N256 (a child pointer per byte); each
 * starts with a version word that is also its lock: write_lock_or_restart(node, &restart) and
 * lock_version_or_restart(node, &version, &restart) set its lock bit with a CAS and report
 * failure through the out-parameter `restart` (P-ART's writeLockOrRestart(bool &needRestart)),
 * write_unlock and write_unlock_obsolete release it (configs/pub_art.ron declares them as
 * HawkSet's part.cfg does).  Lookups take no lock at all (ROWEX: readers never wait).  Keys have
 * three bytes: the root N256 is indexed by the first, then two levels of inner nodes that grow
 * from N4 to N16 to N256, whose children are leaf records.
 *   - Bug #8's shape: a node that grows is replaced in its parent by change(), which stores the
 *     new child pointer under the parent's lock; the pointer is persisted after the parent is
 *     unlocked (RACE-8 in n4_change, n16_change and n256_change: three store sites).
 *   - Bug #9's shape: remove() clears a child pointer under the node's lock, persisted after
 *     the unlock (RACE-9 in n4_remove and n16_remove: two store sites).
 *   The lock-free lookups load the child pointers in n4_get, n16_get and n256_get (RACE-LOAD).
 * Inserting into a node that has room stores its key byte and child under its lock, persisted
 * before the unlock; lock-free lookups can read those before they are durable too (what ROWEX
 * readers do).  THREADS threads (4) insert KEYS keys each, round-robin over one key space, look
 * each one up, and remove every fifth key three inserts later.
 * Usage: pub_art [POOL [KEYS [THREADS]]]; prints the keys found, exits 0. */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

#include "pm.h"

#define POOL_SIZE (16 << 20)
#define MAX_THREADS 8
#define LOCKED 2ull
#define OBSOLETE 1ull

enum { T4, T16, T256 };

struct hdr {
    volatile uint64_t version; /* bit 1: locked, bit 0: obsolete; the rest counts unlocks */
    volatile uint8_t type;
    volatile uint8_t count;
    uint8_t pad[6];
};

struct n4 {
    struct hdr h;
    volatile uint8_t keys[4];
    uint8_t pad[4];
    volatile uint64_t child[4];
};

struct n16 {
    struct hdr h;
    volatile uint8_t keys[16];
    volatile uint64_t child[16];
};

struct n256 {
    struct hdr h;
    volatile uint64_t child[256];
};

struct leaf {
    uint64_t key;
    uint64_t val;
};

static char *pool;
static volatile uint64_t *next_free;
static struct n256 *root;
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t keys = 60;
static int threads = 4;
static uint64_t found[MAX_THREADS];

static void *alloc(size_t size)
{
    pthread_mutex_lock(&alloc_lock);
    uint64_t off = *next_free;
    *next_free = off + ((size + 63) & ~(size_t)63);
    persist((void *)next_free, sizeof *next_free);
    pthread_mutex_unlock(&alloc_lock);
    if (off + size > POOL_SIZE) {
        fprintf(stderr, "pool full\n");
        exit(1);
    }
    memset(pool + off, 0, size);
    return pool + off;
}

/* ---- ROWEX locks: the version word is the lock ---- */

__attribute__((noinline)) void write_lock_or_restart(struct hdr *n, bool *restart)
{
    uint64_t v = n->version;
    if ((v & (LOCKED | OBSOLETE)) != 0 ||
        !__atomic_compare_exchange_n(&n->version, &v, v + LOCKED, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        *restart = true;
}

__attribute__((noinline)) void lock_version_or_restart(struct hdr *n, uint64_t *version, bool *restart)
{
    uint64_t v = *version;
    if ((v & (LOCKED | OBSOLETE)) != 0 ||
        !__atomic_compare_exchange_n(&n->version, &v, v + LOCKED, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        *restart = true;
        return;
    }
    *version = v + LOCKED;
}

__attribute__((noinline)) void write_unlock(struct hdr *n)
{
    __atomic_fetch_add(&n->version, LOCKED, __ATOMIC_RELEASE);
}

__attribute__((noinline)) void write_unlock_obsolete(struct hdr *n)
{
    __atomic_fetch_add(&n->version, LOCKED + OBSOLETE, __ATOMIC_RELEASE);
}

/* ---- per-type operations ---- */

static volatile uint64_t *n4_get(struct n4 *n, uint8_t k)
{
    for (int i = 0; i < 4; i++) {
        uint64_t c = n->child[i]; /* RACE-LOAD: n4_get reads a child pointer, lock-free */
        if (c && n->keys[i] == k)
            return &n->child[i];
    }
    return NULL;
}

static volatile uint64_t *n16_get(struct n16 *n, uint8_t k)
{
    int cnt = n->h.count;
    for (int i = 0; i < cnt && i < 16; i++) {
        uint64_t c = n->child[i]; /* RACE-LOAD: n16_get reads a child pointer, lock-free */
        if (c && n->keys[i] == k)
            return &n->child[i];
    }
    return NULL;
}

static volatile uint64_t *n256_get(struct n256 *n, uint8_t k)
{
    uint64_t c = n->child[k]; /* RACE-LOAD: n256_get reads a child pointer, lock-free */
    return c ? &n->child[k] : NULL;
}

static volatile uint64_t *get_slot(struct hdr *n, uint8_t k)
{
    switch (n->type) {
    case T4: return n4_get((struct n4 *)n, k);
    case T16: return n16_get((struct n16 *)n, k);
    default: return n256_get((struct n256 *)n, k);
    }
}

static uint64_t get_child(struct hdr *n, uint8_t k)
{
    volatile uint64_t *s = get_slot(n, k);
    return s ? *s : 0;
}

/* Whether the (locked) node has a free slot: an N4's removed children leave holes it reuses,
 * an N16 fills its slots in order. */
static int has_room(struct hdr *n)
{
    if (n->type == T4) {
        struct n4 *m = (struct n4 *)n;
        for (int i = 0; i < 4; i++)
            if (!m->child[i])
                return 1;
        return 0;
    }
    return n->type == T256 || n->count < 16;
}

/* Inserts under the node's lock, persisted before the unlock (the caller unlocks). */
static void insert_child(struct hdr *n, uint8_t k, uint64_t c)
{
    if (n->type == T4) {
        struct n4 *m = (struct n4 *)n;
        for (int i = 0; i < 4; i++) {
            if (!m->child[i]) {
                m->keys[i] = k;
                m->child[i] = c; /* STORE: n4 insert, persisted before the unlock */
                persist(m, sizeof *m);
                break;
            }
        }
    } else if (n->type == T16) {
        struct n16 *m = (struct n16 *)n;
        int i = m->h.count;
        m->keys[i] = k;
        m->child[i] = c; /* STORE: n16 insert, persisted before the unlock */
        persist(m, sizeof *m);
    } else {
        struct n256 *m = (struct n256 *)n;
        m->child[k] = c; /* STORE: n256 insert, persisted before the unlock */
        persist((void *)&m->child[k], sizeof m->child[k]);
    }
    n->count++;
    persist((void *)&n->count, 1);
}

/* change(): the child `k` of the locked node `n` becomes `c`; returns the slot, which the
 * caller persists (after unlocking: the bug). */
static volatile uint64_t *n4_change(struct n4 *n, uint8_t k, uint64_t c)
{
    volatile uint64_t *s = n4_get(n, k);
    *s = c; /* RACE-8: n4_change replaces a child pointer */
    return s;
}

static volatile uint64_t *n16_change(struct n16 *n, uint8_t k, uint64_t c)
{
    volatile uint64_t *s = n16_get(n, k);
    *s = c; /* RACE-8: n16_change replaces a child pointer */
    return s;
}

static volatile uint64_t *n256_change(struct n256 *n, uint8_t k, uint64_t c)
{
    n->child[k] = c; /* RACE-8: n256_change replaces a child pointer */
    return &n->child[k];
}

static volatile uint64_t *change(struct hdr *n, uint8_t k, uint64_t c)
{
    switch (n->type) {
    case T4: return n4_change((struct n4 *)n, k, c);
    case T16: return n16_change((struct n16 *)n, k, c);
    default: return n256_change((struct n256 *)n, k, c);
    }
}

/* remove(): clears child `k` of the locked node; the caller persists it after unlocking. */
static volatile uint64_t *n4_remove(struct n4 *n, uint8_t k)
{
    volatile uint64_t *s = n4_get(n, k);
    *s = 0; /* RACE-9: n4_remove clears a child pointer */
    return s;
}

static volatile uint64_t *n16_remove(struct n16 *n, uint8_t k)
{
    volatile uint64_t *s = n16_get(n, k);
    *s = 0; /* RACE-9: n16_remove clears a child pointer */
    return s;
}

/* A node of the next type holding `n`'s children and (k, c); persisted, not yet linked. */
static struct hdr *grow(struct hdr *n, uint8_t k, uint64_t c)
{
    struct hdr *g;
    if (n->type == T4) {
        struct n16 *m = alloc(sizeof *m);
        m->h.type = T16;
        g = &m->h;
    } else {
        struct n256 *m = alloc(sizeof *m);
        m->h.type = T256;
        g = &m->h;
    }
    for (int b = 0; b < 256; b++) {
        uint64_t x = get_child(n, (uint8_t)b);
        if (x)
            insert_child(g, (uint8_t)b, x);
    }
    insert_child(g, k, c);
    persist(g, n->type == T4 ? sizeof(struct n16) : sizeof(struct n256));
    return g;
}

static struct hdr *new_n4(void)
{
    struct n4 *m = alloc(sizeof *m);
    m->h.type = T4;
    persist(m, sizeof *m);
    return &m->h;
}

static uint8_t byte(uint64_t key, int level) { return (uint8_t)(key >> (8 * (2 - level))); }

/* Inserts `c` as child `k` of `n` (reached from `parent` by `pk`, its version `pv` as read). */
static bool insert_into(struct hdr *parent, uint64_t pv, uint8_t pk, struct hdr *n, uint8_t k, uint64_t c)
{
    bool restart = false;
    write_lock_or_restart(n, &restart);
    if (restart)
        return false;
    if (get_child(n, k)) { /* someone inserted it meanwhile */
        write_unlock(n);
        return true;
    }
    if (has_room(n)) {
        insert_child(n, k, c);
        write_unlock(n);
        return true;
    }
    /* Full: grow, and replace n in its parent. */
    lock_version_or_restart(parent, &pv, &restart);
    if (restart) {
        write_unlock(n);
        return false;
    }
    if (get_child(parent, pk) != (uint64_t)(uintptr_t)n) {
        write_unlock(parent);
        write_unlock(n);
        return false;
    }
    struct hdr *g = grow(n, k, c);
    volatile uint64_t *slot = change(parent, pk, (uint64_t)(uintptr_t)g);
    write_unlock_obsolete(n);
    write_unlock(parent);
    persist((void *)slot, sizeof *slot); /* RACE-8: ... persisted after the parent's unlock */
    return true;
}

static void insert(uint64_t key)
{
    struct leaf *l = alloc(sizeof *l);
    l->key = key;
    l->val = key * 3;
    persist(l, sizeof *l);
    for (;;) {
        struct hdr *parent = &root->h;
        uint64_t pv = parent->version;
        uint8_t pk = byte(key, 0);
        struct hdr *n = (struct hdr *)(uintptr_t)get_child(parent, pk);
        if (!n) {
            bool restart = false;
            write_lock_or_restart(parent, &restart);
            if (restart) {
                sched_yield();
                continue;
            }
            if (!get_child(parent, pk))
                insert_child(parent, pk, (uint64_t)(uintptr_t)new_n4());
            write_unlock(parent);
            continue;
        }
        uint8_t k1 = byte(key, 1);
        uint64_t nv = n->version;
        struct hdr *m = (struct hdr *)(uintptr_t)get_child(n, k1);
        if (!m) {
            struct hdr *fresh = new_n4();
            if (!insert_into(parent, pv, pk, n, k1, (uint64_t)(uintptr_t)fresh))
                sched_yield();
            continue;
        }
        if (insert_into(n, nv, k1, m, byte(key, 2), (uint64_t)(uintptr_t)l))
            return;
        sched_yield();
    }
}

static uint64_t lookup(uint64_t key)
{
    struct hdr *n = (struct hdr *)(uintptr_t)get_child(&root->h, byte(key, 0));
    if (n)
        n = (struct hdr *)(uintptr_t)get_child(n, byte(key, 1));
    if (!n)
        return 0;
    struct leaf *l = (struct leaf *)(uintptr_t)get_child(n, byte(key, 2));
    return l && l->key == key ? l->val : 0;
}

static void remove_key(uint64_t key)
{
    for (;;) {
        struct hdr *n = (struct hdr *)(uintptr_t)get_child(&root->h, byte(key, 0));
        n = (struct hdr *)(uintptr_t)get_child(n, byte(key, 1));
        bool restart = false;
        write_lock_or_restart(n, &restart);
        if (restart) {
            sched_yield();
            continue;
        }
        volatile uint64_t *slot = NULL;
        if (n->type == T4)
            slot = n4_remove((struct n4 *)n, byte(key, 2));
        else if (n->type == T16)
            slot = n16_remove((struct n16 *)n, byte(key, 2));
        write_unlock(n);
        if (slot)
            persist((void *)slot, sizeof *slot); /* RACE-9: ... persisted after the unlock */
        return;
    }
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < keys; i++) {
        uint64_t k = i * (uint64_t)threads + id;
        uint64_t key = ((k / 160) % 4) << 16 | ((k / 8) % 20) << 8 | (k % 8);
        insert(key);
        if (lookup(key) == key * 3)
            found[id]++;
        if (i >= 3 && (i - 3) % 5 == 0) {
            uint64_t d = (i - 3) * (uint64_t)threads + id;
            remove_key(((d / 160) % 4) << 16 | ((d / 8) % 20) << 8 | (d % 8));
        }
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
    if (keys > 600)
        keys = 600;
    pool = pm_map(path, POOL_SIZE);
    next_free = (volatile uint64_t *)pool;
    *next_free = 64;
    persist((void *)next_free, sizeof *next_free);
    root = alloc(sizeof *root);
    root->h.type = T256;
    persist(root, sizeof *root);
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
