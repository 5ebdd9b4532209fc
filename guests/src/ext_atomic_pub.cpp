// ext_atomic_pub: PM records published through C++ atomics, written the way a C++ developer
// writes lock-free publication (built -O2, where release stores and acquire loads are plain
// `mov`s): a writer fills a record in a PM array, then publishes it twice, through a DRAM
// `std::atomic<Record *> latest` (memory_order_release) for readers in this process and
// through the PM header's `std::atomic<uint64_t> count` (memory_order_release, then clwb +
// sfence) for recovery. A reader spins on `latest` (memory_order_acquire) and copies each new
// record into a PM audit trail that it persists.
//   - BUG (this file): the writer persists the count before the record (the flag durable
//     first), and persists the record only after publishing it: recovery can find a counted
//     record that is zero (COUNT_PERSIST / REC_STORE), and the reader copies the record into
//     its durable audit before the record is durable (REC_STORE / REC_LOAD).
//   - FIXED (ext_atomic_pub_fixed, built with -DFIXED): the record persisted before either
//     publication.
// Usage: ext_atomic_pub [POOL]         formats POOL, prints `published 8`, exits 0
//        ext_atomic_pub POOL check     checks the counted records: `recovered: N records`, or
//                                      `recovered: torn record I` and exit 1.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

namespace {

constexpr unsigned kRecords = 8;

struct Record {
    uint64_t id;
    uint64_t amount;
    uint64_t check;
    uint64_t pad[5];
};

struct Pool {
    std::atomic<uint64_t> count;
    uint64_t pad[7];
    Record rec[kRecords];
    uint64_t audit_len;
    uint64_t pad2[7];
    uint64_t audit[kRecords];
};

__attribute__((target("clwb"))) inline void persist(const void *p, size_t n)
{
    auto a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(63);
    for (; a < reinterpret_cast<uintptr_t>(p) + n; a += 64)
        _mm_clwb(reinterpret_cast<void *>(a));
    _mm_sfence();
}

std::atomic<Record *> latest{nullptr};

void writer(Pool *pool)
{
    for (uint64_t i = 0; i < kRecords; i++) {
        Record &r = pool->rec[i];
        r.id = i + 1;                        // REC_STORE: id
        r.amount = (i + 1) * 25;             // REC_STORE: amount
        r.check = r.id ^ r.amount ^ 0xfeed; // REC_STORE: check
#ifdef FIXED
        persist(&r, sizeof r); // FIX: the record durable before it is published
#endif
        latest.store(&r, std::memory_order_release);
        pool->count.store(i + 1, std::memory_order_release);
        persist(&pool->count, sizeof pool->count); // COUNT_PERSIST: the flag made durable
#ifndef FIXED
        persist(&r, sizeof r); // BUG: the record durable only after its flag
#endif
        std::this_thread::yield();
    }
}

void reader(Pool *pool)
{
    const Record *seen = nullptr;
    while (pool->audit_len < kRecords) {
        const Record *r = latest.load(std::memory_order_acquire);
        if (r == nullptr || r == seen) {
            std::this_thread::yield();
            continue;
        }
        seen = r;
        uint64_t entry = r->id << 32 | r->amount;      // REC_LOAD
        pool->audit[pool->audit_len] = entry;          // EFFECT: the audit entry
        persist(&pool->audit[pool->audit_len], sizeof entry);
        pool->audit_len++;
        persist(&pool->audit_len, sizeof pool->audit_len);
        if (r->id == kRecords)
            break;
    }
}

int check(const Pool *pool)
{
    uint64_t n = pool->count.load();
    if (n > kRecords) {
        std::printf("recovered: bad count\n");
        return 1;
    }
    for (uint64_t i = 0; i < n; i++) {
        const Record &r = pool->rec[i];
        if (r.id != i + 1 || r.check != (r.id ^ r.amount ^ 0xfeed)) {
            std::printf("recovered: torn record %llu\n", (unsigned long long)i);
            return 1;
        }
    }
    std::printf("recovered: %llu records\n", (unsigned long long)n);
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/atomicpub";
    bool recover = argc > 2 && std::strcmp(argv[2], "check") == 0;
    int fd = open(path, recover ? O_RDWR : O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || (!recover && ftruncate(fd, sizeof(Pool)) != 0)) {
        std::perror(path);
        return 2;
    }
    void *p = mmap(nullptr, sizeof(Pool), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        std::perror("mmap");
        return 2;
    }
    auto *pool = static_cast<Pool *>(p);
    if (recover)
        return check(pool);
    std::thread w(writer, pool), r(reader, pool);
    w.join();
    r.join();
    // How many records the reader saw depends on the schedule; only the count is printed.
    std::printf("published %llu\n", (unsigned long long)pool->count.load());
    munmap(p, sizeof(Pool));
    close(fd);
    return 0;
}
