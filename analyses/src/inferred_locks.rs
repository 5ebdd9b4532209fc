//! Locks inferred from the access pattern on a PM word, for the passes that follow store windows
//! (`hawkset`, `vardalith`): a lock built from atomics that no function names (an inline CAS
//! loop: P-CLHT's bucket lock, compiled into its callers) is seen as a lock all the same.
//!
//! The pattern, on one word (same device address and size):
//! - **acquire**: a locked read-modify-write (`lock cmpxchg`, `xchg`, `lock xadd`, ...) by
//!   thread T that finds the word free (0) and leaves it non-zero;
//! - **release**: a later store of the free value (0) to the word by T while T holds it, plain
//!   (`__atomic_store_n(.., 0, __ATOMIC_RELEASE)` is a plain `mov` on x86) or locked.
//!
//! An acquisition is *tentative* until its word has been released by its holder once: a
//! counter bumped from 0 by `lock xadd`, or a pointer published by a CAS from NULL, looks like
//! an acquisition and is never released. A word some thread released is *confirmed* as a
//! lock. The passes treat every tentative acquisition as a lock held from the RMW on (hawkset
//! keeps it in its locksets, vardalith's windows start there) and decide at the end of the run:
//! an unconfirmed lock protects nothing (hawkset's [`InferredLocks::confirmed`]).
//!
//! A confirmed word's own accesses are synchronisation, not data, only if it is a lock **between
//! threads**: held, at some time, by two threads. A lock is mutual exclusion; a word only one
//! thread ever holds excludes nobody. APEX claims a per-thread log slot with a CAS of its
//! `in_use` word from 0 to the thread's id and stores 0 back when the thread is done: the
//! pattern of a lock, but no second thread ever holds the slot (the others' CASes on it fail
//! and they take the next slot), and the others' plain reads of `in_use` (looking for their
//! own slot) read a value its owner never persisted: a race by Definition 1. Such a word's
//! accesses stay data. (Its protection was never in question: a lock only one thread held is
//! in no other thread's lockset.) The accesses to a shared confirmed word are dropped as they
//! happen once it is both ([`Observed::screen`]), and its earlier records at the end
//! ([`InferredLocks::lock_bytes`]). Vardalith's window boundaries at unconfirmed acquisitions
//! cannot be taken back; they only start later windows later.
//!
//! The read half of a locked RMW is a load event of its own, before the machine knows whether
//! the instruction will store: it is recognised by the fence the locked instruction reported
//! just before it (same thread, same PC), so the very first CAS on a word, made before any
//! acquisition of it, is already known as an access to an RMW word.
//!
//! A lock word in DRAM (guest `pi_cas_lock`: a spinlock in a global) is seen through the
//! machine's [`EventKind::WordAcquire`] and [`EventKind::WordRelease`]
//! (`Interest::LOCK_WORDS`): a locked `cmpxchg`/`xchg` that turned the word from 0 to non-zero,
//! and the word back at 0 by the same thread. The same tentative/confirmed rule applies. The
//! release of a DRAM word is noticed at the holder's next event rather than at its store, which
//! no pass can tell apart: nothing the holder does in between is seen. Atomics inside library
//! code (libc's own locks: malloc's arena lock, stdio's, the named pthread functions' words)
//! are left out — their functions are named, or their locks protect the library's data, not
//! the program's; a window split at every `malloc` would hide races.

use emu::decode::FenceOp;
use emu::events::{Event, EventKind};
use emu::pm::LINE_SIZE;
use rustc_hash::FxHashMap;

use crate::persist::pieces;
use crate::sync::{Mode, SyncOp};

/// The lock ids of inferred locks: the word's device address with the top two bits set (guest
/// addresses, the ids of named locks, stay below 2^48; futex objects set bit 63 alone, barrier
/// generations bits 48–62 alone).
const INFERRED: u64 = 3 << 62;

/// Marks the key of a DRAM word (its guest address) apart from PM words' device addresses.
const DRAM_WORD: u64 = 1 << 61;

/// Whether a lock id is an inferred lock's.
pub(crate) fn is_inferred(lock: u64) -> bool {
    lock & INFERRED == INFERRED && lock != u64::MAX - 1 && lock != u64::MAX - 2
}

/// One word that was the target of a locked read-modify-write.
#[derive(Clone, Debug, Default)]
struct Word {
    size: u32,
    /// Threads holding it by the pattern (one, unless its release went unseen).
    holders: Vec<u32>,
    /// Released by a holder once: a lock.
    confirmed: bool,
    /// The first thread that held it, and whether another thread has held it since: a lock
    /// between threads, whose own accesses are synchronisation (see the module documentation).
    first: Option<u32>,
    shared: bool,
    /// The instructions that acquired it (one or two: the lock's CAS, a resize's marking CAS).
    acquired_at: Vec<u64>,
}

impl Word {
    /// Released by a holder (a lock) and held by two threads at some time: mutual exclusion
    /// between threads, whose word's accesses are synchronisation.
    fn is_lock_between_threads(&self) -> bool {
        self.confirmed && self.shared
    }
}

/// What [`InferredLocks::observe`] makes of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Observed {
    /// The lock operation the event performs, by the event's thread.
    pub op: Option<SyncOp>,
    /// The access is to a confirmed lock word: synchronisation, to be left out.
    pub screen: bool,
}

const NOTHING: Observed = Observed { op: None, screen: false };

/// The inference; see the module documentation.
#[derive(Clone, Debug, Default)]
pub(crate) struct InferredLocks {
    /// Device address → word.
    words: FxHashMap<u64, Word>,
    /// Threads whose last event was a locked instruction's fence, with its PC: their next load
    /// at that PC is the instruction's read half.
    locked: Vec<(u32, u64)>,
    /// Library code, whose own atomics are not the program's locks.
    code: crate::CodeInfo,
    /// Acquisitions and releases seen, and words confirmed.
    pub(crate) acquisitions: u64,
    pub(crate) releases: u64,
    /// Words confirmed so far: a pass that caches what it made of unconfirmed locks starts
    /// again when this changes.
    pub(crate) confirmations: u64,
}

pub(crate) fn value_mask(size: u32) -> u64 {
    if size >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * size)) - 1
    }
}

impl InferredLocks {
    /// What is library code (see the module documentation).
    pub(crate) fn set_code(&mut self, code: &crate::CodeInfo) {
        self.code = code.clone();
    }

    /// Follows `ev` (any event the pass sees, before it screens anything else).
    pub(crate) fn observe(&mut self, ev: &Event) -> Observed {
        match ev.kind {
            EventKind::WordAcquire if !self.code.is_library(ev.pc) => {
                let key = DRAM_WORD | ev.addr;
                let w = self.words.entry(key).or_insert_with(|| Word { size: ev.size, ..Word::default() });
                if w.size != ev.size || w.holders.contains(&ev.tid) {
                    return NOTHING;
                }
                Self::held_by(w, ev.tid);
                w.holders.push(ev.tid);
                if !w.acquired_at.contains(&ev.pc) {
                    w.acquired_at.push(ev.pc);
                }
                self.acquisitions += 1;
                Observed { op: Some(SyncOp::Acquire { lock: INFERRED | key, mode: Mode::Exclusive }), screen: false }
            }
            EventKind::WordRelease => {
                let key = DRAM_WORD | ev.addr;
                let op = match self.words.get_mut(&key) {
                    Some(w) if w.size == ev.size => {
                        Self::release_by(w, ev.tid, key, (&mut self.releases, &mut self.confirmations))
                    }
                    _ => None,
                };
                Observed { op, screen: false }
            }
            EventKind::Fence(FenceOp::Locked) => {
                match self.locked.iter_mut().find(|(t, _)| *t == ev.tid) {
                    Some(e) => e.1 = ev.pc,
                    None => self.locked.push((ev.tid, ev.pc)),
                }
                NOTHING
            }
            EventKind::Load if ev.dev != 0 => {
                let rmw = match self.locked.iter().position(|&(t, pc)| t == ev.tid && pc == ev.pc) {
                    Some(i) => {
                        self.locked.swap_remove(i);
                        true
                    }
                    None => false,
                };
                if rmw && ev.size <= 8 {
                    self.words.entry(ev.dev).or_insert_with(|| Word { size: ev.size, ..Word::default() });
                }
                Observed { op: None, screen: self.is_lock_word(ev) }
            }
            EventKind::RmwStore if ev.dev != 0 && ev.size <= 8 => {
                self.forget_locked(ev.tid);
                let m = value_mask(ev.size);
                let w = self.words.entry(ev.dev).or_insert_with(|| Word { size: ev.size, ..Word::default() });
                let op = if w.size != ev.size {
                    None
                } else if ev.old & m == 0 && ev.new & m != 0 && !w.holders.contains(&ev.tid) {
                    Self::held_by(w, ev.tid);
                    w.holders.push(ev.tid);
                    if !w.acquired_at.contains(&ev.pc) {
                        w.acquired_at.push(ev.pc);
                    }
                    self.acquisitions += 1;
                    Some(SyncOp::Acquire { lock: INFERRED | ev.dev, mode: Mode::Exclusive })
                } else {
                    Self::release(w, ev, (&mut self.releases, &mut self.confirmations))
                };
                Observed { op, screen: self.is_lock_word(ev) }
            }
            EventKind::Store if ev.dev != 0 && !self.words.is_empty() => {
                self.forget_locked(ev.tid);
                let op = match self.words.get_mut(&ev.dev) {
                    Some(w) if w.size == ev.size => Self::release(w, ev, (&mut self.releases, &mut self.confirmations)),
                    _ => None,
                };
                Observed { op, screen: self.is_lock_word(ev) }
            }
            _ => NOTHING,
        }
    }

    /// Thread `tid` takes word `w`: the word is shared once a second thread has held it.
    fn held_by(w: &mut Word, tid: u32) {
        match w.first {
            None => w.first = Some(tid),
            Some(t) if t != tid => w.shared = true,
            Some(_) => {}
        }
    }

    /// A store to word `w` by `ev`'s thread: a release if the thread holds it and stores 0.
    fn release(w: &mut Word, ev: &Event, counts: (&mut u64, &mut u64)) -> Option<SyncOp> {
        if ev.new & value_mask(ev.size) != 0 {
            return None;
        }
        Self::release_by(w, ev.tid, ev.dev, counts)
    }

    /// Word `w` (key `key`) is free again by thread `tid`'s doing: a release if `tid` holds it.
    /// `counts`: the releases and the confirmations seen.
    fn release_by(w: &mut Word, tid: u32, key: u64, counts: (&mut u64, &mut u64)) -> Option<SyncOp> {
        let i = w.holders.iter().position(|&t| t == tid)?;
        w.holders.swap_remove(i);
        if !w.confirmed {
            w.confirmed = true;
            *counts.1 += 1;
        }
        *counts.0 += 1;
        Some(SyncOp::Release { lock: INFERRED | key })
    }

    fn forget_locked(&mut self, tid: u32) {
        if let Some(i) = self.locked.iter().position(|&(t, _)| t == tid) {
            self.locked.swap_remove(i);
        }
    }

    /// Whether the access `ev` lies within a word confirmed as a lock between threads (starting
    /// at its start).
    fn is_lock_word(&self, ev: &Event) -> bool {
        !self.words.is_empty()
            && self.words.get(&ev.dev).is_some_and(|w| w.is_lock_between_threads() && ev.size <= w.size)
    }

    /// Whether inferred lock `lock` is a lock by the end of the run (any other lock id is a
    /// named lock: true). Meaningful once the run is over ([`InferredLocks::settle`]).
    pub(crate) fn confirmed(&self, lock: u64) -> bool {
        !is_inferred(lock) || self.words.get(&(lock & !INFERRED)).is_some_and(|w| w.confirmed)
    }

    /// At the end of the run: a word acquired by an instruction that also acquired a confirmed
    /// lock between threads is one of the same array of locks, though this run never saw it
    /// released, or held by a second thread (a table's bucket no put locked, or only one, marked
    /// by a resize's CAS that keeps it for good). An instruction whose words were each held by
    /// one thread only (APEX's slot claims) makes no lock of them.
    pub(crate) fn settle(&mut self) {
        let mut sites: Vec<u64> = self
            .words
            .values()
            .filter(|w| w.is_lock_between_threads())
            .flat_map(|w| w.acquired_at.iter().copied())
            .collect();
        sites.sort_unstable();
        sites.dedup();
        if sites.is_empty() {
            return;
        }
        for w in self.words.values_mut() {
            if !w.is_lock_between_threads() && w.acquired_at.iter().any(|pc| sites.binary_search(pc).is_ok()) {
                if !w.confirmed {
                    self.confirmations += 1;
                }
                w.confirmed = true;
                w.shared = true;
            }
        }
    }

    /// The bytes of confirmed lock words held by two threads, by device line: `(line, mask)`.
    pub(crate) fn lock_bytes(&self) -> FxHashMap<u64, u64> {
        let mut out: FxHashMap<u64, u64> = FxHashMap::default();
        for (&dev, w) in &self.words {
            if w.is_lock_between_threads() && dev & DRAM_WORD == 0 {
                for (line, mask) in pieces(dev, w.size) {
                    *out.entry(line).or_insert(0) |= mask;
                }
            }
        }
        out
    }

    /// Whether bytes `mask` of `line` lie within words some locked RMW targeted (confirmed
    /// locks or not): an overlap there is decided at the end of the run.
    pub(crate) fn on_rmw_word(&self, line: u64, mask: u64) -> bool {
        if self.words.is_empty() {
            return false;
        }
        let lo = u64::from(mask.trailing_zeros());
        let hi = 64 - u64::from(mask.leading_zeros());
        // Words are at most 8 bytes: the one holding the overlap starts within 7 bytes before it.
        let first = (line * LINE_SIZE + lo).saturating_sub(7);
        (first..line * LINE_SIZE + lo + 1)
            .any(|dev| self.words.get(&dev).is_some_and(|w| dev + u64::from(w.size) >= line * LINE_SIZE + hi))
    }
}

/// Whether bytes `mask` of `line` lie within confirmed lock words (`bytes` from
/// [`InferredLocks::lock_bytes`]).
pub(crate) fn within(bytes: &FxHashMap<u64, u64>, line: u64, mask: u64) -> bool {
    !bytes.is_empty() && bytes.get(&line).is_some_and(|&b| mask & !b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind, tid: u32, pc: u64, dev: u64, old: u64, new: u64) -> Event {
        Event {
            kind,
            tid,
            pc,
            addr: dev,
            dev,
            size: 8,
            old,
            new,
            stack: Default::default(),
            icount: 0,
            store: None,
            flush: None,
            fence: None,
        }
    }

    #[test]
    fn a_cas_from_zero_and_a_store_of_zero_make_a_lock() {
        let mut l = InferredLocks::default();
        let w = 0x1_0000_0040;
        assert_eq!(l.observe(&ev(EventKind::Fence(FenceOp::Locked), 1, 0x10, 0, 0, 0)), NOTHING);
        assert_eq!(l.observe(&ev(EventKind::Load, 1, 0x10, w, 0, 0)), NOTHING);
        let acq = l.observe(&ev(EventKind::RmwStore, 1, 0x10, w, 0, 1));
        assert_eq!(acq.op, Some(SyncOp::Acquire { lock: INFERRED | w, mode: Mode::Exclusive }));
        assert!(!acq.screen && !l.confirmed(INFERRED | w));
        // Another thread's store of 0 releases nothing; the holder's does, and confirms.
        assert_eq!(l.observe(&ev(EventKind::Store, 2, 0x20, w, 1, 0)).op, None);
        let rel = l.observe(&ev(EventKind::Store, 1, 0x20, w, 1, 0));
        assert_eq!(rel, Observed { op: Some(SyncOp::Release { lock: INFERRED | w }), screen: false });
        assert!(l.confirmed(INFERRED | w) && l.confirmed(0x1234));
        // A lock, but only thread 1 held it so far: no lock between threads, its word is data.
        assert!(!l.observe(&ev(EventKind::Load, 2, 0x30, w, 0, 0)).screen && l.lock_bytes().is_empty());
        // Thread 2 takes it too: its word's accesses are synchronisation from now on.
        assert!(l.observe(&ev(EventKind::RmwStore, 2, 0x10, w, 0, 1)).screen);
        assert!(l.observe(&ev(EventKind::Load, 3, 0x30, w, 0, 0)).screen);
        assert!(within(&l.lock_bytes(), w / 64, 0xff) && !within(&l.lock_bytes(), w / 64, 0x1ff));
        assert!(l.on_rmw_word(w / 64, 0xf0));
        // Another word of the same array, acquired by the same CAS, never released: a lock at
        // the end of the run; one acquired elsewhere is not.
        assert!(l.observe(&ev(EventKind::RmwStore, 2, 0x10, w + 64, 0, 2)).op.is_some());
        assert!(l.observe(&ev(EventKind::RmwStore, 2, 0x18, w + 128, 0, 2)).op.is_some());
        l.settle();
        assert!(l.confirmed(INFERRED | (w + 64)) && !l.confirmed(INFERRED | (w + 128)));
    }

    #[test]
    fn a_dram_word_taken_and_given_back_is_a_lock_unless_libc_took_it() {
        let mut l = InferredLocks::default();
        l.set_code(&crate::CodeInfo { library: vec![(0x9000, 0xa000)], ..crate::CodeInfo::default() });
        let word =
            |kind, tid, pc, old, new| Event { addr: 0x4c_0010, dev: 0, size: 4, ..ev(kind, tid, pc, 0, old, new) };
        let key = DRAM_WORD | 0x4c_0010;
        let acq = l.observe(&word(EventKind::WordAcquire, 1, 0x401000, 0, 1));
        assert_eq!(
            acq,
            Observed { op: Some(SyncOp::Acquire { lock: INFERRED | key, mode: Mode::Exclusive }), screen: false }
        );
        assert!(!l.confirmed(INFERRED | key));
        // Only the holder gives it back.
        assert_eq!(l.observe(&word(EventKind::WordRelease, 2, 0x401010, 1, 0)).op, None);
        assert_eq!(
            l.observe(&word(EventKind::WordRelease, 1, 0x401010, 1, 0)).op,
            Some(SyncOp::Release { lock: INFERRED | key })
        );
        assert!(l.confirmed(INFERRED | key));
        // A DRAM word has no PM bytes to leave out.
        assert!(l.lock_bytes().is_empty());
        // libc's own atomics (malloc's arena lock) are not the program's locks.
        let other = Event { addr: 0x4c_0020, ..word(EventKind::WordAcquire, 1, 0x9100, 0, 1) };
        assert_eq!(l.observe(&other), NOTHING);
        assert_eq!(l.acquisitions, 1);
    }

    #[test]
    fn slots_each_held_by_one_thread_are_not_locks_between_threads() {
        // APEX's log slots: each thread claims one by the same CAS from 0 (the others' CASes on
        // it fail) and stores 0 back when done. The lock pattern, but no slot was ever held by
        // two threads: no lock between threads, and settle makes none of the array one.
        let mut l = InferredLocks::default();
        let base = 0x1_0000_1000;
        for t in 0..4u32 {
            let w = base + 64 * u64::from(t);
            for other in 0..t {
                // Failed attempts on the slots taken before: nothing acquired.
                let taken = base + 64 * u64::from(other);
                assert_eq!(
                    l.observe(&ev(EventKind::RmwStore, t, 0x10, taken, u64::from(other) + 1, u64::from(other) + 1)).op,
                    None
                );
            }
            assert!(l.observe(&ev(EventKind::RmwStore, t, 0x10, w, 0, u64::from(t) + 1)).op.is_some());
            assert!(l.observe(&ev(EventKind::Store, t, 0x20, w, u64::from(t) + 1, 0)).op.is_some());
            assert!(l.confirmed(INFERRED | w));
        }
        l.settle();
        assert!(l.lock_bytes().is_empty());
        assert!(!l.observe(&ev(EventKind::Load, 9, 0x30, base, 0, 0)).screen);
    }

    #[test]
    fn counters_and_pointer_swaps_are_not_locks() {
        let mut l = InferredLocks::default();
        let w = 0x1_0000_0080;
        // A counter bumped from 0: tentatively held, never released.
        assert!(l.observe(&ev(EventKind::RmwStore, 1, 0x10, w, 0, 1)).op.is_some());
        assert_eq!(l.observe(&ev(EventKind::RmwStore, 1, 0x10, w, 1, 2)).op, None);
        assert!(!l.confirmed(INFERRED | w) && l.lock_bytes().is_empty());
        // A root pointer swapped from one table to another: never free, never acquired.
        assert_eq!(l.observe(&ev(EventKind::RmwStore, 2, 0x10, w + 8, 0x40, 0x80)).op, None);
        // A plain load of an RMW word is data until the word is confirmed.
        assert!(!l.observe(&ev(EventKind::Load, 2, 0x30, w, 0, 0)).screen);
    }
}
