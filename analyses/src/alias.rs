//! PM alias pairs: PMRace's coverage metric and the source of its targeted interleavings
//! (Chen et al., "Efficiently Detecting Concurrency Bugs in Persistent Memory Programs", ASPLOS 2022,
//! §4.2.1–4.2.2).
//!
//! A *PM alias pair* is two back-to-back accesses to the same PM bytes by different threads:
//! (previous instruction, current instruction, type), the type being read→read, read→write,
//! write→write, or write→read split by whether the written data was durable when it was read
//! (PMRace's UWR and PWR). Back-to-back is against the last access to each 8-byte word. The set of
//! pairs a run covers is its coverage; a run of PMRace's exploration that adds none is not worth
//! repeating.
//!
//! The profile also builds PMRace's *priority entries*: each PM word seen in a cross-thread pair,
//! with the loads and stores that touched it, ordered by how many pair endpoints are the
//! program's own code (library code such as libpmemobj's internals does not count, and
//! non-temporal stores are left out, as in PMRace's `trace_walker.py`). Each entry's loads become
//! sync points of one targeted interleaving (`emu::sched::Hold`).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use emu::events::{Event, EventKind, Interest};
use emu::pm::PmDevice;
use rustc_hash::FxHashMap;

use crate::{Analysis, CodeInfo, RawFinding};

/// Pair types (PMRace's XRR, XRW, XWW, UWR, PWR).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PairType {
    /// Two loads (XRR).
    ReadRead,
    /// A load and a store (XRW).
    ReadWrite,
    /// Two stores (XWW).
    WriteWrite,
    /// A load of data not yet durable.
    UnpersistedWriteRead,
    /// A load of durable data (PWR).
    PersistedWriteRead,
}

/// One PM word's accesses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// Device address of the word (8-byte aligned).
    pub dev: u64,
    /// PCs of the loads.
    pub loads: BTreeSet<u64>,
    /// PCs of the stores.
    pub stores: BTreeSet<u64>,
    /// Cross-thread pair endpoints in the program's own code.
    pub weight: u64,
}

/// What a run's profile found.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// The alias pairs covered: (first PC, second PC, type).
    pub pairs: BTreeSet<(u64, u64, PairType)>,
    words: BTreeMap<u64, Entry>,
    shared: BTreeSet<u64>,
}

/// PMRace keeps at most this many entries (`INJECTION_POINT_LIMIT`).
pub const MAX_ENTRIES: usize = 100;

impl Profile {
    /// The priority entries: shared words that have both loads and stores, heaviest first.
    pub fn entries(&self) -> Vec<Entry> {
        let mut out: Vec<Entry> = self
            .shared
            .iter()
            .filter_map(|w| self.words.get(w))
            .filter(|e| !e.loads.is_empty() && !e.stores.is_empty() && e.weight > 0)
            .cloned()
            .collect();
        out.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.dev.cmp(&b.dev)));
        out.truncate(MAX_ENTRIES);
        out
    }
}

#[derive(Clone, Copy)]
struct Last {
    tid: u32,
    pc: u64,
    write: bool,
}

/// The profiler, run as one more pass; its [`Profile`] is shared with the caller.
pub struct AliasProfiler {
    profile: Rc<RefCell<Profile>>,
    last: FxHashMap<u64, Last>,
    code: CodeInfo,
}

impl AliasProfiler {
    /// A profiler writing into `profile`.
    pub fn new(profile: Rc<RefCell<Profile>>) -> AliasProfiler {
        AliasProfiler { profile, last: FxHashMap::default(), code: CodeInfo::default() }
    }
}

impl Analysis for AliasProfiler {
    fn name(&self) -> &'static str {
        "alias-profile"
    }

    fn interest(&self) -> Interest {
        Interest::LOADS.union(Interest::STORES)
    }

    fn set_code(&mut self, code: &CodeInfo) {
        self.code = code.clone().sorted();
    }

    fn on_event(&mut self, ev: &Event, device: &PmDevice) {
        if ev.dev == 0 {
            return;
        }
        let write = match ev.kind {
            EventKind::Load => false,
            EventKind::Store | EventKind::RmwStore => true,
            // Non-temporal stores are no sync-point partners (PMRace drops them).
            _ => return,
        };
        let own = !self.code.is_library(ev.pc);
        let word = ev.dev & !7;
        let mut p = self.profile.borrow_mut();
        if let Some(prev) = self.last.get(&word).copied() {
            if prev.tid != ev.tid {
                let ty = match (prev.write, write) {
                    (false, false) => PairType::ReadRead,
                    (false, true) => PairType::ReadWrite,
                    (true, true) => PairType::WriteWrite,
                    (true, false) if device.durable_hw(ev.dev, u64::from(ev.size)) => PairType::PersistedWriteRead,
                    (true, false) => PairType::UnpersistedWriteRead,
                };
                p.pairs.insert((prev.pc, ev.pc, ty));
                p.shared.insert(word);
                let e = p.words.entry(word).or_insert_with(|| Entry { dev: word, ..Entry::default() });
                e.weight += u64::from(own) + u64::from(!self.code.is_library(prev.pc));
            }
        }
        if own {
            let e = p.words.entry(word).or_insert_with(|| Entry { dev: word, ..Entry::default() });
            if write {
                e.stores.insert(ev.pc);
            } else {
                e.loads.insert(ev.pc);
            }
        }
        self.last.insert(word, Last { tid: ev.tid, pc: ev.pc, write });
    }

    fn finish(&mut self, _device: &PmDevice) -> Vec<RawFinding> {
        Vec::new()
    }
}
