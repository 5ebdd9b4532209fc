// apex19: a compact stand-in for XiangpengHao/epoch-reclaimer's EpochManager
// (the stored index has only its CMakeLists). Same interface and rule as the
// original (Bw-tree/PMwCAS lineage): a global current epoch, each thread
// publishes the epoch it entered (Protect) and leaves (Unprotect); an epoch is
// safe to reclaim when it is older than every protected epoch.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstddef>
#include <pthread.h>

typedef uint64_t Epoch;
#define IS_POWER_OF_TWO(x) ((x) && !((x) & ((x) - 1)))

class EpochManager {
 public:
  static const int kSlots = 256;
  struct alignas(64) Entry {
    std::atomic<uint64_t> protected_epoch{0};
    std::atomic<uint64_t> owner{0};
  };

  EpochManager() : current_epoch_(1), safe_to_reclaim_epoch_(0) {}

  bool Initialize() {
    current_epoch_ = 1;
    safe_to_reclaim_epoch_ = 0;
    return true;
  }

  bool Protect() {
    Entry* e = MyEntry();
    e->protected_epoch.store(current_epoch_.load(std::memory_order_seq_cst),
                             std::memory_order_seq_cst);
    return true;
  }

  bool Unprotect() {
    MyEntry()->protected_epoch.store(0, std::memory_order_release);
    return true;
  }

  Epoch GetCurrentEpoch() { return current_epoch_.load(std::memory_order_seq_cst); }

  bool IsSafeToReclaim(Epoch epoch) {
    return epoch <= safe_to_reclaim_epoch_.load(std::memory_order_relaxed);
  }

  void BumpCurrentEpoch() {
    Epoch newEpoch = current_epoch_.fetch_add(1, std::memory_order_seq_cst) + 1;
    ComputeNewSafeToReclaimEpoch(newEpoch);
  }

  void ComputeNewSafeToReclaimEpoch(Epoch currentEpoch) {
    Epoch oldest = currentEpoch;
    for (int i = 0; i < kSlots; ++i) {
      Epoch e = table_[i].protected_epoch.load(std::memory_order_acquire);
      if (e != 0 && e < oldest) oldest = e;
    }
    safe_to_reclaim_epoch_.store(oldest - 1, std::memory_order_release);
  }

 private:
  Entry* MyEntry() {
    static thread_local Entry* mine = nullptr;
    if (mine) return mine;
    uint64_t me = (uint64_t)pthread_self();
    for (;;) {
      for (int i = 0; i < kSlots; ++i) {
        uint64_t expected = 0;
        if (table_[i].owner.compare_exchange_strong(expected, me)) {
          mine = &table_[i];
          return mine;
        }
      }
    }
  }

  std::atomic<Epoch> current_epoch_;
  std::atomic<Epoch> safe_to_reclaim_epoch_;
  Entry table_[kSlots];
};

class EpochGuard {
 public:
  explicit EpochGuard(EpochManager* m) : m_(m), unprotect_(true) { m_->Protect(); }
  EpochGuard(EpochGuard&& o) : m_(o.m_), unprotect_(o.unprotect_) { o.unprotect_ = false; }
  ~EpochGuard() { if (unprotect_ && m_) m_->Unprotect(); }
 private:
  EpochManager* m_;
  bool unprotect_;
};
