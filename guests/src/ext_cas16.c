/* ext_cas16: a persistent slot table whose current version is a 16-byte (offset, tag) pair
 * swung with a double-width compare-and-swap, as ABA-safe lock-free code writes it (built -O2
 * -mcx16: `__sync_val_compare_and_swap` on an `unsigned __int128` is an inline `lock
 * cmpxchg16b`; the pair is read with a plain 16-byte load, validated by the CAS).
 * Two updaters each write a new version of a 4-word value into a fresh PM block and install it
 * by CAS-ing the (offset, tag) pair; a reader follows the pair and copies the value it names
 * into a PM mirror that it persists.
 * The pair itself is persisted after its CAS, as every lock-free structure publishes (PAIR
 * lines, inherent in both twins).
 *   - BUG (this file): an updater persists the new block after the CAS that installs it, so the
 *     reader copies block bytes that are not yet durable into its durable mirror
 *     (BLOCK_STORE / BLOCK_LOAD).
 *   - FIXED (ext_cas16_fixed, built with -DFIXED): the block persisted before the CAS.
 * Usage: ext_cas16 [POOL]; prints `versions 17`, exits 0. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define UPDATERS 2
#define PER 8
#define BLOCKS (1 + UPDATERS * PER)

struct block {
    uint64_t version;
    uint64_t v[3];
    uint64_t pad[4];
};

struct pool {
    unsigned __int128 cur; /* low 64 bits: block index; high 64 bits: tag */
    uint64_t pad[6];
    struct block mirror;
    struct block blk[BLOCKS];
};

static struct pool *p;

static inline void persist(const void *a, size_t n)
{
    uintptr_t l = (uintptr_t)a & ~(uintptr_t)63;
    for (; l < (uintptr_t)a + n; l += 64)
        __asm__ volatile("clwb %0" : "+m"(*(volatile char *)l)::"memory");
    __asm__ volatile("sfence" ::: "memory");
}

static void *updater(void *arg)
{
    uint64_t id = (uintptr_t)arg;
    for (uint64_t i = 0; i < PER; i++) {
        uint64_t idx = 1 + id * PER + i;
        struct block *b = &p->blk[idx];
        unsigned __int128 old = *(volatile unsigned __int128 *)&p->cur; /* PAIR_LOAD: may tear; the CAS validates */
        for (;;) {
            const struct block *ob = &p->blk[(uint64_t)old];
            b->version = ob->version + 1; /* BLOCK_STORE: version */
            b->v[0] = b->version * 3;    /* BLOCK_STORE: v0 */
            b->v[1] = b->version * 5;    /* BLOCK_STORE: v1 */
            b->v[2] = b->version * 7;    /* BLOCK_STORE: v2 */
#ifdef FIXED
            persist(b, sizeof *b); /* FIX: the block durable before it is installed */
#endif
            unsigned __int128 nw = ((unsigned __int128)((uint64_t)(old >> 64) + 1) << 64) | idx;
            unsigned __int128 seen = __sync_val_compare_and_swap(&p->cur, old, nw); /* PAIR_CAS */
            if (seen == old)
                break;
            old = seen;
        }
        persist(&p->cur, sizeof p->cur);
#ifndef FIXED
        persist(b, sizeof *b); /* BUG: the block durable after the CAS installed it */
#endif
        sched_yield();
    }
    return NULL;
}

static volatile int stop;

static void *reader(void *arg)
{
    (void)arg;
    while (!stop) {
        unsigned __int128 c = *(volatile unsigned __int128 *)&p->cur; /* PAIR_LOAD */
        const struct block *b = &p->blk[(uint64_t)c];
        uint64_t ver = b->version; /* BLOCK_LOAD: version */
        if (ver > p->mirror.version) {
            p->mirror.v[0] = b->v[0]; /* BLOCK_LOAD: v0 */
            p->mirror.v[1] = b->v[1]; /* BLOCK_LOAD: v1 */
            p->mirror.v[2] = b->v[2]; /* BLOCK_LOAD: v2 */
            p->mirror.version = ver;
            persist(&p->mirror, sizeof p->mirror);
        }
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/cas16";
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, sizeof(struct pool)) != 0) {
        perror(path);
        return 1;
    }
    p = mmap(NULL, sizeof(struct pool), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    p->blk[0].version = 1;
    persist(p, sizeof *p);
    pthread_t t[UPDATERS + 1];
    for (uintptr_t i = 0; i < UPDATERS; i++)
        pthread_create(&t[i], NULL, updater, (void *)i);
    pthread_create(&t[UPDATERS], NULL, reader, NULL);
    for (int i = 0; i < UPDATERS; i++)
        pthread_join(t[i], NULL);
    stop = 1;
    pthread_join(t[UPDATERS], NULL);
    printf("versions %llu\n", (unsigned long long)p->blk[(uint64_t)p->cur].version);
    munmap(p, sizeof *p);
    close(fd);
    return 0;
}
