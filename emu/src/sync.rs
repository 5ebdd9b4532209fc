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
    /// `pthread_mutex_lock` (and its timed variants: success when it returns 0).
    MutexLock,
    /// Succeeds when it returns 0.
    MutexTrylock,
    /// `pthread_mutex_unlock`.
    MutexUnlock,
    /// `pthread_rwlock_rdlock` (and its timed variants): shared.
    RwRdlock,
    /// `pthread_rwlock_wrlock` (and its timed variants): exclusive.
    RwWrlock,
    /// `pthread_rwlock_tryrdlock`: shared, succeeds when it returns 0.
    RwTryRdlock,
    /// `pthread_rwlock_trywrlock`: exclusive, succeeds when it returns 0.
    RwTryWrlock,
    /// `pthread_rwlock_unlock`.
    RwUnlock,
    /// `pthread_spin_lock`.
    SpinLock,
    /// `pthread_spin_trylock`: succeeds when it returns 0.
    SpinTrylock,
    /// `pthread_spin_unlock`.
    SpinUnlock,
    /// `(cond, mutex)`: releases the mutex at entry, reacquires it at return.
    CondWait,
    /// `pthread_cond_signal(cond)`.
    CondSignal,
    /// `pthread_cond_broadcast(cond)`.
    CondBroadcast,
    /// `pthread_barrier_wait(barrier)`: its arrivals of one round happen before its departures.
    BarrierWait,
    /// `sem_wait(sem)` and `sem_timedwait`: succeeds when it returns 0.
    SemWait,
    /// `sem_trywait(sem)`: succeeds when it returns 0.
    SemTrywait,
    /// `sem_post(sem)`.
    SemPost,
    /// `pthread_join(thread, ...)`: the joined thread's handle is the first argument.
    Join,
    /// `pthread_once(control, init)` (and C11 `call_once`, which glibc implements by a jump to
    /// it): every return happens after the init routine's completion.
    Once,
    /// A lock function named in the user's configuration (`--config`, HawkSet's custom locks):
    /// which argument is the lock, how it is held and how success is told ([`CustomSpec`]).
    Custom(CustomSpec),
    /// A C library routine that reads strings or bounded memory for its caller (`strcmp`,
    /// `strlen`, `memcpy`, ... and their vector variants): its entry reports which bytes its
    /// contract reads ([`ReadContract`]), so that wider vector loads past a terminator are not
    /// taken for reads of the next object.
    Reads(ReadContract),
    /// Memory allocation, recognised like the sync functions so that passes can see allocations
    /// (`malloc(size)`, `calloc(n, size)`, `realloc(ptr, size)`: the return value is the block)
    /// and frees (`free(ptr)`), e.g. to forget the history of freed memory.
    Malloc,
    /// `calloc(n, size)`.
    Calloc,
    /// `realloc(ptr, size)`.
    Realloc,
    /// `free(ptr)`.
    Free,
    /// libpmemobj's lock functions (`pmemobj_mutex_lock`, `pmemobj_rwlock_wrlock`, ...): their
    /// lock lives in PM and PMDK reinitialises it when the pool is opened.
    PmemobjLock,
    /// `pmemobj_rwlock_rdlock` and its timed and try variants: shared.
    PmemobjRdlock,
    /// `pmemobj_mutex_unlock` and `pmemobj_rwlock_unlock`.
    PmemobjUnlock,
    /// `pmemobj_cond_wait(pop, cond, mutex)` and `pmemobj_cond_timedwait`: release the
    /// `PMEMmutex` at entry and reacquire it at return, like [`SyncKind::CondWait`].
    PmemobjCondWait,
    /// `pmemobj_cond_signal(pop, cond)`.
    PmemobjCondSignal,
    /// `pmemobj_cond_broadcast(pop, cond)`.
    PmemobjCondBroadcast,
    /// A libpmemobj function that holds one of the pool's lanes while it runs: the atomic
    /// allocations and frees, the atomic list operations, `pmemobj_publish`, `pmemobj_defrag`
    /// and the root object's (re)allocation. Analyses take its entry as a lane hold and its
    /// return as the lane's release, as they take the transaction events (pmemcheck's
    /// `START_TX`/`END_TX`, which PMDK issues around the lane hold of a transaction): see
    /// docs/pmdk.md.
    PmemobjLane,
    /// `pmemobj_alloc(pop, oidp, size, ...)`, `pmemobj_zalloc` and `pmemobj_xalloc`: a lane
    /// section like [`SyncKind::PmemobjLane`] that also hands out an object. The entry's
    /// `addr` is the pool (`pop`), `old` the size asked for; the return's `new` is the object's
    /// offset in the pool (`oidp->off`, 0 when it failed or `oidp` is NULL) and its `dev` the
    /// object's device address (`pop + off` in a PM window; 0 outside one), so that passes can
    /// tell fresh memory from memory the pool had handed out and freed before.
    PmemobjAlloc,
    /// `pmemobj_free(oidp)`: a lane section like [`SyncKind::PmemobjLane`] that ends an
    /// object's life. Its entry is preceded by a [`crate::events::EventKind::Free`] of the
    /// object (found from the `PMEMoid` and its allocation header), so that passes can forget
    /// what threads did to its bytes before it is handed out again.
    PmemobjFree,
    // ---------------------------------------------------------------- OpenMP (libgomp)
    // gcc's OpenMP runtime, recognised by the symbols gcc's code calls (see [`SyncKind::omp`]
    // and docs/analyses/hmtrace.md, "OpenMP"). The event's fields per kind are given with each.
    /// `GOMP_parallel`, `GOMP_parallel_loop_*`, `GOMP_parallel_sections`,
    /// `GOMP_parallel_reductions` (`fn, data, num_threads, ...`): a parallel region forks at
    /// entry and joins at return. `addr` = the region's body function, `old` = its data pointer,
    /// `new` = its `num_threads` argument (0: the default; 1 for `if(0)` or `num_threads(1)`).
    OmpParallel,
    /// An outlined body of gcc's (`NAME._omp_fn.N`): a parallel region's or a task's code,
    /// called by libgomp with one argument. `addr` = the argument, `old` = its first 8 bytes
    /// (0 if unreadable), `new` = the stack pointer at entry; the event's `pc` is the function.
    OmpBody,
    /// A team barrier: `GOMP_barrier`, and the implicit ones of `GOMP_loop_end`,
    /// `GOMP_sections_end` and their `_cancel` variants.
    OmpBarrier,
    /// A mutual exclusion entered (at return): `critical` (unnamed, named), `atomic`'s global
    /// lock, `ordered`, `omp_set_lock`/`omp_set_nest_lock`. `addr` = the lock object.
    OmpAcquire(OmpLock),
    /// `omp_test_lock`/`omp_test_nest_lock`: acquired when it returns non-zero.
    OmpTryAcquire,
    /// The matching exits: `GOMP_critical_end`, `GOMP_critical_name_end`, `GOMP_atomic_end`,
    /// `GOMP_ordered_end`, `omp_unset_lock`, `omp_unset_nest_lock` (a release at entry).
    OmpRelease(OmpLock),
    /// `GOMP_task(fn, data, cpyfn, arg_size, arg_align, if, flags, depend, ...)`: a task is
    /// created at entry. `addr` = `fn`, `old` = the first `min(arg_size, 8)` bytes of `data`
    /// (what its body's argument starts with), `new` = its dependences as two 28-bit Bloom
    /// filters of addresses (out/inout in bits 0–27, in in bits 28–55) and `min(arg_size, 255)`
    /// in bits 56–63 ([`omp_depend_bits`]).
    OmpTask,
    /// `GOMP_taskwait`: the creator's children are complete when it returns.
    OmpTaskwait,
    /// `GOMP_taskwait_depend(depend)` (`taskwait depend(...)`, OpenMP 5.0): the creator's
    /// children whose dependences conflict with `depend` are complete when it returns. `new` =
    /// the dependences as [`SyncKind::OmpTask`] gives them ([`omp_depend_bits`]).
    OmpTaskwaitDepend,
    /// `GOMP_taskgroup_start`.
    OmpTaskgroupStart,
    /// `GOMP_taskgroup_end`: the group's tasks and their descendants are complete when it
    /// returns.
    OmpTaskgroupEnd,
    /// `GOMP_taskloop(fn, data, cpyfn, arg_size, arg_align, flags, ...)` and `_ull`: tasks of
    /// the body `fn` created at entry, complete at return unless `nogroup`. `addr` = `fn`,
    /// `old` = `flags`.
    OmpTaskloop,
    /// `GOMP_sections_start`, `GOMP_sections_next`: the section it returns (0: none left)
    /// runs until the thread's next call of them or the sections' end. `new` = the stack
    /// pointer at entry.
    OmpSectionsNext,
    /// `GOMP_sections_end_nowait`: the thread's last section ends.
    OmpSectionsEnd,
    /// `GOMP_single_copy_start` (`single copyprivate`): returns NULL to the thread that runs
    /// the single region, and to the others, after a barrier, the winner's data (the winner
    /// meets that barrier in `GOMP_single_copy_end`, a [`SyncKind::OmpBarrier`]).
    OmpSingleCopyStart,
    /// `omp_set_num_threads(n)`: the team size of the calling thread's later regions without a
    /// `num_threads` clause. `addr` = `n`.
    OmpSetNumThreads,
    /// Any other `GOMP_*` entry point (work sharing, `single`, loop scheduling, ...): libgomp's
    /// own code, whose internal synchronisation is not the program's.
    OmpRuntime,
}

/// The lock object of an OpenMP mutual exclusion ([`SyncKind::OmpAcquire`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OmpLock {
    /// The unnamed `critical` (one lock for the program).
    Critical,
    /// A named `critical`: `GOMP_critical_name_start(void **pptr)`, the lock is `pptr`.
    Named,
    /// `atomic` done under libgomp's global lock (`GOMP_atomic_start`).
    Atomic,
    /// `ordered` (`GOMP_ordered_start`): one lock, taken in iteration order.
    Ordered,
    /// An `omp_lock_t` or `omp_nest_lock_t`: the first argument.
    Lock,
}

/// Fixed objects of the OpenMP locks that have no address of their own: page zero, which no
/// guest object occupies.
pub const OMP_CRITICAL_OBJ: u64 = 0x10;
/// See [`OMP_CRITICAL_OBJ`].
pub const OMP_ATOMIC_OBJ: u64 = 0x20;
/// See [`OMP_CRITICAL_OBJ`].
pub const OMP_ORDERED_OBJ: u64 = 0x30;

/// libgomp's task flags (`libgomp.h`): the task has a `depend` array.
const GOMP_TASK_FLAG_DEPEND: u64 = 1 << 3;
/// Most dependences of one task read.
const OMP_MAX_DEPENDS: u64 = 64;

/// The bit of a dependence address in a 28-bit Bloom filter.
pub fn omp_depend_bit(addr: u64) -> u64 {
    1 << ((addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % 28)
}

/// A task's dependences as [`SyncKind::OmpTask`] reports them: the out/inout (and
/// mutexinoutset, inoutset, depobj: treated as out) addresses in bits 0–27, the in ones in
/// bits 28–55, read from gcc's `depend` array (`[n, nout, addrs...]`, or with `depend[0] == 0`
/// the OpenMP 5 layout `[0, n, nout, nmutexinoutset, nin, addrs...]`).
pub fn omp_depend_bits(depend: u64, read: &mut dyn FnMut(u64, &mut [u8]) -> bool) -> u64 {
    let mut word = |i: u64| {
        let mut b = [0u8; 8];
        if read(depend.wrapping_add(8 * i), &mut b) {
            u64::from_le_bytes(b)
        } else {
            0
        }
    };
    let (n, first, out_end, in_end) = match word(0) {
        0 => {
            let (n, nout, nmut, nin) = (word(1), word(2), word(3), word(4));
            (n, 5, nout + nmut, nout + nmut + nin)
        }
        n => (n, 2, word(1), n),
    };
    let mut bits = 0;
    for i in 0..n.min(OMP_MAX_DEPENDS) {
        let a = word(first + i);
        let inn = i >= out_end && i < in_end;
        bits |= omp_depend_bit(a) << if inn { 28 } else { 0 };
    }
    bits
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
        ("pthread_once", SyncKind::Once),
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
        ("pmemobj_alloc", SyncKind::PmemobjAlloc),
        ("pmemobj_xalloc", SyncKind::PmemobjAlloc),
        ("pmemobj_zalloc", SyncKind::PmemobjAlloc),
        ("pmemobj_realloc", SyncKind::PmemobjLane),
        ("pmemobj_zrealloc", SyncKind::PmemobjLane),
        ("pmemobj_strdup", SyncKind::PmemobjLane),
        ("pmemobj_wcsdup", SyncKind::PmemobjLane),
        ("pmemobj_free", SyncKind::PmemobjFree),
        ("pmemobj_root", SyncKind::PmemobjLane),
        ("pmemobj_root_construct", SyncKind::PmemobjLane),
        ("pmemobj_publish", SyncKind::PmemobjLane),
        ("pmemobj_defrag", SyncKind::PmemobjLane),
        ("pmemobj_list_insert", SyncKind::PmemobjLane),
        ("pmemobj_list_insert_new", SyncKind::PmemobjLane),
        ("pmemobj_list_remove", SyncKind::PmemobjLane),
        ("pmemobj_list_move", SyncKind::PmemobjLane),
    ];

    /// libgomp's entry points by symbol (static `libgomp.a` and the shared `libgomp.so.1`, whose
    /// lock functions are versioned: `omp_set_lock@@OMP_3.0` and `@OMP_1.0` share one
    /// address). Every other `GOMP_*` symbol is [`SyncKind::OmpRuntime`] and every gcc-outlined
    /// body (`._omp_fn.`) [`SyncKind::OmpBody`]: see [`SyncKind::omp`].
    pub const OPENMP: &'static [(&'static str, SyncKind)] = &[
        ("GOMP_parallel", SyncKind::OmpParallel),
        ("GOMP_parallel_loop_static", SyncKind::OmpParallel),
        ("GOMP_parallel_loop_dynamic", SyncKind::OmpParallel),
        ("GOMP_parallel_loop_guided", SyncKind::OmpParallel),
        ("GOMP_parallel_loop_runtime", SyncKind::OmpParallel),
        ("GOMP_parallel_loop_nonmonotonic_dynamic", SyncKind::OmpParallel),
        ("GOMP_parallel_loop_nonmonotonic_guided", SyncKind::OmpParallel),
        ("GOMP_parallel_loop_nonmonotonic_runtime", SyncKind::OmpParallel),
        ("GOMP_parallel_loop_maybe_nonmonotonic_runtime", SyncKind::OmpParallel),
        ("GOMP_parallel_sections", SyncKind::OmpParallel),
        ("GOMP_parallel_reductions", SyncKind::OmpParallel),
        ("GOMP_barrier", SyncKind::OmpBarrier),
        ("GOMP_barrier_cancel", SyncKind::OmpBarrier),
        ("GOMP_loop_end", SyncKind::OmpBarrier),
        ("GOMP_loop_end_cancel", SyncKind::OmpBarrier),
        ("GOMP_sections_end", SyncKind::OmpBarrier),
        ("GOMP_sections_end_cancel", SyncKind::OmpBarrier),
        ("GOMP_critical_start", SyncKind::OmpAcquire(OmpLock::Critical)),
        ("GOMP_critical_end", SyncKind::OmpRelease(OmpLock::Critical)),
        ("GOMP_critical_name_start", SyncKind::OmpAcquire(OmpLock::Named)),
        ("GOMP_critical_name_end", SyncKind::OmpRelease(OmpLock::Named)),
        ("GOMP_atomic_start", SyncKind::OmpAcquire(OmpLock::Atomic)),
        ("GOMP_atomic_end", SyncKind::OmpRelease(OmpLock::Atomic)),
        ("GOMP_ordered_start", SyncKind::OmpAcquire(OmpLock::Ordered)),
        ("GOMP_ordered_end", SyncKind::OmpRelease(OmpLock::Ordered)),
        ("omp_set_lock", SyncKind::OmpAcquire(OmpLock::Lock)),
        ("omp_set_nest_lock", SyncKind::OmpAcquire(OmpLock::Lock)),
        ("omp_test_lock", SyncKind::OmpTryAcquire),
        ("omp_test_nest_lock", SyncKind::OmpTryAcquire),
        ("omp_unset_lock", SyncKind::OmpRelease(OmpLock::Lock)),
        ("omp_unset_nest_lock", SyncKind::OmpRelease(OmpLock::Lock)),
        ("GOMP_task", SyncKind::OmpTask),
        ("GOMP_taskwait", SyncKind::OmpTaskwait),
        ("GOMP_taskwait_depend", SyncKind::OmpTaskwaitDepend),
        ("omp_set_num_threads", SyncKind::OmpSetNumThreads),
        ("GOMP_taskgroup_start", SyncKind::OmpTaskgroupStart),
        ("GOMP_taskgroup_end", SyncKind::OmpTaskgroupEnd),
        ("GOMP_taskloop", SyncKind::OmpTaskloop),
        ("GOMP_taskloop_ull", SyncKind::OmpTaskloop),
        ("GOMP_sections_start", SyncKind::OmpSectionsNext),
        ("GOMP_sections_next", SyncKind::OmpSectionsNext),
        ("GOMP_sections_end_nowait", SyncKind::OmpSectionsEnd),
        ("GOMP_single_copy_start", SyncKind::OmpSingleCopyStart),
        ("GOMP_single_copy_end", SyncKind::OmpBarrier),
    ];

    /// The OpenMP kind of a function symbol: an entry of [`SyncKind::OPENMP`], any other
    /// `GOMP_*` function ([`SyncKind::OmpRuntime`]), or a body gcc outlined
    /// (`NAME._omp_fn.N`, [`SyncKind::OmpBody`]). Versioned names (`omp_set_lock@@OMP_3.0`)
    /// are taken by their base name.
    pub fn omp(symbol: &str) -> Option<SyncKind> {
        let base = symbol.split('@').next().unwrap_or(symbol);
        if let Some((_, k)) = SyncKind::OPENMP.iter().find(|(n, _)| *n == base) {
            return Some(*k);
        }
        if base.starts_with("GOMP_") {
            return Some(SyncKind::OmpRuntime);
        }
        // Only the body itself (renamed or not by LTO's `.lto_priv.N`): gcc's hot/cold split
        // (`main._omp_fn.0.cold`, reached by a jump from inside the body) and partial inlining's
        // `.part.N` (called from it) are parts of a body's code, not bodies the runtime starts.
        let number = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
        let body = base.split_once("._omp_fn.").is_some_and(|(_, rest)| match rest.split_once(".lto_priv.") {
            Some((n, m)) => number(n) && number(m),
            None => number(rest),
        });
        body.then_some(SyncKind::OmpBody)
    }

    /// Whether the function creates units of concurrency that are not threads (OpenMP tasks
    /// and sections: concurrent with one another whatever thread runs them, one included).
    pub fn spawns_logical_threads(self) -> bool {
        matches!(self, SyncKind::OmpTask | SyncKind::OmpTaskloop | SyncKind::OmpSectionsNext)
    }

    /// A call into libgomp (every OpenMP kind but a body, which is the program's code).
    pub fn is_omp_runtime(self) -> bool {
        matches!(
            self,
            SyncKind::OmpParallel
                | SyncKind::OmpBarrier
                | SyncKind::OmpAcquire(_)
                | SyncKind::OmpTryAcquire
                | SyncKind::OmpRelease(_)
                | SyncKind::OmpTask
                | SyncKind::OmpTaskwait
                | SyncKind::OmpTaskwaitDepend
                | SyncKind::OmpTaskgroupStart
                | SyncKind::OmpTaskgroupEnd
                | SyncKind::OmpTaskloop
                | SyncKind::OmpSectionsNext
                | SyncKind::OmpSectionsEnd
                | SyncKind::OmpSingleCopyStart
                | SyncKind::OmpSetNumThreads
                | SyncKind::OmpRuntime
        )
    }

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

    /// What the machine reports of an entry with the integer arguments `args` (RDI, RSI, RDX,
    /// RCX, R8, R9), reading guest memory with `read` where the kind needs it (the strings of a
    /// [`SyncKind::Reads`] routine): see [`Entry`].
    pub fn entry(self, args: [u64; 6], read: &mut dyn FnMut(u64, &mut [u8]) -> bool) -> Entry {
        self.entry_at(args, 0, read)
    }

    /// [`SyncKind::entry`] with the stack pointer at entry (`rsp`, pointing at the return
    /// address), for the kinds that read arguments passed on the stack (`GOMP_task`'s flags
    /// and `depend`).
    pub fn entry_at(self, args: [u64; 6], rsp: u64, read: &mut dyn FnMut(u64, &mut [u8]) -> bool) -> Entry {
        fn word(read: &mut dyn FnMut(u64, &mut [u8]) -> bool, a: u64) -> u64 {
            let mut b = [0u8; 8];
            if read(a, &mut b) {
                u64::from_le_bytes(b)
            } else {
                0
            }
        }
        match self {
            SyncKind::OmpParallel => return Entry { obj: args[0], old: args[1], new: args[2], aux: 0 },
            SyncKind::OmpTaskloop => return Entry { obj: args[0], old: args[5], new: 0, aux: 0 },
            SyncKind::OmpTaskwaitDepend => {
                let deps = if args[0] != 0 { omp_depend_bits(args[0], read) } else { 0 };
                return Entry { obj: 0, old: 0, new: deps, aux: 0 };
            }
            SyncKind::OmpBody => return Entry { obj: args[0], old: word(read, args[0]), new: rsp, aux: 0 },
            SyncKind::OmpSectionsNext => return Entry { obj: 0, old: 0, new: rsp, aux: 0 },
            SyncKind::OmpAcquire(l) | SyncKind::OmpRelease(l) => {
                let obj = match l {
                    OmpLock::Critical => OMP_CRITICAL_OBJ,
                    OmpLock::Atomic => OMP_ATOMIC_OBJ,
                    OmpLock::Ordered => OMP_ORDERED_OBJ,
                    OmpLock::Named | OmpLock::Lock => args[0],
                };
                return Entry { obj, old: 0, new: 0, aux: 0 };
            }
            SyncKind::OmpTask => {
                let size = args[3];
                let n = size.min(8) as usize;
                let mut b = [0u8; 8];
                let fp = if n > 0 && read(args[1], &mut b[..n]) { u64::from_le_bytes(b) } else { 0 };
                let flags = word(read, rsp.wrapping_add(8));
                let depend = word(read, rsp.wrapping_add(16));
                let deps = if flags & GOMP_TASK_FLAG_DEPEND != 0 && depend != 0 && rsp != 0 {
                    omp_depend_bits(depend, read)
                } else {
                    0
                };
                return Entry { obj: args[0], old: fp, new: deps | size.min(255) << 56, aux: 0 };
            }
            _ => {}
        }
        match self {
            k if k.is_pmemobj() => Entry { obj: args[1], old: args[2], new: args[0], aux: 0 },
            SyncKind::PmemobjAlloc => Entry { obj: args[0], old: args[2], new: 0, aux: args[1] },
            SyncKind::Custom(c) => Entry {
                obj: args[usize::from(c.lock_arg.min(5))],
                old: 0,
                new: 0,
                aux: c.result_arg.map_or(0, |a| args[usize::from(a.min(5))]),
            },
            SyncKind::Reads(r) => {
                let ((a, la), (b, lb)) = r.ranges(args, read);
                Entry { obj: a, old: b, new: u64::from(la) | u64::from(lb) << 32, aux: 0 }
            }
            _ => Entry { obj: args[0], old: args[1], new: 0, aux: 0 },
        }
    }

    /// The result a return reports (the `new` of its [`crate::events::EventKind::SyncReturn`]):
    /// the return value `rax`, or for a custom lock that reports success through an
    /// out-parameter, that parameter's value now (`aux` is its address, from [`Entry::aux`]),
    /// read with `read` (0 if it cannot be read).
    pub fn result(self, rax: u64, aux: u64, read: &mut dyn FnMut(u64, &mut [u8]) -> bool) -> u64 {
        match self {
            // `PMEMoid { pool_uuid_lo, off }`: the offset the allocation wrote back.
            SyncKind::PmemobjAlloc => {
                let mut buf = [0u8; 8];
                if aux == 0 || !read(aux.wrapping_add(8), &mut buf) {
                    return 0;
                }
                u64::from_le_bytes(buf)
            }
            SyncKind::Custom(CustomSpec { result_arg: Some(_), result_size, .. }) => {
                let mut buf = [0u8; 8];
                let n = usize::from(result_size.clamp(1, 8));
                if aux == 0 || !read(aux, &mut buf[..n]) {
                    return 0;
                }
                u64::from_le_bytes(buf)
            }
            _ => rax,
        }
    }

    /// Whether a call whose result ([`SyncKind::result`]) was `ret` acquired what it set out to.
    pub fn succeeded(self, ret: u64) -> bool {
        match self {
            SyncKind::Custom(c) => c.succeeded(ret),
            // pthread functions return 0 on success (the barrier's serial thread returns
            // PTHREAD_BARRIER_SERIAL_THREAD = -1, also a success); sem_* return 0.
            SyncKind::BarrierWait => ret as i32 == 0 || ret as i32 == -1,
            // omp_test_lock returns true, omp_test_nest_lock the new nesting count.
            SyncKind::OmpTryAcquire => ret as i32 != 0,
            SyncKind::OmpAcquire(_) => true,
            _ => ret as i32 == 0,
        }
    }

    /// An unlock-like call: a release of a lock when it is entered (mutex, rwlock, spinlock and
    /// libpmemobj unlocks, custom releases, `sem_post`).
    pub fn is_release(self) -> bool {
        matches!(
            self,
            SyncKind::MutexUnlock
                | SyncKind::RwUnlock
                | SyncKind::SpinUnlock
                | SyncKind::PmemobjUnlock
                | SyncKind::SemPost
                | SyncKind::OmpRelease(_)
                | SyncKind::Custom(CustomSpec { op: CustomOp::Release, .. })
        )
    }

    /// The bytes of the lock object at the event's address that the primitive's own code reads
    /// and writes (its lock word): a pthread or libpmemobj object's size, a semaphore's, a custom
    /// lock's configured size. `None` for calls that lock nothing (joins, allocations, string
    /// routines, lane holders).
    pub fn lock_bytes(self) -> Option<u32> {
        match self {
            SyncKind::MutexLock | SyncKind::MutexTrylock | SyncKind::MutexUnlock => Some(40),
            SyncKind::RwRdlock
            | SyncKind::RwWrlock
            | SyncKind::RwTryRdlock
            | SyncKind::RwTryWrlock
            | SyncKind::RwUnlock => Some(56),
            SyncKind::SpinLock | SyncKind::SpinTrylock | SyncKind::SpinUnlock => Some(4),
            SyncKind::CondWait | SyncKind::CondSignal | SyncKind::CondBroadcast => Some(48),
            SyncKind::BarrierWait => Some(32),
            SyncKind::SemWait | SyncKind::SemTrywait | SyncKind::SemPost => Some(32),
            // pthread_once_t is an int (C11's once_flag a struct of one).
            SyncKind::Once => Some(4),
            // PMEMmutex, PMEMrwlock and PMEMcondvar are 64-byte unions.
            SyncKind::PmemobjLock
            | SyncKind::PmemobjRdlock
            | SyncKind::PmemobjUnlock
            | SyncKind::PmemobjCondWait
            | SyncKind::PmemobjCondSignal
            | SyncKind::PmemobjCondBroadcast => Some(64),
            SyncKind::Custom(c) => Some(u32::from(c.lock_size.max(1))),
            // omp_nest_lock_t is 16 bytes (omp_lock_t 4); a named critical's lock pointer 8.
            SyncKind::OmpAcquire(OmpLock::Lock) | SyncKind::OmpRelease(OmpLock::Lock) | SyncKind::OmpTryAcquire => {
                Some(16)
            }
            SyncKind::OmpAcquire(OmpLock::Named) | SyncKind::OmpRelease(OmpLock::Named) => Some(8),
            SyncKind::OmpAcquire(_)
            | SyncKind::OmpRelease(_)
            | SyncKind::OmpParallel
            | SyncKind::OmpBody
            | SyncKind::OmpBarrier
            | SyncKind::OmpTask
            | SyncKind::OmpTaskwait
            | SyncKind::OmpTaskwaitDepend
            | SyncKind::OmpTaskgroupStart
            | SyncKind::OmpTaskgroupEnd
            | SyncKind::OmpTaskloop
            | SyncKind::OmpSectionsNext
            | SyncKind::OmpSectionsEnd
            | SyncKind::OmpSingleCopyStart
            | SyncKind::OmpSetNumThreads
            | SyncKind::OmpRuntime => None,
            SyncKind::Join
            | SyncKind::Malloc
            | SyncKind::Calloc
            | SyncKind::Realloc
            | SyncKind::Free
            | SyncKind::PmemobjLane
            | SyncKind::PmemobjAlloc
            | SyncKind::PmemobjFree
            | SyncKind::Reads(_) => None,
        }
    }
}

/// What the machine reports of a call's entry ([`SyncKind::entry`]): the event's `addr`, `old`
/// and `new` (see [`crate::events::EventKind::SyncEnter`]), and a word the call's frame keeps
/// for its return (the address of a custom lock's out-parameter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// The object synchronised on (the event's `addr`).
    pub obj: u64,
    /// The event's `old`.
    pub old: u64,
    /// The event's `new`.
    pub new: u64,
    /// Kept by the frame until the return ([`SyncKind::result`]).
    pub aux: u64,
}

/// How a lock is held, for read-write locks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum LockMode {
    /// Alone: a mutex, a write lock (HawkSet's `regular`, `write`, `unique`).
    #[default]
    Exclusive,
    /// With other readers (HawkSet's `read`, `shared`).
    Shared,
}

/// What a custom lock function does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CustomOp {
    /// Acquires the lock when it returns.
    Acquire,
    /// Acquires the lock when it returns, if its result says so ([`CustomSpec::succeeded`]).
    TryAcquire,
    /// Releases the lock when it is entered.
    Release,
}

/// A custom lock function as the machine and the passes use it (from a [`CustomLock`] of the
/// configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CustomSpec {
    /// What it does.
    pub op: CustomOp,
    /// How the lock is held.
    pub mode: LockMode,
    /// The argument (0 = the first) that is the lock's address.
    pub lock_arg: u8,
    /// Bytes of the lock word at that address (what the function's own accesses there are).
    pub lock_size: u8,
    /// The argument that points to the out-parameter reporting success, if success is not the
    /// return value.
    pub result_arg: Option<u8>,
    /// Bytes of the result compared (the return value's low bytes, or the out-parameter's).
    pub result_size: u8,
    /// A try-lock succeeded when its result equals this ...
    pub success: Option<i64>,
    /// ... or differs from this.
    pub failure: Option<i64>,
}

impl CustomSpec {
    /// Whether a call with result `ret` (already read from the out-parameter, if any) holds the
    /// lock: always for an acquire, on the success value (or any value but the failure value)
    /// for a try-acquire. The result is compared at its `result_size` bytes, sign-extended, so
    /// `-1` matches an `int` returning -1.
    pub fn succeeded(&self, ret: u64) -> bool {
        if self.op != CustomOp::TryAcquire {
            return true;
        }
        let bits = 8 * u32::from(self.result_size.clamp(1, 8));
        let v = if bits == 64 { ret as i64 } else { ((ret << (64 - bits)) as i64) >> (64 - bits) };
        let fit = |x: i64| if bits == 64 { x } else { (x << (64 - bits)) >> (64 - bits) };
        match (self.success, self.failure) {
            (Some(s), _) => v == fit(s),
            (None, Some(f)) => v != fit(f),
            (None, None) => v == 0,
        }
    }
}

/// Which bytes a string or memory routine reads by its contract: up to two ranges, each
/// either a NUL-terminated string at an argument (its bytes through the terminator, bounded by a
/// length argument for the `strn*` functions) or `[arg, arg + length argument)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReadContract {
    /// The strings at arguments `first` and (if `two`) `first + 1`, each bounded by argument
    /// `bound` if given.
    Strings {
        /// The first string's argument.
        first: u8,
        /// A second string at the next argument.
        two: bool,
        /// The argument bounding each string's length (`strncmp`'s `n`).
        bound: Option<u8>,
    },
    /// `[arg a, arg a + arg n)` and, if given, `[arg b, arg b + arg n)`.
    Bytes {
        /// The first buffer's argument.
        a: u8,
        /// A second buffer's argument.
        b: Option<u8>,
        /// The length's argument.
        n: u8,
    },
}

/// Longest string a routine's contract is measured to; longer ones count as this long.
const MAX_STRING: u64 = 1 << 20;

impl ReadContract {
    /// The ranges `(start, length)` the call with `args` reads (length 0: no second range).
    fn ranges(self, args: [u64; 6], read: &mut dyn FnMut(u64, &mut [u8]) -> bool) -> ((u64, u32), (u64, u32)) {
        let arg = |i: u8| args[usize::from(i.min(5))];
        let clamp = |n: u64| n.min(u64::from(u32::MAX)) as u32;
        match self {
            ReadContract::Strings { first, two, bound } => {
                let limit = bound.map_or(MAX_STRING, |b| arg(b).min(MAX_STRING));
                let a = arg(first);
                let la = string_extent(a, limit, read);
                let (b, lb) = if two {
                    let b = arg(first + 1);
                    (b, string_extent(b, limit, read))
                } else {
                    (0, 0)
                };
                ((a, clamp(la)), (b, clamp(lb)))
            }
            ReadContract::Bytes { a, b, n } => {
                let len = clamp(arg(n));
                ((arg(a), len), b.map_or((0, 0), |b| (arg(b), len)))
            }
        }
    }
}

/// Bytes of the string at `at` its readers may use: through its terminating NUL, at most
/// `limit`; what can be read of it if memory ends first.
fn string_extent(at: u64, limit: u64, read: &mut dyn FnMut(u64, &mut [u8]) -> bool) -> u64 {
    let mut buf = [0u8; 64];
    let mut done = 0u64;
    while done < limit {
        // Chunks end at 64-byte boundaries, so a read never crosses into an unmapped page.
        let a = at.wrapping_add(done);
        let n = (64 - (a % 64)).min(limit - done) as usize;
        if !read(a, &mut buf[..n]) {
            // Memory ends inside the chunk: what can be read of it, a byte at a time.
            for i in 0..n {
                if !read(a + i as u64, &mut buf[i..=i]) {
                    return done + i as u64;
                }
                if buf[i] == 0 {
                    return (done + i as u64 + 1).min(limit);
                }
            }
            done += n as u64;
            continue;
        }
        if let Some(i) = buf[..n].iter().position(|&c| c == 0) {
            return (done + i as u64 + 1).min(limit);
        }
        done += n as u64;
    }
    limit
}

/// The string and memory routines whose reads are bounded by their contract, by base name (the
/// symbol without leading underscores, up to a `_variant` suffix: `__strcmp_sse42`,
/// `__memcpy_avx_unaligned_erms`, `__strcpy_chk`).
pub const READ_ROUTINES: &[(&str, ReadContract)] = &[
    ("strlen", ReadContract::Strings { first: 0, two: false, bound: None }),
    ("strnlen", ReadContract::Strings { first: 0, two: false, bound: Some(1) }),
    ("strcmp", ReadContract::Strings { first: 0, two: true, bound: None }),
    ("strcasecmp", ReadContract::Strings { first: 0, two: true, bound: None }),
    ("strncmp", ReadContract::Strings { first: 0, two: true, bound: Some(2) }),
    ("strncasecmp", ReadContract::Strings { first: 0, two: true, bound: Some(2) }),
    ("strcoll", ReadContract::Strings { first: 0, two: true, bound: None }),
    ("strstr", ReadContract::Strings { first: 0, two: true, bound: None }),
    ("strspn", ReadContract::Strings { first: 0, two: true, bound: None }),
    ("strcspn", ReadContract::Strings { first: 0, two: true, bound: None }),
    ("strpbrk", ReadContract::Strings { first: 0, two: true, bound: None }),
    ("strcat", ReadContract::Strings { first: 0, two: true, bound: None }),
    ("strchr", ReadContract::Strings { first: 0, two: false, bound: None }),
    ("strchrnul", ReadContract::Strings { first: 0, two: false, bound: None }),
    ("strrchr", ReadContract::Strings { first: 0, two: false, bound: None }),
    ("strdup", ReadContract::Strings { first: 0, two: false, bound: None }),
    ("strcpy", ReadContract::Strings { first: 1, two: false, bound: None }),
    ("stpcpy", ReadContract::Strings { first: 1, two: false, bound: None }),
    ("strncpy", ReadContract::Strings { first: 1, two: false, bound: Some(2) }),
    ("stpncpy", ReadContract::Strings { first: 1, two: false, bound: Some(2) }),
    ("memchr", ReadContract::Bytes { a: 0, b: None, n: 2 }),
    ("memrchr", ReadContract::Bytes { a: 0, b: None, n: 2 }),
    ("memcmp", ReadContract::Bytes { a: 0, b: Some(1), n: 2 }),
    ("bcmp", ReadContract::Bytes { a: 0, b: Some(1), n: 2 }),
    ("memcpy", ReadContract::Bytes { a: 1, b: None, n: 2 }),
    ("memmove", ReadContract::Bytes { a: 1, b: None, n: 2 }),
    ("mempcpy", ReadContract::Bytes { a: 1, b: None, n: 2 }),
];

impl ReadContract {
    /// The contract of the routine named `symbol` (`__strcmp_avx2`, `memcpy`, `__strncpy_chk`),
    /// if it is one of [`READ_ROUTINES`].
    pub fn of_symbol(symbol: &str) -> Option<ReadContract> {
        let base = symbol.trim_start_matches('_');
        READ_ROUTINES
            .iter()
            .find(|(name, _)| base.strip_prefix(name).is_some_and(|rest| rest.is_empty() || rest.starts_with('_')))
            .map(|(_, c)| *c)
    }
}

/// A custom lock function from the user's configuration (RON), HawkSet-style: its symbol (as
/// the object's symbol table has it, so C++ names mangled), what it does, and optionally which
/// argument is the lock, how it is held and where its success shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomLock {
    /// The function's symbol.
    pub symbol: String,
    /// Acquire, try-acquire (with its success or failure value) or release.
    pub kind: CustomLockKind,
    /// The argument that is the lock's address (HawkSet's `mutex_id_arg`), from 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lock_arg: u8,
    /// How the lock is held (HawkSet's `type`: `regular`, `write` and `unique` are `Exclusive`,
    /// `read` and `shared` are `Shared`).
    #[serde(default, skip_serializing_if = "is_exclusive")]
    pub mode: LockMode,
    /// The argument pointing to the out-parameter that reports a try-acquire's success
    /// (HawkSet's `result_id_arg`; P-ART's `writeLockOrRestart(bool &needRestart)`): its value
    /// when the function returns is compared instead of the return value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_arg: Option<u8>,
    /// Bytes of the result compared: default 4 (an `int` return value) or, with `result_arg`,
    /// 1 (a `bool` out-parameter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_size: Option<u8>,
    /// Bytes of the lock word (default 8): the function's own accesses to them are
    /// synchronisation, not data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_size: Option<u8>,
}

fn is_zero(v: &u8) -> bool {
    *v == 0
}

fn is_exclusive(m: &LockMode) -> bool {
    *m == LockMode::Exclusive
}

/// What a custom lock function does: `Acquire`, `Release`, or `TryAcquire(success: V)` /
/// `TryAcquire(failure: V)` (HawkSet's `success_value` / `failure_value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CustomLockKind {
    /// Acquires when it returns.
    Acquire,
    /// Acquires when its result is `success`, or is not `failure`.
    TryAcquire {
        /// The result that means success.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        success: Option<i64>,
        /// The result that means failure (any other means success).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<i64>,
    },
    /// Releases when it is entered.
    Release,
}

impl CustomLock {
    /// A lock function of kind `kind` with every option at its default.
    pub fn new(symbol: &str, kind: CustomLockKind) -> CustomLock {
        CustomLock {
            symbol: symbol.to_string(),
            kind,
            lock_arg: 0,
            mode: LockMode::Exclusive,
            result_arg: None,
            result_size: None,
            lock_size: None,
        }
    }

    /// What is wrong with it, if anything: an argument beyond the sixth (only register arguments
    /// are read), a size that is not 1 to 8 bytes, a try-acquire without a success or failure
    /// value, an out-parameter on something that is not a try-acquire.
    pub fn check(&self) -> Result<(), String> {
        let name = &self.symbol;
        if self.lock_arg > 5 || self.result_arg.is_some_and(|a| a > 5) {
            return Err(format!("lock `{name}`: arguments are numbered 0 to 5 (the register arguments)"));
        }
        if self.result_size.is_some_and(|s| !(1..=8).contains(&s))
            || self.lock_size.is_some_and(|s| !(1..=8).contains(&s))
        {
            return Err(format!("lock `{name}`: sizes are 1 to 8 bytes"));
        }
        match self.kind {
            CustomLockKind::TryAcquire { success: None, failure: None } => {
                Err(format!("lock `{name}`: TryAcquire needs a success or a failure value"))
            }
            CustomLockKind::TryAcquire { .. } => Ok(()),
            _ if self.result_arg.is_some() => Err(format!("lock `{name}`: result_arg is for TryAcquire")),
            _ => Ok(()),
        }
    }

    /// The kind of event the machine reports for calls to it.
    pub fn sync_kind(&self) -> SyncKind {
        let (op, success, failure) = match self.kind {
            CustomLockKind::Acquire => (CustomOp::Acquire, None, None),
            CustomLockKind::TryAcquire { success, failure } => (CustomOp::TryAcquire, success, failure),
            CustomLockKind::Release => (CustomOp::Release, None, None),
        };
        SyncKind::Custom(CustomSpec {
            op,
            mode: self.mode,
            lock_arg: self.lock_arg,
            lock_size: self.lock_size.unwrap_or(8),
            result_arg: self.result_arg,
            result_size: self.result_size.unwrap_or(if self.result_arg.is_some() { 1 } else { 4 }),
            success,
            failure,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(bytes: &'static [u8], base: u64) -> impl FnMut(u64, &mut [u8]) -> bool {
        move |a, buf| {
            let Some(off) = a.checked_sub(base) else { return false };
            let off = off as usize;
            if off + buf.len() > bytes.len() {
                return false;
            }
            buf.copy_from_slice(&bytes[off..off + buf.len()]);
            true
        }
    }

    #[test]
    fn string_contracts_end_at_the_terminator_or_the_bound() {
        let mut mem = memory(b"key1\0key22\0\0\0", 0x1000);
        let strcmp = SyncKind::Reads(ReadContract::of_symbol("__strcmp_sse42").unwrap());
        let e = strcmp.entry([0x1000, 0x1005, 0, 0, 0, 0], &mut mem);
        assert_eq!((e.obj, e.old, e.new), (0x1000, 0x1005, 5 | 6 << 32));
        let strncmp = SyncKind::Reads(ReadContract::of_symbol("strncmp").unwrap());
        let e = strncmp.entry([0x1000, 0x1005, 3, 0, 0, 0], &mut mem);
        assert_eq!(e.new, 3 | 3 << 32);
        // Memory that ends before a terminator: what could be read.
        let strlen = SyncKind::Reads(ReadContract::of_symbol("strlen").unwrap());
        let mut short = memory(b"abc", 0x2000);
        assert_eq!(strlen.entry([0x2000, 0, 0, 0, 0, 0], &mut short).new, 3);
        let memcpy = SyncKind::Reads(ReadContract::of_symbol("__memcpy_avx_unaligned_erms").unwrap());
        let e = memcpy.entry([0x9000, 0x1000, 24, 0, 0, 0], &mut mem);
        assert_eq!((e.obj, e.new), (0x1000, 24));
        assert!(ReadContract::of_symbol("strcmpx").is_none());
        assert!(ReadContract::of_symbol("memset").is_none());
        assert_eq!(ReadContract::of_symbol("__strcpy_chk"), ReadContract::of_symbol("strcpy"));
    }

    #[test]
    fn openmp_entry_points_and_dependences() {
        assert_eq!(SyncKind::omp("GOMP_parallel"), Some(SyncKind::OmpParallel));
        assert_eq!(SyncKind::omp("omp_set_lock@@OMP_3.0"), Some(SyncKind::OmpAcquire(OmpLock::Lock)));
        assert_eq!(SyncKind::omp("GOMP_loop_dynamic_next"), Some(SyncKind::OmpRuntime));
        assert_eq!(SyncKind::omp("main._omp_fn.3"), Some(SyncKind::OmpBody));
        assert_eq!(SyncKind::omp("main._omp_fn.12"), Some(SyncKind::OmpBody));
        assert_eq!(SyncKind::omp("main._omp_fn.0.cold"), None);
        assert_eq!(SyncKind::omp("foo._omp_fn.1.part.0"), None);
        assert_eq!(SyncKind::omp("foo._omp_fn.1.lto_priv.0"), Some(SyncKind::OmpBody));
        assert_eq!(SyncKind::omp("foo._omp_fn.1.lto_priv.0.cold"), None);
        assert_eq!(SyncKind::omp("omp_get_thread_num"), None);
        // depend array, gcc's old layout: 3 dependences, the first 2 out/inout.
        let (a, b, c) = (0x5000u64, 0x5008u64, 0x5010u64);
        let mut words = vec![3u64, 2, a, b, c];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        let bits = omp_depend_bits(0x8000, &mut memory(leaked, 0x8000));
        assert_eq!(bits, omp_depend_bit(a) | omp_depend_bit(b) | omp_depend_bit(c) << 28);
        // OpenMP 5 layout: [0, n, out, mutexinoutset, in, addrs].
        words = vec![0, 2, 0, 0, 2, a, b];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        let bits = omp_depend_bits(0x8000, &mut memory(leaked, 0x8000));
        assert_eq!(bits, (omp_depend_bit(a) | omp_depend_bit(b)) << 28);
        // GOMP_task's entry: flags and depend from the stack (rsp + 8, rsp + 16).
        let frame: Vec<u8> = [0u64, 8, 0x9000].iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut mem = memory(Box::leak(frame.into_boxed_slice()), 0x1000);
        let e = SyncKind::OmpTask.entry_at([0x40_1000, 0, 0, 4, 4, 1], 0x1000, &mut mem);
        assert_eq!((e.obj, e.new >> 56), (0x40_1000, 4));
    }

    #[test]
    fn custom_locks_pick_their_argument_and_judge_their_result() {
        let mut art =
            CustomLock::new("writeLockOrRestart", CustomLockKind::TryAcquire { success: Some(0), failure: None });
        art.result_arg = Some(1);
        art.check().unwrap();
        let k = art.sync_kind();
        let mut mem = memory(&[1, 0], 0x100);
        let e = k.entry([0x5000, 0x100, 0, 0, 0, 0], &mut mem);
        assert_eq!((e.obj, e.aux), (0x5000, 0x100));
        // needRestart = true: not acquired; false: acquired.
        assert_eq!(k.result(77, 0x100, &mut mem), 1);
        assert!(!k.succeeded(1));
        assert_eq!(k.result(77, 0x101, &mut mem), 0);
        assert!(k.succeeded(0));
        let mut second = CustomLock::new("rd", CustomLockKind::Acquire);
        second.lock_arg = 1;
        let e = second.sync_kind().entry([1, 2, 3, 4, 5, 6], &mut mem);
        assert_eq!(e.obj, 2);
        // Failure values, and an int's -1.
        let t = CustomLock::new("t", CustomLockKind::TryAcquire { success: None, failure: Some(0) }).sync_kind();
        assert!(!t.succeeded(0) && t.succeeded(1));
        let m1 = CustomLock::new("t", CustomLockKind::TryAcquire { success: Some(-1), failure: None }).sync_kind();
        assert!(m1.succeeded(0xffff_ffff) && !m1.succeeded(1));
        assert!(CustomLock::new("t", CustomLockKind::TryAcquire { success: None, failure: None }).check().is_err());
        let mut bad = CustomLock::new("t", CustomLockKind::Acquire);
        bad.result_arg = Some(1);
        assert!(bad.check().is_err());
    }

    #[test]
    fn old_configurations_still_parse() {
        // As the configuration is read: `Some` may be left out.
        let ron = ron::Options::default().with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME);
        let old: Vec<CustomLock> =
            ron.from_str("[(symbol: \"a\", kind: Acquire), (symbol: \"t\", kind: TryAcquire(success: 1))]").unwrap();
        assert_eq!(old[1].kind, CustomLockKind::TryAcquire { success: Some(1), failure: None });
        let new: Vec<CustomLock> = ron
            .from_str("[(symbol: \"w\", kind: TryAcquire(success: 0), result_arg: 1, mode: Shared, lock_arg: 0)]")
            .unwrap();
        assert_eq!(new[0].mode, LockMode::Shared);
        // Written back, the old shape is kept.
        let json = serde_json::to_string(&old[1]).unwrap();
        assert_eq!(json, r#"{"symbol":"t","kind":{"TryAcquire":{"success":1}}}"#);
    }
}
