// turbo47: a YCSB-style driver for TurboHash's PMDK version (hansonzhao007/TurboHash 2d7d7b3,
// src/turbo/turbo_hash_pmem_pmdk.h), in the shape of HawkSet's runs (its runners/turbohash.sh runs
// a patched `workload -i ycsb_N.txt -t 8`, whose patch is not public): main creates the table in
// the -p pool and inserts -l keys (the load phase), then -t threads run -n operations, 30% insert
// (a fresh key), 30% update and 30% get of a key inserted earlier, 10% delete of one. The
// operations are drawn in main from a seeded splitmix64 before any thread starts (-s), so the
// workload never depends on the schedule; thread t runs operations t, t+T, ... Keys and values
// are uint64_t (hash_bench_pmdk.cc's turbo_pmem::unordered_map<size_t, size_t>), so insertions
// take the flat-slot path of insertToSlotAndGC (turbo_hash_pmem_pmdk.h:2238, HawkSet's bug #3).
//
// Usage: turbo_driver -p POOL [-t THREADS] [-n OPS] [-l LOAD] [-b BUCKETS] [-c CELLS] [-s SEED]
#include <pthread.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// turbo_hash_pmem_pmdk.h is patched on two lines to read these instead of its constants: the pool
// path ("/mnt/pmem/turbohash", lines 1696 and 1763) and the pool size (96 GiB, line 67).
static const char* turbo_pool_path = "/mnt/pmem0/turbohash";
static size_t turbo_pool_size = 256UL << 20;

#include "turbo/turbo_hash_pmem_pmdk.h"

using Table = turbo_pmem::unordered_map<size_t, size_t>;

struct Op {
    char type;  // 'i' insert, 'u' update, 'g' get, 'd' delete
    uint64_t key;
    uint64_t value;
};

static uint64_t rng_state;
static uint64_t next_rand () {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static Table* table;
static std::vector<Op> ops;
static int nthreads = 4;
static uint64_t found[64], put_ok[64], deleted[64];

static void* worker (void* arg) {
    long t = (long)arg;
    auto info = table->getThreadInfo ();
    for (size_t i = t; i < ops.size (); i += nthreads) {
        const Op& op = ops[i];
        switch (op.type) {
            case 'i':
            case 'u':
                put_ok[t] += table->Put (op.key, op.value, info);
                break;
            case 'g':
                found[t] += table->Find (op.key, info, [] (auto&&) {});
                break;
            case 'd':
                deleted[t] += table->Delete (op.key, info);
                break;
        }
    }
    return nullptr;
}

int main (int argc, char** argv) {
    size_t nops = 1000, nload = 1000;
    uint32_t buckets = 16, cells = 8;
    int opt;
    rng_state = 47;
    while ((opt = getopt (argc, argv, "p:t:n:l:b:c:s:")) != -1) {
        switch (opt) {
            case 'p': turbo_pool_path = optarg; break;
            case 't': nthreads = atoi (optarg); break;
            case 'n': nops = strtoull (optarg, nullptr, 10); break;
            case 'l': nload = strtoull (optarg, nullptr, 10); break;
            case 'b': buckets = strtoul (optarg, nullptr, 10); break;
            case 'c': cells = strtoul (optarg, nullptr, 10); break;
            case 's': rng_state = strtoull (optarg, nullptr, 10); break;
            default:
                fprintf (stderr, "usage: %s -p POOL [-t T] [-n OPS] [-l LOAD] [-b B] [-c C] [-s SEED]\n",
                         argv[0]);
                return 2;
        }
    }
    if (nthreads < 1 || nthreads > 64) return 2;

    // The workload: keys inserted so far (load keys first), each later op choosing among them.
    std::vector<uint64_t> keys;
    for (size_t i = 0; i < nload; i++) keys.push_back (next_rand ());
    for (size_t i = 0; i < nops; i++) {
        uint64_t r = next_rand () % 100;
        Op op{};
        if (r < 30 || keys.empty ()) {
            op.type = 'i';
            op.key = next_rand ();
            keys.push_back (op.key);
        } else {
            op.type = r < 60 ? 'u' : r < 90 ? 'g' : 'd';
            op.key = keys[next_rand () % keys.size ()];
        }
        op.value = next_rand ();
        ops.push_back (op);
    }

    unlink (turbo_pool_path);
    table = new Table (buckets, cells);
    {
        auto info = table->getThreadInfo ();
        for (size_t i = 0; i < nload; i++) table->Put (keys[i], keys[i] ^ 0x5a5a, info);
    }

    std::vector<pthread_t> th (nthreads);
    for (long t = 0; t < nthreads; t++) pthread_create (&th[t], nullptr, worker, (void*)t);
    for (int t = 0; t < nthreads; t++) pthread_join (th[t], nullptr);

    uint64_t f = 0, p = 0, d = 0;
    for (int t = 0; t < nthreads; t++) f += found[t], p += put_ok[t], d += deleted[t];
    // Check: every load key not deleted by the workload is still there (single-threaded now).
    size_t present = 0;
    {
        auto info = table->getThreadInfo ();
        for (size_t i = 0; i < nload; i++) present += table->Find (keys[i], info, [] (auto&&) {});
    }
    printf ("turbo_driver: %zu load, %zu ops on %d threads: %lu puts, %lu found, %lu deleted; "
            "%zu of %zu load keys present; capacity %zu\n",
            nload, nops, nthreads, (unsigned long)p, (unsigned long)f, (unsigned long)d, present,
            nload, table->Capacity ());
    delete table;
    return 0;
}
