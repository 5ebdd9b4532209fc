//! The synchronisation vocabulary every detector shares: raw sync events from the machine turned
//! into lock operations and happens-before operations, and vector clocks.
//!
//! The machine reports recognised functions at entry and return ([`EventKind::SyncEnter`],
//! [`EventKind::SyncReturn`]) and thread creation and exit. [`SyncAdapter`] turns them into
//! [`SyncOp`]s with the conventions the papers use:
//! - an acquisition is seen when the lock call *returns* successfully (try-locks included, with
//!   their success value), a release when the unlock call is *entered*;
//! - `pthread_cond_wait(cond, mutex)` releases the mutex at entry and reacquires it at return,
//!   and its return is an ordering *wait* on the condition variable, whose `signal`/`broadcast`
//!   entries are *posts* (OSCS's "release, ordering acquire, acquire");
//! - barrier entry posts to the barrier's current generation (a thread's k-th arrival is in
//!   the k-th), barrier return waits on that generation (all arrivals of a round happen before
//!   all its departures, and nothing of the next round does); `sem_post` posts, a successful `sem_wait`/`sem_trywait` waits;
//! - thread creation, join (the joined thread found by its handle, glibc's `pthread_t`, which is
//!   the TLS pointer passed to clone) and exit;
//! - libpmemobj's locks (`pmemobj_mutex_*`, `pmemobj_rwlock_*`) are locks on the `PMEMmutex`
//!   (`PMEMrwlock`) object, and every call to one of them holds HawkSet's pseudo-lock
//!   ([`PMDK_PSEUDO_LOCK`]) from entry to return.
//!
//! [`HappensBefore`] keeps vector clocks for the ordering operations a detector chooses to
//! honour (HawkSet honours only create and join; HMTRace and OSCS honour all of them).

use emu::events::{Event, EventKind};
use emu::sync::SyncKind;
use rustc_hash::FxHashMap;

/// How a lock is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    Exclusive,
    Shared,
}

/// A synchronisation operation by the thread of the event it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncOp {
    Acquire {
        lock: u64,
        mode: Mode,
    },
    Release {
        lock: u64,
    },
    /// An ordering release on an object (condition variable signal, barrier arrival, sem_post).
    Post {
        obj: u64,
    },
    /// An ordering acquire from an object (condition wait return, barrier departure, sem_wait).
    Wait {
        obj: u64,
    },
    Create {
        child: u32,
    },
    Join {
        child: u32,
    },
    Exit,
}

/// Turns the machine's sync events into [`SyncOp`]s.
#[derive(Default, Debug)]
pub struct SyncAdapter {
    /// Thread handle (pthread_t) → tid.
    handles: FxHashMap<u64, u32>,
    /// The mutex each thread passed to a condition wait it is in.
    cond_mutex: FxHashMap<u32, u64>,
    /// Arrivals of each thread at each barrier: a thread's k-th arrival belongs to the
    /// barrier's k-th generation, whose posts only that generation's departures wait for (one
    /// object per generation, so a fast thread's arrival at the next round does not order
    /// itself before a slow thread's departure from this one).
    barrier_rounds: FxHashMap<(u64, u32), u64>,
}

/// HawkSet's acquire-release pseudo-lock: held for the duration of every libpmemobj lock call,
/// so that the PM accesses inside PMDK's lock implementation (its locks live in PM, with their
/// lazy reinitialisation) are mutually protected rather than races among themselves.
pub const PMDK_PSEUDO_LOCK: u64 = u64::MAX - 1;

/// The object of a barrier's generation (`round` in the top bits; guest addresses stay below
/// 2^48).
fn barrier_round(addr: u64, round: u64) -> u64 {
    addr ^ ((round & 0x7fff) << 48)
}

impl SyncAdapter {
    /// Calls `out` with each operation `ev` stands for (none for non-sync events).
    pub fn translate(&mut self, ev: &Event, mut out: impl FnMut(SyncOp)) {
        match ev.kind {
            EventKind::ThreadCreate => {
                let child = ev.new as u32;
                if ev.addr != 0 {
                    self.handles.insert(ev.addr, child);
                }
                out(SyncOp::Create { child });
            }
            EventKind::ThreadExit => out(SyncOp::Exit),
            EventKind::SyncEnter(kind) => match kind {
                SyncKind::MutexUnlock | SyncKind::RwUnlock | SyncKind::SpinUnlock | SyncKind::CustomRelease => {
                    out(SyncOp::Release { lock: ev.addr })
                }
                SyncKind::PmemobjUnlock => {
                    out(SyncOp::Release { lock: ev.addr });
                    out(SyncOp::Acquire { lock: PMDK_PSEUDO_LOCK, mode: Mode::Exclusive });
                }
                SyncKind::PmemobjLock | SyncKind::PmemobjRdlock => {
                    out(SyncOp::Acquire { lock: PMDK_PSEUDO_LOCK, mode: Mode::Exclusive })
                }
                SyncKind::CondWait => {
                    self.cond_mutex.insert(ev.tid, ev.old);
                    out(SyncOp::Release { lock: ev.old });
                }
                SyncKind::CondSignal | SyncKind::CondBroadcast | SyncKind::SemPost => {
                    out(SyncOp::Post { obj: ev.addr })
                }
                SyncKind::BarrierWait => {
                    let round = self.barrier_rounds.entry((ev.addr, ev.tid)).or_insert(0);
                    *round += 1;
                    out(SyncOp::Post { obj: barrier_round(ev.addr, *round) })
                }
                _ => {}
            },
            EventKind::SyncReturn(kind) => {
                let ok = kind.succeeded(ev.new);
                match kind {
                    SyncKind::MutexLock
                    | SyncKind::MutexTrylock
                    | SyncKind::SpinLock
                    | SyncKind::SpinTrylock
                    | SyncKind::RwWrlock
                    | SyncKind::RwTryWrlock
                    | SyncKind::CustomAcquire
                    | SyncKind::CustomTryAcquire { .. }
                        if ok =>
                    {
                        out(SyncOp::Acquire { lock: ev.addr, mode: Mode::Exclusive })
                    }
                    SyncKind::RwRdlock | SyncKind::RwTryRdlock if ok => {
                        out(SyncOp::Acquire { lock: ev.addr, mode: Mode::Shared })
                    }
                    SyncKind::CondWait => {
                        // The mutex is reacquired even when the wait times out.
                        out(SyncOp::Wait { obj: ev.addr });
                        if let Some(m) = self.cond_mutex.remove(&ev.tid) {
                            out(SyncOp::Acquire { lock: m, mode: Mode::Exclusive });
                        }
                    }
                    SyncKind::BarrierWait if ok => {
                        let round = self.barrier_rounds.get(&(ev.addr, ev.tid)).copied().unwrap_or(0);
                        out(SyncOp::Wait { obj: barrier_round(ev.addr, round) })
                    }
                    SyncKind::SemWait | SyncKind::SemTrywait if ok => out(SyncOp::Wait { obj: ev.addr }),
                    SyncKind::PmemobjLock | SyncKind::PmemobjRdlock | SyncKind::PmemobjUnlock => {
                        out(SyncOp::Release { lock: PMDK_PSEUDO_LOCK });
                        if ok && kind != SyncKind::PmemobjUnlock {
                            let mode = if kind == SyncKind::PmemobjRdlock { Mode::Shared } else { Mode::Exclusive };
                            out(SyncOp::Acquire { lock: ev.addr, mode });
                        }
                    }
                    SyncKind::Join if ok => {
                        if let Some(&child) = self.handles.get(&ev.addr) {
                            out(SyncOp::Join { child });
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

/// Which threads are inside a libpmemobj lock call. PMDK's locks live in PM, so their own loads
/// and stores (the lock words, the lazy reinitialisation) are PM accesses; HawkSet's pseudo-lock
/// makes them mutually protected, and PM detectors leave them out.
#[derive(Default, Debug)]
pub struct PmdkLockCalls {
    depth: FxHashMap<u32, u32>,
}

impl PmdkLockCalls {
    /// Follows `ev` (any event).
    pub fn observe(&mut self, ev: &Event) {
        match ev.kind {
            EventKind::SyncEnter(SyncKind::PmemobjLock | SyncKind::PmemobjRdlock | SyncKind::PmemobjUnlock) => {
                *self.depth.entry(ev.tid).or_default() += 1
            }
            EventKind::SyncReturn(SyncKind::PmemobjLock | SyncKind::PmemobjRdlock | SyncKind::PmemobjUnlock) => {
                if let Some(d) = self.depth.get_mut(&ev.tid) {
                    *d = d.saturating_sub(1);
                }
            }
            EventKind::ThreadExit => {
                self.depth.remove(&ev.tid);
            }
            _ => {}
        }
    }

    /// Whether thread `tid` is inside a libpmemobj lock call.
    pub fn inside(&self, tid: u32) -> bool {
        self.depth.get(&tid).is_some_and(|&d| d > 0)
    }
}

/// Which threads are inside a recognised synchronisation function (between its
/// [`EventKind::SyncEnter`] and [`EventKind::SyncReturn`]): the memory accesses of the primitive
/// itself (lock words, futex state, barrier counters) are not the program's and a detector that
/// watches all memory ignores them. Counts nest; a thread's count is dropped when it exits.
#[derive(Default, Debug)]
pub struct SyncBracket {
    depth: FxHashMap<u32, u32>,
}

impl SyncBracket {
    /// Follows one event (call before translating it: a return ends the bracket first).
    pub fn observe(&mut self, ev: &Event) {
        match ev.kind {
            EventKind::SyncEnter(_) => *self.depth.entry(ev.tid).or_insert(0) += 1,
            EventKind::SyncReturn(_) => {
                if let Some(d) = self.depth.get_mut(&ev.tid) {
                    *d = d.saturating_sub(1);
                }
            }
            EventKind::ThreadExit => {
                self.depth.remove(&ev.tid);
            }
            _ => {}
        }
    }

    /// Whether `tid` is inside a synchronisation function now.
    pub fn inside(&self, tid: u32) -> bool {
        self.depth.get(&tid).is_some_and(|d| *d > 0)
    }
}

/// A vector clock over thread ids (dense by first appearance, so clocks stay short).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VectorClock(pub Vec<u32>);

impl VectorClock {
    pub fn get(&self, slot: usize) -> u32 {
        self.0.get(slot).copied().unwrap_or(0)
    }

    pub fn set(&mut self, slot: usize, v: u32) {
        if self.0.len() <= slot {
            self.0.resize(slot + 1, 0);
        }
        self.0[slot] = v;
    }

    pub fn join(&mut self, other: &VectorClock) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).max(*b);
        }
    }

    /// `self` ≤ `other` pointwise: everything `self` saw, `other` saw too.
    pub fn le(&self, other: &VectorClock) -> bool {
        self.0.iter().enumerate().all(|(i, v)| *v <= other.get(i))
    }
}

/// Which ordering operations create happens-before edges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edges {
    pub create_join: bool,
    /// Post/wait on condition variables, barriers, semaphores.
    pub objects: bool,
    /// Release → later acquire of the same lock.
    pub locks: bool,
}

/// Vector clocks per thread, per sync object and per lock.
#[derive(Debug)]
pub struct HappensBefore {
    edges: Edges,
    slots: FxHashMap<u32, usize>,
    threads: FxHashMap<u32, VectorClock>,
    objects: FxHashMap<u64, VectorClock>,
    locks: FxHashMap<u64, VectorClock>,
    exited: FxHashMap<u32, VectorClock>,
}

impl HappensBefore {
    pub fn new(edges: Edges) -> HappensBefore {
        HappensBefore {
            edges,
            slots: FxHashMap::default(),
            threads: FxHashMap::default(),
            objects: FxHashMap::default(),
            locks: FxHashMap::default(),
            exited: FxHashMap::default(),
        }
    }

    /// The dense slot of a thread id.
    pub fn slot(&mut self, tid: u32) -> usize {
        let n = self.slots.len();
        *self.slots.entry(tid).or_insert(n)
    }

    /// The thread's current clock (its own component at least 1).
    pub fn clock(&mut self, tid: u32) -> &VectorClock {
        self.ensure(tid);
        &self.threads[&tid]
    }

    fn ensure(&mut self, tid: u32) {
        let s = self.slot(tid);
        let c = self.threads.entry(tid).or_default();
        if c.get(s) == 0 {
            c.set(s, 1);
        }
    }

    /// Advances the thread's own component (a new epoch after it released something).
    fn tick(&mut self, tid: u32) {
        self.ensure(tid);
        let s = self.slot(tid);
        let c = self.threads.get_mut(&tid).expect("ensured");
        let v = c.get(s) + 1;
        c.set(s, v);
    }

    /// Applies one operation by `tid`.
    pub fn apply(&mut self, tid: u32, op: SyncOp) {
        self.ensure(tid);
        match op {
            SyncOp::Create { child } if self.edges.create_join => {
                let c = self.threads[&tid].clone();
                self.ensure(child);
                self.threads.get_mut(&child).expect("ensured").join(&c);
                self.tick(tid);
            }
            SyncOp::Join { child } if self.edges.create_join => {
                if let Some(c) = self.exited.get(&child).cloned().or_else(|| self.threads.get(&child).cloned()) {
                    self.threads.get_mut(&tid).expect("ensured").join(&c);
                }
            }
            SyncOp::Exit => {
                let c = self.threads[&tid].clone();
                self.exited.insert(tid, c);
            }
            SyncOp::Post { obj } if self.edges.objects => {
                let c = self.threads[&tid].clone();
                self.objects.entry(obj).or_default().join(&c);
                self.tick(tid);
            }
            SyncOp::Wait { obj } if self.edges.objects => {
                if let Some(c) = self.objects.get(&obj).cloned() {
                    self.threads.get_mut(&tid).expect("ensured").join(&c);
                }
            }
            SyncOp::Release { lock } if self.edges.locks => {
                let c = self.threads[&tid].clone();
                self.locks.insert(lock, c);
                self.tick(tid);
            }
            SyncOp::Acquire { lock, .. } if self.edges.locks => {
                if let Some(c) = self.locks.get(&lock).cloned() {
                    self.threads.get_mut(&tid).expect("ensured").join(&c);
                }
            }
            _ => {}
        }
    }

    /// Whether the event at clock `earlier` (by thread `t1`) happens before thread `t2` now.
    pub fn ordered_before(&mut self, earlier: &VectorClock, t2: u32) -> bool {
        self.ensure(t2);
        earlier.le(&self.threads[&t2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_join_and_objects_order_threads() {
        let mut hb = HappensBefore::new(Edges { create_join: true, objects: true, locks: false });
        let before_create = hb.clock(1).clone();
        hb.apply(1, SyncOp::Create { child: 2 });
        assert!(hb.ordered_before(&before_create, 2));
        let child_work = hb.clock(2).clone();
        assert!(!hb.ordered_before(&child_work, 1));
        hb.apply(2, SyncOp::Post { obj: 9 });
        hb.apply(1, SyncOp::Wait { obj: 9 });
        assert!(hb.ordered_before(&child_work, 1));
        let late = hb.clock(2).clone();
        hb.apply(2, SyncOp::Exit);
        hb.apply(1, SyncOp::Join { child: 2 });
        assert!(hb.ordered_before(&late, 1));
    }

    #[test]
    fn locks_order_only_when_asked() {
        let mut hb = HappensBefore::new(Edges { create_join: true, objects: true, locks: false });
        hb.apply(1, SyncOp::Create { child: 2 });
        let w = hb.clock(1).clone();
        hb.apply(1, SyncOp::Release { lock: 5 });
        hb.apply(2, SyncOp::Acquire { lock: 5, mode: Mode::Exclusive });
        assert!(!hb.ordered_before(&w, 2));
        let mut hb = HappensBefore::new(Edges { create_join: true, objects: true, locks: true });
        hb.apply(1, SyncOp::Create { child: 2 });
        let w = hb.clock(1).clone();
        hb.apply(1, SyncOp::Release { lock: 5 });
        hb.apply(2, SyncOp::Acquire { lock: 5, mode: Mode::Exclusive });
        assert!(hb.ordered_before(&w, 2));
    }
}
