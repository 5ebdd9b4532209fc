/* pmdk_atomic_api: libpmemobj's non-transactional ("atomic") API (dynamically linked, -O0 -g),
 * the way the libpmemobj examples that predate transactions keep a catalogue of named entries.
 * An entry is allocated with pmemobj_alloc and a constructor that fills its id and name
 * (pmemobj_memcpy_persist) and clears its notes (pmemobj_memset_persist); it is then linked into
 * a POBJ_LIST with POBJ_LIST_INSERT_HEAD (pmemobj_list_insert); its `stamp` (the hash of its
 * id and name, which the reader trusts) is written between the two. A statistics object is replaced
 * with POBJ_NEW / POBJ_FREE; the root's counters are updated with pmemobj_flush on each and one
 * pmemobj_drain, and the root's generation with pmemobj_persist. Recovery (pmemobj_open) walks
 * the list and checks every entry's stamp.
 *   - BUG (this file): the stamp, written after the constructor ran, is not persisted before the
 *     entry is linked (STAMP_BUG), nor after: a crash leaves a linked entry whose stamp is zero.
 *   - FIXED (pmdk_atomic_api_fixed, built with FIXED): pmemobj_persist of the stamp.
 * Usage: pmdk_atomic_api POOL          creates the pool and catalogues the entries
 *        pmdk_atomic_api POOL check    `consistent: N entries` (exit 0) or `inconsistent ...`
 *                                      (exit 1); `no pool` (exit 0) */
#include <errno.h>
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NENTRIES 4

POBJ_LAYOUT_BEGIN(catalogue);
POBJ_LAYOUT_ROOT(catalogue, struct root);
POBJ_LAYOUT_TOID(catalogue, struct entry);
POBJ_LAYOUT_TOID(catalogue, struct stats);
POBJ_LAYOUT_END(catalogue);

struct entry {
    POBJ_LIST_ENTRY(struct entry) link;
    uint64_t id;
    char name[32];
    char notes[64];
    uint64_t stamp; /* hash of id and name, set once catalogued */
};

struct stats {
    uint64_t entries;
    uint64_t name_bytes;
};

struct root {
    POBJ_LIST_HEAD(entries, struct entry) head;
    TOID(struct stats) stats;
    uint64_t inserted;
    uint64_t name_bytes;
    uint64_t generation;
};

struct entry_args {
    uint64_t id;
    const char *name;
};

static uint64_t stamp_of(uint64_t id, const char *name)
{
    uint64_t h = 1469598103934665603ull ^ id;
    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return h | 1;
}

static int entry_construct(PMEMobjpool *pop, void *ptr, void *arg)
{
    struct entry *e = ptr;
    const struct entry_args *a = arg;
    e->id = a->id;
    pmemobj_persist(pop, &e->id, sizeof e->id);
    char name[32] = {0};
    strncpy(name, a->name, sizeof name - 1);
    pmemobj_memcpy_persist(pop, e->name, name, sizeof name);
    pmemobj_memset_persist(pop, e->notes, 0, sizeof e->notes);
    return 0;
}

static int stats_construct(PMEMobjpool *pop, void *ptr, void *arg)
{
    struct stats *s = ptr;
    const struct root *r = arg;
    s->entries = r->inserted;
    s->name_bytes = r->name_bytes;
    pmemobj_persist(pop, s, sizeof *s);
    return 0;
}

static int catalogue(PMEMobjpool *pop, TOID(struct root) root, uint64_t id, const char *name)
{
    struct entry_args args = {id, name};
    PMEMoid oid;
    if (pmemobj_alloc(pop, &oid, sizeof(struct entry), TOID_TYPE_NUM(struct entry), entry_construct, &args) != 0) {
        perror("pmemobj_alloc");
        return -1;
    }
    TOID(struct entry) e;
    TOID_ASSIGN(e, oid);
    D_RW(e)->stamp = stamp_of(id, name); /* STAMP_BUG: written after the constructor, not persisted before the entry is linked */
#ifdef FIXED
    pmemobj_persist(pop, &D_RW(e)->stamp, sizeof D_RW(e)->stamp); /* FIX */
#endif
    if (POBJ_LIST_INSERT_HEAD(pop, &D_RW(root)->head, e, link) != 0) {
        perror("pmemobj_list_insert");
        return -1;
    }
    D_RW(root)->inserted++;
    D_RW(root)->name_bytes += strlen(name);
    pmemobj_flush(pop, &D_RW(root)->inserted, sizeof(uint64_t));
    pmemobj_flush(pop, &D_RW(root)->name_bytes, sizeof(uint64_t));
    pmemobj_drain(pop);
    return 0;
}

static int refresh_stats(PMEMobjpool *pop, TOID(struct root) root)
{
    TOID(struct stats) old = D_RO(root)->stats;
    /* POBJ_NEW publishes the new object's oid into the root atomically with the allocation. */
    if (POBJ_NEW(pop, &D_RW(root)->stats, struct stats, stats_construct, D_RW(root)) != 0) {
        perror("POBJ_NEW");
        return -1;
    }
    if (!TOID_IS_NULL(old))
        POBJ_FREE(&old);
    D_RW(root)->generation++;
    pmemobj_persist(pop, &D_RW(root)->generation, sizeof(uint64_t));
    return 0;
}

static int check(PMEMobjpool *pop)
{
    TOID(struct root) root = POBJ_ROOT(pop, struct root);
    uint64_t n = 0;
    TOID(struct entry) e;
    POBJ_LIST_FOREACH(e, &D_RO(root)->head, link) {
        if (D_RO(e)->stamp != stamp_of(D_RO(e)->id, D_RO(e)->name)) {
            printf("inconsistent: entry %llu (%s) has stamp %llx\n", (unsigned long long)D_RO(e)->id, D_RO(e)->name,
                   (unsigned long long)D_RO(e)->stamp);
            return 1;
        }
        n++;
    }
    if (!TOID_IS_NULL(D_RO(root)->stats) && D_RO(D_RO(root)->stats)->entries > n) {
        printf("inconsistent: stats count %llu entries, the list %llu\n", (unsigned long long)D_RO(D_RO(root)->stats)->entries,
               (unsigned long long)n);
        return 1;
    }
    printf("consistent: %llu entries\n", (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/catalogue";
    if (argc > 2 && strcmp(argv[2], "check") == 0) {
        PMEMobjpool *pop = pmemobj_open(path, POBJ_LAYOUT_NAME(catalogue));
        if (pop == NULL) {
            printf("no pool\n");
            return 0;
        }
        int rc = check(pop);
        pmemobj_close(pop);
        return rc;
    }
    unlink(path);
    PMEMobjpool *pop = pmemobj_create(path, POBJ_LAYOUT_NAME(catalogue), PMEMOBJ_MIN_POOL, 0644);
    if (pop == NULL) {
        perror("pmemobj_create");
        return 1;
    }
    TOID(struct root) root = POBJ_ROOT(pop, struct root);
    static const char *names[NENTRIES] = {"alpha", "bravo", "charlie", "delta"};
    for (uint64_t i = 0; i < NENTRIES; i++) {
        if (catalogue(pop, root, i + 1, names[i]) != 0)
            return 1;
        if (i % 2 == 1 && refresh_stats(pop, root) != 0)
            return 1;
    }
    printf("catalogued %llu, generation %llu\n", (unsigned long long)D_RO(root)->inserted,
           (unsigned long long)D_RO(root)->generation);
    pmemobj_close(pop);
    return 0;
}
