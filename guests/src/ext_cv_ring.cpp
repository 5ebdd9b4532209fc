// ext_cv_ring: a bounded producer/consumer queue whose ring lives in PM, written the way a C++
// developer writes one (built -O2): std::thread, std::mutex, std::unique_lock and two
// std::condition_variables (not_full / not_empty), the ring mapped from a file with mmap and
// made durable with _mm_clwb + _mm_sfence. A producer pushes 16 jobs; the consumer pops them
// and appends each to a PM results log (persisted inside its critical section).
//   - BUG (this file): push() persists the slot and the tail after the unique_lock's scope
//     ends (and after notify_one): the consumer, woken, loads them under the mutex before they
//     are durable and copies the job into its durable log (SLOT_STORE/SLOT_LOAD,
//     TAIL_STORE/TAIL_LOAD); a crash in between leaves a logged job the ring never held.
//   - FIXED (ext_cv_ring_fixed, built with -DFIXED): persisted inside the critical section.
// Usage: ext_cv_ring [POOL]; prints `consumed 16 sum 1360`, exits 0.
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <immintrin.h>
#include <mutex>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

namespace {

constexpr unsigned kCap = 4;
constexpr unsigned kJobs = 16;

struct Ring {
    uint64_t head;
    uint64_t tail;
    uint64_t pad[6];
    uint64_t slot[kCap];
    uint64_t pad2[8 - kCap];
    uint64_t log_len;
    uint64_t pad3[7];
    uint64_t log[kJobs];
};

__attribute__((target("clwb"))) void persist(const void *p, size_t n)
{
    auto a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(63);
    for (; a < reinterpret_cast<uintptr_t>(p) + n; a += 64)
        _mm_clwb(reinterpret_cast<void *>(a));
    _mm_sfence();
}

class PmQueue {
  public:
    explicit PmQueue(Ring *r) : r_(r) {}

    void push(uint64_t job)
    {
        uint64_t t;
        {
            std::unique_lock<std::mutex> lk(m_);
            not_full_.wait(lk, [&] { return r_->tail - r_->head < kCap; }); // TAIL_LOAD: producer
            t = r_->tail;
            r_->slot[t % kCap] = job; // SLOT_STORE
            r_->tail = t + 1;         // TAIL_STORE
#ifdef FIXED
            persist(&r_->slot[t % kCap], sizeof(uint64_t));
            persist(&r_->tail, sizeof(uint64_t)); // FIX: durable inside the critical section
#endif
        }
        not_empty_.notify_one();
#ifndef FIXED
        persist(&r_->slot[t % kCap], sizeof(uint64_t));
        persist(&r_->tail, sizeof(uint64_t)); // BUG: durable only after the lock's scope ended
#endif
    }

    uint64_t pop()
    {
        std::unique_lock<std::mutex> lk(m_);
        not_empty_.wait(lk, [&] { return r_->head != r_->tail; }); // TAIL_LOAD: consumer
        uint64_t h = r_->head;
        uint64_t job = r_->slot[h % kCap]; // SLOT_LOAD
        r_->log[r_->log_len] = job;        // EFFECT: the job logged durably
        persist(&r_->log[r_->log_len], sizeof(uint64_t));
        r_->log_len++;
        persist(&r_->log_len, sizeof(uint64_t));
        r_->head = h + 1;
        persist(&r_->head, sizeof(uint64_t));
        lk.unlock();
        not_full_.notify_one();
        return job;
    }

  private:
    Ring *r_;
    std::mutex m_;
    std::condition_variable not_full_, not_empty_;
};

} // namespace

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/cvring";
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, sizeof(Ring)) != 0) {
        perror(path);
        return 1;
    }
    void *p = mmap(nullptr, sizeof(Ring), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    auto *ring = static_cast<Ring *>(p);
    PmQueue q(ring);
    uint64_t sum = 0, consumed = 0;
    std::thread producer([&] {
        for (uint64_t j = 1; j <= kJobs; j++)
            q.push(j * 10);
    });
    std::thread consumer([&] {
        for (unsigned i = 0; i < kJobs; i++) {
            sum += q.pop();
            consumed++;
        }
    });
    producer.join();
    consumer.join();
    std::printf("consumed %llu sum %llu\n", (unsigned long long)consumed, (unsigned long long)sum);
    munmap(p, sizeof(Ring));
    close(fd);
    return 0;
}
