//! Synchronisation functions the machine recognises by address, so that lock acquisitions,
//! releases and ordering operations enter the event stream.
//!
//! The machine reports a call to a recognised function twice: at its entry
//! ([`crate::events::EventKind::SyncEnter`], with the first two arguments) and when it returns
//! ([`crate::events::EventKind::SyncReturn`], with the return value). A release is therefore seen
//! when the unlock call is entered and an acquisition when the lock call returns, which is what
//! lockset and happens-before analyses need (HawkSet, Vardalith, OSCS, HMTRace all define their
//! windows that way). Functions are found by symbol in every loaded object (pthreads, POSIX semaphores, and the
//! allocation functions malloc/calloc/realloc/free, reported the same way) or
//! named by the user (custom locks: acquire, try-acquire with its success value, release).
//!
//! What this cannot see: a lock taken by inlined code or a hand-written spin loop that is not
//! named as a custom lock, and a function reached by a tail jump rather than a call.

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
    ];

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
