//! Synchronisation functions the machine recognises by address, so that lock acquisitions,
//! releases and ordering operations enter the event stream.
//!
//! The machine reports a call to a recognised function twice: at its entry
//! ([`crate::events::EventKind::SyncEnter`], with its arguments) and when it returns
//! ([`crate::events::EventKind::SyncReturn`], with the return value). A release is therefore seen
//! when the unlock call is entered and an acquisition when the lock call returns, which is what
//! lockset and happens-before analyses need (HawkSet, Vardalith, OSCS, HMTRace all define their
//! windows that way). Functions are found by symbol in every loaded object (pthreads, POSIX
//! semaphores, libpmemobj's locks and condition variables, and the allocation functions
//! malloc/calloc/realloc/free, reported the same way) or named by the user (custom locks:
//! acquire, try-acquire with its success value, release).
//!
//! A function is entered when a block starts at its address, reached either by a `call` (the
//! call pushes the frame the function runs in) or by a jump with no call of its own: a PLT stub's
//! indirect jump (bound at start-up or, lazily, by ld.so's resolver on the first call), a tail
//! call (`jmp pthread_mutex_lock` at the end of a wrapper). A jump runs the function in the
//! innermost frame of the shadow call stack, so it returns when that frame does.
//!
//! What this cannot see: a lock taken by inlined code or a hand-written spin loop that is not
//! named as a custom lock.

use serde::{Deserialize, Serialize};

/// What a recognised function does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SyncKind {
    MutexLock,
    /// Succeeds when it returns 0.
    MutexTrylock,
    MutexUnlock,
    RwRdlock,
    RwWrlock,
    RwTryRdlock,
    RwTryWrlock,
    RwUnlock,
    SpinLock,
    SpinTrylock,
    SpinUnlock,
    /// `(cond, mutex)`: releases the mutex at entry, reacquires it at return.
    CondWait,
    CondSignal,
    CondBroadcast,
    BarrierWait,
    SemWait,
    SemTrywait,
    SemPost,
    /// `pthread_join(thread, ...)`: the joined thread's handle is the first argument.
    Join,
    /// A user-named lock function: acquires the lock at its first argument.
    CustomAcquire,
    /// A user-named try-lock: acquires when it returns the given value.
    CustomTryAcquire {
        success: i64,
    },
    CustomRelease,
    /// Memory allocation, recognised like the sync functions so that passes can see allocations
    /// (`malloc(size)`, `calloc(n, size)`, `realloc(ptr, size)`: the return value is the block)
    /// and frees (`free(ptr)`), e.g. to forget the history of freed memory.
    Malloc,
    Calloc,
    Realloc,
    Free,
    /// libpmemobj's lock functions (`pmemobj_mutex_lock`, `pmemobj_rwlock_wrlock`, ...): their
    /// lock lives in PM and PMDK reinitialises it when the pool is opened.
    PmemobjLock,
    /// `pmemobj_rwlock_rdlock` and its timed and try variants: shared.
    PmemobjRdlock,
    PmemobjUnlock,
    /// `pmemobj_cond_wait(pop, cond, mutex)` and `pmemobj_cond_timedwait`: release the
    /// `PMEMmutex` at entry and reacquire it at return, like [`SyncKind::CondWait`].
    PmemobjCondWait,
    PmemobjCondSignal,
    PmemobjCondBroadcast,
    /// A libpmemobj function that holds one of the pool's lanes while it runs: the atomic
    /// allocations and frees, the atomic list operations, `pmemobj_publish`, `pmemobj_defrag`
    /// and the root object's (re)allocation. Analyses take its entry as a lane hold and its
    /// return as the lane's release, as they take the transaction events (pmemcheck's
    /// `START_TX`/`END_TX`, which PMDK issues around the lane hold of a transaction): see
    /// docs/pmdk.md.
    PmemobjLane,
}

impl SyncKind {
    /// The standard functions, by the symbol names glibc's static and shared libraries export.
    pub const STANDARD: &'static [(&'static str, SyncKind)] = &[
        ("pthread_mutex_lock", SyncKind::MutexLock),
        ("pthread_mutex_timedlock", SyncKind::MutexLock),
        ("pthread_mutex_clocklock", SyncKind::MutexLock),
        ("pthread_mutex_trylock", SyncKind::MutexTrylock),
        ("pthread_mutex_unlock", SyncKind::MutexUnlock),
        ("pthread_rwlock_rdlock", SyncKind::RwRdlock),
        ("pthread_rwlock_timedrdlock", SyncKind::RwRdlock),
        ("pthread_rwlock_wrlock", SyncKind::RwWrlock),
        ("pthread_rwlock_timedwrlock", SyncKind::RwWrlock),
        ("pthread_rwlock_tryrdlock", SyncKind::RwTryRdlock),
        ("pthread_rwlock_trywrlock", SyncKind::RwTryWrlock),
        ("pthread_rwlock_unlock", SyncKind::RwUnlock),
        ("pthread_spin_lock", SyncKind::SpinLock),
        ("pthread_spin_trylock", SyncKind::SpinTrylock),
        ("pthread_spin_unlock", SyncKind::SpinUnlock),
        ("pthread_cond_wait", SyncKind::CondWait),
        ("pthread_cond_timedwait", SyncKind::CondWait),
        ("pthread_cond_clockwait", SyncKind::CondWait),
        ("pthread_cond_signal", SyncKind::CondSignal),
        ("pthread_cond_broadcast", SyncKind::CondBroadcast),
        ("pthread_barrier_wait", SyncKind::BarrierWait),
        ("sem_wait", SyncKind::SemWait),
        ("sem_timedwait", SyncKind::SemWait),
        ("sem_clockwait", SyncKind::SemWait),
        ("sem_trywait", SyncKind::SemTrywait),
        ("sem_post", SyncKind::SemPost),
        ("pthread_join", SyncKind::Join),
        ("pthread_timedjoin_np", SyncKind::Join),
        ("pthread_clockjoin_np", SyncKind::Join),
        ("malloc", SyncKind::Malloc),
        ("calloc", SyncKind::Calloc),
        ("realloc", SyncKind::Realloc),
        ("free", SyncKind::Free),
        ("pmemobj_mutex_lock", SyncKind::PmemobjLock),
        ("pmemobj_mutex_timedlock", SyncKind::PmemobjLock),
        ("pmemobj_mutex_trylock", SyncKind::PmemobjLock),
        ("pmemobj_rwlock_rdlock", SyncKind::PmemobjRdlock),
        ("pmemobj_rwlock_wrlock", SyncKind::PmemobjLock),
        ("pmemobj_rwlock_timedrdlock", SyncKind::PmemobjRdlock),
        ("pmemobj_rwlock_timedwrlock", SyncKind::PmemobjLock),
        ("pmemobj_rwlock_tryrdlock", SyncKind::PmemobjRdlock),
        ("pmemobj_rwlock_trywrlock", SyncKind::PmemobjLock),
        ("pmemobj_mutex_unlock", SyncKind::PmemobjUnlock),
        ("pmemobj_rwlock_unlock", SyncKind::PmemobjUnlock),
        ("pmemobj_cond_wait", SyncKind::PmemobjCondWait),
        ("pmemobj_cond_timedwait", SyncKind::PmemobjCondWait),
        ("pmemobj_cond_signal", SyncKind::PmemobjCondSignal),
        ("pmemobj_cond_broadcast", SyncKind::PmemobjCondBroadcast),
        // Every exported function of libpmemobj 1.12 that reaches `lane_hold` outside a
        // transaction (its call graph, from the symbols of Debian's libpmemobj.a).
        ("pmemobj_alloc", SyncKind::PmemobjLane),
        ("pmemobj_xalloc", SyncKind::PmemobjLane),
        ("pmemobj_zalloc", SyncKind::PmemobjLane),
        ("pmemobj_realloc", SyncKind::PmemobjLane),
        ("pmemobj_zrealloc", SyncKind::PmemobjLane),
        ("pmemobj_strdup", SyncKind::PmemobjLane),
        ("pmemobj_wcsdup", SyncKind::PmemobjLane),
        ("pmemobj_free", SyncKind::PmemobjLane),
        ("pmemobj_root", SyncKind::PmemobjLane),
        ("pmemobj_root_construct", SyncKind::PmemobjLane),
        ("pmemobj_publish", SyncKind::PmemobjLane),
        ("pmemobj_defrag", SyncKind::PmemobjLane),
        ("pmemobj_list_insert", SyncKind::PmemobjLane),
        ("pmemobj_list_insert_new", SyncKind::PmemobjLane),
        ("pmemobj_list_remove", SyncKind::PmemobjLane),
        ("pmemobj_list_move", SyncKind::PmemobjLane),
    ];

    /// libpmemobj's functions, which take the pool first and the lock or condition variable
    /// second (`pmemobj_mutex_lock(pop, mutexp)`, `pmemobj_cond_wait(pop, condp, mutexp)`): their
    /// events name the object they synchronise on, not the pool (see
    /// [`crate::events::EventKind::SyncEnter`]).
    pub fn is_pmemobj(self) -> bool {
        matches!(
            self,
            SyncKind::PmemobjLock
                | SyncKind::PmemobjRdlock
                | SyncKind::PmemobjUnlock
                | SyncKind::PmemobjCondWait
                | SyncKind::PmemobjCondSignal
                | SyncKind::PmemobjCondBroadcast
        )
    }

    /// A condition wait, pthread's or libpmemobj's: releases the mutex at entry, reacquires it
    /// at return.
    pub fn is_cond_wait(self) -> bool {
        matches!(self, SyncKind::CondWait | SyncKind::PmemobjCondWait)
    }

    /// A condition signal or broadcast, pthread's or libpmemobj's.
    pub fn is_cond_signal(self) -> bool {
        matches!(
            self,
            SyncKind::CondSignal
                | SyncKind::CondBroadcast
                | SyncKind::PmemobjCondSignal
                | SyncKind::PmemobjCondBroadcast
        )
    }

    /// The event fields `(addr, old, new)` of an entry with the integer arguments `args`
    /// (RDI, RSI, RDX): the first two arguments, or for libpmemobj's functions the object (the
    /// second), the third argument (a condition wait's mutex) and the pool.
    pub fn entry_fields(self, args: [u64; 3]) -> (u64, u64, u64) {
        if self.is_pmemobj() {
            (args[1], args[2], args[0])
        } else {
            (args[0], args[1], 0)
        }
    }

    /// Whether a call that returned `ret` acquired what it set out to.
    pub fn succeeded(self, ret: u64) -> bool {
        match self {
            SyncKind::CustomTryAcquire { success } => ret as i64 == success,
            SyncKind::CustomAcquire | SyncKind::CustomRelease => true,
            // pthread functions return 0 on success (the barrier's serial thread returns
            // PTHREAD_BARRIER_SERIAL_THREAD = -1, also a success); sem_* return 0.
            SyncKind::BarrierWait => ret as i32 == 0 || ret as i32 == -1,
            _ => ret as i32 == 0,
        }
    }
}

/// A custom lock function from the user's configuration (RON), HawkSet-style.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomLock {
    pub symbol: String,
    pub kind: CustomLockKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CustomLockKind {
    Acquire,
    TryAcquire { success: i64 },
    Release,
}

impl CustomLockKind {
    pub fn sync_kind(self) -> SyncKind {
        match self {
            CustomLockKind::Acquire => SyncKind::CustomAcquire,
            CustomLockKind::TryAcquire { success } => SyncKind::CustomTryAcquire { success },
            CustomLockKind::Release => SyncKind::CustomRelease,
        }
    }
}
