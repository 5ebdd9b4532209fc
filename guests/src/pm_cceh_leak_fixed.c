/* pm_cceh_leak_fixed: FIXED twin of pm_cceh_leak.c (CCEH's leaking variant).  Before a doubling
 * allocates anything it records an intent in the allocator's line, persisted: the depth it is
 * doubling to and the allocator's `next_free` before the doubling.  The intent is cleared once the
 * new depth is durable.  Recovery (`check`) finds a pending intent whose depth was never reached
 * and rolls the allocator back to the recorded `next_free`, reclaiming the segments the
 * interrupted doubling allocated, before it walks the table; so no allocated segment is ever
 * unreachable after recovery.
 *
 * An extendible hash table in PM: a directory of 2^depth segment offsets and a global depth;
 * a segment is 8 slots {key, value} (two lines).  insert() puts a key in segment
 * `hash(key) & (2^depth - 1)`; when that segment is full the directory doubles: for each new
 * entry e in [2^d, 2^(d+1)) a segment is allocated (`next_free` advanced and persisted FIRST),
 * filled with the keys of segment e - 2^d whose bit d is set (persisted), and linked into the
 * directory (persisted); then the new depth is persisted (the new entries become reachable) and
 * the keys that moved are removed from their old segments.  Every step is flushed and fenced in
 * order, so no key is ever lost; from the allocation until the depth is durable the new segment
 * is reachable from nothing durable, but the intent says how to reclaim it.  Single-threaded.
 *
 * Layout (pool file, POOL_SIZE bytes):
 *   offset 0:    allocator { magic, next_free, intent_depth, undo_next_free }  (line 0)
 *   offset 64:   directory { depth }                        (line 1)
 *   offset 128:  seg_off[16]                                (lines 2-3)
 *   offset 256:  segments, 128 bytes each, allocated in order
 *
 * Usage: pm_cceh_leak_fixed [POOL]        (re)initialises the table, inserts 40 keys, prints the depth,
 *                                   the number of segments and a checksum, exits 0
 *        pm_cceh_leak_fixed POOL check    opens the existing pool, completes or rolls back a
 *                                   pending intent (persisted), then walks the directory and
 *                                   the allocator: prints `recovery ok: depth D,
 *                                   S segments, N keys` (exit 0), `recovery: leaked segment at
 *                                   OFF` when an allocated segment is unreachable (exit 1), or
 *                                   `recovery: bad ...` (exit 1) */
#include "pm.h"

#define POOL_SIZE 8192
#define MAGIC 0x43434548u /* "CCEH" */
#define SLOTS 8
#define MAX_DEPTH 4
#define MAX_SEGS (1 << MAX_DEPTH)
#define SEG_BASE 256
#define NKEYS 40

struct alloc {
    volatile uint64_t magic;
    volatile uint64_t next_free;
    volatile uint64_t intent_depth; /* 0: no doubling in progress */
    volatile uint64_t undo_next_free;
    uint64_t pad[4];
};

struct dir {
    volatile uint64_t depth;
    uint64_t pad[7];
    volatile uint64_t seg_off[MAX_SEGS];
};

struct seg {
    struct {
        uint64_t key; /* 0: empty */
        uint64_t value;
    } slot[SLOTS];
};

_Static_assert(sizeof(struct alloc) == 64, "allocator line");
_Static_assert(sizeof(struct dir) == 192, "directory lines");
_Static_assert(sizeof(struct seg) == 128, "two lines");
_Static_assert(SEG_BASE + MAX_SEGS * sizeof(struct seg) <= POOL_SIZE, "pool fits");

static char *pool;
static struct alloc *al;
static struct dir *dir;

static uint64_t hash(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 40; }
static struct seg *seg_at(uint64_t off) { return (struct seg *)(pool + off); }

static uint64_t alloc_segment(void)
{
    uint64_t off = al->next_free;
    if (off + sizeof(struct seg) > SEG_BASE + MAX_SEGS * sizeof(struct seg)) {
        fprintf(stderr, "out of segments\n");
        exit(2);
    }
    al->next_free = off + sizeof(struct seg); PM_CLWB(&al->next_free); PM_SFENCE(); /* ALLOC: covered by the doubling's intent */
    return off;
}

static void persist_seg(struct seg *s)
{
    PM_CLWB(&s->slot[0]); PM_CLWB(&s->slot[4]); PM_SFENCE(); /* SEG: the segment persisted */
}

static void double_directory(void)
{
    uint64_t d = dir->depth;
    if (d >= MAX_DEPTH) {
        fprintf(stderr, "directory full\n");
        exit(2);
    }
    al->undo_next_free = al->next_free;
    al->intent_depth = d + 1; PM_CLWB(&al->intent_depth); PM_SFENCE(); /* FIX: the intent persisted before allocating */
    for (uint64_t e = 1u << d; e < 2u << d; e++) {
        uint64_t off = alloc_segment();
        struct seg *s = seg_at(off), *old = seg_at(dir->seg_off[e - (1u << d)]);
        int n = 0;
        for (int j = 0; j < SLOTS; j++) {
            if (old->slot[j].key != 0 && (hash(old->slot[j].key) >> d & 1)) {
                s->slot[n].key = old->slot[j].key;
                s->slot[n].value = old->slot[j].value;
                n++;
            }
        }
        for (; n < SLOTS; n++)
            s->slot[n].key = s->slot[n].value = 0;
        persist_seg(s);
        dir->seg_off[e] = off; PM_CLWB(&dir->seg_off[e]); PM_SFENCE(); /* LINK: the directory entry persisted */
    }
    dir->depth = d + 1; PM_CLWB(&dir->depth); PM_SFENCE(); /* PUBLISH: the new entries reachable */
    al->intent_depth = 0; PM_CLWB(&al->intent_depth); PM_SFENCE(); /* DONE: the intent cleared */
    /* The keys that moved are removed from the old segments (copies left by a crash before
     * this are ignored by lookups: they are in a segment their hash no longer selects). */
    for (uint64_t e = 0; e < (1u << d); e++) {
        struct seg *old = seg_at(dir->seg_off[e]);
        int moved = 0;
        for (int j = 0; j < SLOTS; j++)
            if (old->slot[j].key != 0 && (hash(old->slot[j].key) >> d & 1)) {
                old->slot[j].key = 0;
                moved = 1;
            }
        if (moved)
            persist_seg(old);
    }
}

static void insert(uint64_t key, uint64_t value)
{
    for (;;) {
        struct seg *s = seg_at(dir->seg_off[hash(key) & ((1u << dir->depth) - 1)]);
        for (int j = 0; j < SLOTS; j++) {
            if (s->slot[j].key == 0) {
                s->slot[j].value = value;
                s->slot[j].key = key; PM_CLWB(&s->slot[j]); PM_SFENCE(); /* INSERT: the key (its slot's line) persisted */
                return;
            }
        }
        double_directory();
    }
}

/* Recovery: a doubling whose depth never became durable is rolled back (its segments are
 * reclaimed); one whose depth did has its intent cleared. */
static void recover_intent(void)
{
    uint64_t want = al->intent_depth;
    if (want == 0)
        return;
    if (dir->depth < want)
        al->next_free = al->undo_next_free;
    al->intent_depth = 0;
    persist(al, sizeof *al);
}

/* Walks the directory and the allocator.  Returns 0 when every allocated segment is reachable. */
static int check(void)
{
    if (al->magic == 0) {
        puts("recovery ok: empty pool");
        return 0;
    }
    recover_intent();
    uint64_t depth = dir->depth, next = al->next_free;
    if (al->magic != MAGIC || depth > MAX_DEPTH || next < SEG_BASE + sizeof(struct seg) ||
        next > SEG_BASE + MAX_SEGS * sizeof(struct seg) || (next - SEG_BASE) % sizeof(struct seg) != 0) {
        puts("recovery: bad header");
        return 1;
    }
    int reached[MAX_SEGS] = {0};
    int keys = 0;
    for (uint64_t e = 0; e < (1u << depth); e++) {
        uint64_t off = dir->seg_off[e];
        if (off < SEG_BASE || off >= next || (off - SEG_BASE) % sizeof(struct seg) != 0) {
            printf("recovery: bad directory entry %llu\n", (unsigned long long)e);
            return 1;
        }
        reached[(off - SEG_BASE) / sizeof(struct seg)] = 1;
        const struct seg *s = seg_at(off);
        for (int j = 0; j < SLOTS; j++)
            if (s->slot[j].key != 0 && (hash(s->slot[j].key) & ((1u << depth) - 1)) == e)
                keys++;
    }
    uint64_t nsegs = (next - SEG_BASE) / sizeof(struct seg);
    for (uint64_t i = 0; i < nsegs; i++) {
        if (!reached[i]) {
            printf("recovery: leaked segment at %llu\n", (unsigned long long)(SEG_BASE + i * sizeof(struct seg)));
            return 1;
        }
    }
    printf("recovery ok: depth %llu, %llu segments, %d keys\n", (unsigned long long)depth,
           (unsigned long long)nsegs, keys);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    int check_mode = argc > 2 && strcmp(argv[2], "check") == 0;
    pool = check_mode ? pm_open(path, POOL_SIZE, 0) : pm_map(path, POOL_SIZE);
    al = (struct alloc *)pool;
    dir = (struct dir *)(pool + sizeof(struct alloc));
    if (check_mode)
        return check();

    /* Initialise: the header lines zeroed and persisted, then segment 0 built and linked, and
     * the allocator (with its magic) written last: a crash before that leaves an empty pool. */
    memset(pool, 0, SEG_BASE);
    persist(pool, SEG_BASE);
    struct seg *s0 = seg_at(SEG_BASE);
    memset(s0, 0, sizeof *s0);
    persist(s0, sizeof *s0);
    dir->seg_off[0] = SEG_BASE;
    dir->depth = 0;
    persist((void *)&dir->depth, sizeof dir->depth);
    persist((void *)&dir->seg_off[0], sizeof dir->seg_off[0]);
    al->next_free = SEG_BASE + sizeof(struct seg);
    al->magic = MAGIC;
    persist(al, sizeof *al);

    for (uint64_t k = 1; k <= NKEYS; k++)
        insert(k, k * 10);

    uint64_t sum = 0;
    int found = 0;
    for (uint64_t e = 0; e < (1u << dir->depth); e++) {
        const struct seg *s = seg_at(dir->seg_off[e]);
        for (int j = 0; j < SLOTS; j++)
            if (s->slot[j].key != 0) {
                found++;
                sum += s->slot[j].key * s->slot[j].value;
            }
    }
    printf("depth %llu, %llu segments, %d keys, checksum %llu\n", (unsigned long long)dir->depth,
           (unsigned long long)((al->next_free - SEG_BASE) / sizeof(struct seg)), found, (unsigned long long)sum);
    return 0;
}
