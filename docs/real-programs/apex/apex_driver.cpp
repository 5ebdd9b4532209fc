// apex19: a driver for APEX in the shape of HawkSet-exp's runners/apex.diff
// (src/benchmark/workload.cpp): open or create the pool, place the Apex object
// in the pool's root, bulk-load a set of keys from main, then run a YCSB-like
// file (`op;key;value`: i insert, s search, u update, d delete) on -t threads.
// Differences from the artifact's driver: bulk-load keys come from a fixed LCG
// (-b N, default 100000) instead of ycsb-200M.bin, and thread t runs
// operations t, t+T, ... (round-robin) instead of a contiguous slice.
#include "../src/core/apex.h"
#include <unistd.h>
#include <pthread.h>
#include <fstream>
#include <vector>
#include <algorithm>
#include <cstdio>

struct Op { char type; uint64_t key; uint64_t value; };

static std::vector<Op> load_workload(const char* path) {
  std::vector<Op> ops;
  FILE* f = fopen(path, "r");
  if (!f) { perror(path); exit(1); }
  char line[256];
  while (fgets(line, sizeof line, f)) {
    Op op{};
    op.type = line[0];
    if (op.type != 'i' && op.type != 's' && op.type != 'u' && op.type != 'd') continue;
    char* p = line + 2;
    op.key = strtoull(p, &p, 10);
    if (*p == ';') op.value = strtoull(p + 1, nullptr, 10);
    ops.push_back(op);
  }
  fclose(f);
  return ops;
}

typedef Tree<uint64_t, uint64_t> tree_t;
static tree_t* g_index;
static std::vector<Op> g_ops;
static int g_threads = 4;
static uint64_t g_found[64];

static void* worker(void* arg) {
  long tid = (long)arg;
  for (size_t i = tid; i < g_ops.size(); i += g_threads) {
    Op& op = g_ops[i];
    uint64_t x = 0;
    switch (op.type) {
      case 'i': g_index->insert(op.key, op.value); break;
      case 'u': g_index->update(op.key, op.value); break;
      case 's': if (g_index->search(op.key, &x)) g_found[tid]++; break;
      case 'd': g_index->erase(op.key); break;
    }
  }
  return nullptr;
}

int main(int argc, char** argv) {
  const char* input = nullptr;
  const char* pool = nullptr;
  long bulk = 100000;
  int c;
  while ((c = getopt(argc, argv, "t:i:p:b:")) != -1) {
    switch (c) {
      case 't': g_threads = atoi(optarg); break;
      case 'i': input = optarg; break;
      case 'p': pool = optarg; break;
      case 'b': bulk = atol(optarg); break;
      default: fprintf(stderr, "usage: %s -t N -p POOL -i FILE [-b BULK]\n", argv[0]); return 2;
    }
  }
  if (!input || !pool || g_threads < 1 || g_threads > 64 || bulk < 2) {
    fprintf(stderr, "usage: %s -t N -p POOL -i FILE [-b BULK]\n", argv[0]);
    return 2;
  }
  g_ops = load_workload(input);

  // Bulk-load keys: distinct 63-bit keys from a fixed LCG (not the workload's).
  auto values = new std::pair<uint64_t, uint64_t>[bulk];
  uint64_t x = 0x2545F4914F6CDD1DULL;
  for (long i = 0; i < bulk; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    values[i].first = (x >> 1) | 1;
    values[i].second = values[i].first ^ 0xAAAA;
  }
  std::sort(values, values + bulk, [](auto const& a, auto const& b) { return a.first < b.first; });
  long n = std::unique(values, values + bulk, [](auto const& a, auto const& b) { return a.first == b.first; }) - values;

  bool recover = my_alloc::BasePMPool::Initialize(pool, pool_size);
  auto index_ptr = reinterpret_cast<tree_t**>(my_alloc::BasePMPool::GetRoot(sizeof(tree_t*)));
  if (recover) {
    g_index = reinterpret_cast<tree_t*>(reinterpret_cast<char*>(*index_ptr) + 48);
    new (g_index) alex::Apex<uint64_t, uint64_t>(recover);
  } else {
    my_alloc::BasePMPool::ZAllocate(reinterpret_cast<void**>(index_ptr), sizeof(alex::Apex<uint64_t, uint64_t>) + 64);
    g_index = reinterpret_cast<tree_t*>(reinterpret_cast<char*>(*index_ptr) + 48);
    new (g_index) alex::Apex<uint64_t, uint64_t>();
    g_index->bulk_load(values, (int)n);
  }
  fprintf(stderr, "bulk %ld keys, workload %zu ops, %d threads\n", n, g_ops.size(), g_threads);

  std::vector<pthread_t> th(g_threads);
  for (long t = 0; t < g_threads; t++) pthread_create(&th[t], nullptr, worker, (void*)t);
  for (long t = 0; t < g_threads; t++) pthread_join(th[t], nullptr);

  uint64_t found = 0;
  for (int t = 0; t < g_threads; t++) found += g_found[t];
  // Check: every inserted key that was not deleted is found again.
  uint64_t missing = 0, checked = 0;
  std::vector<uint64_t> deleted;
  for (auto& op : g_ops) if (op.type == 'd') deleted.push_back(op.key);
  std::sort(deleted.begin(), deleted.end());
  for (auto& op : g_ops) {
    if (op.type != 'i' || std::binary_search(deleted.begin(), deleted.end(), op.key)) continue;
    uint64_t v;
    checked++;
    if (!g_index->search(op.key, &v)) missing++;
  }
  printf("searches found %lu; inserted keys checked %lu, missing %lu\n",
         (unsigned long)found, (unsigned long)checked, (unsigned long)missing);
  return missing ? 1 : 0;
}
