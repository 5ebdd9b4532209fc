// turbo47: a crash test of BucketMetaPmem's missing persist (docs/analyses/hawkset.md, "The real
// programs (TurboHash)"). `BucketMetaPmem` entries are 24 bytes in an array that libpmemobj places
// 16 bytes past a cache line, so entry 4 straddles two lines; `Store` (the commit of a rehash)
// writes `bucket2_ptr_` on the second line, flushes only `this`'s line, then flips `cur_ver_` and
// flushes that line again. After a crash `cur_ver_` can say 2 while `bucket2_ptr_` is still 0.
//
//   turbo_meta_crash -p POOL [-b BUCKET]      workload: one thread inserts keys of bucket B
//                                             (default 4) until the bucket has been rehashed once
//   turbo_meta_crash -p POOL -r               check: every bucket's current pointer is non-null
//                                             (exit 1 naming the bucket otherwise)
#include <libpmemobj.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

static const char* turbo_pool_path = "/mnt/pmem0/turbohash";
static size_t turbo_pool_size = 64UL << 20;

#include "turbo/turbo_hash_pmem_pmdk.h"

using Table = turbo_pmem::unordered_map<size_t, size_t>;

// BucketMetaPmem's layout (private in TurboHash): cur_ver_, two cell-count shifts, two pptrs.
struct RawMeta {
    uint8_t cur_ver, shift1, shift2;
    uint64_t ptr1, ptr2;
};
static_assert(sizeof(RawMeta) == 24, "TurboHash's BucketMetaPmem is 24 bytes");
struct RawRoot {
    size_t bucket_count;
    uint64_t buckets_pmem;  // pptr: offset in the low 48 bits
};

static int check () {
    PMEMobjpool* pop = pmemobj_open (turbo_pool_path, "turbo_pmdk");
    if (!pop) return 0;  // crashed before the pool existed: nothing to recover
    RawRoot* root = (RawRoot*)pmemobj_direct (pmemobj_root (pop, sizeof (RawRoot)));
    if (root->bucket_count == 0 || (root->buckets_pmem & 0xFFFFFFFFFFFFULL) == 0) return 0;
    RawMeta* m = (RawMeta*)((char*)pop + (root->buckets_pmem & 0xFFFFFFFFFFFFULL));
    for (size_t b = 0; b < root->bucket_count; b++) {
        uint64_t p = (m[b].cur_ver == 1 ? m[b].ptr1 : m[b].ptr2) & 0xFFFFFFFFFFFFULL;
        if ((m[b].cur_ver != 1 && m[b].cur_ver != 2) || p == 0) {
            printf ("bucket %zu: version %u, its bucket pointer is null\n", b, m[b].cur_ver);
            return 1;
        }
    }
    pmemobj_close (pop);
    return 0;
}

int main (int argc, char** argv) {
    int opt, recover = 0;
    uint32_t bucket = 4, buckets = 8, cells = 2;
    while ((opt = getopt (argc, argv, "p:b:r")) != -1) {
        if (opt == 'p') turbo_pool_path = optarg;
        else if (opt == 'b') bucket = strtoul (optarg, nullptr, 10);
        else if (opt == 'r') recover = 1;
        else return 2;
    }
    if (recover) return check ();
    unlink (turbo_pool_path);
    Table* t = new Table (buckets, cells);
    size_t cap = t->Capacity (), n = 0;
    {
        auto info = t->getThreadInfo ();  // gone before the table: its epoch must be left
        for (uint64_t k = 1; t->Capacity () == cap && k < 1000000; k++) {
            if (((t->KeyToHash (k) >> 32) & (buckets - 1)) != bucket) continue;
            t->Put (k, k, info);
            n++;
        }
    }
    printf ("%zu keys into bucket %u; capacity %zu -> %zu\n", n, bucket, cap, t->Capacity ());
    delete t;
    return 0;
}
