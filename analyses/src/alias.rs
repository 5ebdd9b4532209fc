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
//!
//! Beyond PMRace, the profile finds *publication sites*: a store of an 8-byte value that names PM
//! memory (as an address in the same mapping, or as an offset into the same file, the way PMDK's
//! `PMEMoid.off` and hand-made pools do) whose first store in the run came after the first store
//! to the stored-to word's line: a pointer to a fresh object put where older code finds it (a
//! resize swapping in its new table, a split linking its new node, a list insert). Such a store
//! is where PMRace's published inter-thread inconsistencies begin (P-CLHT, FAST-FAIR): a thread
//! that loads the pointer before it is durable and inserts into the object has a durable side
//! effect of it. Each publishing store PC is one entry, whatever address it stores to (the
//! object, so the word, differs between runs), with the loads of every word it stored; these
//! entries come first.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use emu::events::{Event, EventKind, Interest};
use emu::pm::{PmDevice, FILE_SHIFT};
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
    /// A publication site: `stores` are the publishing stores and `loads` the loads of the words
    /// they stored, on any address (`dev` is then the first such word, for the summary only).
    pub publication: bool,
}

/// What a run's profile found.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// The alias pairs covered: (first PC, second PC, type).
    pub pairs: BTreeSet<(u64, u64, PairType)>,
    words: BTreeMap<u64, Entry>,
    shared: BTreeSet<u64>,
    /// Publishing store PC → the words it stored a fresh object's address to.
    publications: BTreeMap<u64, BTreeSet<u64>>,
    /// The PC of every PM load seen, library code's too: a targeted interleaving whose loads
    /// are none of these, in a run that went as this one did so far, has held nobody yet.
    pub loads_seen: BTreeSet<u64>,
}

/// PMRace keeps at most this many entries (`INJECTION_POINT_LIMIT`).
pub const MAX_ENTRIES: usize = 100;

impl Profile {
    /// The priority entries: shared words that have both loads and stores, heaviest first.
    pub fn entries(&self) -> Vec<Entry> {
        let mut pubs: Vec<Entry> = Vec::new();
        for (&pc, words) in &self.publications {
            // One entry per field the instruction publishes into: words whose loads share a PC
            // are one field (a node's child slots, read by the same search loop); words read by
            // different code are different fields (a table's root and a bucket's overflow link,
            // both stored by one non-inlined store helper). Holding the readers of one field only
            // does not hold a thread that reads the other under a lock the publisher then needs.
            let mut fields: Vec<(Entry, bool)> = Vec::new();
            for w in words {
                let Some(x) = self.words.get(w) else { continue };
                if x.loads.is_empty() {
                    continue;
                }
                let mut e = Entry { dev: *w, publication: true, ..Entry::default() };
                e.stores.insert(pc);
                e.loads.extend(x.loads.iter().copied());
                e.weight = x.weight;
                let mut shared = self.shared.contains(w);
                // Merge every field this word's loads overlap (transitively, by absorbing them).
                let mut i = 0;
                while i < fields.len() {
                    if fields[i].0.loads.intersection(&e.loads).next().is_some() {
                        let (f, s) = fields.swap_remove(i);
                        e.loads.extend(f.loads);
                        e.weight += f.weight;
                        e.dev = e.dev.min(f.dev);
                        shared |= s;
                        i = 0;
                    } else {
                        i += 1;
                    }
                }
                fields.push((e, shared));
            }
            // Only a pointer another thread loaded can be read before it is durable.
            pubs.extend(fields.into_iter().filter(|(_, shared)| *shared).map(|(e, _)| e));
        }
        pubs.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.stores.cmp(&b.stores)).then(a.loads.cmp(&b.loads)));
        let mut out: Vec<Entry> = self
            .shared
            .iter()
            .filter_map(|w| self.words.get(w))
            .filter(|e| !e.loads.is_empty() && !e.stores.is_empty() && e.weight > 0)
            .cloned()
            .collect();
        out.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.dev.cmp(&b.dev)));
        pubs.extend(out);
        pubs.truncate(MAX_ENTRIES);
        pubs
    }
}

#[derive(Clone, Copy)]
struct Birth {
    seq: u64,
    tid: u32,
    solo: bool,
}

#[derive(Clone, Copy)]
struct Last {
    tid: u32,
    pc: u64,
    write: bool,
}

/// The profiler, run as one more pass; its [`Profile`] is shared with the caller.
///
/// A copy ([`Analysis::fork`], for a checkpoint of the run) shares the caller's profile too, and
/// keeps the profile as it was then: the copy made of it when the checkpoint is restored puts that
/// back into the shared profile before it goes on, so that the caller finds there what the
/// restored run profiled from its start. (A checkpoint's copy is only ever copied when it is
/// restored; a running profiler's copy is a checkpoint's.)
pub struct AliasProfiler {
    profile: Rc<RefCell<Profile>>,
    /// In a checkpoint's copy: the profile when the checkpoint was taken.
    at_checkpoint: Option<Box<Profile>>,
    last: FxHashMap<u64, Last>,
    /// Per PM line: event number of its first store (its "birth"), that store's thread, and
    /// whether no other thread stored to it since (a fresh object is its creator's alone).
    born: FxHashMap<u64, Birth>,
    seq: u64,
    code: CodeInfo,
}

impl AliasProfiler {
    /// A profiler writing into `profile`.
    pub fn new(profile: Rc<RefCell<Profile>>) -> AliasProfiler {
        AliasProfiler {
            profile,
            at_checkpoint: None,
            last: FxHashMap::default(),
            born: FxHashMap::default(),
            seq: 0,
            code: CodeInfo::default(),
        }
    }

    /// The device line a stored 8-byte value names, if it names a PM line stored to in this run:
    /// as an address in the store's own mapping, or as an offset into the store's file.
    fn target(&self, ev: &Event) -> Option<u64> {
        let mask = (1u64 << FILE_SHIFT) - 1;
        let (file, off) = (ev.dev & !mask, ev.dev & mask);
        let v = ev.new;
        let base = ev.addr.wrapping_sub(off);
        let as_addr = v.checked_sub(base).filter(|o| *o <= mask);
        [as_addr, Some(v).filter(|o| *o <= mask)]
            .into_iter()
            .flatten()
            .map(|o| (file | o) & !63)
            .find(|l| self.born.contains_key(l))
    }
}

impl AliasProfiler {
    /// A PM store: its line's birth, and whether it publishes a fresh object.
    fn birth_and_publication(&mut self, ev: &Event, own: bool) {
        self.seq += 1;
        let line = ev.dev & !63;
        let b = self.born.entry(line).or_insert(Birth { seq: self.seq, tid: ev.tid, solo: true });
        b.solo &= b.tid == ev.tid;
        let field_born = b.seq;
        if own && ev.size == 8 && ev.new != 0 {
            // A pointer to an object younger than the field it is stored in, that only the
            // storing thread has written so far: a publication.
            if let Some(t) = self.target(ev) {
                let o = self.born[&t];
                if t != line && o.seq > field_born && o.tid == ev.tid && o.solo {
                    self.profile.borrow_mut().publications.entry(ev.pc).or_default().insert(ev.dev & !7);
                }
            }
        }
    }

    /// A non-temporal PM store: a birth or a publication, never an alias-pair endpoint.
    fn nt_store(&mut self, ev: &Event) {
        let own = !self.code.is_library(ev.pc);
        self.birth_and_publication(ev, own);
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
            EventKind::Load => {
                self.profile.borrow_mut().loads_seen.insert(ev.pc);
                false
            }
            EventKind::Store | EventKind::RmwStore => true,
            // Non-temporal stores are no sync-point partners (PMRace drops them), but they do
            // create objects and publish them (P-CLHT's resize swaps its root with `movnti`).
            EventKind::NtStore => {
                self.nt_store(ev);
                return;
            }
            _ => return,
        };
        let own = !self.code.is_library(ev.pc);
        let word = ev.dev & !7;
        if write {
            self.birth_and_publication(ev, own);
        }
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

    fn fork(&self) -> Option<Box<dyn Analysis>> {
        let at_checkpoint = match &self.at_checkpoint {
            // A checkpoint restored: its run goes on with the profile it had then.
            Some(saved) => {
                *self.profile.borrow_mut() = (**saved).clone();
                None
            }
            // A checkpoint taken.
            None => Some(Box::new(self.profile.borrow().clone())),
        };
        Some(Box::new(AliasProfiler {
            profile: self.profile.clone(),
            at_checkpoint,
            last: self.last.clone(),
            born: self.born.clone(),
            seq: self.seq,
            code: self.code.clone(),
        }))
    }
}
