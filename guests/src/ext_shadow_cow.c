/* ext_shadow_cow: copy-on-write (shadow paging) of a small sorted key array, as research
 * prototypes build it (-O0 -g). The current version is the node the root names; the writer
 * copies it into a free slot, inserts a key there, persists the new node and swings the 8-byte
 * root (a slot index) with a release store, which it persists. A reader thread follows the root
 * with acquire loads, lock-free, and sums the keys it sees (in DRAM). Recovery reads the root and
 * checks the node it names: its key count equals its version and its keys are the ones inserted.
 *   - BUG (this file): the writer persists the node after the root swing (NODE_BUG): a crash in
 *     between leaves a durable root naming a slot that still holds an older node (or zeros), and
 *     the reader reads the node's keys before they are durable (NODE_STORE / NODE_LOAD).
 *   - FIXED (ext_shadow_cow_fixed, built with -DFIXED): the node is persisted before the swing.
 *     The root itself is loaded by the reader between its store and its persist in both: lock-free
 *     publication (ROOT_STORE / ROOT_LOAD).
 * Usage: ext_shadow_cow [POOL]          formats the pool, runs the writer and the reader
 *        ext_shadow_cow POOL recover    checks the node the root names: `recovery ok: version V`
 *                                       (exit 0) or `recovery: ...` (exit 1) */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLOTS 8 /* more than INSERTS: a slot is never reused while a reader may still follow it */
#define KEYS 6
#define INSERTS 5
#define MAGIC 0x434f5731u

struct node {
    uint64_t version;
    uint64_t nkeys;
    uint64_t keys[KEYS];
};

struct pool {
    uint64_t magic;
    uint64_t root; /* slot of the current node */
    uint64_t pad[6];
    struct node slot[SLOTS];
};

static struct pool *pool;
static int writer_done;

static uint64_t key_of(uint64_t i)
{
    return 1000 - 37 * i; /* inserted in decreasing order: every insert shifts the array */
}

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static void insert(uint64_t key)
{
    uint64_t cur = pool->root;
    uint64_t next = (cur + 1) % SLOTS;
    struct node *old = &pool->slot[cur], *n = &pool->slot[next];
    uint64_t i = 0, j = 0;
    while (i < old->nkeys && old->keys[i] < key)
        n->keys[j++] = old->keys[i++]; /* NODE_STORE: copied keys */
    n->keys[j++] = key;                /* NODE_STORE: new key */
    while (i < old->nkeys)
        n->keys[j++] = old->keys[i++]; /* NODE_STORE: shifted keys */
    n->nkeys = j;                      /* NODE_STORE: count */
    n->version = old->version + 1;     /* NODE_STORE: version */
#ifdef FIXED
    persist(n, sizeof *n); /* FIX: the node durable before the root names it */
#endif
    __atomic_store_n(&pool->root, next, __ATOMIC_RELEASE); /* ROOT_STORE */
    persist(&pool->root, sizeof pool->root);
#ifndef FIXED
    persist(n, sizeof *n); /* NODE_BUG: the node persisted after the root swing */
#endif
}

static void *writer(void *arg)
{
    (void)arg;
    for (uint64_t i = 0; i < INSERTS; i++) {
        insert(key_of(i));
        sched_yield();
    }
    __atomic_store_n(&writer_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *reader(void *arg)
{
    uint64_t *seen = arg;
    for (;;) {
        int last = __atomic_load_n(&writer_done, __ATOMIC_ACQUIRE);
        uint64_t r = __atomic_load_n(&pool->root, __ATOMIC_ACQUIRE); /* ROOT_LOAD */
        const struct node *n = &pool->slot[r];
        uint64_t count = n->nkeys; /* NODE_LOAD: count */
        uint64_t sum = 0;
        for (uint64_t i = 0; i < count && i < KEYS; i++)
            sum += n->keys[i]; /* NODE_LOAD: keys */
        *seen += sum;
        if (last)
            return NULL;
        sched_yield();
    }
}

static int recover(void)
{
    if (pool->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    uint64_t r = pool->root;
    if (r >= SLOTS) {
        printf("recovery: bad root %llu\n", (unsigned long long)r);
        return 1;
    }
    const struct node *n = &pool->slot[r];
    if (n->nkeys != n->version || n->nkeys > KEYS) {
        printf("recovery: node %llu has %llu keys at version %llu\n", (unsigned long long)r,
               (unsigned long long)n->nkeys, (unsigned long long)n->version);
        return 1;
    }
    for (uint64_t i = 0; i < n->nkeys; i++)
        if (n->keys[i] != key_of(n->nkeys - 1 - i)) {
            printf("recovery: node %llu key %llu wrong\n", (unsigned long long)r, (unsigned long long)i);
            return 1;
        }
    printf("recovery ok: version %llu\n", (unsigned long long)n->version);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/cow";
    int recovering = argc > 2 && strcmp(argv[2], "recover") == 0;
    int fd = open(path, recovering ? O_RDWR : O_RDWR | O_CREAT, 0644);
    struct stat st;
    if (recovering && (fd < 0 || fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(struct pool))) {
        printf("recovery ok: no pool\n");
        return 0;
    }
    if (fd < 0 || (!recovering && ftruncate(fd, sizeof(struct pool)) != 0)) {
        perror(path);
        return 1;
    }
    pool = mmap(NULL, sizeof(struct pool), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (pool == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    if (recovering)
        return recover();
    memset(pool, 0, sizeof *pool);
    persist(pool, sizeof *pool);
    pool->magic = MAGIC;
    persist(&pool->magic, sizeof pool->magic);
    uint64_t seen = 0;
    pthread_t w, r;
    pthread_create(&w, NULL, writer, NULL);
    pthread_create(&r, NULL, reader, &seen);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    printf("version %llu, reader saw %llu\n", (unsigned long long)pool->slot[pool->root].version,
           (unsigned long long)(seen != 0));
    return 0;
}
