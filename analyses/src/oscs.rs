//! `oscs`: order-sensitive critical sections, the non-race atomicity and order violations of
//! Huang, Halberg and Suh, "Non-Race Concurrency Bug Detection Through Order-Sensitive Critical
//! Sections" (ISCA 2013).
//!
//! # Definition
//! Two critical sections of different threads that hold a common mutex are *order-sensitive*
//! when neither is ordered before the other by *ordering* synchronisation (create/join,
//! barriers, condition variables, semaphores: mutexes order nothing here) and the order in
//! which they run can change shared memory. The detector approximates the second condition per
//! byte: a conflicting pair (one write) between the two sections that is not a *read-write
//! sequence* in both (a read followed by a write of the byte in the same section, the pattern of
//! commutative updates such as `sum += x`), optionally not a redundant write.
//!
//! # Algorithm (the paper's Figure 8, corrected where it cannot be implemented literally)
//! - Per thread: the critical-section list (mutex, instance), an instance per successful
//!   acquisition (the paper's lock timestamp cannot tell apart sections between two ordering
//!   operations); a vector clock that only ordering operations advance ([`HappensBefore`] with
//!   create/join and object edges, no lock edges); the deferred *detection list*.
//! - Per byte (only bytes accessed in a critical section get history): the latest read and
//!   write of each thread with its section list and its epoch (the thread's own clock), and per
//!   thread `CSRWFlag` with the section of its latest read.
//! - On each access: first `update_commutative_flag` (a write sets the flag iff the thread's
//!   latest read of the byte was in the same section instance; a read outside that instance
//!   clears it), then the checks against other threads' previous writes (and, for a write, their
//!   previous reads) that share a mutex: unordered pairs whose earlier section has no sequence
//!   are reported at once; if only the current section lacks one yet, the pair waits in the
//!   detection list, re-checked when the thread leaves its *outermost* section (a counter++
//!   preempted between its read and its write is silent); then the history is updated.
//! - Corrections (docs/analyses/oscs.md explains each): "If Type == Read, skip Step 3" means skip
//!   the read check, not the history update; `update_release` publishes to the *object's* clock
//!   (`OrderObjVClk[SyncObj]`, not `[TID]`); and the ordering test is the standard epoch test,
//!   ordered iff `epoch <= ThreadVClk[TID][PrevTID]` with release copying the clock *before*
//!   incrementing, so accesses just before a barrier are ordered with those just after it (the
//!   figure's `<=` with publish-then-increment calls them unordered).
//! - Variants: OSCS-Opt (default) keeps per byte the latest read and write of the two most
//!   recent threads; `history=full` is OSCS-Base (every thread's). `redundant=on` drops writes
//!   that leave the byte unchanged. `condflag=on` suppresses pairs on condition flags: bytes read
//!   in a section that then waits on a condition variable, or written in one that then signals
//!   or broadcasts (the paper's main false positive, Section 5.3).
//! - Accesses inside recognised synchronisation functions are ignored ([`SyncBracket`]), and
//!   library code when the session supplies [`CodeInfo`].
//!
//! # What it can miss
//! Data races (unprotected accesses) are out of scope. Older conflicting accesses are forgotten
//! (one per thread, two threads in Opt). Commutativity is a heuristic: `x = 2*x` against
//! `x = x+1` passes as commutative. Non-determinism in thread-local state is not checked; a
//! misplaced ordering operation is not detected. Barrier generations, condition variables and
//! semaphores order what they ordered in *this* run, so a pair the schedule happened to order
//! through a signal is not reported.
//!
//! # False positives
//! OSCS is a heuristic and reports pairs whose order does not matter to the program's output:
//! flags used as ad-hoc ordering with condition variables (use `condflag=on`), conditional
//! updates (MAX), producer/consumer indices, reader sections of a rwlock (a read-only section
//! against a writer's), redundant writes (use `redundant=on`), statistics. Every report is a
//! pair of unordered critical sections with a conflicting byte and no read-write sequence in at
//! least one of them: the message says which.

use std::collections::BTreeMap;

use emu::events::{Event, EventKind, Interest, MemoryWant};
use emu::pm::PmDevice;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::options::parse_bool;
use crate::pair::{what, PairFindings, Side};
use crate::shadow::{PcCache, Shadow, SiteId, Sites, Small, Spill};
use crate::spaces::{Spaces, SPACE_BITS};
use crate::sync::{ClockCopy, Edges, HappensBefore, SyncAdapter, SyncBracket, SyncOp, VectorClock};
use crate::{Analysis, CodeInfo, RawFinding};

/// Threads whose latest read and latest write each location remembers in the optimised variant
/// (OSCS-Opt: "the two most recent reads and two most recent writes from different threads").
const OPT_THREADS: usize = 2;
/// Addresses read or written in a critical section that the `condflag` heuristic remembers per
/// thread (the most recent ones).
const CS_TOUCHED: usize = 64;

/// An interned critical-section list (0 is the empty list): the `(mutex, instance)` pairs a
/// thread is inside, outermost first.
type CsId = u32;

/// Lists interned before the first collection of unused ones ([`Oscs::collect_cs`]).
const CS_COLLECT_MIN: usize = 1 << 14;

/// The critical-section lists: every acquisition and release makes a new one (instances are
/// unique), so they live contiguously in one arena, a list being a span of it, and the lists no
/// history, pending pair or thread refers to any more are collected when the arena has doubled
/// since the last collection: a lock-heavy run keeps what its histories can still use, not one
/// list per acquisition it ever made.
#[derive(Clone)]
struct CsLists {
    entries: Vec<(u64, u64)>,
    /// `(start, len)` in `entries`, by id; id 0 is the empty list.
    spans: Vec<(u32, u32)>,
    /// Collect when `spans` reaches this many.
    collect_at: usize,
}

impl Default for CsLists {
    fn default() -> CsLists {
        CsLists { entries: Vec::new(), spans: vec![(0, 0)], collect_at: CS_COLLECT_MIN }
    }
}

impl CsLists {
    fn get(&self, id: CsId) -> &[(u64, u64)] {
        let (start, len) = self.spans[id as usize];
        &self.entries[start as usize..(start + len) as usize]
    }

    fn push(&mut self, list: &[(u64, u64)]) -> CsId {
        if list.is_empty() {
            return 0;
        }
        let start = self.entries.len() as u32;
        self.entries.extend_from_slice(list);
        self.spans.push((start, list.len() as u32));
        (self.spans.len() - 1) as CsId
    }

    /// Keeps the lists `live` marks (by old id) and returns each old id's new one (0 for the
    /// dropped).
    fn compact(&mut self, live: &[bool]) -> Vec<CsId> {
        let mut remap = vec![0; self.spans.len()];
        let mut entries = Vec::with_capacity(self.entries.len() / 2);
        let mut spans = vec![(0, 0)];
        for (old, keep) in live.iter().enumerate().skip(1) {
            if *keep {
                let (start, len) = self.spans[old];
                spans.push((entries.len() as u32, len));
                entries.extend_from_slice(&self.entries[start as usize..(start + len) as usize]);
                remap[old] = (spans.len() - 1) as CsId;
            }
        }
        self.entries = entries;
        self.spans = spans;
        self.collect_at = (2 * self.spans.len()).max(CS_COLLECT_MIN);
        remap
    }
}

/// Options of the pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// OSCS-Base: the latest read and write of every thread per location, instead of the two
    /// most recent threads' (OSCS-Opt).
    pub full_history: bool,
    /// The redundant-write filter: a write that leaves the byte's value unchanged conflicts
    /// with nothing.
    pub redundant_write: bool,
    /// Suppresses pairs on condition flags: locations read in a critical section that then waits
    /// on a condition variable, or written in one that then signals or broadcasts.
    pub condflag: bool,
}

impl Options {
    /// Parses `--analyses oscs:KEY=VALUE[:KEY=VALUE]...`: `history=opt|full`,
    /// `redundant=on|off`, `condflag=on|off`.
    pub fn parse(spec: &str) -> Result<Options, String> {
        let mut o = Options::default();
        for kv in spec.split(':').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("`{kv}`: expected KEY=VALUE"))?;
            match k {
                "history" => {
                    o.full_history = match v {
                        "opt" => false,
                        "full" => true,
                        _ => return Err(format!("history={v}: expected opt or full")),
                    }
                }
                "redundant" => o.redundant_write = parse_bool(k, v)?,
                "condflag" => o.condflag = parse_bool(k, v)?,
                _ => return Err(format!("unknown oscs option `{k}` (history, redundant, condflag)")),
            }
        }
        Ok(o)
    }
}

/// The most recent read or write of a location by one thread (`PrevRead*`/`PrevWrite*`): 24
/// bytes.
#[derive(Clone, Copy, Debug, Default)]
struct Access {
    tid: u32,
    slot: u32,
    /// The thread's own clock component at the access (`PrevReadVClk`/`PrevWriteVClk`).
    epoch: u32,
    cs: CsId,
    /// PC and call stack ([`Sites`]).
    site: SiteId,
    /// A write that did not change the byte (only with the redundant-write filter).
    redundant: bool,
}

/// Per thread and location: `CSRWFlag` and the critical-section list of its latest read (kept
/// even when the optimised history has dropped the read itself).
#[derive(Clone, Copy, Debug, Default)]
struct Flag {
    tid: u32,
    rw: bool,
    last_read_cs: CsId,
}

/// One byte's history, 144 bytes in [`Histories`]: OSCS-Opt's two threads' latest read and
/// write and two threads' flags inline; more (OSCS-Base's every thread, a third thread's flag)
/// in the pass's [`Spill`] pools.
#[derive(Clone, Copy, Default, Debug)]
struct Loc {
    /// Most recent first, one per thread.
    reads: Small<Access, OPT_THREADS>,
    writes: Small<Access, OPT_THREADS>,
    flags: Small<Flag, OPT_THREADS>,
}

impl Loc {
    fn flag(&self, h: &Histories, tid: u32) -> Option<Flag> {
        self.flags.as_slice(&h.flags).iter().find(|f| f.tid == tid).copied()
    }
}

/// The bytes' histories: [`Loc`]s in a slab (a byte's shadow holds its index + 1), reused when
/// memory is unmapped, and the pools of the lists that outgrow a `Loc`.
#[derive(Clone, Default)]
struct Histories {
    slab: Vec<Loc>,
    free: Vec<u32>,
    accesses: Spill<Access>,
    flags: Spill<Flag>,
}

impl Histories {
    /// The history with index + 1 `id`.
    fn get(&self, id: u32) -> Option<&Loc> {
        id.checked_sub(1).map(|i| &self.slab[i as usize])
    }

    /// Stores `loc` under `id` (index + 1), or under a new id if `id` is 0; returns the id.
    fn put(&mut self, id: u32, loc: Loc) -> u32 {
        if id != 0 {
            self.slab[id as usize - 1] = loc;
            return id;
        }
        match self.free.pop() {
            Some(id) => {
                self.slab[id as usize - 1] = loc;
                id
            }
            None => {
                self.slab.push(loc);
                self.slab.len() as u32
            }
        }
    }

    /// Frees the history `id` (the byte's memory went away).
    fn release(&mut self, id: u32) {
        if id == 0 {
            return;
        }
        let loc = &mut self.slab[id as usize - 1];
        loc.reads.release(&mut self.accesses);
        loc.writes.release(&mut self.accesses);
        loc.flags.release(&mut self.flags);
        self.free.push(id);
    }
}

/// A pair waiting for the end of the current thread's outermost critical section
/// (`DetectionList`).
#[derive(Clone, Copy, Debug)]
struct Pending {
    addr: u64,
    prev: Access,
    prev_write: bool,
    cur: Side,
    cur_cs: CsId,
    lock: u64,
}

#[derive(Clone, Debug)]
struct Report {
    first_tid: u32,
    second_tid: u32,
    addr: u64,
    lock: u64,
    first_instance: u64,
    second_instance: u64,
    first_rw: bool,
    second_rw: bool,
    count: u64,
    addrs: Vec<u64>,
}

#[derive(Clone, Default)]
struct ThreadState {
    /// `(mutex, instance)`, outermost first.
    cs: Vec<(u64, u64)>,
    cs_id: CsId,
    detection: Vec<Pending>,
    /// Addresses read (`false`) or written (`true`) in the current outermost critical section,
    /// for the condflag heuristic.
    touched: Vec<(u64, bool)>,
}

/// The `oscs` pass.
#[derive(Clone)]
pub struct Oscs {
    opts: Options,
    code: CodeInfo,
    adapter: SyncAdapter,
    bracket: SyncBracket,
    /// The recognised calls, for `--config` locks released by a plain store of 0 to their word
    /// rather than a call (P-CLHT's `LOCK_RLS`): without it every such acquisition is held until
    /// the thread exits ([`crate::sync::SyncCalls::released_by_store`]).
    calls: crate::sync::SyncCalls,
    hb: HappensBefore,
    threads: FxHashMap<u32, ThreadState>,
    cs_lists: CsLists,
    next_instance: u64,
    /// Shadow memory: the id of each byte's history in `hist` (0: none), on the pages a
    /// critical section accessed (accesses outside critical sections elsewhere need no
    /// lookup). An id, not the history: most bytes of such a page have none.
    locs: Shadow<u32>,
    hist: Histories,
    /// The sites of the histories' accesses.
    sites: Sites,
    /// [`CodeInfo::is_library`] of the PCs seen.
    library: PcCache,
    /// The candidates of one access (kept: no allocation per access).
    cands: Vec<(Access, bool, bool)>,
    condflags: FxHashSet<u64>,
    reports: BTreeMap<(Side, Side), Report>,
    ops: Vec<SyncOp>,
    /// The accessing thread's clock, copied here for one access.
    vc_scratch: ClockCopy,
    /// Forked processes' address spaces: where their private memory is recorded.
    spaces: Spaces,
}

impl Default for Oscs {
    fn default() -> Oscs {
        Oscs::new(Options::default())
    }
}

impl Oscs {
    /// The pass with these options.
    pub fn new(opts: Options) -> Oscs {
        Oscs {
            opts,
            code: CodeInfo::default(),
            adapter: SyncAdapter::default(),
            bracket: SyncBracket::default(),
            calls: crate::sync::SyncCalls::default(),
            hb: HappensBefore::new(Edges { create_join: true, objects: true, locks: false }),
            threads: FxHashMap::default(),
            cs_lists: CsLists::default(),
            next_instance: 1,
            locs: Shadow::new(0),
            hist: Histories::default(),
            sites: Sites::default(),
            library: PcCache::default(),
            cands: Vec::new(),
            condflags: FxHashSet::default(),
            reports: BTreeMap::new(),
            ops: Vec::new(),
            vc_scratch: ClockCopy::default(),
            spaces: Spaces::default(),
        }
    }

    fn thread(&mut self, tid: u32) -> &mut ThreadState {
        self.threads.entry(tid).or_default()
    }

    fn recompute_cs(&mut self, tid: u32) {
        if self.cs_lists.spans.len() >= self.cs_lists.collect_at {
            self.collect_cs();
        }
        let t = self.threads.entry(tid).or_default();
        t.cs_id = self.cs_lists.push(&t.cs);
    }

    /// Drops the critical-section lists nothing refers to (every thread's current one, the
    /// pending pairs', the histories' accesses and flags) and renumbers the rest.
    fn collect_cs(&mut self) {
        let mut live = vec![false; self.cs_lists.spans.len()];
        self.each_cs_id(|id| live[*id as usize] = true);
        let remap = self.cs_lists.compact(&live);
        self.each_cs_id(|id| *id = remap[*id as usize]);
    }

    /// Every critical-section id the pass holds, once each.
    fn each_cs_id(&mut self, mut f: impl FnMut(&mut CsId)) {
        for t in self.threads.values_mut() {
            f(&mut t.cs_id);
            for p in &mut t.detection {
                f(&mut p.prev.cs);
                f(&mut p.cur_cs);
            }
        }
        // Released histories hold empty lists, so every list below is visited once.
        let h = &mut self.hist;
        for loc in &mut h.slab {
            for a in loc.reads.as_mut_slice(&mut h.accesses) {
                f(&mut a.cs);
            }
            for a in loc.writes.as_mut_slice(&mut h.accesses) {
                f(&mut a.cs);
            }
            for fl in loc.flags.as_mut_slice(&mut h.flags) {
                f(&mut fl.last_read_cs);
            }
        }
    }

    /// A mutex both lists hold (across threads: the same mutex object).
    fn common_lock(&self, a: CsId, b: CsId) -> Option<u64> {
        if a == 0 || b == 0 {
            return None;
        }
        let (la, lb) = (self.cs_lists.get(a), self.cs_lists.get(b));
        la.iter().find(|(m, _)| lb.iter().any(|(n, _)| n == m)).map(|(m, _)| *m)
    }

    /// Whether both lists share a critical-section instance (within a thread).
    fn same_instance(&self, a: CsId, b: CsId) -> bool {
        if a == 0 || b == 0 {
            return false;
        }
        let (la, lb) = (self.cs_lists.get(a), self.cs_lists.get(b));
        la.iter().any(|x| lb.contains(x))
    }

    fn instance_of(&self, cs: CsId, lock: u64) -> u64 {
        self.cs_lists.get(cs).iter().find(|(m, _)| *m == lock).map(|(_, i)| *i).unwrap_or(0)
    }

    fn apply(&mut self, tid: u32, op: SyncOp) {
        match op {
            SyncOp::Acquire { lock, .. } => {
                let inst = self.next_instance;
                self.next_instance += 1;
                self.thread(tid).cs.push((lock, inst));
                self.recompute_cs(tid);
            }
            SyncOp::Release { lock } => {
                let t = self.thread(tid);
                let Some(i) = t.cs.iter().rposition(|(m, _)| *m == lock) else {
                    return;
                };
                t.cs.remove(i);
                let outermost = t.cs.is_empty();
                self.recompute_cs(tid);
                if outermost {
                    self.flush_detection(tid);
                    self.thread(tid).touched.clear();
                }
            }
            SyncOp::Exit => {
                self.flush_detection(tid);
                self.hb.apply(tid, op);
            }
            _ => self.hb.apply(tid, op),
        }
    }

    /// The outermost critical section ended: re-check the deferred pairs with the flags as they
    /// are now.
    fn flush_detection(&mut self, tid: u32) {
        let mut pending = std::mem::take(&mut self.thread(tid).detection);
        for p in pending.drain(..) {
            let loc = self.locs.get(p.addr).and_then(|id| self.hist.get(*id));
            let prev_rw = loc.and_then(|l| l.flag(&self.hist, p.prev.tid)).is_some_and(|f| f.rw);
            let cur_rw = loc.and_then(|l| l.flag(&self.hist, tid)).is_some_and(|f| f.rw);
            if !prev_rw || !cur_rw {
                self.report(p.addr, &p.prev, p.prev_write, tid, p.cur, p.cur_cs, p.lock, (prev_rw, cur_rw));
            }
        }
        // The list keeps its room for the next section (a pair waits in most of them).
        self.thread(tid).detection = pending;
    }

    /// Marks the locations the current critical section touched as condition flags, when it
    /// waits (`read` ones) or signals (`written` ones).
    fn mark_condflags(&mut self, tid: u32, written: bool) {
        if let Some(t) = self.threads.get(&tid) {
            for (a, w) in &t.touched {
                if *w == written {
                    self.condflags.insert(*a);
                }
            }
        }
    }

    /// Whether the access `ev` changes nothing: its thread is outside critical sections and no
    /// byte it touches has a history. Outside critical sections only locations with history
    /// matter (the flag is cleared, the thread's latest access replaced), and a location gets
    /// one only from an access inside a critical section.
    #[inline]
    fn idle(&self, ev: &Event) -> bool {
        let cs = self.threads.get(&ev.tid).map(|t| t.cs_id).unwrap_or(0);
        let size = u64::from(ev.size.max(1));
        cs == 0 && !self.locs.has_page(ev.addr) && !self.locs.has_page(ev.addr + size - 1)
    }

    /// An access that is not [`Oscs::idle`] (the caller tested it).
    fn access(&mut self, ev: &Event) {
        let write = !matches!(ev.kind, EventKind::Load);
        let tid = ev.tid;
        let cs = self.threads.get(&tid).map(|t| t.cs_id).unwrap_or(0);
        let size = u64::from(ev.size.max(1));
        let slot = self.hb.slot(tid) as u32;
        let site = self.sites.id(ev.pc, ev.stack);
        // The clock, copied into a buffer kept for the purpose (no allocation per access).
        let mut vc = std::mem::take(&mut self.vc_scratch);
        self.hb.clock_into(tid, &mut vc);
        for i in 0..size {
            let addr = ev.addr + i;
            let redundant = write && self.opts.redundant_write && i < 8 && {
                let (o, n) = ((ev.old >> (8 * i)) & 0xff, (ev.new >> (8 * i)) & 0xff);
                o == n
            };
            self.access_byte(ev, addr, write, redundant, cs, slot, site, &vc.vc);
        }
        self.vc_scratch = vc;
        if cs != 0 && self.opts.condflag {
            let t = self.thread(tid);
            if !t.touched.iter().any(|(a, w)| *a == ev.addr && *w == write) {
                if t.touched.len() >= CS_TOUCHED {
                    t.touched.remove(0);
                }
                t.touched.push((ev.addr, write));
            }
        }
    }

    /// `OSCS_detectCS` for one byte.
    #[allow(clippy::too_many_arguments)]
    fn access_byte(
        &mut self,
        ev: &Event,
        addr: u64,
        write: bool,
        redundant: bool,
        cs: CsId,
        slot: u32,
        site: SiteId,
        vc: &VectorClock,
    ) {
        let tid = ev.tid;
        // The history is changed in place, in steps between which the reports borrow the pass.
        let id = match self.locs.get(addr).copied().unwrap_or(0) {
            0 if cs == 0 => return,
            0 => {
                let id = self.hist.put(0, Loc::default());
                *self.locs.get_or_insert(addr) = id;
                id
            }
            id => id,
        } as usize
            - 1;
        let epoch = vc.get(slot as usize);
        // update_commutative_flag, before the history is updated: a write completes a
        // read-write sequence when the thread's latest read of the byte was in this same
        // critical-section instance; the first read of a section (or one outside) clears it.
        let h = &mut self.hist;
        let loc = &mut h.slab[id];
        let fi = match loc.flags.as_slice(&h.flags).iter().position(|f| f.tid == tid) {
            Some(i) => i,
            None => {
                loc.flags.push(&mut h.flags, Flag { tid, rw: false, last_read_cs: 0 });
                loc.flags.len(&h.flags) - 1
            }
        };
        let last_read_cs = loc.flags.as_slice(&h.flags)[fi].last_read_cs;
        let same = self.same_instance(cs, last_read_cs);
        let h = &mut self.hist;
        let my_flag = &mut h.slab[id].flags.as_mut_slice(&mut h.flags)[fi];
        if write {
            my_flag.rw = same;
        } else if !same {
            my_flag.rw = false;
        }
        let cur_rw = my_flag.rw;
        let cur = Side { pc: ev.pc, stack: ev.stack, write };
        if cs != 0 && !redundant {
            // Step 1: previous writes of other threads; step 2 (writes only): previous reads.
            // Each with its thread's flag (no flag of another thread changes below).
            let mut cands = std::mem::take(&mut self.cands);
            cands.clear();
            let h = &self.hist;
            let loc = &h.slab[id];
            let with_flag = |a: &Access, w: bool| (*a, w, loc.flag(h, a.tid).is_some_and(|f| f.rw));
            cands.extend(loc.writes.as_slice(&h.accesses).iter().map(|a| with_flag(a, true)));
            if write {
                cands.extend(loc.reads.as_slice(&h.accesses).iter().map(|a| with_flag(a, false)));
            }
            for &(prev, prev_write, prev_rw) in &cands {
                if prev.tid == tid || prev.redundant {
                    continue;
                }
                let Some(lock) = self.common_lock(cs, prev.cs) else {
                    continue;
                };
                // check_order, corrected: the earlier access is ordered before this one iff
                // its epoch is at most what this thread knows of its thread.
                if prev.epoch <= vc.get(prev.slot as usize) {
                    continue;
                }
                // check_commutative.
                if !prev_rw {
                    self.report(addr, &prev, prev_write, tid, cur, cs, lock, (prev_rw, cur_rw));
                } else if !cur_rw {
                    self.thread(tid).detection.push(Pending { addr, prev, prev_write, cur, cur_cs: cs, lock });
                }
            }
            self.cands = cands;
        }
        // Step 3: the history.
        let acc = Access { tid, slot, epoch, cs, site, redundant };
        let cap = if self.opts.full_history { usize::MAX } else { OPT_THREADS };
        let h = &mut self.hist;
        let loc = &mut h.slab[id];
        let list = if write { &mut loc.writes } else { &mut loc.reads };
        list.retain(&mut h.accesses, |a| a.tid != tid);
        list.insert(&mut h.accesses, 0, acc);
        list.truncate(&mut h.accesses, cap);
        if !write {
            loc.flags.as_mut_slice(&mut h.flags)[fi].last_read_cs = cs;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn report(
        &mut self,
        addr: u64,
        prev: &Access,
        prev_write: bool,
        tid: u32,
        cur: Side,
        cur_cs: CsId,
        lock: u64,
        (prev_rw, cur_rw): (bool, bool),
    ) {
        let (pc, stack) = self.sites.get(prev.site);
        let first = Side { pc, stack, write: prev_write };
        let first_instance = self.instance_of(prev.cs, lock);
        let second_instance = self.instance_of(cur_cs, lock);
        let r = self.reports.entry((first, cur)).or_insert_with(|| Report {
            first_tid: prev.tid,
            second_tid: tid,
            addr,
            lock,
            first_instance,
            second_instance,
            first_rw: prev_rw,
            second_rw: cur_rw,
            count: 0,
            addrs: Vec::new(),
        });
        r.count += 1;
        if r.addrs.len() < 16 && !r.addrs.contains(&addr) {
            r.addrs.push(addr);
        }
    }
}

impl Analysis for Oscs {
    fn name(&self) -> &'static str {
        "oscs"
    }

    /// Two critical sections seen to access a byte unordered stay order-sensitive whatever the
    /// program does next: the findings stand when the run hangs at the instruction budget,
    /// deadlocks or is interrupted (the deferred comparisons are made at the stop).
    fn reports_when_stopped(&self) -> bool {
        true
    }

    fn fork(&self) -> Option<Box<dyn Analysis>> {
        Some(Box::new(self.clone()))
    }

    /// While no thread is inside a critical section and no byte has a history, every access is
    /// [`Oscs::idle`]: it changes nothing and can be one side of no pair, now or later (only an
    /// access inside a section makes a history; `redundant` and `condflag` look only at such
    /// accesses too). So the accesses are wanted only while some thread is inside a section
    /// (entered at a synchronisation event, as the machine needs), and for good once some byte
    /// has a history. On threads that take no lock the all-memory hooks then stay out of the
    /// engine (plain emulation's speed), but for the short sections glibc opens itself
    /// (`pthread_create` takes the loader's lock while it sets up the new thread's TLS).
    fn wants_memory(&self) -> MemoryWant {
        if self.locs.pages() > 0 {
            MemoryWant::Always
        } else if self.threads.values().any(|t| t.cs_id != 0) {
            MemoryWant::Now
        } else {
            MemoryWant::No
        }
    }

    fn interest(&self) -> Interest {
        // The overwritten bytes only for the redundant-write filter (a store that changes
        // nothing is dropped), the one user of an event's `old`: reading them back through
        // Unicorn was about a sixth of a run on CPU-bound code (docs/performance.md).
        let base = Interest::MEMORY.union(Interest::SYNC);
        if self.opts.redundant_write {
            base.union(Interest::DRAM_OLD)
        } else {
            base
        }
    }

    fn on_event(&mut self, ev: &Event, _device: &PmDevice) {
        match ev.kind {
            EventKind::Load | EventKind::Store | EventKind::NtStore | EventKind::RmwStore => {
                // A `--config` lock's release by a plain store: the lock's own access, not data.
                if ev.kind != EventKind::Load {
                    if let Some(lock) = self.calls.released_by_store(ev) {
                        self.apply(ev.tid, SyncOp::Release { lock });
                        return;
                    }
                }
                // A forked process's private bytes are its own location, not its parent's.
                let ev = &Event { addr: self.spaces.key(ev.tid, ev.addr, ev.dev), ..*ev };
                // Most accesses of most programs change nothing (`access`'s first test), known
                // before the library and bracket lookups.
                if self.idle(ev) {
                    return;
                }
                let code = &self.code;
                if !self.library.get(ev.pc, |pc| code.is_library(pc)) && !self.bracket.inside(ev.tid) {
                    self.access(ev)
                }
            }
            // munmap(addr, len): the memory's history goes with it.
            EventKind::Syscall if ev.addr == 11 => {
                let hist = &mut self.hist;
                let at = self.spaces.key(ev.tid, ev.new, 0);
                self.locs.clear_with(at, at.saturating_add(ev.old), |id| hist.release(*id));
            }
            EventKind::SharedMemory => self.spaces.share(ev.addr, ev.old),
            k if k.orders_threads() => {
                if ev.kind == EventKind::ThreadCreate {
                    self.spaces.created(ev.tid, ev.new as u32, ev.old == 1);
                }
                if self.opts.condflag {
                    match ev.kind {
                        EventKind::SyncEnter(k) if k.is_cond_wait() => self.mark_condflags(ev.tid, false),
                        EventKind::SyncEnter(k) if k.is_cond_signal() => self.mark_condflags(ev.tid, true),
                        _ => {}
                    }
                }
                self.bracket.observe(ev);
                self.calls.observe(ev);
                let mut ops = std::mem::take(&mut self.ops);
                self.adapter.translate(ev, |op| ops.push(op));
                for op in ops.drain(..) {
                    self.apply(ev.tid, op);
                }
                self.ops = ops;
            }
            _ => {}
        }
    }

    fn set_code(&mut self, code: &CodeInfo) {
        self.code = code.clone().sorted();
        self.library.clear();
    }

    fn finish(&mut self, _device: &PmDevice) -> Vec<RawFinding> {
        let tids: Vec<u32> = self.threads.keys().copied().collect();
        for t in tids {
            self.flush_detection(t);
        }
        let mut out = PairFindings::new("oscs");
        for ((first, second), r) in std::mem::take(&mut self.reports) {
            if self.opts.condflag && r.addrs.iter().any(|a| self.condflags.contains(a)) {
                continue;
            }
            let rw = |b: bool| if b { "a read-write sequence" } else { "no read-write sequence" };
            let message = || {
                format!(
                    "order-sensitive critical sections: {} by thread {} (critical section #{} of mutex {:#x}, {}) and \
                 {} by thread {} (critical section #{}, {}) at {:#x} are not ordered, so their order decides the \
                 byte's value",
                    what(first.write),
                    r.first_tid,
                    r.first_instance,
                    r.lock,
                    rw(r.first_rw),
                    what(second.write),
                    r.second_tid,
                    r.second_instance,
                    rw(r.second_rw),
                    r.addr & !SPACE_BITS
                )
            };
            out.add(
                "order-sensitive-critical-sections",
                message,
                r.count,
                (&first, r.first_tid),
                (&second, r.second_tid),
            );
        }
        out.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;

    const X: u64 = 0x5000;
    const K: &str = "order-sensitive-critical-sections";

    fn sim(opts: Options) -> Sim<Oscs> {
        let mut s = Sim { dev: PmDevice::default(), pass: Oscs::new(opts) };
        s.create(1, 2);
        s.create(1, 3);
        s
    }

    #[test]
    fn read_in_one_section_and_write_in_another_is_reported() {
        let mut s = sim(Options::default());
        for t in [2, 3] {
            s.lock(t, L1);
            s.read(t, 0x100, X);
            s.unlock(t, L1);
            s.lock(t, L1);
            s.write(t, 0x200, X, 0, 1);
            s.unlock(t, L1);
        }
        // The read-then-write pair and the write-then-read one are the same two sites: one
        // finding, both orders kept as its stack combinations.
        let found = s.finish();
        let pairs: Vec<(u64, u64)> = found.iter().map(|f| (f.locations[0].pc, f.locations[1].pc)).collect();
        assert_eq!(pairs, vec![(0x100, 0x200), (0x200, 0x200)]);
        assert_eq!(found[0].group.as_ref().unwrap().variants.len(), 2);
    }

    #[test]
    fn histories_hold_a_third_thread_and_are_reused_after_munmap() {
        let mut s = sim(Options::default());
        s.create(1, 4);
        for t in [2, 3, 4] {
            s.lock(t, L1);
            s.write(t, 0x100 * u64::from(t), X, 0, 1);
            s.unlock(t, L1);
        }
        // OSCS-Opt keeps two threads' writes, but every thread's flag: the third spills.
        assert_eq!(s.pass.hist.slab.len(), 4, "one history per byte written");
        assert_eq!(s.pass.hist.flags.in_use(), 4);
        assert_eq!(s.pairs(K), vec![(0x200, 0x300), (0x200, 0x400), (0x300, 0x400)]);
        // munmap(X & !0xfff, 4096): the histories go back to the slab, their lists to the pools.
        s.send(dram(EventKind::Syscall, 2, 0x700, 11, 0, 4096, X & !0xfff));
        assert_eq!((s.pass.hist.free.len(), s.pass.hist.flags.in_use()), (4, 0));
        s.lock(3, L1);
        s.write(3, 0x500, X, 1, 2);
        s.unlock(3, L1);
        assert_eq!(s.pass.hist.slab.len(), 4, "new histories reuse the freed ones");
        assert!(s.pairs(K).is_empty(), "no history survived the unmapping");
    }

    #[test]
    fn unused_critical_section_lists_are_collected_and_histories_keep_theirs() {
        let mut s = sim(Options::default());
        // Thread 2 writes X in a section, then thread 3 takes the lock far more often than the
        // first collection's threshold without touching X: the write's list must survive, under
        // a new number (lists made before it are dropped).
        for _ in 0..100 {
            s.lock(3, L1);
            s.unlock(3, L1);
        }
        s.lock(2, L1);
        s.write(2, 0x100, X, 0, 1);
        s.unlock(2, L1);
        for _ in 0..3 * CS_COLLECT_MIN {
            s.lock(3, L1);
            s.unlock(3, L1);
        }
        assert!(s.pass.cs_lists.spans.len() < CS_COLLECT_MIN, "{} lists kept", s.pass.cs_lists.spans.len());
        s.lock(3, L1);
        s.write(3, 0x200, X, 1, 2);
        s.unlock(3, L1);
        let found = s.finish();
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].locations[0].pc, found[0].locations[1].pc), (0x100, 0x200));
        // The first section's instance survived the collections that renumbered its list.
        assert!(found[0].message.contains("critical section #101 of mutex"), "{}", found[0].message);
    }

    #[test]
    fn read_write_sequences_commute_through_the_detection_list() {
        let mut s = sim(Options::default());
        // Thread 3's read finds thread 2's complete sequence while its own is not complete
        // yet: deferred to its release, where both flags are set.
        for t in [2, 3] {
            s.lock(t, L1);
            s.read(t, 0x100, X);
            s.write(t, 0x200, X, 0, 1);
            s.unlock(t, L1);
        }
        assert!(s.pairs(K).is_empty());
        // A section that only reads is reported at its release.
        let mut s = sim(Options::default());
        s.lock(2, L1);
        s.read(2, 0x100, X);
        s.write(2, 0x200, X, 0, 1);
        s.unlock(2, L1);
        s.lock(3, L1);
        s.read(3, 0x300, X);
        s.unlock(3, L1);
        assert_eq!(s.pairs(K), vec![(0x200, 0x300)]);
    }

    #[test]
    fn different_locks_and_no_locks_are_out_of_scope() {
        let mut s = sim(Options::default());
        s.lock(2, L1);
        s.write(2, 0x100, X, 0, 1);
        s.unlock(2, L1);
        s.lock(3, L2);
        s.write(3, 0x200, X, 1, 2);
        s.unlock(3, L2);
        s.write(3, 0x300, X, 2, 3);
        assert!(s.pairs(K).is_empty());
    }

    #[test]
    fn ordering_just_before_and_after_a_barrier_is_ordered() {
        // Figure 8's off-by-one: the last access before the barrier and the first after it
        // must count as ordered (copy the clock, then increment).
        let mut s = sim(Options::default());
        s.lock(2, L1);
        s.write(2, 0x100, X, 0, 1);
        s.unlock(2, L1);
        s.barrier(&[2, 3]);
        s.lock(3, L1);
        s.write(3, 0x200, X, 1, 2);
        s.unlock(3, L1);
        assert!(s.pairs(K).is_empty());
        // Without the barrier the same sections are reported.
        let mut s = sim(Options::default());
        s.lock(2, L1);
        s.write(2, 0x100, X, 0, 1);
        s.unlock(2, L1);
        s.lock(3, L1);
        s.write(3, 0x200, X, 1, 2);
        s.unlock(3, L1);
        assert_eq!(s.pairs(K), vec![(0x100, 0x200)]);
    }

    #[test]
    fn redundant_writes_conflict_with_nothing_when_asked() {
        for (redundant_write, expect) in [(false, 1), (true, 0)] {
            let mut s = sim(Options { redundant_write, ..Options::default() });
            s.lock(2, L1);
            s.write(2, 0x100, X, 0, 7);
            s.unlock(2, L1);
            s.lock(3, L1);
            s.write(3, 0x200, X, 7, 7);
            s.unlock(3, L1);
            assert_eq!(s.pairs(K).len(), expect, "redundant_write = {redundant_write}");
        }
    }

    #[test]
    fn the_optimised_history_forgets_older_threads() {
        // Threads 2, 3, 4 write X in sections of L1, then thread 5 reads it: OSCS-Opt keeps the
        // two most recent writers, OSCS-Base all of them.
        for (full_history, expect) in [(false, 2), (true, 3)] {
            let mut s = sim(Options { full_history, ..Options::default() });
            s.create(1, 4);
            s.create(1, 5);
            for t in [2, 3, 4] {
                s.lock(t, L1);
                s.write(t, 0x100 * u64::from(t), X, 0, u64::from(t));
                s.unlock(t, L1);
            }
            s.lock(5, L1);
            s.read(5, 0x900, X);
            s.unlock(5, L1);
            let n = s.pairs(K).iter().filter(|p| p.1 == 0x900).count();
            assert_eq!(n, expect, "full_history = {full_history}");
        }
    }

    #[test]
    fn options_parse() {
        let o = Options::parse("history=full:redundant=on:condflag=1").unwrap();
        assert!(o.full_history && o.redundant_write && o.condflag);
        assert!(Options::parse("history=most").is_err());
        assert!(Options::parse("bogus=1").is_err());
        assert!(Options::parse("condflag").is_err());
    }
}
