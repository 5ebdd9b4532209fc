// ext_spin_hash: a persistent hash map with per-bucket pthread_spinlock_t locks kept in DRAM
// (PM holds only the buckets), written as a small C++ class (built -O2). A loader thread puts
// keys 1..N; a mirror thread gets each key under its bucket's lock and puts a mirrored key
// (key + 1000) holding the same value, persisted inside that bucket's lock. Values are written
// once, so recovery can check that every mirrored value has its original.
//   - BUG (this file): the loader group-commits: it puts a batch of keys and persists their slots
//     afterwards, when the buckets' locks are released (PUT_BUG): the mirror thread can read a
//     value before it is durable and persist a copy of it (SLOT_STORE / SLOT_LOAD: a
//     persistence-induced race), and a crash after the copy's persist and before the original's
//     leaves a mirror whose original is gone.
//   - FIXED (ext_spin_hash_fixed, built with -DFIXED): put persists the slot under the lock.
// A slot's key is stored after its value with a release store: without it gcc -O2 merges the two
// stores into one 16-byte movups, whose halves x86 does not write atomically (crash testing found
// a durable key without its value in the first draft of the fixed twin).
// Usage: ext_spin_hash [POOL]          formats the pool, runs the loader and the mirror
//        ext_spin_hash POOL recover    checks every mirror: `recovery ok: M mirrors` (exit 0) or
//                                      `recovery: mirror of K without its original` (exit 1)
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

constexpr unsigned kBuckets = 8;
constexpr unsigned kSlots = 4;
constexpr uint64_t kKeys = 6;
constexpr uint64_t kMirror = 1000;
constexpr uint64_t kBatch = 2;

struct Slot {
    uint64_t key; // 0: free
    uint64_t value;
};

struct alignas(64) Bucket {
    Slot slot[kSlots];
};

struct Pool {
    Bucket bucket[kBuckets];
};

__attribute__((target("clwb"))) void persist(const void *p, size_t len)
{
    uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
    for (; a < reinterpret_cast<uintptr_t>(p) + len; a += 64)
        _mm_clwb(reinterpret_cast<void *>(a));
    _mm_sfence();
}

class PHashMap {
public:
    explicit PHashMap(Pool *pool) : pool_(pool)
    {
        for (auto &l : locks_)
            pthread_spin_init(&l, PTHREAD_PROCESS_PRIVATE);
    }

    // Returns the slot, for the caller's group flush (none needed in the fixed twin).
    Slot *put(uint64_t key, uint64_t value)
    {
        unsigned b = bucket_of(key);
        pthread_spin_lock(&locks_[b]);
        Slot *s = nullptr;
        for (auto &slot : pool_->bucket[b].slot)
            if (slot.key == 0 || slot.key == key) {
                s = &slot;
                break;
            }
        if (s == nullptr) {
            pthread_spin_unlock(&locks_[b]);
            return nullptr;
        }
        s->value = value;                                 // SLOT_STORE: value
        __atomic_store_n(&s->key, key, __ATOMIC_RELEASE); // SLOT_STORE: key, after its value
#ifdef FIXED
        persist(s, sizeof *s); // FIX: durable before the lock is released
#endif
        pthread_spin_unlock(&locks_[b]);
        return s;
    }

    bool put_durable(uint64_t key, uint64_t value)
    {
        unsigned b = bucket_of(key);
        pthread_spin_lock(&locks_[b]);
        for (auto &slot : pool_->bucket[b].slot)
            if (slot.key == 0) {
                slot.value = value;                                // MIRROR_STORE: value
                __atomic_store_n(&slot.key, key, __ATOMIC_RELEASE); // MIRROR_STORE: key
                persist(&slot, sizeof slot);
                pthread_spin_unlock(&locks_[b]);
                return true;
            }
        pthread_spin_unlock(&locks_[b]);
        return false;
    }

    bool get(uint64_t key, uint64_t *value)
    {
        unsigned b = bucket_of(key);
        bool found = false;
        pthread_spin_lock(&locks_[b]);
        for (const auto &slot : pool_->bucket[b].slot)
            if (slot.key == key) { // SLOT_LOAD: key
                *value = slot.value; // SLOT_LOAD: value
                found = true;
                break;
            }
        pthread_spin_unlock(&locks_[b]);
        return found;
    }

    static unsigned bucket_of(uint64_t key) { return static_cast<unsigned>((key * 0x9e3779b1u) >> 7) % kBuckets; }

private:
    Pool *pool_;
    pthread_spinlock_t locks_[kBuckets];
};

uint64_t value_of(uint64_t key) { return key * 7919 + 1; }

void *loader(void *arg)
{
    auto *map = static_cast<PHashMap *>(arg);
    // Group commit: a batch of puts, then one flush of the batch's slots (in the fixed twin
    // each put has persisted its slot already).
    for (uint64_t k = 1; k <= kKeys; k += kBatch) {
        [[maybe_unused]] Slot *batch[kBatch] = {};
        for (uint64_t i = 0; i < kBatch && k + i <= kKeys; i++)
            batch[i] = map->put(k + i, value_of(k + i));
        sched_yield();
#ifndef FIXED
        for (Slot *s : batch)
            if (s != nullptr)
                persist(s, sizeof *s); // PUT_BUG: the batch persisted after its locks were released
#endif
    }
    return nullptr;
}

void *mirror(void *arg)
{
    auto *map = static_cast<PHashMap *>(arg);
    bool done[kKeys + 1] = {};
    uint64_t left = kKeys;
    while (left > 0) {
        for (uint64_t k = 1; k <= kKeys; k++) {
            uint64_t v;
            if (done[k] || !map->get(k, &v))
                continue;
            map->put_durable(k + kMirror, v);
            done[k] = true;
            left--;
        }
        sched_yield();
    }
    return nullptr;
}

int recover(const Pool *pool)
{
    unsigned mirrors = 0;
    for (const auto &b : pool->bucket)
        for (const auto &s : b.slot) {
            if (s.key <= kMirror)
                continue;
            uint64_t k = s.key - kMirror;
            const Bucket &ob = pool->bucket[PHashMap::bucket_of(k)];
            bool ok = false;
            for (const auto &o : ob.slot)
                ok |= o.key == k && o.value == s.value;
            if (!ok) {
                std::printf("recovery: mirror of %llu without its original\n", static_cast<unsigned long long>(k));
                return 1;
            }
            mirrors++;
        }
    std::printf("recovery ok: %u mirrors\n", mirrors);
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/spinhash";
    bool recovering = argc > 2 && std::strcmp(argv[2], "recover") == 0;
    int fd = open(path, recovering ? O_RDWR : O_RDWR | O_CREAT, 0644);
    struct stat st;
    if (recovering && (fd < 0 || fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Pool)))) {
        std::printf("recovery ok: no pool\n");
        return 0;
    }
    if (fd < 0 || (!recovering && ftruncate(fd, sizeof(Pool)) != 0)) {
        std::perror(path);
        return 1;
    }
    void *m = mmap(nullptr, sizeof(Pool), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        std::perror("mmap");
        return 1;
    }
    auto *pool = static_cast<Pool *>(m);
    if (recovering)
        return recover(pool);
    PHashMap map(pool);
    pthread_t l, r;
    pthread_create(&l, nullptr, loader, &map);
    pthread_create(&r, nullptr, mirror, &map);
    pthread_join(l, nullptr);
    pthread_join(r, nullptr);
    uint64_t v = 0;
    map.get(kKeys + kMirror, &v);
    std::printf("mirrored %llu\n", static_cast<unsigned long long>(v));
    return 0;
}
