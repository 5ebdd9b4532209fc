// ext_shared_mutex: a C++ class owning a PM table, guarded by a std::shared_mutex, as an
// application developer writes one (built -O2): writers take std::unique_lock, readers
// std::shared_lock (libstdc++ implements both with pthread_rwlock_t), and a second member, an
// audit journal, is appended under a std::mutex with std::lock_guard and persisted inside its
// scope. Persistence is _mm_clwb + _mm_sfence. Two writers update slots, two readers sum them.
//   - BUG (this file): set() persists the slot after the unique_lock's scope ends, so a reader
//     under the shared lock can load it before it is durable (STORE / LOAD lines).
//   - FIXED (ext_shared_mutex_fixed, built with -DFIXED): persisted inside the scope.
// The journal is correct in both.
// Usage: ext_shared_mutex [POOL]; prints the readers' total and the journal length, exits 0.
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <immintrin.h>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

__attribute__((target("clwb"))) void persist_range(const void *p, size_t len)
{
    auto a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(63);
    auto end = reinterpret_cast<uintptr_t>(p) + len;
    for (; a < end; a += 64)
        _mm_clwb(reinterpret_cast<void *>(a));
    _mm_sfence();
}

struct Layout {
    uint64_t slots[16];
    uint64_t journal_len;
    uint64_t pad[7];
    uint64_t journal[64];
};

class PmTable {
public:
    explicit PmTable(Layout *pm) : pm_(pm) {}

    void set(unsigned i, uint64_t v)
    {
        {
            std::unique_lock<std::shared_mutex> guard(mu_);
            pm_->slots[i] = v; /* STORE: under the unique lock */
#ifdef FIXED
            persist_range(&pm_->slots[i], sizeof(uint64_t)); /* FIX: inside the scope */
#endif
        }
#ifndef FIXED
        persist_range(&pm_->slots[i], sizeof(uint64_t)); /* BUG: after the scope unlocked */
#endif
        log(i);
    }

    uint64_t get(unsigned i) const
    {
        std::shared_lock<std::shared_mutex> guard(mu_);
        return pm_->slots[i]; /* LOAD: under the shared lock */
    }

    uint64_t journal_length() const
    {
        std::lock_guard<std::mutex> g(journal_mu_);
        return pm_->journal_len;
    }

private:
    void log(unsigned i)
    {
        std::lock_guard<std::mutex> g(journal_mu_);
        uint64_t n = pm_->journal_len;
        if (n < 64) {
            pm_->journal[n] = i;
            persist_range(&pm_->journal[n], sizeof(uint64_t));
            pm_->journal_len = n + 1;
            persist_range(&pm_->journal_len, sizeof(uint64_t));
        }
    }

    Layout *pm_;
    mutable std::shared_mutex mu_;
    mutable std::mutex journal_mu_;
};

} // namespace

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/table";
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror(path);
        return 1;
    }
    void *map = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    auto *pm = new (map) Layout{};
    persist_range(pm, sizeof *pm);
    PmTable table(pm);

    uint64_t totals[2] = {0, 0};
    std::vector<std::thread> threads;
    for (unsigned w = 0; w < 2; w++)
        threads.emplace_back([&table, w] {
            for (unsigned r = 0; r < 8; r++)
                table.set((w * 8 + r) % 16, w * 100 + r + 1);
        });
    for (unsigned rd = 0; rd < 2; rd++)
        threads.emplace_back([&table, &totals, rd] {
            for (unsigned r = 0; r < 3; r++) {
                for (unsigned i = 0; i < 16; i++)
                    totals[rd] += table.get(i) != 0;
                std::this_thread::yield();
            }
        });
    for (auto &t : threads)
        t.join();
    std::printf("journal %llu, readers done\n", (unsigned long long)table.journal_length());
    (void)totals;
    return 0;
}
