//! `hmtrace`: data races found by software memory tags gated by locksets, after HMTRace
//! (Shastri, Ammanaghatta Shivakumar, Verbeek, Ravindran, Wang: "HMTRace: Hardware-Assisted
//! Memory-Tagging based Dynamic Data Race Detection").
//!
//! # Definition
//! Two accesses race when they touch a common byte from different threads, at least one writes,
//! neither happens before the other, and no lock held at both excludes the other (the paper's
//! Eq. 10: a tag check that succeeds for the earlier access and fails for the later one, disjoint
//! locksets, a write). Two reads of that kind whose threads both hold locks, none in common,
//! are *inconsistent lock usage* (kind `inconsistent-lock-usage`), never a race; they are
//! reported only with `ilu=on`. Off by default: the pattern is also what correct programs do
//! when they hold locks as turn tokens rather than around the data (a barrier built from locks
//! handed over, DataRaceBench's `bar3`/`critsec` kernels: each thread reads shared data while
//! holding its own lock, every write ordered by the hand-offs), and nothing in one run tells
//! the two apart, so by default a race-free program gets no finding.
//!
//! # Algorithm
//! HMTRace colours each 16-byte granule of shared memory with the tag of the thread that last
//! took it (Arm MTE) and lets the hardware fault when another thread's pointer touches it while
//! an Eraser-style lockset analysis cannot prove the access protected. Here the tag is software
//! and exact, per granule:
//! - **Tags.** A granule keeps a short list of access records, each `(thread, write bit, byte
//!   mask, the thread's own clock at the access, the locks it held, its PC and stack)`. The byte
//!   mask replaces the paper's padding: unmodified binaries pack objects into granules, and two
//!   threads' adjacent ints must not look like one object. Thread ids are full ids (no 14-tag
//!   limit). A write makes its thread the only owner of its bytes (MTE's re-tag); a read adds
//!   the reader and leaves the writer's record in place, so reads under a reader-shared lock
//!   *inherit* the tag (the paper's Shared+read rule) and readers never conflict.
//! - **Lockset gate (Algorithm 1).** Each granule stands for an allocation (malloc is not seen,
//!   see below) with Eraser's states: *exclusive* while every other thread's record happens
//!   before the current access (no check at all: this is also how ownership passes after join,
//!   a barrier or a handoff), then *shared* with a candidate lockset refined by intersection
//!   (each lock in its weakest mode). A check is needed only when the candidate and the current
//!   locks do not exclude each other (the paper's *Inconclusive*).
//! - **Check (the dummy load of Algorithm 2).** Each overlapping record of another thread is
//!   compared: ordered by happens-before, or excluded by a common lock held exclusively on one
//!   side, or both reads: no race. Reports are deduplicated by the pair of sites and name both
//!   accesses (earlier and later, read or write) with their threads.
//! - **Happens-before.** The paper keeps no clocks and says nothing about barriers, condition
//!   variables, semaphores or atomics, so a literal reimplementation reports every handoff
//!   through them (its Section 4 models only lock acquire/release and thread termination). Vector clocks ([`HappensBefore`]) order: create → child,
//!   exit → join, barrier arrivals of a round → its departures (per generation), signal →
//!   wakeup, `sem_post` → `sem_wait`, mutex and rwlock release → acquire (a read unlock orders
//!   only later writers), a futex wake → the return of the wait it ended (runtimes the pass does
//!   not know, such as libgomp's barriers, hand off through futexes; see
//!   [`crate::sync::SyncAdapter`]), and **sync locations**: bytes touched by a locked read-modify-write
//!   (`lock`-prefixed or `xchg`), and the word of a `futex` system call the program (not
//!   libgomp) makes, are atomics; every later plain store to them is a release and
//!   every plain load an acquire (C11 release stores and acquire loads compile to plain moves
//!   on x86), a locked instruction both. Plain accesses to sync locations are never races, and a
//!   report whose bytes became a sync location later in the run is dropped at the end, except
//!   one whose later access is a locked instruction of the program's own: that is an atomic
//!   write racing with a plain write made before the bytes became a sync location. The
//!   program's code compiled from C++'s `std::atomic` header ([`CodeInfo::atomic`], from the
//!   line table) is known to access atomic objects even with plain moves: such a store releases
//!   and such a load acquires the object, and both are recorded as data flagged atomic, which
//!   conflicts with plain accesses only ([`Entry::atomic`]); the object is not made a sync
//!   location, so a plain access to it through a cast stays a race in either order.
//! - **Ownership cleared.** When a thread exits, every record in its stack block (glibc's
//!   descriptor, the thread's handle, sits at the top of the 8 MiB block) is forgotten: glibc
//!   hands cached stacks of finished threads to new ones (`thr_detached`).
//! - Accesses inside recognised synchronisation functions (lock words, futex state) are not the
//!   program's and are ignored ([`SyncBracket`]); so are accesses from library code when the
//!   session supplies [`CodeInfo`], except the memory and string functions, which are checked
//!   and attributed to their caller by the backtrace (the report's line is the first frame with
//!   a source line).
//!
//! # Departures from the paper, and why
//! - Mutex release → acquire is an ordering edge as well as a lockset: a flag set under a mutex
//!   orders data written before it (`drb_008`), which a pure lockset detector reports. Locksets
//!   still gate the checks and classify read/read pairs.
//! - Algorithm 2 read literally re-tags the granule after a Shared read, undoing the inheritance
//!   (Algorithm 2 as printed): reads here never re-tag another thread's write.
//! - Algorithm 1 removes the lock *before* trimming the pointee's lockset (as printed): the
//!   lockset used here is the one held at the access.
//! - Inconsistent lock usage requires both reads to hold locks: a read under a lock against an
//!   unlocked read of data nobody writes concurrently (glibc does that with its own globals) is
//!   not a sign of anything.
//!
//! # What it can miss
//! One execution: a race whose accesses the schedule orders through some synchronisation
//! (including libc's internal locks, which are locked instructions) is not reported; run more
//! seeds. A granule forgets its oldest records beyond 32. Eraser's gate skips the
//! check once a candidate lockset is consistent, so an unlocked access made before the granule
//! became shared can escape (Eraser's own initialisation blind spot). Accesses wider than 8
//! bytes are not delivered by the machine (see docs/analyses/hmtrace.md). Races on memory freed
//! and reallocated are missed or, without allocator visibility, wrongly attributed: `free` and
//! `munmap` are not seen, so only thread exit clears records. After a `fork`, the parent's and
//! the child's private memory are told apart ([`Spaces`]) and what they share is not: DRAM both
//! map shared through the fork keeps one address, but a file or System V segment each maps on
//! its own after it is told apart only if it lands at the same address in both.
//!
//! # Why it reports no false positives (and where it can)
//! A report needs two accesses to overlapping bytes by different threads, one a write, that
//! the run's synchronisation does not order and no common lock excludes: on the accesses the
//! machine reports, that is a data race of this execution. False positives come from
//! synchronisation the pass cannot see: ad-hoc spin flags without any locked instruction
//! (reported, as they are races in C11), custom locks not named in the configuration, memory
//! recycled by `munmap`/`mmap` between threads, and, until the session supplies [`CodeInfo`],
//! libc's own benign races (glibc's malloc reads `free_list` and `aligned_heap_area` without
//! its lock): both accesses of such a report are in code without source lines.

use emu::callstack::StackId;
use emu::events::{Event, EventKind, Interest};
use emu::pm::PmDevice;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

use crate::pair::{what, PairFindings, Side};
use crate::shadow::{Packed, PcCache, Shadow, SiteId, Sites, Small, Spill};
use crate::spaces::{Spaces, SPACE_BITS};
use crate::sync::{ClockCopy, Edges, HappensBefore, Mode, SyncAdapter, SyncBracket, SyncOp};
use crate::{Analysis, CodeInfo, RawFinding};

/// Bytes per granule: MTE's tag granule, the unit whose owner the pass records.
const GRANULE: u64 = 16;
const GRANULE_SHIFT: u32 = 4;
/// Most access records one granule keeps; beyond it the oldest record of another thread is
/// forgotten (a possible missed race, never a false one).
const MAX_ENTRIES: usize = 32;
/// A thread's stack block as glibc lays it out: the thread descriptor (the handle) at the top,
/// the static TLS and the stack below it, `RLIMIT_STACK` (8 MiB) in all.
const STACK_SPAN: u64 = 8 << 20;
const TCB_SPAN: u64 = 4096;
/// Happens-before objects of sync locations live in their own key space (bit 63: no guest
/// address has it, nor an object of [`SyncAdapter`]); a lock's release objects too (bit 47:
/// written by exclusive holders, bit 48: by shared ones).
const SYNC_KEY: u64 = 1 << 63;
const LOCK_W: u64 = SYNC_KEY | 1 << 47;
const LOCK_R: u64 = SYNC_KEY | 1 << 48;
/// Locations remembered per report for the end-of-run sync-location filter.
const MAX_CONFLICTS: usize = 16;
/// Reports remembered by key in front of the report map.
const RECENT: usize = 4;
/// A key no report has (no access is made at PC `u64::MAX`).
const NO_KEY: (ReportKind, Side, Side) = (
    ReportKind::Race,
    Side { pc: u64::MAX, stack: StackId(0), write: false },
    Side { pc: u64::MAX, stack: StackId(0), write: false },
);

/// An interned lockset (0 is the empty set).
type LsId = u32;

/// Locksets held at accesses, interned: sorted `(lock, mode)` lists.
#[derive(Clone)]
struct LockSets {
    sets: Vec<Vec<(u64, Mode)>>,
    index: FxHashMap<Vec<(u64, Mode)>, LsId>,
    excludes: FxHashMap<(LsId, LsId), bool>,
    common: FxHashMap<(LsId, LsId), bool>,
    meet: FxHashMap<(LsId, LsId), LsId>,
}

impl LockSets {
    fn new() -> LockSets {
        let mut index = FxHashMap::default();
        index.insert(Vec::new(), 0);
        LockSets {
            sets: vec![Vec::new()],
            index,
            excludes: FxHashMap::default(),
            common: FxHashMap::default(),
            meet: FxHashMap::default(),
        }
    }

    /// The id of `set` (sorted), allocated only the first time it is seen: a thread takes and
    /// releases the same few locks again and again.
    fn intern(&mut self, set: &[(u64, Mode)]) -> LsId {
        if let Some(id) = self.index.get(set) {
            return *id;
        }
        let id = self.sets.len() as LsId;
        self.sets.push(set.to_vec());
        self.index.insert(set.to_vec(), id);
        id
    }

    /// Whether two accesses made holding `a` and `b` exclude each other: some lock is in both
    /// sets and held exclusively in at least one (two read locks of a rwlock do not).
    fn excludes(&mut self, a: LsId, b: LsId) -> bool {
        if a == 0 || b == 0 {
            return false;
        }
        if let Some(v) = self.excludes.get(&(a, b)) {
            return *v;
        }
        let v = self.sets[a as usize].iter().any(|(l, ma)| {
            self.sets[b as usize].iter().any(|(k, mb)| k == l && (*ma == Mode::Exclusive || *mb == Mode::Exclusive))
        });
        self.excludes.insert((a, b), v);
        v
    }

    /// Whether the two sets share a lock in any mode.
    fn common(&mut self, a: LsId, b: LsId) -> bool {
        if a == 0 || b == 0 {
            return false;
        }
        if let Some(v) = self.common.get(&(a, b)) {
            return *v;
        }
        let v = self.sets[a as usize].iter().any(|(l, _)| self.sets[b as usize].iter().any(|(k, _)| k == l));
        self.common.insert((a, b), v);
        v
    }

    /// Eraser's refinement: the locks in both sets, each in the weaker of its two modes.
    fn meet(&mut self, a: LsId, b: LsId) -> LsId {
        if a == b {
            return a;
        }
        if a == 0 || b == 0 {
            return 0;
        }
        if let Some(v) = self.meet.get(&(a, b)) {
            return *v;
        }
        let mut out = Vec::new();
        for (l, ma) in &self.sets[a as usize] {
            if let Some((_, mb)) = self.sets[b as usize].iter().find(|(k, _)| k == l) {
                let m = if *ma == Mode::Exclusive && *mb == Mode::Exclusive { Mode::Exclusive } else { Mode::Shared };
                out.push((*l, m));
            }
        }
        let v = self.intern(&out);
        self.meet.insert((a, b), v);
        v
    }
}

/// What the pass knows of a thread.
#[derive(Clone, Default)]
struct ThreadState {
    /// Locks held now, with their mode and how often they were taken (recursive mutexes).
    held: Vec<(u64, Mode, u32)>,
    /// `held` as an interned set.
    ls: LsId,
    /// The thread's handle (glibc's descriptor at the top of its stack block), if it was created
    /// by `pthread_create`.
    handle: Option<u64>,
}

/// One access record of a granule: the software tag. The thread of `ctx` owns the bytes in
/// `mask` for reading or for writing; `epoch` is its own clock component at the access, `ctx`
/// also names its clock slot and the locks it held ([`Contexts`]), `site` its PC and call stack
/// ([`Sites`]). 16 bytes.
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    ctx: CtxId,
    epoch: u32,
    site: SiteId,
    mask: u16,
    write: bool,
    /// Made by an access compiled from C++'s `std::atomic` ([`CodeInfo::is_atomic`]) or to a C11
    /// `_Atomic` object ([`CodeInfo::is_atomic_object`]): it
    /// conflicts with plain accesses only (in the byte the layout left free).
    atomic: bool,
}

/// An interned [`Ctx`].
type CtxId = u32;

/// Who made an access, as a record needs it: the thread (or OpenMP task) whose happens-before
/// time it runs, its clock slot and the locks it held. A thread runs with a handful of these (a
/// lockset changes at each acquire and release, a slot only when the thread is new), so a
/// record names its context with 4 bytes instead of 12; two records with the same context are
/// by the same thread with the same locks (one compare).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Ctx {
    tid: u32,
    slot: u32,
    ls: LsId,
}

/// The contexts of records, interned. A thread runs with a few, but a program that creates
/// and joins threads (or OpenMP tasks) without end makes new ones all the time, so contexts no
/// record names any more are swept ([`Hmtrace::sweep_contexts`]) and their ids reused: the
/// table follows the contexts alive, not every one ever made.
#[derive(Clone)]
struct Contexts {
    /// By id; a freed id's slot holds its last context until it is reused.
    list: Vec<Ctx>,
    index: FxHashMap<Ctx, CtxId>,
    /// Ids of swept contexts, for reuse (lowest last: reused lowest first).
    free: Vec<CtxId>,
    /// Sweep when this many contexts are interned: twice as many as the last sweep kept (at
    /// least [`SWEEP_MIN`]), so a sweep's walk over the shadow is paid for by the contexts made
    /// since, and a program with few contexts never sweeps.
    next_sweep: usize,
    /// The most contexts interned at once (`hmtrace.contexts` in the run's counters).
    peak: usize,
    /// Scratch for a sweep: a bit per id, set for ids some record names.
    marks: Vec<u64>,
}

/// Contexts interned before the first sweep.
const SWEEP_MIN: usize = 256;

impl Default for Contexts {
    fn default() -> Self {
        Contexts {
            list: Vec::new(),
            index: FxHashMap::default(),
            free: Vec::new(),
            next_sweep: SWEEP_MIN,
            peak: 0,
            marks: Vec::new(),
        }
    }
}

impl Contexts {
    fn intern(&mut self, c: Ctx) -> CtxId {
        let Contexts { list, index, free, .. } = self;
        let id = *index.entry(c).or_insert_with(|| match free.pop() {
            Some(id) => {
                list[id as usize] = c;
                id
            }
            None => {
                list.push(c);
                (list.len() - 1) as CtxId
            }
        });
        self.peak = self.peak.max(self.live());
        id
    }

    /// Contexts interned now.
    fn live(&self) -> usize {
        self.index.len()
    }

    /// Notes that a record names `id` (during a sweep).
    fn mark(&mut self, id: CtxId) {
        self.marks[id as usize / 64] |= 1 << (id % 64);
    }

    /// Frees every interned context not marked since the sweep began, and clears the marks.
    fn sweep(&mut self) {
        let Contexts { list, index, free, marks, .. } = self;
        index.retain(|_, &mut id| marks[id as usize / 64] & (1 << (id % 64)) != 0);
        free.clear();
        free.extend((0..list.len() as CtxId).rev().filter(|&id| marks[id as usize / 64] & (1 << (id % 64)) == 0));
        self.next_sweep = (2 * self.index.len()).max(SWEEP_MIN);
    }
}

/// [`Granule::shared`] of a granule not (or no longer) accessed concurrently.
const NOT_SHARED: LsId = LsId::MAX;

/// Access records kept in the granule itself; more go to the pass's [`Spill`] pool.
const INLINE: usize = 2;

/// What the pass keeps per granule, in its shadow memory (a page's accessed granules only,
/// [`Packed`]): 44 bytes, two records inline (a thread's own data, stored at one site and
/// loaded at another). A store to each 64-byte line of a big mapping touches one granule in
/// four, so what a granule costs is what a touched line costs (it was a 64-byte block for
/// every granule of a touched page: 256 bytes a line). Not aligned to a cache line: one in
/// three straddles two, which measured no slower than the aligned 64-byte block.
#[derive(Clone)]
struct Granule {
    /// The granule's lockset state (HMTRace's Algorithm 1, with Eraser's exclusive phase):
    /// [`NOT_SHARED`] while it is virgin or exclusive (every record of another thread happens
    /// before the owner's latest access: no check needed), or, once accessed concurrently by
    /// several threads, the candidate lockset (the locks every access since then held, each in
    /// its weakest mode). A check is needed unless the current locks and the candidate exclude
    /// each other.
    shared: LsId,
    /// The bytes that are sync locations now (touched by a locked instruction).
    sync: u16,
    /// The records, oldest first: most granules only ever hold one or two, inline; a granule
    /// several threads or sites share spills its list to the pass's pool ([`Hmtrace::spill`]).
    /// (A `Vec` per granule cost an allocation when a granule got its first record and another
    /// when it got its second, and a pointer to follow at every access.)
    entries: Small<Entry, INLINE>,
}

impl Default for Granule {
    fn default() -> Self {
        Granule { shared: NOT_SHARED, sync: 0, entries: Small::default() }
    }
}

/// What a report is: a data race or inconsistent lock usage (in the order of their names, which
/// is the order of the findings).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum ReportKind {
    Race,
    Ilu,
}

impl ReportKind {
    fn name(self) -> &'static str {
        match self {
            ReportKind::Race => "data-race",
            ReportKind::Ilu => "inconsistent-lock-usage",
        }
    }
}

#[derive(Clone, Debug)]
struct Report {
    first_tid: u32,
    second_tid: u32,
    addr: u64,
    len: u32,
    locked: bool,
    /// The later access is a locked instruction of the program's (an atomic write): kept
    /// though its bytes are a sync location.
    atomic: bool,
    count: u64,
    /// Granules and bytes of the conflicts (at most [`MAX_CONFLICTS`]).
    conflicts: Vec<(u64, u16)>,
}

/// Options of the pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Report read/read pairs with inconsistent locking (kind `inconsistent-lock-usage`): off
    /// by default (a diagnostic, not a race: race-free programs that pass locks as turn tokens
    /// show it too; see the module docs).
    pub ilu: bool,
}

impl Options {
    /// Parses `--analyses hmtrace:KEY=VALUE[:KEY=VALUE]...`: `ilu=on|off`.
    pub fn parse(spec: &str) -> Result<Options, String> {
        let mut o = Options::default();
        for kv in spec.split(':').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("`{kv}`: expected KEY=VALUE"))?;
            match k {
                "ilu" => o.ilu = crate::options::parse_bool(k, v)?,
                _ => return Err(format!("unknown hmtrace option `{k}` (ilu)")),
            }
        }
        Ok(o)
    }
}

/// What the pass knows of the running thread, kept between accesses: its vector clock and
/// what every access needs of it (valid until the next synchronisation event).
#[derive(Clone, Default)]
struct CurrentClock {
    valid: bool,
    tid: u32,
    /// Whose happens-before time `tid` runs: itself, or the OpenMP task it is running
    /// ([`crate::sync::Omp::actor`]).
    actor: u32,
    vc: ClockCopy,
    epoch: u32,
    slot: u32,
    ls: LsId,
    /// `(actor, slot, ls)` interned: the context of this thread's records.
    ctx: CtxId,
    /// Inside a recognised synchronisation function ([`SyncBracket`]).
    inside: bool,
}

/// The `hmtrace` pass.
#[derive(Clone)]
pub struct Hmtrace {
    opts: Options,
    code: CodeInfo,
    adapter: SyncAdapter,
    bracket: SyncBracket,
    /// The recognised calls, for `--config` locks released by a plain store of 0 to their word
    /// rather than a call (P-CLHT's `LOCK_RLS`): without it every such acquisition is held until
    /// the thread exits ([`crate::sync::SyncCalls::released_by_store`]).
    calls: crate::sync::SyncCalls,
    hb: HappensBefore,
    locks: LockSets,
    threads: FxHashMap<u32, ThreadState>,
    /// Shadow memory: the records of every granule of the pages accessed.
    shadow: Shadow<Granule, Box<Packed<Granule>>>,
    /// The record lists of granules with more than [`INLINE`] records.
    spill: Spill<Entry>,
    /// The records' contexts (thread, clock slot, locks held).
    ctxs: Contexts,
    /// Room for a thread's lockset being interned ([`Hmtrace::relock`], at every acquire and
    /// release: a vector each time was an allocation per lock operation).
    lockset: Vec<(u64, Mode)>,
    /// The sites of the records, with [`CodeInfo::is_library`] of their PCs.
    sites: Sites,
    /// [`CodeInfo::is_atomic`] of the PCs (asked only when the program has such code).
    atomic_pcs: PcCache,
    /// Bytes that were sync locations at any time, by granule (for the end-of-run filter; only
    /// atomics' granules, which locked instructions touch).
    sync_ever: FxHashMap<u64, u16>,
    /// The plain-write records a granule's bytes had when they became a sync location, by
    /// granule: what a later locked instruction of another thread is checked against
    /// ([`Hmtrace::atomic_write`]). Few: only granules that become sync locations.
    pre_atomic: BTreeMap<u64, Vec<Entry>>,
    /// The running thread's clock, cached between synchronisation operations.
    cur: CurrentClock,
    /// Reports by (kind, earlier side, later side): a hash map, as a racy loop finds its pair
    /// again at every access and must pay one probe for it (sorted by the key at the end). The
    /// kind is an enum, not its name: hashing and comparing a string per occurrence was a
    /// sizeable part of an occurrence's cost.
    reports: FxHashMap<(ReportKind, Side, Side), u32>,
    /// The reports, in the order they were first made (`reports` holds their indices).
    report_list: Vec<((ReportKind, Side, Side), Report)>,
    /// The keys of the last reports made or counted, with their indices: a racy loop's
    /// occurrences alternate between a few pairs, each then found by a compare, not a hash probe.
    recent: [((ReportKind, Side, Side), u32); RECENT],
    /// The entry of `recent` to be replaced next.
    recent_next: usize,
    /// Operations of one event, each with the thread of happens-before time it is by.
    ops: Vec<(u32, SyncOp)>,
    /// The conflicts of one check (kept: a racy loop finds one per access, and must not
    /// allocate for each).
    found: Vec<(ReportKind, Entry, u16)>,
    /// Live heap blocks (start → size), from malloc/calloc/realloc returns, so that `free`
    /// clears the block's records: memory the allocator hands to another thread is new memory.
    allocs: FxHashMap<u64, u64>,
    /// Sizes of allocation calls in progress, per thread (calloc's and realloc's size is known
    /// only at entry).
    alloc_sizes: FxHashMap<u32, (u64, u64)>,
    /// Forked processes' address spaces: where their private memory is recorded.
    spaces: Spaces,
}

impl Default for Hmtrace {
    fn default() -> Hmtrace {
        Hmtrace::new(Options::default())
    }
}

/// The byte mask of `[lo, hi)` inside the granule starting at `base`.
fn mask_of(base: u64, lo: u64, hi: u64) -> u16 {
    let a = lo.max(base) - base;
    let b = hi.min(base + GRANULE) - base;
    if b <= a {
        return 0;
    }
    let bits = ((1u32 << (b - a)) - 1) << a;
    bits as u16
}

impl Hmtrace {
    /// The pass with these options.
    pub fn new(opts: Options) -> Hmtrace {
        Hmtrace {
            opts,
            code: CodeInfo::default(),
            adapter: SyncAdapter::default(),
            bracket: SyncBracket::default(),
            calls: crate::sync::SyncCalls::default(),
            hb: HappensBefore::new(Edges { create_join: true, objects: true, locks: false }),
            locks: LockSets::new(),
            threads: FxHashMap::default(),
            shadow: Shadow::new(GRANULE_SHIFT),
            spill: Spill::default(),
            ctxs: Contexts::default(),
            lockset: Vec::new(),
            sites: Sites::default(),
            atomic_pcs: PcCache::default(),
            sync_ever: FxHashMap::default(),
            pre_atomic: BTreeMap::new(),
            cur: CurrentClock::default(),
            reports: FxHashMap::default(),
            report_list: Vec::new(),
            recent: [(NO_KEY, 0); RECENT],
            recent_next: 0,
            ops: Vec::new(),
            found: Vec::new(),
            allocs: FxHashMap::default(),
            alloc_sizes: FxHashMap::default(),
            spaces: Spaces::default(),
        }
    }

    fn thread(&mut self, tid: u32) -> &mut ThreadState {
        self.threads.entry(tid).or_default()
    }

    /// Makes `self.cur` the state of `tid` (copied into its buffers only after a thread switch
    /// or a synchronisation event).
    #[inline]
    fn refresh_clock(&mut self, tid: u32) {
        // Called two or three times per access: the test inline, the copy out of line.
        if !(self.cur.valid && self.cur.tid == tid) {
            self.load_clock(tid);
        }
    }

    /// [`Hmtrace::refresh_clock`]'s copy of `tid`'s state into `self.cur`.
    #[inline(never)]
    fn load_clock(&mut self, tid: u32) {
        let actor = self.adapter.omp.actor(tid);
        let slot = self.hb.slot(actor);
        self.hb.clock_into(actor, &mut self.cur.vc);
        self.cur.epoch = self.cur.vc.vc.get(slot);
        self.cur.slot = slot as u32;
        self.cur.ls = self.threads.get(&actor).map_or(0, |t| t.ls);
        if self.ctxs.live() >= self.ctxs.next_sweep {
            self.sweep_contexts();
        }
        self.cur.ctx = self.ctxs.intern(Ctx { tid: actor, slot: slot as u32, ls: self.cur.ls });
        self.cur.inside = self.bracket.inside(tid);
        self.cur.tid = tid;
        self.cur.actor = actor;
        self.cur.valid = true;
    }

    /// Frees the contexts no record names any more: a mark over every record (the shadow's
    /// granules with their spilled lists, the records kept of bytes that became sync locations,
    /// the conflicts of a check in progress) and the running thread's context, then a sweep.
    /// Called before a context is interned once the table has doubled since the last sweep.
    fn sweep_contexts(&mut self) {
        let Hmtrace { ctxs, shadow, spill, pre_atomic, found, cur, .. } = self;
        ctxs.marks.clear();
        ctxs.marks.resize(ctxs.list.len().div_ceil(64), 0);
        shadow.each(|_, g| {
            for e in g.entries.as_slice(spill) {
                ctxs.mark(e.ctx);
            }
        });
        for e in pre_atomic.values().flatten() {
            ctxs.mark(e.ctx);
        }
        for (_, e, _) in found.iter() {
            ctxs.mark(e.ctx);
        }
        if cur.valid {
            ctxs.mark(cur.ctx);
        }
        ctxs.sweep();
    }

    fn apply(&mut self, tid: u32, op: SyncOp) {
        self.cur.valid = false;
        match op {
            SyncOp::Acquire { lock, mode } => {
                let t = self.thread(tid);
                match t.held.iter_mut().find(|(l, _, _)| *l == lock) {
                    Some(h) => h.2 += 1,
                    None => t.held.push((lock, mode, 1)),
                }
                self.relock(tid);
                // Release-to-acquire order: what writers released, and for a writer also what
                // readers released (readers do not order each other).
                self.hb.apply(tid, SyncOp::Wait { obj: LOCK_W | lock });
                if mode == Mode::Exclusive {
                    self.hb.apply(tid, SyncOp::Wait { obj: LOCK_R | lock });
                }
            }
            SyncOp::Release { lock } => {
                let t = self.thread(tid);
                if let Some(i) = t.held.iter().position(|(l, _, _)| *l == lock) {
                    let mode = t.held[i].1;
                    t.held[i].2 -= 1;
                    if t.held[i].2 == 0 {
                        t.held.remove(i);
                    }
                    let key = if mode == Mode::Exclusive { LOCK_W } else { LOCK_R };
                    self.hb.apply(tid, SyncOp::Post { obj: key | lock });
                }
                self.relock(tid);
            }
            SyncOp::Create { child } => {
                self.hb.apply(tid, op);
                self.thread(child);
            }
            SyncOp::Exit => {
                self.hb.apply(tid, op);
                let handle = self.thread(tid).handle;
                self.threads.remove(&tid);
                if let Some(h) = handle {
                    let h = self.spaces.key(tid, h, 0);
                    self.forget(h.saturating_sub(STACK_SPAN), h.saturating_add(TCB_SPAN));
                }
            }
            _ => self.hb.apply(tid, op),
        }
    }

    fn relock(&mut self, tid: u32) {
        let t = self.threads.get(&tid).expect("thread exists");
        let mut set = std::mem::take(&mut self.lockset);
        set.clear();
        set.extend(t.held.iter().map(|(l, m, _)| (*l, *m)));
        set.sort_unstable();
        let id = self.locks.intern(&set);
        self.lockset = set;
        self.thread(tid).ls = id;
    }

    /// Clears the records of the granules of `[lo, hi)`: a freed heap block, unmapped memory.
    fn forget_block(&mut self, lo: u64, hi: u64) {
        self.forget(lo, hi);
    }

    /// Follows malloc, calloc, realloc and free.
    fn allocation(&mut self, ev: &Event) {
        use emu::sync::SyncKind;
        match ev.kind {
            EventKind::SyncEnter(SyncKind::Calloc) => {
                self.alloc_sizes.insert(ev.tid, (ev.addr.saturating_mul(ev.old), 0));
            }
            EventKind::SyncEnter(SyncKind::Realloc) => {
                self.alloc_sizes.insert(ev.tid, (ev.old, self.spaces.key(ev.tid, ev.addr, 0)));
            }
            // munmap(addr, len): the memory is gone; whatever is mapped there later is new.
            EventKind::Syscall if ev.addr == 11 => {
                let (lo, len) = (self.spaces.key(ev.tid, ev.new, 0), ev.old);
                self.allocs.retain(|a, _| *a < lo || *a >= lo.saturating_add(len));
                self.forget_block(lo, lo.saturating_add(len));
            }
            // futex(uaddr, ...): the word is a synchronisation variable (the kernel's protocol
            // needs its loads and stores atomic), as a word a locked instruction touched is.
            // Not libgomp's own words: the order its barriers and task queue happen to take is
            // not what OpenMP guarantees (the entry points give that).
            EventKind::Syscall if ev.addr == 202 && !self.adapter.omp.in_runtime(ev.tid) => {
                self.mark_sync(self.spaces.key(ev.tid, ev.new & !3, 0), 4)
            }
            EventKind::SyncEnter(SyncKind::Free) => {
                let at = self.spaces.key(ev.tid, ev.addr, 0);
                if let Some(size) = self.allocs.remove(&at) {
                    self.forget_block(at, at + size);
                }
            }
            EventKind::SyncReturn(kind @ (SyncKind::Malloc | SyncKind::Calloc | SyncKind::Realloc)) => {
                let (size, old) = match kind {
                    SyncKind::Malloc => (ev.addr, 0),
                    _ => self.alloc_sizes.remove(&ev.tid).unwrap_or((0, 0)),
                };
                let new = self.spaces.key(ev.tid, ev.new, 0);
                if kind == SyncKind::Realloc && old != 0 && new != old {
                    if let Some(s) = self.allocs.remove(&old) {
                        self.forget_block(old, old + s);
                    }
                }
                if ev.new != 0 {
                    self.allocs.insert(new, size);
                }
            }
            _ => {}
        }
    }

    /// Clears every record in `[lo, hi)`: memory that is dead (an exited thread's stack block).
    fn forget(&mut self, lo: u64, hi: u64) {
        let spill = &mut self.spill;
        self.shadow.clear_with(lo, hi, |g| g.entries.release(spill));
        if !self.pre_atomic.is_empty() {
            let (a, b) = (lo >> GRANULE_SHIFT, hi.saturating_add((1 << GRANULE_SHIFT) - 1) >> GRANULE_SHIFT);
            let dead: Vec<u64> = self.pre_atomic.range(a..b).map(|(k, _)| *k).collect();
            for k in dead {
                self.pre_atomic.remove(&k);
            }
        }
    }

    fn access(&mut self, ev: &Event) {
        // Refreshed by the caller: the thread or task the access is by.
        let tid = self.cur.actor;
        let write = !matches!(ev.kind, EventKind::Load);
        let locked = matches!(ev.kind, EventKind::RmwStore);
        // Library internals take part only through their synchronisation.
        let code = &self.code;
        let (site, library) = self.sites.lookup(ev.pc, ev.stack, |pc| code.is_library(pc));
        // C++'s std::atomic compiled into the program: a release store or an acquire load is a
        // plain move, yet an access to an atomic object (never a race), as a locked one is. The
        // same for the program's C11 `_Atomic` objects, known by address (C accesses them only
        // atomically, but through a cast or a copy: library code's copies are left out).
        let atomic = !locked
            && !library
            && ((!code.atomic.is_empty() && self.atomic_pcs.get(ev.pc, |pc| code.is_atomic(pc)))
                || code.is_atomic_object(ev.addr));
        let (lo, hi) = (ev.addr, ev.addr.saturating_add(u64::from(ev.size.max(1))));
        let mut gi = lo >> GRANULE_SHIFT;
        while gi << GRANULE_SHIFT < hi {
            let base = gi << GRANULE_SHIFT;
            let m = mask_of(base, lo, hi);
            if locked {
                // A locked read-modify-write: the bytes become a sync location, and the
                // instruction an acquire and a release of it. In the program's code it is an
                // atomic write first, checked against the plain writes made before.
                if !library {
                    self.atomic_write(ev, gi, m);
                }
                self.mark_sync_granule(gi, m);
                let key = SYNC_KEY | (ev.addr & !7);
                self.apply(tid, SyncOp::Wait { obj: key });
                self.apply(tid, SyncOp::Post { obj: key });
            } else if atomic {
                // An atomic object (C++ defines its loads and stores as never racing with each
                // other): checked and recorded as data against plain accesses only, so a plain
                // access to the object through a cast still races with it, and ordered as the
                // release (store) or acquire (load) it is. The bytes do not become a sync
                // location: that would take the object's plain accesses for atomics too.
                let key = SYNC_KEY | (ev.addr & !7);
                if !write {
                    self.apply(tid, SyncOp::Wait { obj: key });
                }
                self.refresh_clock(ev.tid);
                let g = self.shadow.get_or_insert(base);
                let plain = m & !g.sync;
                if plain != 0 {
                    let (cur, found) = (&self.cur, &mut self.found);
                    if check_granule(
                        g,
                        &mut self.spill,
                        cur,
                        &self.ctxs,
                        &mut self.locks,
                        self.opts.ilu,
                        found,
                        site,
                        plain,
                        write,
                        true,
                    ) {
                        self.report_found(ev, gi, write, true);
                    }
                }
                if write {
                    self.apply(tid, SyncOp::Post { obj: key });
                }
            } else if library {
                // Library internals take part only through their synchronisation (and leave no
                // records, so no page is allocated for them).
                let sync = self.shadow.get(base).map_or(0, |g| g.sync) & m;
                if sync != 0 {
                    self.sync_access(tid, base, sync, write);
                }
            } else {
                // One shadow lookup for the sync bits and the check, unless the access is to a
                // sync location (whose ordering changes the clock the check uses). The clock
                // too may have changed at a sync location in the previous granule.
                self.refresh_clock(ev.tid);
                let g = self.shadow.get_or_insert(base);
                let sync = g.sync & m;
                if sync == 0 {
                    let (cur, found) = (&self.cur, &mut self.found);
                    if check_granule(
                        g,
                        &mut self.spill,
                        cur,
                        &self.ctxs,
                        &mut self.locks,
                        self.opts.ilu,
                        found,
                        site,
                        m,
                        write,
                        false,
                    ) {
                        self.report_found(ev, gi, write, false);
                    }
                } else {
                    self.sync_access(tid, base, sync, write);
                    let plain = m & !sync;
                    if plain != 0 {
                        self.check(ev, site, gi, plain, write);
                    }
                }
            }
            gi += 1;
        }
    }

    /// A locked instruction of the program's on bytes `m` of granule `gi`: an atomic write,
    /// racing with another thread's plain write it is not ordered with (a non-atomic write
    /// unordered with an atomic access is a data race under C11 and OpenMP too: a shared
    /// variable set by one thread while another's reduction or `omp atomic` updates it). The
    /// records it can meet are those made before the bytes became a sync location; plain reads
    /// are not checked (a spin on a flag before its first atomic update is an atomic read).
    fn atomic_write(&mut self, ev: &Event, gi: u64, m: u16) {
        self.atomic_access(ev, gi, m, true);
    }

    /// An access to an atomic object of bytes `m` of granule `gi` (a locked instruction, or a
    /// load or store compiled from C++'s `std::atomic`), checked against the plain writes of
    /// other threads it is not ordered with ([`Hmtrace::atomic_write`]): an atomic load racing
    /// with a non-atomic store is a data race under C++ too.
    fn atomic_access(&mut self, ev: &Event, gi: u64, m: u16, write: bool) {
        self.refresh_clock(ev.tid);
        let Some(g) = self.shadow.get(gi << GRANULE_SHIFT) else { return };
        let cur = &self.cur;
        let plain = g.entries.as_slice(&self.spill).iter().map(|e| (e, e.mask & !g.sync));
        let before = self.pre_atomic.get(&gi).into_iter().flatten().map(|e| (e, e.mask));
        for (e, mask) in plain.chain(before) {
            let both = mask & m;
            let c = &self.ctxs.list[e.ctx as usize];
            if both != 0
                && e.write
                && !e.atomic
                && c.tid != cur.actor
                && e.epoch > cur.vc.vc.get(c.slot as usize)
                && !self.locks.excludes(c.ls, cur.ls)
            {
                self.found.push((ReportKind::Race, *e, both));
            }
        }
        if !self.found.is_empty() {
            self.report_found(ev, gi, write, true);
        }
    }

    /// Bytes `[lo, lo + len)` are a sync location from now on ([`Hmtrace::mark_sync_granule`]).
    fn mark_sync(&mut self, lo: u64, len: u64) {
        let hi = lo.saturating_add(len);
        let mut gi = lo >> GRANULE_SHIFT;
        while gi << GRANULE_SHIFT < hi {
            self.mark_sync_granule(gi, mask_of(gi << GRANULE_SHIFT, lo, hi));
            gi += 1;
        }
    }

    /// Bytes `m` of granule `gi` are a sync location: their plain accesses are atomics' loads and
    /// stores from now on (acquires and releases of the location, not data), their records go,
    /// and the races reported on them at any time are dropped at the end.
    fn mark_sync_granule(&mut self, gi: u64, m: u16) {
        *self.sync_ever.entry(gi).or_insert(0) |= m;
        let g = self.shadow.get_or_insert(gi << GRANULE_SHIFT);
        let spill = &mut self.spill;
        if g.entries.as_slice(spill).iter().any(|e| e.write && e.mask & m != 0) {
            let kept = self.pre_atomic.entry(gi).or_default();
            for e in g.entries.as_slice(spill).iter().filter(|e| e.write && e.mask & m != 0) {
                if kept.len() < MAX_ENTRIES {
                    kept.push(Entry { mask: e.mask & m, ..*e });
                }
            }
        }
        g.sync |= m;
        for e in g.entries.as_mut_slice(spill) {
            e.mask &= !m;
        }
        g.entries.retain(spill, |e| e.mask != 0);
    }

    /// A plain access to the sync location bytes `sync` of the granule at `base`: a release
    /// store or an acquire load (C11 atomics compile to plain moves on x86).
    fn sync_access(&mut self, tid: u32, base: u64, sync: u16, write: bool) {
        let key = SYNC_KEY | ((base + u64::from(sync.trailing_zeros())) & !7);
        let op = if write { SyncOp::Post { obj: key } } else { SyncOp::Wait { obj: key } };
        self.apply(tid, op);
    }

    /// HMTRace's check of granule `gi` for the bytes `m` ([`check_granule`]), the clock
    /// refreshed first, then the reports.
    fn check(&mut self, ev: &Event, site: SiteId, gi: u64, m: u16, write: bool) {
        self.refresh_clock(ev.tid);
        let g = self.shadow.get_or_insert(gi << GRANULE_SHIFT);
        if check_granule(
            g,
            &mut self.spill,
            &self.cur,
            &self.ctxs,
            &mut self.locks,
            self.opts.ilu,
            &mut self.found,
            site,
            m,
            write,
            false,
        ) {
            self.report_found(ev, gi, write, false);
        }
    }

    /// Reports the conflicts [`check_granule`] left in `found`.
    fn report_found(&mut self, ev: &Event, gi: u64, write: bool, atomic: bool) {
        let tid = self.cur.actor;
        let mut found = std::mem::take(&mut self.found);
        for (kind, e, both) in found.drain(..) {
            let i = self.report(kind, &e, ev, tid, write, gi, both);
            self.report_list[i as usize].1.atomic |= atomic;
        }
        self.found = found;
    }

    #[allow(clippy::too_many_arguments)]
    fn report(&mut self, kind: ReportKind, e: &Entry, ev: &Event, tid: u32, write: bool, gi: u64, both: u16) -> u32 {
        let (pc, stack) = self.sites.get(e.site);
        let c = self.ctxs.list[e.ctx as usize];
        let first = Side { pc, stack, write: e.write };
        let second = Side { pc: ev.pc, stack: ev.stack, write };
        let key = (kind, first, second);
        let i = match self.recent.iter().find(|(k, _)| *k == key) {
            Some(&(_, i)) => i,
            None => {
                let list = &mut self.report_list;
                let threads = &self.threads;
                let i = *self.reports.entry(key).or_insert_with(|| {
                    list.push((
                        key,
                        Report {
                            first_tid: c.tid,
                            second_tid: tid,
                            addr: (gi << GRANULE_SHIFT) + u64::from(both.trailing_zeros()),
                            len: both.count_ones(),
                            locked: c.ls != 0 || threads.get(&tid).is_some_and(|t| t.ls != 0),
                            atomic: false,
                            count: 0,
                            conflicts: Vec::new(),
                        },
                    ));
                    (list.len() - 1) as u32
                });
                self.recent[self.recent_next] = (key, i);
                self.recent_next = (self.recent_next + 1) % RECENT;
                i
            }
        };
        let r = &mut self.report_list[i as usize].1;
        r.count += 1;
        if r.conflicts.len() < MAX_CONFLICTS && !r.conflicts.contains(&(gi, both)) {
            r.conflicts.push((gi, both));
        }
        i
    }
}

/// HMTRace's check of one granule (Algorithm 2 with the tag compare made explicit), then the
/// tag update, by the running thread `cur` for the bytes `m`. The conflicts go to `found`
/// (returns whether there are any). A function of the pieces of the pass it needs, so that the
/// caller looks the granule up once for its sync bits and for this.
#[allow(clippy::too_many_arguments)]
#[inline]
fn check_granule(
    g: &mut Granule,
    spill: &mut Spill<Entry>,
    cur: &CurrentClock,
    ctxs: &Contexts,
    locks: &mut LockSets,
    ilu: bool,
    found: &mut Vec<(ReportKind, Entry, u16)>,
    site: SiteId,
    m: u16,
    write: bool,
    atomic: bool,
) -> bool {
    let (tid, vc, epoch, ctx, ls) = (cur.actor, &cur.vc.vc, cur.epoch, cur.ctx, cur.ls);
    // Same context: same thread, slot and locks.
    let same_site = |e: &Entry| e.ctx == ctx && e.write == write && e.epoch == epoch && e.site == site;
    let ctx_of = |e: &Entry| &ctxs.list[e.ctx as usize];
    // The granule's one record is this thread's, made at the same site, epoch and locks (a
    // loop over its own data): nothing to check, and the access only widens the record.
    if let [e] = g.entries.as_mut_slice(spill) {
        if same_site(e) {
            e.mask |= m;
            g.shared = NOT_SHARED;
            return false;
        }
    }
    let ordered = |c: &Ctx, e: &Entry| e.epoch <= vc.get(c.slot as usize);
    // One walk over the records does both halves of the access for each record in turn (each
    // half reads and changes only that record):
    // - the check: whether another thread's record is unordered with this access and,
    //   tentatively, the conflicts (kept only if the lockset gate asks for a check below:
    //   conflicts exist only where an unordered record does, so a granule without one pays
    //   nothing for this), against the record as it was before the access;
    // - the tag update: a write makes the thread the only owner of its bytes; a read adds it as
    //   a reader and leaves the writer's tag in place (a read under a reader-shared lock
    //   inherits the tag). The walk also finds this site's record among those that keep bytes,
    //   at its index once the emptied ones are gone.
    let mut unordered_others = false;
    let mut emptied = false;
    let mut kept = 0;
    let mut at = None;
    for e in g.entries.as_mut_slice(spill) {
        // A record of this context is this thread's; another context may be too.
        let mine = e.ctx == ctx || ctx_of(e).tid == tid;
        if !mine && !ordered(ctx_of(e), e) {
            unordered_others = true;
            let both = e.mask & m;
            let els = ctx_of(e).ls;
            // Two atomic accesses never race.
            if both != 0 && !(atomic && e.atomic) {
                if e.write || write {
                    if !locks.excludes(els, ls) {
                        found.push((ReportKind::Race, *e, both));
                    }
                } else if ilu && els != 0 && ls != 0 && !locks.common(els, ls) {
                    found.push((ReportKind::Ilu, *e, both));
                }
            }
        }
        if write || (mine && !e.write) {
            e.mask &= !m;
        }
        // Records at rest keep some bytes: an empty one was emptied just now.
        if e.mask == 0 {
            emptied = true;
        } else {
            if at.is_none() && same_site(e) {
                at = Some(kept);
            }
            kept += 1;
        }
    }
    let need_check = if !unordered_others {
        g.shared = NOT_SHARED;
        false
    } else if g.shared == NOT_SHARED {
        g.shared = ls;
        true
    } else {
        let skip = locks.excludes(g.shared, ls);
        g.shared = locks.meet(g.shared, ls);
        !skip
    };
    if !need_check {
        found.clear();
    }
    if emptied {
        g.entries.retain(spill, |e| e.mask != 0);
    }
    match at {
        Some(i) => g.entries.as_mut_slice(spill)[i].mask |= m,
        None => g.entries.push(spill, Entry { ctx, epoch, site, mask: m, write, atomic }),
    }
    if g.entries.len(spill) > MAX_ENTRIES {
        if let Some(i) = g.entries.as_slice(spill).iter().position(|e| e.ctx != ctx && ctx_of(e).tid != tid) {
            g.entries.remove(spill, i);
        }
    }
    !found.is_empty()
}

impl Analysis for Hmtrace {
    fn name(&self) -> &'static str {
        "hmtrace"
    }

    /// A race seen is a race whatever the program does next: the findings stand when the run
    /// hangs at the instruction budget or deadlocks (a program that never ends, a server, a
    /// barrier missing a lock). What it cannot know then: a location whose first locked
    /// instruction would have come after the stop is not known as a sync location, so its
    /// plain accesses count as data.
    fn reports_when_stopped(&self) -> bool {
        true
    }

    /// `contexts`: the most record contexts interned at once (bounded by the ones records name,
    /// [`Hmtrace::sweep_contexts`], not by every thread and lockset the run ever had).
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![("contexts", self.ctxs.peak as u64)]
    }

    fn fork(&self) -> Option<Box<dyn Analysis>> {
        Some(Box::new(self.clone()))
    }

    fn interest(&self) -> Interest {
        Interest::MEMORY.union(Interest::SYNC)
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
                self.refresh_clock(ev.tid);
                if !self.cur.inside {
                    let addr = self.spaces.key(ev.tid, ev.addr, ev.dev);
                    if addr == ev.addr {
                        self.access(ev)
                    } else {
                        self.access(&Event { addr, ..*ev })
                    }
                }
            }
            EventKind::Syscall => self.allocation(ev),
            EventKind::SharedMemory => self.spaces.share(ev.addr, ev.old),
            k if k.orders_threads() => {
                self.cur.valid = false;
                self.allocation(ev);
                self.bracket.observe(ev);
                self.calls.observe(ev);
                if ev.kind == EventKind::ThreadCreate {
                    if ev.addr != 0 {
                        self.thread(ev.new as u32).handle = Some(ev.addr);
                    }
                    self.spaces.created(ev.tid, ev.new as u32, ev.old == 1);
                }
                let mut ops = std::mem::take(&mut self.ops);
                self.adapter.translate_actors(ev, |who, op| ops.push((who, op)));
                for (who, op) in ops.drain(..) {
                    self.apply(who, op);
                }
                self.ops = ops;
                if let Some((lo, hi)) = self.adapter.omp.dead_stack.take() {
                    let at = self.spaces.key(ev.tid, lo, 0);
                    self.forget(at, at.saturating_add(hi.saturating_sub(lo)));
                }
                for obj in self.adapter.omp.dead_objects.drain(..) {
                    self.hb.forget(obj);
                }
                for (actor, posts) in self.adapter.omp.dead_actors.drain(..) {
                    self.hb.retire(actor, posts);
                    self.threads.remove(&actor);
                }
            }
            _ => {}
        }
    }

    fn set_code(&mut self, code: &CodeInfo) {
        self.code = code.clone().sorted();
        self.sites.forget_answers();
        self.atomic_pcs.clear();
    }

    fn finish(&mut self, _device: &PmDevice) -> Vec<RawFinding> {
        let mut out = PairFindings::new("hmtrace");
        self.reports.clear();
        self.recent = [(NO_KEY, 0); RECENT];
        let mut reports = std::mem::take(&mut self.report_list);
        reports.sort_unstable_by_key(|r| r.0);
        for ((kind, first, second), r) in reports {
            // A location touched by a locked instruction at any time is a sync location: its
            // plain accesses were atomics' loads and stores, not races.
            let live =
                r.atomic || r.conflicts.iter().any(|(gi, m)| m & !self.sync_ever.get(gi).copied().unwrap_or(0) != 0);
            if !live {
                continue;
            }
            let message = || {
                if kind == ReportKind::Race {
                    format!(
                        "data race: {} by thread {} and {} by thread {} of {} byte(s) at {:#x}, not ordered by \
                         happens-before and {}",
                        what(first.write),
                        r.first_tid,
                        what(second.write),
                        r.second_tid,
                        r.len,
                        r.addr & !SPACE_BITS,
                        if r.locked { "holding no lock in common" } else { "with no lock held" }
                    )
                } else {
                    format!(
                        "inconsistent lock usage: reads by thread {} and thread {} of {} byte(s) at {:#x}, not \
                         ordered by happens-before, each holding locks but none in common",
                        r.first_tid,
                        r.second_tid,
                        r.len,
                        r.addr & !SPACE_BITS
                    )
                }
            };
            out.add(kind.name(), message, r.count, (&first, r.first_tid), (&second, r.second_tid));
        }
        out.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;

    const X: u64 = 0x5000;
    const RACE: &str = "data-race";
    const ILU: &str = "inconsistent-lock-usage";

    fn sim() -> Sim<Hmtrace> {
        sim_with(Options::default())
    }

    fn sim_with(opts: Options) -> Sim<Hmtrace> {
        let mut s = Sim { dev: PmDevice::default(), pass: Hmtrace::new(opts) };
        s.create(1, 2);
        s.create(1, 3);
        s
    }

    #[test]
    fn masks() {
        assert_eq!(mask_of(0, 0, 4), 0xf);
        assert_eq!(mask_of(0, 12, 20), 0xf000);
        assert_eq!(mask_of(16, 12, 20), 0xf);
        assert_eq!(mask_of(0, 0, 16), 0xffff);
    }

    #[test]
    fn one_finding_per_pair_of_sites_whichever_came_first() {
        let mut s = sim();
        // Thread 2 reads at 0x100 before thread 3 writes at 0x200; then, on another variable,
        // thread 3 writes at 0x200 before thread 2 reads at 0x100: one race of two sites.
        s.read(2, 0x100, X);
        s.write(3, 0x200, X, 0, 1);
        s.write(3, 0x200, X + 0x40, 1, 2);
        s.read(2, 0x100, X + 0x40);
        let found = s.finish();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].occurrences, 2);
        let g = found[0].group.as_ref().unwrap();
        let roles: Vec<Vec<&str>> = g.variants.iter().map(|v| v.locations.iter().map(|l| l.role).collect()).collect();
        assert!(roles.contains(&vec!["earlier-read", "later-write"]), "{roles:?}");
        assert!(roles.contains(&vec!["earlier-write", "later-read"]), "{roles:?}");
    }

    #[test]
    fn unsynchronised_writes_race_and_adjacent_bytes_do_not() {
        let mut s = sim();
        s.write(2, 0x100, X, 0, 1);
        s.write(3, 0x200, X + 4, 0, 1);
        s.write(3, 0x300, X, 1, 2);
        assert_eq!(s.pairs(RACE), vec![(0x100, 0x300)]);
    }

    #[test]
    fn a_common_lock_protects_and_different_locks_do_not() {
        let mut s = sim();
        s.lock(2, L1);
        s.write(2, 0x100, X, 0, 1);
        s.unlock(2, L1);
        s.lock(3, L1);
        s.write(3, 0x200, X, 1, 2);
        s.unlock(3, L1);
        s.lock(2, L2);
        s.write(2, 0x300, X, 2, 3);
        s.unlock(2, L2);
        assert_eq!(s.pairs(RACE), vec![(0x200, 0x300)]);
    }

    #[test]
    fn create_join_barrier_and_exit_order_or_clear() {
        let mut s = sim();
        s.write(1, 0x100, X, 0, 1);
        s.create(1, 4);
        s.write(4, 0x200, X, 1, 2);
        s.barrier(&[4, 3]);
        s.read(3, 0x300, X);
        assert!(s.pairs(RACE).is_empty());
        // A thread's stack block is dead once it exits: its records go.
        let mut s = sim();
        let stack = 0x7000_0000 + 2 * 0x100_0000 - 0x100;
        s.write(2, 0x100, stack, 0, 1);
        s.send(dram(EventKind::ThreadExit, 2, 0, 0, 0, 0, 0));
        s.write(3, 0x200, stack, 1, 2);
        assert!(s.pairs(RACE).is_empty());
    }

    #[test]
    fn a_record_is_16_bytes_and_a_granule_44() {
        // What a touched granule costs (docs/performance.md, bytes per touched PM line).
        assert_eq!(std::mem::size_of::<Entry>(), 16);
        assert_eq!(std::mem::size_of::<Granule>(), 44);
    }

    #[test]
    fn a_thread_with_other_locks_is_the_same_thread() {
        // The same thread's records under two locksets are two contexts: neither is another
        // thread's, and a write of the same bytes by it replaces both.
        let mut s = sim();
        s.create(1, 4);
        s.lock(2, L1);
        s.write(2, 0x100, X, 0, 1);
        s.unlock(2, L1);
        s.read(2, 0x200, X);
        s.write(2, 0x300, X, 1, 2);
        assert!(s.pairs(RACE).is_empty());
        assert_eq!(s.pass.shadow.get(X).map(|g| g.entries.len(&s.pass.spill)), Some(1));
        // Another thread's write races with the last write only, wherever its context.
        s.write(4, 0x400, X, 2, 3);
        assert_eq!(s.pairs(RACE), vec![(0x300, 0x400)]);
    }

    #[test]
    fn records_beyond_the_inline_two_spill_in_order_and_are_given_back() {
        let mut s = sim();
        s.create(1, 4);
        // Three readers: the granule's list spills to the pool.
        s.read(2, 0x100, X);
        s.read(3, 0x200, X);
        s.read(4, 0x300, X + 8);
        assert_eq!(s.pass.spill.in_use(), 1);
        // A write by the first reader races with the other two, in the order they read; it
        // leaves one record for its bytes and the third reader's, inline again.
        s.write(2, 0x400, X, 0, 1);
        assert_eq!(s.pairs(RACE), vec![(0x200, 0x400)]);
        assert_eq!(s.pass.spill.in_use(), 0);
        s.read(3, 0x500, X + 4);
        s.read(4, 0x600, X + 12);
        assert_eq!(s.pass.spill.in_use(), 1);
        // munmap(X & !0xfff, 4096): the page's records go, the spilled list back to the pool.
        s.send(dram(EventKind::Syscall, 2, 0x700, 11, 0, 4096, X & !0xfff));
        assert_eq!(s.pass.spill.in_use(), 0);
        s.write(3, 0x800, X, 1, 2);
        assert!(s.pairs(RACE).is_empty(), "no record survived the unmapping");
    }

    #[test]
    fn locked_instructions_make_sync_locations_with_release_acquire_order() {
        let mut s = sim();
        let flag = X + 64;
        // Consumer polls before the producer publishes: plain, later found to be a sync location.
        s.read(3, 0x50, flag);
        s.write(2, 0x100, X, 0, 42);
        s.send(dram(EventKind::Load, 2, 0x110, flag, 4, 0, 0));
        s.send(dram(EventKind::RmwStore, 2, 0x110, flag, 4, 0, 1));
        s.read(3, 0x200, flag);
        s.read(3, 0x300, X);
        assert!(s.pairs(RACE).is_empty());
    }

    #[test]
    fn cxx_atomic_accesses_order_plain_data_and_race_only_with_plain_accesses() {
        // Code at 0x1000..0x2000 is compiled from std::atomic's header: its plain moves are a
        // release store and an acquire load of `flag`, which order the data written before.
        let code = CodeInfo { atomic: vec![(0x1000, 0x2000)], ..CodeInfo::default() };
        let mut s = sim();
        s.pass.set_code(&code);
        let flag = X + 64;
        s.write(2, 0x100, X, 0, 42);
        s.write(2, 0x1100, flag, 0, 1);
        s.read(3, 0x1200, flag);
        s.read(3, 0x300, X);
        assert!(s.pairs(RACE).is_empty(), "release/acquire through std::atomic orders the data");
        // Atomic accesses never race with each other, but a plain access to the object through
        // a cast races with an unordered atomic one, in either order.
        s.write(3, 0x1300, flag, 1, 2);
        assert!(s.pairs(RACE).is_empty());
        s.write(2, 0x400, flag, 2, 3);
        assert_eq!(s.pairs(RACE), vec![(0x1300, 0x400)]);
        // The object is no sync location: the plain write stays data.
        assert_eq!(s.pass.shadow.get(flag).map_or(0, |g| g.sync), 0);
    }

    #[test]
    fn reads_under_different_locks_are_inconsistent_lock_usage_not_races() {
        let reads_under_two_locks = |s2: &mut Sim<Hmtrace>| {
            s2.create(1, 4);
            s2.create(1, 5);
            s2.lock(4, L1);
            s2.read(4, 0x100, X);
            s2.unlock(4, L1);
            s2.lock(5, L2);
            s2.read(5, 0x200, X);
            s2.unlock(5, L2);
        };
        let mut s = sim();
        s.write(1, 0x80, X, 0, 5);
        reads_under_two_locks(&mut s);
        s.read(5, 0x300, X);
        assert!(s.pairs(RACE).is_empty());
        let mut s2 = sim_with(Options { ilu: true });
        reads_under_two_locks(&mut s2);
        assert_eq!(s2.pairs(ILU), vec![(0x100, 0x200)]);
        // Off by default: a diagnostic, not a race.
        let mut s3 = sim();
        reads_under_two_locks(&mut s3);
        assert!(s3.pairs(ILU).is_empty() && s3.pairs(RACE).is_empty());
    }

    #[test]
    fn library_code_is_left_out() {
        let mut s = sim();
        s.pass.set_code(&CodeInfo {
            library: vec![(0x1000, 0x2000)],
            copy: vec![(0x1800, 0x1900)],
            ..CodeInfo::default()
        });
        s.write(2, 0x1100, X, 0, 1);
        s.write(3, 0x1200, X, 1, 2);
        assert!(s.pairs(RACE).is_empty());
        let mut s = sim();
        s.pass.set_code(&CodeInfo {
            library: vec![(0x1000, 0x2000)],
            copy: vec![(0x1800, 0x1900)],
            ..CodeInfo::default()
        });
        s.write(2, 0x1850, X, 0, 1);
        s.read(3, 0x300, X);
        assert_eq!(s.pairs(RACE), vec![(0x1850, 0x300)]);
    }
}
