//! `pmrace`: PMRace's PM inconsistency checkers (Chen et al., "Efficiently Detecting Concurrency
//! Bugs in Persistent Memory Programs", ASPLOS 2022), over one execution of the emulator.
//!
//! # What it reports
//! - **inter-thread-inconsistency** (the paper's Definition 2): thread B loads PM bytes that
//!   thread A stored and that are not yet durable (a *candidate*, Definition 1), and then stores
//!   to PM a value derived from them (*content flow*) or through an address derived from them
//!   (*address flow*, the P-CLHT resize bug). A crash after B's store is durable and before A's
//!   is leaves B's effect without its cause. Locations: the `unpersisted load`, the `durable side
//!   effect` and the `source store`.
//! - **intra-thread-inconsistency**: the same within one thread (A = B). Counted always,
//!   reported with `pmrace:intra=on`: most are a thread reading back data it is initialising
//!   and persists a little later, which crash testing judges better.
//! - **sync-inconsistency** (Definition 3): a synchronisation variable in PM becomes durable
//!   while held, so a crash leaves it held with no thread to release it. Locations: the
//!   `acquire` and the instruction that made it durable (`persisted while held`).
//!
//! # How
//! - *Candidates.* On each PM load the device says, per byte, whether the latest store is durable
//!   and which thread made it. Strict (default): not durable under the hardware rule (a `clwb`
//!   without its fence is not durable). `pmrace:compat=on` uses the paper's released rule: a flush
//!   cleans its line at once and non-temporal stores are clean when issued. Bytes inside a range
//!   a PMDK transaction registered (`TX_ADD`) are not candidates: the undo log restores them.
//!   Ranges come from PMDK's client requests (`emu::client`: pmemcheck's `ADD_TO_TX` and
//!   `REMOVE_FROM_TX`, cleared when the outermost transaction ends).
//!   Candidates are deduplicated by (source store PC, load PC); each is one taint source id.
//!   Loads by library code (functions without source lines, such as libpmemobj's pool and heap
//!   management) are not candidates, except the copies `memcpy` and its kin make for their
//!   caller: PMRace likewise narrows its checks to the program's data.
//! - *Durable side effects* come from the machine's byte-granular taint engine
//!   (`emu::taint`): the loaded bytes carry the candidate's id through registers, memory, SSE
//!   copies and arithmetic (explicit data flow only, as DataFlowSanitizer); every PM store
//!   reports the ids its value and its address registers carry. A store over the candidate's own
//!   source bytes is not a side effect (it overwrites the non-persisted data itself).
//! - *Synchronisation variables*, without annotations: a PM word changed by a locked
//!   read-modify-write (`lock cmpxchg`, `xchg`) away from its previous value and later stored
//!   back to it by the thread that moved it away is a lock, its previous value the initial one
//!   (brought back by another thread outside a lock function, it is a lock-free variable such
//!   as a stack's head, never reported); words listed in `--config`
//!   (`sync_vars`, PMRace's `pm_sync_var_hint`) are synchronisation variables from the start.
//!   Locks taken inside libpmemobj's lock functions are not reported: PMDK reinitialises its
//!   locks when a pool is opened.
//! - *Post-failure validation.* When a side effect becomes durable while its source still is
//!   not, or a held variable becomes durable, the pass captures the crash image a crash at that
//!   moment leaves (every non-durable line lost: a state the model allows) and asks for the
//!   program's recovery (`--recover`) to be run on it. An inconsistency whose bytes recovery
//!   overwrites before reading them, or a variable recovery resets to its initial value, is a
//!   validated false positive: counted, not reported.
//!
//! # What it can miss
//! One execution is checked: an interleaving in which no thread reads unpersisted data shows
//! nothing (explore schedules with `--explore`). Control dependences carry no taint, so a side
//! effect chosen by a branch on the unpersisted value is missed, as in the paper. Durable side
//! effects outside PM (files, sockets) are not checked. A lock recognised by its release is
//! reported only if the run releases it. x86-TSO store buffering is not modelled, so a load
//! never reads a store still in its writer's store buffer.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use emu::callstack::StackId;
use emu::events::{Event, EventKind, Interest};
use emu::pm::PmDevice;
use rustc_hash::FxHashMap;

use crate::{Analysis, CodeInfo, Finding, ImageSink, RawFinding, RawLocation, Settings, Validation};

/// `pmrace:compat=on|off:intra=on|off`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// The paper's persistence rule: a flush alone makes data clean, NT stores are clean.
    pub compat: bool,
    /// Report intra-thread inconsistencies too (always counted).
    pub intra: bool,
}

impl Options {
    /// Parses `compat=on|off:intra=on|off`.
    pub fn parse(spec: &str) -> Result<Options, String> {
        let mut o = Options::default();
        for kv in spec.split(':').filter(|s| !s.is_empty()) {
            match kv {
                "compat=on" | "compat=1" | "compat=true" => o.compat = true,
                "compat=off" | "compat=0" | "compat=false" => o.compat = false,
                "intra=on" | "intra=1" | "intra=true" => o.intra = true,
                "intra=off" | "intra=0" | "intra=false" => o.intra = false,
                other => return Err(format!("pmrace: unknown option `{other}` (compat=on|off, intra=on|off)")),
            }
        }
        Ok(o)
    }
}

/// A program point with its stack and thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Site {
    pc: u64,
    stack: StackId,
    tid: u32,
}

/// A PM store the pass may still name as a candidate's source: 24 bytes.
#[derive(Clone, Copy)]
struct StoreRec {
    /// The device's store id.
    id: u64,
    dev: u64,
    size: u32,
    /// Index of its site in [`Stores::sites`].
    site: u32,
}

/// The recent stores, in store id order. The device counts store ids up, so a new store goes
/// at the end and a lookup is a binary search: 32 bytes a store, where a hash map from id to
/// record cost about 150 (its table doubled, at most 7/8 full).
#[derive(Clone, Default)]
struct Stores {
    recs: Vec<StoreRec>,
    /// Each record's event sequence number, at the same index, with the compat rule only (the
    /// only reader): 8 bytes a store the default rule does not pay.
    seqs: Vec<u64>,
    keep_seqs: bool,
    sites: Vec<Site>,
    site_ids: FxHashMap<Site, u32>,
    /// The site of the last store recorded.
    last_site: u32,
}

impl Stores {
    fn len(&self) -> usize {
        self.recs.len()
    }

    /// Records store `id` (the elements of one `rep` instruction share it: the last wins).
    fn insert(&mut self, id: u64, site: Site, seq: u64, dev: u64, size: u32) {
        let site = match self.sites.get(self.last_site as usize) {
            Some(last) if *last == site => self.last_site,
            _ => *self.site_ids.entry(site).or_insert_with(|| {
                self.sites.push(site);
                self.sites.len() as u32 - 1
            }),
        };
        self.last_site = site;
        let rec = StoreRec { id, dev, size, site };
        let i = match self.recs.last() {
            Some(last) if last.id < id => self.recs.len(),
            None => 0,
            Some(_) => match self.recs.binary_search_by_key(&id, |r| r.id) {
                Ok(i) => {
                    self.recs[i] = rec;
                    if self.keep_seqs {
                        self.seqs[i] = seq;
                    }
                    return;
                }
                Err(i) => i,
            },
        };
        self.recs.insert(i, rec);
        if self.keep_seqs {
            self.seqs.insert(i, seq);
        }
    }

    fn find(&self, id: u64) -> Option<usize> {
        match self.recs.last() {
            Some(last) if last.id == id => Some(self.recs.len() - 1),
            _ => self.recs.binary_search_by_key(&id, |r| r.id).ok(),
        }
    }

    /// The site of store `id`.
    fn site(&self, id: u64) -> Option<Site> {
        self.find(id).map(|i| self.sites[self.recs[i].site as usize])
    }

    /// The event sequence number of store `id` (kept with the compat rule only).
    fn seq(&self, id: u64) -> Option<u64> {
        self.find(id).and_then(|i| self.seqs.get(i).copied())
    }

    fn contains(&self, id: u64) -> bool {
        self.find(id).is_some()
    }

    /// Keeps the stores for which `keep(id, dev, size)` holds.
    fn retain(&mut self, mut keep: impl FnMut(u64, u64, u32) -> bool) {
        if !self.keep_seqs {
            self.recs.retain(|r| keep(r.id, r.dev, r.size));
            return;
        }
        let mut n = 0;
        for i in 0..self.recs.len() {
            let r = self.recs[i];
            if keep(r.id, r.dev, r.size) {
                self.recs[n] = r;
                self.seqs[n] = self.seqs[i];
                n += 1;
            }
        }
        self.recs.truncate(n);
        self.seqs.truncate(n);
    }
}

/// A deduplicated candidate: a (source store, load) pair.
#[derive(Clone)]
struct Candidate {
    store: Site,
    load: Site,
    inter: bool,
    /// Device range of the latest instance's non-persisted source bytes.
    source: (u64, u32),
}

/// An inconsistency: a candidate with a durable side effect at a store site.
#[derive(Clone)]
struct Inconsistency {
    candidate: u32,
    side: Site,
    content: bool,
    address: bool,
    count: u64,
    validation: Option<Validation>,
    /// The source was durable again by the time of every side effect seen (not reported).
    window_closed: bool,
    /// The distinct PM bytes the side-effect store wrote (the first few).
    targets: Vec<(u64, u32)>,
}

/// Side-effect stores named in one finding, at most.
const MAX_SIDE_LOCATIONS: usize = 4;

/// Distinct side-effect targets kept per inconsistency to judge whether they are data.
const MAX_TARGETS: usize = 8;

/// A synchronisation variable in PM.
#[derive(Clone)]
struct SyncVar {
    size: u32,
    init: u64,
    current: u64,
    /// Listed by the user: a lock without needing to see it released.
    annotated: bool,
    /// Taken inside libpmemobj's lock functions.
    pmdk: bool,
    /// The store that moved it away from `init`.
    acquire: Option<Site>,
    /// Seen back at `init` after being held (so it is a lock).
    released: bool,
    /// The thread that moved it away from `init` in the current holding.
    holder: Option<u32>,
    /// Brought back to `init` by a thread that had not moved it away, outside any recognised
    /// lock call: a lock-free variable (a Treiber stack's head pushed by one thread and popped
    /// empty by another), not a lock. Mutual exclusion means the holder releases; a lock
    /// function's own release (a reader-writer lock's last reader) is exempt.
    lock_free: bool,
    /// The current holding was already found durable.
    durable_seen: bool,
}

impl SyncVar {
    /// Held (away from its initial value since an acquiring store) and not yet found durable
    /// in this holding: [`Pmrace::held_vars`] lists exactly these.
    fn is_held(&self) -> bool {
        self.current != self.init && !self.pmdk && self.acquire.is_some() && !self.durable_seen
    }

    /// Known to be a lock: annotated, or seen released by its holder.
    fn is_lock(&self) -> bool {
        self.annotated || (self.released && !self.lock_free)
    }
}

#[derive(Clone)]
struct SyncFinding {
    /// The variable validation checks (the first seen).
    dev: u64,
    /// The variables seen at these sites (the first few).
    devs: Vec<u64>,
    acquire: Site,
    persisted_at: Site,
    count: u64,
    validation: Option<Validation>,
}

#[derive(Clone, Default)]
struct Counts {
    inter_candidates: u64,
    intra_candidates: u64,
    inter_inconsistencies: u64,
    intra_inconsistencies: u64,
    sync_inconsistencies: u64,
    images: u64,
    /// Inconsistencies whose source was durable again before each of their side effects.
    closed: u64,
    /// Inconsistencies whose side effects only took or released locks.
    sync_side_effects: u64,
}

/// Crash images captured for validation per run, at most (each copies the PM files).
const MAX_IMAGES: u64 = 32;

#[derive(Clone, Default)]
/// The `pmrace` pass: PMRace's checkers over taint from unpersisted loads.
pub struct Pmrace {
    options: Options,
    /// Each recent store by device store id: its site, event sequence number (compat rule) and
    /// bytes. Pruned of stores no byte holds unpersisted any more ([`Pmrace::prune_stores`]), so
    /// it stays as large as the data not yet durable, not the run.
    stores: Stores,
    /// `stores`' size after the last pruning.
    stores_kept: usize,
    /// Last flush of each device line, as an event sequence number (compat rule only).
    flushed: FxHashMap<u64, u64>,
    seq: u64,
    candidates: Vec<Candidate>,
    candidate_ids: FxHashMap<(u64, u64), u32>,
    inconsistencies: Vec<Inconsistency>,
    inconsistency_ids: FxHashMap<(u32, u64), usize>,
    sync_vars: BTreeMap<u64, SyncVar>,
    /// The variables held and not yet found durable in this holding: what a persist checks.
    /// Scanning every variable ever seen at each fence cost time quadratic in the run (every
    /// node's version word of a radix tree stays a variable for good).
    held_vars: BTreeSet<u64>,
    sync_findings: Vec<SyncFinding>,
    sync_finding_ids: FxHashMap<(u64, u64), usize>,
    /// Threads inside a libpmemobj lock function.
    pmdk_locks: crate::sync::PmdkLockCalls,
    /// The recognised calls each thread is in: a lock function's own accesses to its lock word
    /// (pthread's, libpmemobj's, `--config` custom locks') are synchronisation, not data.
    sync_calls: crate::sync::SyncCalls,
    /// PM ranges registered with a PMDK transaction (pmemcheck `ADD_TO_TX`), per thread:
    /// (device start, end), until removed or the outermost transaction ends.
    tx_ranges: FxHashMap<u32, Vec<(u64, u64)>>,
    tx_depth: FxHashMap<u32, u32>,
    annotated: Vec<crate::SyncVar>,
    sink: Option<Rc<RefCell<dyn ImageSink>>>,
    counts: Counts,
    code: CodeInfo,
    /// [`CodeInfo::is_library`] of the PCs seen: asked at every PM load once taint is on.
    library: crate::shadow::PcCache,
}

impl Pmrace {
    /// The pass with these options.
    pub fn new(options: Options) -> Pmrace {
        let mut p = Pmrace { options, ..Pmrace::default() };
        p.stores.keep_seqs = options.compat;
        p
    }

    fn site(ev: &Event) -> Site {
        Site { pc: ev.pc, stack: ev.stack, tid: ev.tid }
    }

    /// The first byte of `[dev, dev+size)` whose latest store is not durable (under the
    /// selected rule), with that store's id and writer.
    fn unpersisted_byte(&self, dev: u64, size: u32, device: &PmDevice) -> Option<(u64, u64, u32)> {
        // One line-table probe per line (a load is asked about at every PM load); whether the
        // load is inside a transaction's range does not depend on the byte: asked once.
        let mut in_tx = None;
        let pick = |a: u64, info: &emu::pm::PersistInfo| {
            if info.durable_hw {
                return false;
            }
            if self.options.compat {
                if info.nt {
                    return false;
                }
                let stored = self.stores.seq(info.store.0).unwrap_or(0);
                if self.flushed.get(&(a & !63)).is_some_and(|&f| f > stored) {
                    return false;
                }
            }
            !*in_tx.get_or_insert_with(|| self.in_tx(dev, size))
        };
        let (a, info) = device.find_persist_info(dev, u64::from(size), pick)?;
        Some((a, info.store.0, info.writer))
    }

    fn in_tx(&self, dev: u64, size: u32) -> bool {
        let end = dev + u64::from(size);
        self.tx_ranges.values().flatten().any(|&(s, e)| dev >= s && end <= e)
    }

    fn capture(&mut self, ev: &Event, device: &PmDevice) -> Option<u32> {
        // Each image holds a copy of the PM files: a bounded number per run.
        if self.counts.images >= MAX_IMAGES {
            return None;
        }
        let sink = self.sink.clone()?;
        let image = sink.borrow_mut().capture(ev, device);
        if image.is_some() {
            self.counts.images += 1;
        }
        image
    }

    /// Whether every byte a side effect wrote is a synchronisation variable (a word the program
    /// used as a lock: moved away from its value by a locked read-modify-write and back, or
    /// annotated).
    fn only_sync(&self, inc: &Inconsistency) -> bool {
        !inc.targets.is_empty()
            && inc.targets.iter().all(|&(dev, size)| {
                self.sync_vars
                    .range(..=dev)
                    .next_back()
                    .is_some_and(|(&v, var)| dev + u64::from(size) <= v + u64::from(var.size) && var.is_lock())
            })
    }

    /// Forgets the stores no byte holds unpersisted any more: none can be a candidate's source
    /// again. Run when the map has doubled since the last time, so it costs O(1) a store.
    fn prune_stores(&mut self, device: &PmDevice) {
        self.stores.retain(|id, dev, size| {
            (dev..dev + u64::from(size))
                .any(|a| device.persist_info(a).is_some_and(|i| i.store.0 == id && !i.durable_hw))
        });
        self.stores_kept = self.stores.len();
    }

    /// After something became durable: variables persisted while held.
    fn check_durability(&mut self, ev: &Event, device: &PmDevice) {
        if self.held_vars.is_empty() {
            return;
        }
        // In address order, as the variables themselves are kept.
        let held: Vec<(u64, u32)> = self.held_vars.iter().map(|d| (*d, self.sync_vars[d].size)).collect();
        for (dev, size) in held {
            if !device.durable_hw(dev, u64::from(size)) {
                continue;
            }
            let v = &self.sync_vars[&dev];
            let Some(acquire) = v.acquire else { continue };
            // One finding per (acquire, persist) site pair, whichever variable (PMRace's unique
            // bug is per synchronisation-variable type; a lock per bucket is one bug, not one per
            // bucket): the first variable seen is the one validation checks.
            let (init, key) = (v.init, (acquire.pc, ev.pc));
            match self.sync_finding_ids.get(&key) {
                Some(&i) => {
                    let f = &mut self.sync_findings[i];
                    f.count += 1;
                    if f.devs.len() < MAX_TARGETS && !f.devs.contains(&dev) {
                        f.devs.push(dev);
                    }
                }
                None => {
                    let image = self.capture(ev, device);
                    let validation = image.map(|image| Validation {
                        image,
                        overwritten: Vec::new(),
                        reset: Some((dev, size, init)),
                        newest_lines: Vec::new(),
                    });
                    self.sync_finding_ids.insert(key, self.sync_findings.len());
                    self.sync_findings.push(SyncFinding {
                        dev,
                        devs: vec![dev],
                        acquire,
                        persisted_at: Self::site(ev),
                        count: 1,
                        validation,
                    });
                }
            }
            if let Some(v) = self.sync_vars.get_mut(&dev) {
                v.durable_seen = true;
            }
            self.held_vars.remove(&dev);
        }
    }

    fn on_store(&mut self, ev: &Event, device: &PmDevice) {
        if let Some(id) = ev.store {
            self.stores.insert(id.0, Self::site(ev), self.seq, ev.dev, ev.size);
            if self.stores.len() >= 2 * self.stores_kept + 4096 {
                self.prune_stores(device);
            }
        }
        // Annotated variables: known from their offset in any PM file.
        if !self.annotated.is_empty() {
            let off = ev.dev & ((1 << 40) - 1);
            for a in &self.annotated {
                if a.offset == off && !self.sync_vars.contains_key(&ev.dev) {
                    self.sync_vars.insert(
                        ev.dev,
                        SyncVar {
                            size: a.size,
                            init: a.init,
                            current: a.init,
                            annotated: true,
                            pmdk: false,
                            acquire: None,
                            released: false,
                            holder: None,
                            lock_free: false,
                            durable_seen: false,
                        },
                    );
                }
            }
        }
        let rmw = ev.kind == EventKind::RmwStore;
        let pmdk = self.pmdk_locks.inside(ev.tid);
        if rmw && ev.size <= 8 && ev.old != ev.new && !self.sync_vars.contains_key(&ev.dev) {
            self.sync_vars.insert(
                ev.dev,
                SyncVar {
                    size: ev.size,
                    init: ev.old,
                    current: ev.old,
                    annotated: false,
                    pmdk,
                    acquire: None,
                    released: false,
                    holder: None,
                    lock_free: false,
                    durable_seen: false,
                },
            );
        }
        if let Some(v) = self.sync_vars.get_mut(&ev.dev) {
            if ev.size == v.size {
                v.pmdk |= pmdk;
                let was = v.current;
                v.current = ev.new;
                if was == v.init && ev.new != v.init {
                    v.acquire = Some(Self::site(ev));
                    v.holder = Some(ev.tid);
                    v.durable_seen = false;
                } else if ev.new == v.init && was != v.init {
                    v.released = true;
                    if v.holder.is_some_and(|h| h != ev.tid) && !self.sync_calls.is_own(ev) {
                        v.lock_free = true;
                    }
                    v.acquire = None;
                    v.holder = None;
                }
                if v.is_held() {
                    self.held_vars.insert(ev.dev);
                } else {
                    self.held_vars.remove(&ev.dev);
                }
            }
        }
    }
}

impl Analysis for Pmrace {
    fn name(&self) -> &'static str {
        "pmrace"
    }

    /// An inconsistency is judged when its side effect is stored (was the source durable then?)
    /// and a sync-inconsistency when the held variable becomes durable, so both stand when the
    /// run stops before the program ends: a server that waits for requests forever, a hang at
    /// the instruction budget, an interrupt. Their crash images were captured as they happened
    /// and are validated as after a run that ended. What a stop leaves out: a lock recognised by
    /// its release is not yet one if the run stopped while it was held.
    fn reports_when_stopped(&self) -> bool {
        true
    }

    fn interest(&self) -> Interest {
        Interest::LOADS.union(Interest::STORES).union(Interest::PERSIST).union(Interest::SYNC).union(Interest::TAINT)
    }

    fn set_code(&mut self, code: &CodeInfo) {
        self.code = code.clone().sorted();
        self.library.clear();
    }

    fn set_image_sink(&mut self, sink: Rc<RefCell<dyn ImageSink>>) {
        self.sink = Some(sink);
    }

    fn fork(&self) -> Option<Box<dyn Analysis>> {
        // The candidates, recent stores, inconsistencies, variables and counts are plain data. A
        // crash image already captured lives in the run's image store, which a copy cannot own:
        // before the first one, the copy captures into the store of the run it goes on in (the
        // session gives it one, [`Analysis::set_image_sink`]).
        if self.counts.images > 0 {
            return None;
        }
        Some(Box::new(self.clone()))
    }

    fn configure(&mut self, settings: &Settings) {
        self.annotated = settings.sync_vars.clone();
    }

    fn on_event(&mut self, ev: &Event, device: &PmDevice) {
        self.seq += 1;
        self.pmdk_locks.observe(ev);
        self.sync_calls.observe(ev);
        match ev.kind {
            EventKind::Store | EventKind::NtStore | EventKind::RmwStore if ev.dev != 0 => self.on_store(ev, device),
            EventKind::Flush(_) if ev.dev != 0 => {
                if self.options.compat {
                    self.flushed.insert(ev.dev & !63, self.seq);
                }
                self.check_durability(ev, device);
            }
            EventKind::Fence(_) | EventKind::Flush(_) | EventKind::Persist => self.check_durability(ev, device),
            EventKind::TxAdd if ev.dev != 0 => {
                self.tx_ranges.entry(ev.tid).or_default().push((ev.dev, ev.dev + u64::from(ev.size)));
            }
            EventKind::TxRemove if ev.dev != 0 => {
                let (s, e) = (ev.dev, ev.dev + u64::from(ev.size));
                if let Some(r) = self.tx_ranges.get_mut(&ev.tid) {
                    r.retain(|&(a, b)| b <= s || a >= e);
                }
            }
            EventKind::TxBegin => *self.tx_depth.entry(ev.tid).or_default() += 1,
            EventKind::TxEnd => {
                let d = self.tx_depth.entry(ev.tid).or_default();
                *d = d.saturating_sub(1);
                if *d == 0 {
                    // Committed or aborted: the undo log no longer covers the ranges.
                    self.tx_ranges.remove(&ev.tid);
                }
            }
            _ => {}
        }
    }

    fn may_taint(&self, ev: &Event, device: &PmDevice) -> bool {
        // `taint_source`'s conditions, without naming the candidate (a load event changes
        // nothing they read).
        ev.dev != 0
            && !self.code.is_library(ev.pc)
            && !self.sync_calls.is_own(ev)
            && self.unpersisted_byte(ev.dev, ev.size, device).is_some_and(|(_, store, _)| self.stores.contains(store))
    }

    fn taint_source(&mut self, ev: &Event, device: &PmDevice) -> u32 {
        // A library's loads of its own metadata (libpmemobj's pool and heap management) are
        // the library's business; copies it makes for the program (memcpy) are the program's.
        let code = &self.code;
        if ev.dev == 0 || self.library.get(ev.pc, |pc| code.is_library(pc)) {
            return 0;
        }
        // A lock function reading its own lock word (P-ART's version lock, taken by a CAS and
        // released by an increment, which never returns to its first value): the value decides
        // who holds the lock, no data.
        if self.sync_calls.is_sync_access(ev) {
            return 0;
        }
        let Some((byte, store, writer)) = self.unpersisted_byte(ev.dev, ev.size, device) else { return 0 };
        let Some(store_site) = self.stores.site(store) else { return 0 };
        let key = (store_site.pc, ev.pc);
        let inter = writer != ev.tid;
        let id = match self.candidate_ids.get(&key) {
            Some(&id) => id,
            None => {
                self.candidates.push(Candidate { store: store_site, load: Self::site(ev), inter, source: (0, 0) });
                let id = self.candidates.len() as u32;
                self.candidate_ids.insert(key, id);
                id
            }
        };
        if inter {
            self.counts.inter_candidates += 1;
        } else {
            self.counts.intra_candidates += 1;
        }
        let end = ev.dev + u64::from(ev.size);
        self.candidates[id as usize - 1].source = (byte, (end - byte) as u32);
        id
    }

    fn on_tainted_store(&mut self, ev: &Event, content: &[u32], address: &[u32], device: &PmDevice) {
        if self.sync_calls.is_own(ev) {
            // Taking or releasing a lock changes no data (as `sync_side_effects`).
            self.counts.sync_side_effects += 1;
            return;
        }
        let (dev, end) = (ev.dev, ev.dev + u64::from(ev.size));
        for &id in content.iter().chain(address.iter()) {
            let Some(c) = self.candidates.get(id as usize - 1) else { continue };
            let (s, n) = c.source;
            if dev < s + u64::from(n) && s < end {
                // Writing the non-persisted bytes themselves back is no side effect.
                continue;
            }
            let key = (id, ev.pc);
            let idx = match self.inconsistency_ids.get(&key) {
                Some(&i) => i,
                None => {
                    if c.inter {
                        self.counts.inter_inconsistencies += 1;
                    } else {
                        self.counts.intra_inconsistencies += 1;
                    }
                    self.inconsistencies.push(Inconsistency {
                        candidate: id,
                        side: Self::site(ev),
                        content: false,
                        address: false,
                        count: 0,
                        validation: None,
                        window_closed: true,
                        targets: Vec::new(),
                    });
                    self.inconsistency_ids.insert(key, self.inconsistencies.len() - 1);
                    self.inconsistencies.len() - 1
                }
            };
            let inc = &mut self.inconsistencies[idx];
            inc.count += 1;
            if inc.targets.len() < MAX_TARGETS && !inc.targets.contains(&(dev, ev.size)) {
                inc.targets.push((dev, ev.size));
            }
            inc.content |= content.contains(&id);
            inc.address |= address.contains(&id);
            let (s, n) = c.source;
            if device.durable_hw(s, u64::from(n)) {
                // The source was persisted (by its writer, or by the reader itself) between the
                // load and this store: no crash separates the effect from its cause.
                continue;
            }
            inc.window_closed = false;
            if inc.validation.is_none() && (c.inter || self.options.intra) {
                // The crash image where this store's line persisted (by a flush to come, or an
                // eviction) and everything not yet durable, the source included, is lost.
                let lines: Vec<u64> = (dev / 64..=(end - 1) / 64).collect();
                if let Some(image) = self.capture(ev, device) {
                    let inc = &mut self.inconsistencies[idx];
                    inc.validation =
                        Some(Validation { image, overwritten: vec![(dev, ev.size)], reset: None, newest_lines: lines });
                }
            }
        }
    }

    fn finish(&mut self, _device: &PmDevice) -> Vec<RawFinding> {
        let mut out = Vec::new();
        // The reportable inconsistencies, grouped by candidate: one unpersisted load has one
        // finding, whatever number of stores its taint reached (an insert's value, key and link
        // through the same unpersisted pointer are one bug).
        let mut groups: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, inc) in self.inconsistencies.iter().enumerate() {
            if inc.window_closed {
                // Every side effect came after its source was durable again: under the exact
                // model no crash image holds the effect without the cause.
                self.counts.closed += 1;
                continue;
            }
            if self.only_sync(inc) {
                // Taking or releasing a lock reached through the pointer is no durable side
                // effect: the lock word is synchronisation, not data (its own persistence is the
                // sync-inconsistency check's business).
                self.counts.sync_side_effects += 1;
                continue;
            }
            let c = &self.candidates[inc.candidate as usize - 1];
            if !c.inter && !self.options.intra {
                // Counted; reported with `pmrace:intra=on` (most are a thread reading back what
                // it initialised and persists a little later).
                continue;
            }
            groups.entry(inc.candidate).or_default().push(i);
        }
        for (cand, incs) in groups {
            let c = &self.candidates[cand as usize - 1];
            let (content, address) = incs.iter().fold((false, false), |(a, b), &i| {
                (a || self.inconsistencies[i].content, b || self.inconsistencies[i].address)
            });
            let validation = incs.iter().find_map(|&i| self.inconsistencies[i].validation.clone());
            let flow = match (content, address) {
                (true, true) => "a value derived from them, through an address derived from them,",
                (false, true) => "through an address derived from them",
                _ => "a value derived from them",
            };
            let whose = if c.inter { "another thread" } else { "the same thread" };
            let window = if validation.is_some() {
                "; a crash image where the side effect is durable and its source is not was captured"
            } else {
                ""
            };
            let message = format!(
                "the load read PM bytes {whose} stored that were not yet durable, and the thread then stored {flow} to PM: a crash after that store is durable and before the source is loses the cause but keeps its effect{window}"
            );
            // The load and the source store identify the finding (its key locations); the
            // side-effect stores are listed, by address, so that runs that reach the same ones
            // agree.
            let mut locations = vec![
                RawLocation { role: "unpersisted load", pc: c.load.pc, stack: c.load.stack, tid: c.load.tid },
                RawLocation { role: "source store", pc: c.store.pc, stack: c.store.stack, tid: c.store.tid },
            ];
            let mut sides: Vec<Site> = incs.iter().map(|&i| self.inconsistencies[i].side).collect();
            sides.sort_by_key(|s| s.pc);
            for side in sides.iter().take(MAX_SIDE_LOCATIONS) {
                locations.push(RawLocation {
                    role: "durable side effect",
                    pc: side.pc,
                    stack: side.stack,
                    tid: side.tid,
                });
            }
            let occurrences = incs.iter().map(|&i| self.inconsistencies[i].count).sum();
            out.push(RawFinding {
                analysis: "pmrace",
                kind: if c.inter { "inter-thread-inconsistency" } else { "intra-thread-inconsistency" },
                message,
                occurrences,
                group: Some(by_sites(&locations, occurrences)),
                locations,
                validation,
            });
        }
        for f in &self.sync_findings {
            let is_lock = |d: &u64| self.sync_vars.get(d).is_some_and(|v| !v.pmdk && v.is_lock());
            if !is_lock(&f.dev) && !f.devs.iter().any(is_lock) {
                continue;
            }
            let v = &self.sync_vars[&f.dev];
            self.counts.sync_inconsistencies += 1;
            let locations = vec![
                RawLocation { role: "acquire", pc: f.acquire.pc, stack: f.acquire.stack, tid: f.acquire.tid },
                RawLocation {
                    role: "persisted while held",
                    pc: f.persisted_at.pc,
                    stack: f.persisted_at.stack,
                    tid: f.persisted_at.tid,
                },
            ];
            out.push(RawFinding {
                analysis: "pmrace",
                kind: "sync-inconsistency",
                message: format!(
                    "a synchronisation variable in PM ({} bytes, initially {:#x}) became durable while held: after a crash it is still held and no thread will release it",
                    v.size, v.init
                ),
                occurrences: f.count,
                group: Some(by_sites(&locations, f.count)),
                locations,
                validation: f.validation.clone(),
            });
        }
        out
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counts;
        vec![
            ("inter_candidates", self.candidates.iter().filter(|c| c.inter).count() as u64),
            ("intra_candidates", self.candidates.iter().filter(|c| !c.inter).count() as u64),
            ("candidate_loads", c.inter_candidates + c.intra_candidates),
            ("inter_inconsistencies", c.inter_inconsistencies),
            ("intra_inconsistencies", c.intra_inconsistencies),
            ("sync_inconsistencies", c.sync_inconsistencies),
            ("images", c.images),
            ("source_durable_first", c.closed),
            ("sync_side_effects", c.sync_side_effects),
        ]
    }
}

/// Functions whose recovery PMRace cannot validate (PMDK's transactional allocation, redo
/// logged), and those the user lists (`pmrace_allow` in `--config`): a finding with one in a
/// backtrace is a known false positive.
const DEFAULT_ALLOW: &[&str] = &[
    "pmemobj_tx_alloc",
    "pmemobj_tx_zalloc",
    "pmemobj_tx_xalloc",
    "pmemobj_tx_realloc",
    "pmemobj_tx_zrealloc",
    "pmemobj_tx_strdup",
    "pmemobj_tx_wcsdup",
];

/// A finding grouped by its first two locations' sites (the load and the source store; the
/// acquire and the persist): the runs of an exploration reach one inconsistency through many call
/// paths, which are kept as its stack combinations ([`crate::group`]) instead of becoming
/// findings of their own. One run gives each finding one combination.
fn by_sites(locations: &[RawLocation], occurrences: u64) -> crate::group::RawGroup {
    crate::group::RawGroup {
        class: "",
        key_locations: 2,
        stored: None,
        variants: vec![crate::group::RawVariant { locations: locations.to_vec(), occurrences, message: None }],
    }
}
/// Whether a finding's backtraces pass through an allowed function or `file:line`: a known
/// false positive, left out before validation ([`crate::PassInfo::known_benign`]).
pub fn known_benign(f: &Finding, settings: &Settings) -> bool {
    let names = DEFAULT_ALLOW.iter().copied().chain(settings.pmrace_allow.iter().map(String::as_str));
    let names: Vec<&str> = names.collect();
    f.locations.iter().flat_map(|l| l.backtrace.iter()).any(|fr| {
        let func = fr.function.as_deref().unwrap_or("");
        let at = match (&fr.file, fr.line) {
            (Some(file), Some(line)) => format!("{}:{line}", file.rsplit('/').next().unwrap_or(file)),
            _ => String::new(),
        };
        names.iter().any(|n| *n == func || (!at.is_empty() && *n == at))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(pc: u64) -> Site {
        Site { pc, stack: StackId(0), tid: 1 }
    }

    #[test]
    fn stores_keep_sequence_numbers_only_for_the_compat_rule() {
        for keep_seqs in [false, true] {
            let mut s = Stores { keep_seqs, ..Stores::default() };
            s.insert(10, site(0x10), 100, 0x1000, 8);
            s.insert(30, site(0x30), 300, 0x3000, 8);
            // Out of order (a `rep` element's id), and a repeated id: the last wins.
            s.insert(20, site(0x20), 200, 0x2000, 8);
            s.insert(30, site(0x31), 310, 0x3000, 8);
            assert_eq!(std::mem::size_of::<StoreRec>(), 24);
            let want = |seq| keep_seqs.then_some(seq);
            assert_eq!((s.site(20).map(|x| x.pc), s.seq(20)), (Some(0x20), want(200)));
            assert_eq!((s.site(30).map(|x| x.pc), s.seq(30)), (Some(0x31), want(310)));
            s.retain(|id, dev, _| id != 10 && dev != 0x2000);
            assert!(!s.contains(10) && !s.contains(20) && s.contains(30));
            assert_eq!((s.len(), s.seq(30)), (1, want(310)));
            assert_eq!(s.seqs.len(), if keep_seqs { 1 } else { 0 });
        }
    }
}
