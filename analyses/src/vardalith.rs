//! `vardalith`: persistence-induced races from overlapping store and load windows (Gonçalves,
//! Fragoso Santos, Rodrigues & Matos, *Vardalith: Hybrid Detection of Persistent Memory
//! Concurrency Bugs*, ECOOP 2026).
//!
//! # The bug
//! A *persistence-induced race* (PIR, the paper's Definition 1): a store `s` to PM address x by
//! thread T1, the first later persistence `p` of x by T1, and a load `l` of x by thread T2 ≠ T1
//! such that `p` does not happen before `l` and `l` does not happen before `s`. Some
//! interleaving then lets T2 read the value before it is durable; a crash after T2 acted on it
//! loses the cause of the effect.
//!
//! # The algorithm: persistent interference-free regions
//! Vardalith widens each access into a region during which no other thread's synchronisation
//! can intervene (Definition 2):
//! - a **load window** runs from the thread's last *acquire* before the load to its first
//!   *release* after it;
//! - a **store window** runs from the thread's last acquire before the store to its first release
//!   **after the store is persisted** by its writer (own flush, then own fence). Releases between
//!   the store and its persistence do not end it; a store never persisted stays open until the
//!   program ends.
//!
//! Theorem 3: if a store window and a load window of different threads on the same bytes
//! overlap, a PIR exists. Overlap is judged against the run's actual order: the pass reports when
//! both windows are open at one moment — even if the load executed *before* the store (its
//! window was still open when the store's began). Every report is therefore a true PIR in the
//! paper's sense, provided the run's synchronisation is fully visible (see below); nobody has to
//! observe the racy interleaving itself, only one in which the regions overlap.
//!
//! Acquires are lock returns (try-locks when they succeed; read or write mode alike), condition
//! wait returns, barrier departures, successful `sem_wait`s, joins, and a thread's start. Releases
//! are unlock entries, condition wait entries (the mutex), signals and broadcasts, barrier
//! arrivals, `sem_post`, thread creation and thread exit. A futex hand-off outside those calls
//! (a `FUTEX_WAKE` and the wait it ends; a child process's end and the `wait4` that reaps it) is
//! a release and an acquire. libpmemobj's locks and condition
//! variables count like pthread's, and its lanes ([`crate::sync::Lanes`]) too: a lane hold is an
//! acquire, its release a release, and a store and a load of the lanes' memory made in lane
//! sections of two threads do not conflict (the lane orders them; `lanes=off` ignores lanes).
//! All of this comes from [`SyncAdapter`].
//!
//! # Relation to the paper's implementation
//! The paper finds region *starts* with a static, intraprocedural binary analysis (postdominance,
//! no acquire on the way, the address still computable) because tracking every acquire as a
//! potential start is too costly natively; its starts are at or after the true ones, so it sees
//! sub-regions (sound, less recall). Here every acquire is an event anyway, so windows start
//! *exactly* at the last acquire, retroactively when the access happens: a superset of what the
//! paper's runtime can see, with the same soundness argument (real-time overlap implies
//! happens-before overlap). The paper's runtime matches regions by start address; this pass
//! matches by byte range, so an 8-byte store and a 4-byte load at offset 4 conflict.
//!
//! Since happens-before overlap of *maximal* windows is equivalent to a PIR (the paper's Theorem 3), the
//! option `mode=hb` checks Definition 1 directly with vector clocks over every synchronisation
//! edge (create/join, locks, condition variables, barriers, semaphores): a store is reported with
//! a load when the load does not happen before the store and the store's persistence does not
//! happen before the load. It reports everything the window mode can see in the same run, plus
//! pairs whose windows merely *could* overlap under another schedule.
//!
//! # Choices where the paper is open
//! - **Persistence** is the device's `durable_own` (the writer's own flush and its own fence, a
//!   clflush under `--flush-model intel`, or an NT store and the writer's fence), checked at the
//!   writer's flushes and fences. The paper assumes that releases fence and only instruments
//!   flushes; `release_fence=on` restores that: a store flushed by its writer counts as persisted
//!   at the writer's next release. That is not true of plain-store unlocks (glibc's
//!   `pthread_spin_unlock`), hence off by default. `persist_owner=any` accepts any thread's flush
//!   and fence (the hardware rule), noticed at the writer's next flush, fence or release.
//! - **A store its writer never persists, made durable by another thread's flush and fence** (a
//!   structure filled by several threads and persisted whole by one, as P-CLHT's resize helpers
//!   fill the new table its resizer persists) is durable from then on under either rule: its
//!   window ends at the writer's next release after that persist (as it already did at the
//!   writer's exit). The paper's runtime cleans a store region only on its writer's own flush and
//!   names the spurious reports this gives (own-thread persistence only); before, such a window
//!   stayed open to the end and overlapped every later load, all of which read durable bytes.
//! - **A fence inside an unlock call** (`unlock_fence=on`, the default): glibc's mutex and rwlock
//!   unlocks release with a locked instruction, which also fences; a store flushed just before
//!   the unlock is therefore persisted by the releasing instruction itself. Its window closes at
//!   that release rather than at the next one. The same for a barrier's arrival (glibc's and
//!   libgomp's are a locked add) and `sem_post`.
//! - **A store overwritten** by its own thread before being persisted keeps its window; it closes
//!   with the overwriting store's persistence.
//! - **msync, fsync and durable pwrite** ([`emu::events::EventKind::Persist`]) persist their
//!   thread's windows as a fence does; another thread's stores they made durable stay open
//!   until that thread's next flush or fence.
//! - **Frees** (`frees=on`, the default): a PM object freed by `pmemobj_free`
//!   ([`emu::events::EventKind::Free`]) takes its bytes out of every window: the overlaps of
//!   its life were found when they happened, and no window of the bytes' next life (the same
//!   memory handed out again) conflicts with one of the old.
//! - **What the program declares to pmemcheck** (`annotations=on`, the default; see
//!   [`crate::annotations`] and docs/pmdk.md): accesses to PM it withdrew from checking
//!   (libpmemobj's run-time pool state) are not PM accesses, and a declaration that bytes are
//!   clean closes the store windows on them then, as if persisted. The paper's tool instruments
//!   only the program's binary and never meets libpmemobj's own state; without this, that
//!   state's stores (never persisted on purpose) keep their windows open to the end.
//!
//! # Memory
//! A new access by a thread at a site that covers the bytes of an earlier window of the same
//! thread and site takes that window's place: the new window starts no earlier, so it ends and
//! persists no earlier (and in hb mode its clock is later), and it conflicts with every future
//! access the old one would have. Memory therefore follows distinct (thread, site, bytes), not
//! accesses. Closed windows are dropped once no future window can reach back to them (every live
//! thread has acquired since they closed; in hb mode, every live thread's clock has seen them).
//! While one thread lives its loads open no window at all: such a window would close at the
//! thread's next release, and every thread that could store later is created at or after it.
//!
//! # What it can miss
//! Only overlaps of this run's windows (window mode) or this run's accesses (hb mode) are seen:
//! a racy load on a path not taken, or windows that never overlap under the chosen schedule, go
//! unreported (`--explore` runs more schedules). Nothing is reported about stores no other thread
//! loads. Bytes the program declared clean or withdrew from pmemcheck's checking are
//! believed (`annotations=off` checks them).
//!
//! # Sources of false positives, and the options for them
//! The guarantee needs *every* acquire and release to be visible. A synchronisation the pass does
//! not see — a lock taken by inlined code or a hand-written spin loop on a DRAM word not named as
//! a custom lock (on a PM word it is inferred: [`crate::inferred_locks`], `infer_locks=off`), a
//! flag handed over with atomics, a lock-free protocol — makes windows longer than the true
//! ones, and their overlap may then be impossible. Initialisation persisted before its
//! publication by a plain store or an `xchg` is the common case: HawkSet's initialization
//! removal heuristic (`irh=1`, `irh=0` off; [`crate::irh`]) drops a store persisted before a
//! second thread touched its bytes. By default (`irh_order=causal`) such a store is held, and
//! dropped only if its persist happens before the access that publishes it (a lock, a post, a
//! PM reads-from edge); `irh_order=observed` is HawkSet's rule, which pays with the schedules in
//! which a reader could have come first. Flush-on-read designs, where readers persist
//! what they read, are bugs only under the writer-only rule; `persist_owner=any` accepts them.
//! Reports may be benign when recovery tolerates the lost value (the paper counts them anyway).
//!
//! **Reads-from edges** (`reads_from=off`, the default: the paper's happens-before has only its
//! synchronisation calls). On x86 a load that reads a value is ordered after everything its
//! writer did before storing it, and a flag or pointer handed over by plain stores is such an
//! edge, which the windows do not see. With `reads_from=on` a pair the windows found is left out
//! when a reads-from edge orders it ([`crate::irh::ReadsFrom`], as `hawkset`'s option; the
//! windows themselves stay the paper's): a load that read (transitively) a store made after the
//! persist of the store window's bytes, by whichever thread persisted them (P-CLHT's resizer
//! persists the bucket copies its helpers made, then swaps the table pointer the readers follow),
//! or a store whose thread read what the loader stored after the load (an epoch of the loader
//! advances at each of its persists, so a store made after the load is known apart from one made
//! before it). The edge is an order of this run: a thread that learnt a later epoch of the
//! writer through a read it does not depend on is ordered too, and its load, made inside the
//! window in another schedule, goes unreported (P-CLHT: `clht_put`'s load of the swapped table
//! pointer at 440 is no longer listed with the swap).

use std::collections::BTreeMap;

use emu::decode::FlushOp;
use emu::events::{Event, EventKind, Interest};
use emu::pm::{DurabilityRule, PmDevice, LINE_SIZE};
use emu::sync::SyncKind;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::annotations::Annotations;
use crate::group::{Described, Grouper, StoreShapes};
use crate::inferred_locks::{within, InferredLocks};
pub use crate::irh::IrhOrder;
use crate::irh::{HeldStores, Publication, ReadsFrom};
use crate::options::{option_pairs, parse_bool, parse_owner};
use crate::persist::{
    durable_bytes, is_release_call, pieces, range_pieces, ChunkVec, Interner, RmwSites, ShadowLists, Site, SiteIds,
};
use crate::screen::WindowPass;
use crate::sync::{Edges, HappensBefore, PmdkLockCalls, SyncAdapter, SyncCalls, SyncOp};
use crate::{Analysis, CodeInfo, RawFinding, RawLocation};

/// How overlap is decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverlapMode {
    /// The paper's: store and load windows open at the same moment of this run.
    Windows,
    /// Definition 1 with vector clocks over every synchronisation edge.
    HappensBefore,
}

/// The pass's options; see the module documentation. Set from `--analyses
/// vardalith:mode=hb:release_fence=on` (see [`VardalithOptions::parse`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VardalithOptions {
    /// How overlap is decided.
    pub mode: OverlapMode,
    /// A store flushed by its writer counts as persisted at the writer's next release.
    pub release_fence: bool,
    /// Whose flush and fence make a store durable.
    pub persist_owner: DurabilityRule,
    /// A fence inside an unlock call persists before that release.
    pub unlock_fence: bool,
    /// Sampling (the paper's §5.2): only every `sample`-th access opens a window; every access
    /// is still checked against the windows open. 1: every access.
    pub sample: u32,
    /// libpmemobj's lane holds and releases ([`crate::sync::Lanes`]) are acquires and releases,
    /// and accesses to the lanes' memory in lane sections of two threads are ordered.
    pub lanes: bool,
    /// PM the program withdrew from pmemcheck's checking (`REMOVE_PMEM_MAPPING`: PMDK's
    /// run-time state in the pool) is not PM for this pass.
    pub annotations: bool,
    /// A lock function's own accesses to its lock word are synchronisation, not data.
    pub sync_words: bool,
    /// A load inside a string or memory routine counts only for the bytes its contract reads.
    pub strings: bool,
    /// Locks built from atomics are inferred from the accesses to their PM words
    /// ([`crate::inferred_locks`]).
    pub infer_locks: bool,
    /// HawkSet's initialization removal heuristic with this threshold (0: off): a store
    /// persisted before `irh + 1` threads accessed its bytes opens no window.
    pub irh: u32,
    /// Which stores the IRH removes ([`IrhOrder`]).
    pub irh_order: IrhOrder,
    /// An object libpmemobj's allocator hands out (`pmemobj_alloc`, `_zalloc`, `_xalloc`) is
    /// unpublished for the IRH, whatever threads did to its bytes in an earlier life.
    pub fresh_allocs: bool,
    /// The read half of a locked read-modify-write is a racing load (off: as `hawkset`'s
    /// `rmw_loads`, the instruction's own store carries what it read into the same bytes).
    pub rmw_loads: bool,
    /// A freed PM object's windows end at its free ([`emu::events::EventKind::Free`]): they
    /// conflict with no window of the bytes' next life.
    pub frees: bool,
    /// Reads-from edges order pairs ([`crate::irh::ReadsFrom`]): a load that read (transitively)
    /// a store its writer made after a store window's bytes were persisted is ordered after that
    /// persist, and a store whose thread read what the loader stored after its load is ordered
    /// after the load. Off: the paper's happens-before (synchronisation calls only).
    pub reads_from: bool,
}

impl Default for VardalithOptions {
    fn default() -> Self {
        VardalithOptions {
            mode: OverlapMode::Windows,
            release_fence: false,
            persist_owner: DurabilityRule::Own,
            unlock_fence: true,
            sample: 1,
            lanes: true,
            annotations: true,
            sync_words: true,
            strings: true,
            infer_locks: true,
            irh: 1,
            irh_order: IrhOrder::Causal,
            fresh_allocs: true,
            rmw_loads: false,
            frees: true,
            reads_from: false,
        }
    }
}

impl VardalithOptions {
    /// Parses `mode=windows|hb`, `release_fence=on|off`, `persist_owner=own|any`,
    /// `unlock_fence=on|off`, `sample=N`, `lanes=on|off`, `annotations=on|off`,
    /// `sync_words=on|off`, `strings=on|off`, `infer_locks=on|off`, `irh=N`, `irh_order=causal|observed`, `fresh_allocs=on|off`,
    /// `rmw_loads=on|off`, `frees=on|off`, `reads_from=on|off`, separated by `:`.
    pub fn parse(spec: &str) -> Result<VardalithOptions, String> {
        let mut o = VardalithOptions::default();
        for (k, v) in option_pairs(spec)? {
            match k {
                "mode" => {
                    o.mode = match v {
                        "windows" => OverlapMode::Windows,
                        "hb" => OverlapMode::HappensBefore,
                        _ => return Err(format!("mode={v}: expected windows or hb")),
                    }
                }
                "release_fence" => o.release_fence = parse_bool(k, v)?,
                "persist_owner" => o.persist_owner = parse_owner(k, v)?,
                "unlock_fence" => o.unlock_fence = parse_bool(k, v)?,
                "lanes" => o.lanes = parse_bool(k, v)?,
                "annotations" => o.annotations = parse_bool(k, v)?,
                "sync_words" => o.sync_words = parse_bool(k, v)?,
                "strings" => o.strings = parse_bool(k, v)?,
                "infer_locks" => o.infer_locks = parse_bool(k, v)?,
                "irh" => o.irh = v.parse().map_err(|_| format!("irh={v}: expected a number"))?,
                "irh_order" => o.irh_order = IrhOrder::parse(v)?,
                "fresh_allocs" => o.fresh_allocs = parse_bool(k, v)?,
                "rmw_loads" => o.rmw_loads = parse_bool(k, v)?,
                "frees" => o.frees = parse_bool(k, v)?,
                "reads_from" => o.reads_from = parse_bool(k, v)?,
                "sample" => {
                    o.sample = v
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| format!("sample={v}: expected a number >= 1"))?
                }
                _ => {
                    let known = "mode, release_fence, persist_owner, unlock_fence, sample, lanes, annotations, \
                                 sync_words, strings, infer_locks, irh, irh_order, fresh_allocs, rmw_loads, frees, \
                                 reads_from";
                    return Err(format!("unknown vardalith option `{k}` ({known})"));
                }
            }
        }
        Ok(o)
    }
}

/// A racing (store, load) pair's store thread, load thread (of its first occurrence) and
/// occurrences.
type PairCount = (u32, u32, u64);

/// The 8-byte granules of a line holding bytes `mask` of it, one bit each.
fn granule_bits(mask: u64) -> u64 {
    (0..8).filter(|g| mask >> (8 * g) & 0xff != 0).fold(0, |b, g| b | 1 << g)
}

/// An entry of [`Vardalith::by_line`]: window `id` on the granules `bits` of its line.
fn entry(id: u32, bits: u64) -> u64 {
    u64::from(id) | bits << 32
}

/// At most this many racing load sites are listed per finding (all are counted).
pub const MAX_LOADS: usize = 8;

/// Windows still open have this end.
const OPEN: u64 = u64::MAX;
/// A store not yet persisted has this persistence epoch (hb mode).
const NEVER: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// A load window, or a store not flushed since.
    Dirty,
    /// A store its writer flushed (or an NT store).
    Flushed,
    /// A store durable, its window waiting for the writer's next release.
    Persisted,
}

/// Packed to 4-byte alignment: 52 bytes, not 56 (one is kept per store or load window, so per
/// touched PM line while its store is not persisted).
#[derive(Clone, Copy, Debug)]
#[repr(Rust, packed(4))]
struct Window {
    store: bool,
    tid: u32,
    line: u64,
    mask: u64,
    /// The access's site, interned in [`Vardalith::sites`] (a window is 56 bytes, not 64).
    site: u32,
    /// Event step of the last acquire before the access (window mode).
    start: u64,
    /// Event step of the release that closed it, or [`OPEN`].
    end: u64,
    state: State,
    /// hb mode: the writer's/reader's clock at the access (interned).
    vc: u32,
    /// hb mode: the writer's own epoch at the persistence, or [`NEVER`].
    p_epoch: u32,
    /// Made inside a lane section, to the lanes' memory ([`crate::sync::Lanes::protects`]).
    lane: bool,
    /// A store persisted before its bytes were published, held by the causal IRH: it conflicts
    /// with nothing until the access that publishes its bytes decides it ([`HeldStores`]).
    held: bool,
    /// Made inside one of libpmemobj's allocation calls (a store of the allocator or of the
    /// object's constructor).
    in_alloc: bool,
    /// Listed in its thread's [`Thread::persisted`] since its last release: a window persisted
    /// again (a line stored and persisted over and over with no release between, as a
    /// single-threaded log) is listed once, not once per persist.
    listed: bool,
}

#[derive(Clone, Default, Debug)]
struct Thread {
    last_acquire: u64,
    /// Store windows not closed, by line, and load windows not closed.
    stores: OpenStores,
    loads: Vec<u32>,
    /// The store windows of `stores` made persisted since the thread's last release, by
    /// `(line, id)`, for that release to close ([`Vardalith::release`]); an entry may name a
    /// window since replaced, closed or no longer listed, which the release skips.
    persisted: Vec<(u64, u32)>,
    /// Lines flushed since the last fence.
    flushed: FxHashSet<u64>,
    /// Lines flushed since the last fence where an exited thread left store windows open.
    flushed_orphans: Vec<u64>,
    /// Lines where this thread has store windows open and another thread flushed (under the
    /// writer-only rule): settled with the hardware rule at this thread's next releases, until
    /// its windows there close.
    foreign_flushed: FxHashSet<u64>,
    /// Inside an unlock call: the step of its release and the epoch before it.
    in_release: Option<(u64, u32)>,
    vc: Option<u32>,
    exited: bool,
    /// Inside `pthread_join`: its next access comes after the join's acquire, so it holds no
    /// window back from pruning (a main thread waiting for its workers would keep every window
    /// they close).
    joining: bool,
    /// Sizes asked of the PMDK allocations the thread is in (their entries), innermost last.
    allocs: Vec<u64>,
    /// Windows its exit would have closed (window mode), with their (thread, line, site, start)
    /// to tell a freed and reused id: they stay open until a join of this thread (`pthread_join`,
    /// or the wait that reaps the process it ended), the only acquire the exit synchronises with.
    exit_pending: Vec<ExitPending>,
}

/// A window an exit would have closed, with its (thread, line, site, start) ([`Thread::exit_pending`]).
type ExitPending = (u32, (u32, u64, u32, u64));

/// The pass. Reports are made online, when the later of two conflicting windows is created.
#[derive(Clone)]
pub struct Vardalith {
    opts: VardalithOptions,
    sync: SyncAdapter,
    pmdk_locks: PmdkLockCalls,
    /// The recognised calls each thread is in: lock words, string routines' contracts.
    calls: SyncCalls,
    /// What the program declared through pmemcheck's client requests.
    annotations: Annotations,
    /// Locks inferred from atomics on PM words.
    inferred: InferredLocks,
    /// Which PM bytes a second thread has accessed (the IRH).
    irh: Publication,
    /// Store windows the causal IRH holds, by window id.
    held: HeldStores,
    /// Scratch: the held windows an access decided.
    decided: Vec<(u32, u64, bool)>,
    /// Threads seen and not exited.
    live: u32,
    /// What each store site wrote (pointers, values, counters), for the findings.
    stored: StoreShapes,
    /// The locked read-modify-writes that stored to PM (`rmw_loads=off`).
    rmw_pcs: RmwSites,
    /// PM accesses seen (for sampling).
    accesses: u64,
    /// Vector clocks over every edge (used in hb mode only).
    hb: HappensBefore,
    /// Number of events seen: the run's global order, in which windows start and end.
    step: u64,
    threads: FxHashMap<u32, Thread>,
    /// Window slab; `None` slots are listed in `free`.
    windows: Windows,
    free: Vec<u32>,
    /// PM line → windows on its bytes (open or closed, not yet pruned), each entry a window id
    /// with the line's 8-byte granules it covers ([`entry`]): an access looks only at the windows
    /// on the granules it touches, without loading the others (a line of eight 8-byte bucket
    /// heads), and a window on a whole line is listed once, not once per granule. A line's list
    /// is a 4-byte index into a slab ([`ShadowLists`]); two entries cost no allocation of their
    /// own.
    by_line: ShadowLists,
    /// Vector clocks without trailing zeros, interned (hb mode).
    clocks: Interner<Vec<u32>>,
    /// Windows created since the last prune.
    created_since_prune: usize,
    /// Exited threads that left store windows open (never persisted by their writer).
    exited_with_stores: usize,
    /// (store site, load site) → (store thread, load thread, occurrences).
    pairs: BTreeMap<(Site, Site), PairCount>,
    /// The windows' sites.
    sites: SiteIds,
    /// Overlaps on words a locked RMW targeted, by (store site, load site, line, bytes): kept
    /// apart until the end, when those on words confirmed as locks are dropped.
    word_pairs: BTreeMap<(Site, Site, u64, u64), PairCount>,
    ops: Vec<SyncOp>,
    /// Conflicting windows left out because a lane orders them.
    lane_ordered: u64,
    /// Scratch buffer: accesses, flushes, fences and releases allocate nothing once the pass
    /// has warmed up (a line's open store windows are inline in its entry).
    todo: Vec<u64>,
    fence_lines: FxHashSet<u64>,
    /// Frees seen and bytes freed (`frees=on`), for `--host-stats`.
    frees: u64,
    freed_bytes: u64,
    /// Reads-from clocks (`reads_from=on`).
    rf: Option<Box<ReadsFrom>>,
    /// `reads_from=on`, by window id: for a load window, (its thread, that thread's epoch in the
    /// reads-from clocks at the load); for a store window, (the thread whose flush and fence
    /// made it durable, that thread's epoch just after the persist), or an epoch of [`NEVER`].
    /// Kept apart from the windows so that a run without the option pays nothing for it.
    rf_win: Vec<(u32, u32)>,
    /// Conflicting windows left out because a reads-from edge orders them (`reads_from=on`).
    rf_ordered: u64,
}

/// Windows per chunk of [`Vardalith::windows`] (56 KiB).
const WINDOW_CHUNK: usize = 1024;

/// A thread's open store windows on one line: almost always one or two, so they are kept inline
/// in the line's entry (a `Vec` cost a heap block of its own per line).
type Ids = smallvec::SmallVec<[u32; 2]>;

/// The pass's windows, by id (freed ids are `None`).
type Windows = ChunkVec<Option<Window>, WINDOW_CHUNK>;

/// Thread `tid`'s state in `threads`, made (and counted `live`) the first time.
fn thread_in<'a>(threads: &'a mut FxHashMap<u32, Thread>, live: &mut u32, tid: u32) -> &'a mut Thread {
    threads.entry(tid).or_insert_with(|| {
        *live += 1;
        Thread::default()
    })
}

/// The line of live window `id`.
fn line_of(windows: &Windows, id: u32) -> u64 {
    windows[id as usize].as_ref().expect("live window").line
}

fn line_hash(line: u64) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(line)
}

/// A thread's open store windows, by line. A thread has one window open on most lines it
/// stores to: `one` holds that window's id alone, hashed by the window's line (4 bytes a
/// bucket; a map from line to id cost 16, 34 a line with its slack, for every line a thread had
/// not yet persisted). A line with more moves to `many`. Every id listed is a live window.
#[derive(Clone, Default, Debug)]
struct OpenStores {
    one: hashbrown::HashTable<u32>,
    many: FxHashMap<u64, Ids>,
}

impl OpenStores {
    fn push(&mut self, line: u64, id: u32, windows: &Windows) {
        if let Some(ids) = self.many.get_mut(&line) {
            ids.push(id);
        } else if let Some(first) = self.remove_one(line, windows) {
            self.many.insert(line, smallvec::smallvec![first, id]);
        } else {
            self.one.insert_unique(line_hash(line), id, |&i| line_hash(line_of(windows, i)));
        }
    }

    fn remove_one(&mut self, line: u64, windows: &Windows) -> Option<u32> {
        let e = self.one.find_entry(line_hash(line), |&i| line_of(windows, i) == line).ok()?;
        Some(e.remove().0)
    }

    fn get(&self, line: u64, windows: &Windows) -> Option<Ids> {
        match self.one.find(line_hash(line), |&i| line_of(windows, i) == line) {
            Some(&id) => Some(smallvec::smallvec![id]),
            None => self.many.get(&line).cloned(),
        }
    }

    fn contains_key(&self, line: u64, windows: &Windows) -> bool {
        self.one.find(line_hash(line), |&i| line_of(windows, i) == line).is_some() || self.many.contains_key(&line)
    }

    /// Whether window `id` is listed on `line`; if so it is taken off.
    fn remove_id(&mut self, line: u64, id: u32, windows: &Windows) -> bool {
        if let Ok(e) = self.one.find_entry(line_hash(line), |&i| i == id) {
            e.remove();
            return true;
        }
        let Some(ids) = self.many.get_mut(&line) else { return false };
        let Some(i) = ids.iter().position(|&i| i == id) else { return false };
        ids.remove(i);
        if ids.len() <= 1 {
            let ids = self.many.remove(&line).unwrap_or_default();
            self.insert(line, ids, windows);
        }
        true
    }

    fn remove(&mut self, line: u64, windows: &Windows) -> Option<Ids> {
        match self.remove_one(line, windows) {
            Some(id) => Some(smallvec::smallvec![id]),
            None => self.many.remove(&line),
        }
    }

    /// Sets the windows of a line that has none listed (after [`OpenStores::remove`]).
    fn insert(&mut self, line: u64, ids: Ids, windows: &Windows) {
        match ids.len() {
            0 => {}
            1 => {
                self.one.insert_unique(line_hash(line), ids[0], |&i| line_hash(line_of(windows, i)));
            }
            _ => {
                self.many.insert(line, ids);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.one.is_empty() && self.many.is_empty()
    }

    /// The lines with windows listed, in no particular order.
    fn lines<'a>(&'a self, windows: &'a Windows) -> impl Iterator<Item = u64> + 'a {
        self.one.iter().map(|&id| line_of(windows, id)).chain(self.many.keys().copied())
    }

    /// Keeps the windows for which `keep` holds.
    fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        self.one.retain(|id| keep(*id));
        self.many.retain(|_, ids| {
            ids.retain(|id| keep(*id));
            !ids.is_empty()
        });
    }
}

const PRUNE_EVERY: usize = 4096;

impl Default for Vardalith {
    fn default() -> Self {
        Vardalith::new(VardalithOptions::default())
    }
}

impl Vardalith {
    /// The pass with these options.
    pub fn new(opts: VardalithOptions) -> Vardalith {
        Vardalith {
            opts,
            sync: SyncAdapter::default(),
            pmdk_locks: PmdkLockCalls::default(),
            calls: SyncCalls::default(),
            annotations: Annotations::default(),
            inferred: InferredLocks::default(),
            irh: Publication::new(opts.irh, opts.irh_order),
            // With the IRH off its record of the lines accessed is empty: the shapes keep their own.
            stored: {
                let mut s = StoreShapes::default();
                if opts.irh == 0 {
                    s.keep_lines();
                }
                s
            },
            held: HeldStores::new(opts.irh_order == IrhOrder::Causal),
            decided: Vec::new(),
            live: 0,
            rmw_pcs: RmwSites::default(),
            accesses: 0,
            hb: HappensBefore::new(Edges { create_join: true, objects: true, locks: true }),
            step: 0,
            threads: FxHashMap::default(),
            windows: ChunkVec::default(),
            free: Vec::new(),
            by_line: ShadowLists::default(),
            clocks: Interner::default(),
            created_since_prune: 0,
            exited_with_stores: 0,
            pairs: BTreeMap::new(),
            sites: SiteIds::default(),
            word_pairs: BTreeMap::new(),
            ops: Vec::new(),
            lane_ordered: 0,
            todo: Vec::new(),
            fence_lines: FxHashSet::default(),
            frees: 0,
            freed_bytes: 0,
            rf: opts.reads_from.then(|| Box::new(ReadsFrom::new(true))),
            rf_win: Vec::new(),
            rf_ordered: 0,
        }
    }

    /// From an option string (`mode=hb:release_fence=on`).
    pub fn from_spec(spec: &str) -> Result<Vardalith, String> {
        Ok(Vardalith::new(VardalithOptions::parse(spec)?))
    }

    fn hb_mode(&self) -> bool {
        self.opts.mode == OverlapMode::HappensBefore
    }

    /// The open store windows of `tid`, with the windows they name.
    fn stores_of(&mut self, tid: u32) -> (&mut OpenStores, &Windows) {
        (&mut thread_in(&mut self.threads, &mut self.live, tid).stores, &self.windows)
    }

    fn open_remove(&mut self, tid: u32, line: u64) -> Option<Ids> {
        let (stores, windows) = self.stores_of(tid);
        stores.remove(line, windows)
    }

    fn open_insert(&mut self, tid: u32, line: u64, ids: Ids) {
        let (stores, windows) = self.stores_of(tid);
        stores.insert(line, ids, windows);
    }

    fn open_push(&mut self, tid: u32, line: u64, id: u32) {
        let (stores, windows) = self.stores_of(tid);
        stores.push(line, id, windows);
    }

    fn thread(&mut self, tid: u32) -> &mut Thread {
        thread_in(&mut self.threads, &mut self.live, tid)
    }

    fn clock(&mut self, tid: u32) -> u32 {
        if !self.hb_mode() {
            return 0;
        }
        if let Some(id) = self.thread(tid).vc {
            return id;
        }
        // Interned as it comes: a dense copy of a sparse clock ends at its last non-zero slot.
        let id = self.clocks.id(self.hb.clock(tid).0);
        self.thread(tid).vc = Some(id);
        id
    }

    /// Component `of` of interned clock `vc`.
    fn at(&mut self, vc: u32, of: u32) -> u32 {
        if !self.hb_mode() {
            return 0;
        }
        let s = self.hb.slot(of);
        self.clocks.get(vc).get(s).copied().unwrap_or(0)
    }

    /// The thread's own epoch now.
    fn epoch(&mut self, tid: u32) -> u32 {
        let vc = self.clock(tid);
        self.at(vc, tid)
    }

    fn get(&self, id: u32) -> &Window {
        self.windows[id as usize].as_ref().expect("live window")
    }

    fn get_mut(&mut self, id: u32) -> &mut Window {
        self.windows[id as usize].as_mut().expect("live window")
    }

    fn alloc(&mut self, w: Window) -> u32 {
        self.created_since_prune += 1;
        let line = w.line;
        let id = match self.free.pop() {
            Some(id) => {
                self.windows[id as usize] = Some(w);
                id
            }
            None => self.windows.push(Some(w)) as u32,
        };
        self.by_line.push(line, entry(id, granule_bits(w.mask)));
        id
    }

    /// Whether the (new) access `w` conflicts with the existing window `o` of another thread.
    fn conflicts(&mut self, w: &Window, o: &Window) -> bool {
        if self.hb_mode() {
            let (s, l) = if w.store { (w, o) } else { (o, w) };
            // l ≰hb s: the store's clock has not seen the load's epoch.
            let l_epoch = self.at(l.vc, l.tid);
            let s_sees = self.at(s.vc, l.tid);
            if s_sees >= l_epoch {
                return false;
            }
            // p ≰hb l: not persisted, or the load has not seen the persistence's epoch.
            s.p_epoch == NEVER || self.at(l.vc, s.tid) < s.p_epoch
        } else {
            // `w` is open now; `o` overlaps unless it closed before `w` began.
            o.end > w.start
        }
    }

    /// `reads_from=on`: whether a reads-from edge orders the new access `w` and the conflicting
    /// window `o` of another thread. A new load is ordered after a store whose persist it knows
    /// (it read, transitively, something the persisting thread stored after the persist: the
    /// pointer published after a node's flush and fence); a new store is ordered after a load
    /// when its thread knows an epoch of the loader later than the load's (it read something
    /// the loader stored after the load, and only after an advance of the loader's epoch, which
    /// its persists make). Not a window boundary: the windows stay as the paper's.
    fn rf_orders(&mut self, w: &Window, o: u32) -> bool {
        let (by, epoch) = self.rf_of(o);
        let Some(rf) = &mut self.rf else { return false };
        if w.store {
            epoch != NEVER && rf.knows(w.tid, by) > epoch
        } else {
            epoch != NEVER && rf.knows(w.tid, by) >= epoch
        }
    }

    /// `reads_from=on`: window `id`'s (thread, epoch) ([`Vardalith::rf_win`]).
    fn rf_of(&self, id: u32) -> (u32, u32) {
        self.rf_win.get(id as usize).copied().unwrap_or((0, NEVER))
    }

    /// `reads_from=on`: sets window `id`'s (thread, epoch).
    fn rf_set(&mut self, id: u32, v: (u32, u32)) {
        if self.rf.is_none() {
            return;
        }
        let i = id as usize;
        if self.rf_win.len() <= i {
            self.rf_win.resize(i + 1, (0, NEVER));
        }
        self.rf_win[i] = v;
    }

    /// `reads_from=on`: store window `id` was made durable by `by`'s flush and fence (its
    /// writer's or another thread's): it keeps `by`'s epoch just after the persist, the first
    /// time.
    fn rf_persisted(&mut self, id: u32, by: u32) {
        if self.rf_of(id).1 != NEVER {
            return;
        }
        let Some(rf) = &mut self.rf else { return };
        let epoch = rf.window_end(by);
        self.rf_set(id, (by, epoch));
    }

    /// `reads_from=on`: `tid` fenced (or `clflush`ed) `lines`: other threads' store windows there
    /// that are durable now under the hardware rule were persisted by `tid` (P-CLHT's resizer
    /// persisting the bucket copies its helpers made): they keep `tid`'s epoch, though their
    /// windows still end at their writers' next releases.
    fn rf_foreign_persist(&mut self, device: &PmDevice, tid: u32, lines: &FxHashSet<u64>) {
        if self.rf.is_none() {
            return;
        }
        let mut writers: Vec<u32> = self.threads.keys().copied().filter(|&w| w != tid).collect();
        writers.sort_unstable();
        let mut sorted: Vec<u64> = lines.iter().copied().collect();
        sorted.sort_unstable();
        for line in sorted {
            for &wt in &writers {
                let Some(ids) = self.threads.get(&wt).and_then(|t| t.stores.get(line, &self.windows)) else { continue };
                for id in ids {
                    let w = *self.get(id);
                    if w.state == State::Persisted || self.rf_of(id).1 != NEVER || w.mask == 0 {
                        continue;
                    }
                    if durable_bytes(device, DurabilityRule::Hw, w.line, w.mask, wt, false) == w.mask {
                        self.rf_persisted(id, tid);
                    }
                }
            }
        }
    }

    fn on_access(&mut self, ev: &Event, device: &PmDevice, store: bool, nt: bool) {
        self.accesses += 1;
        self.stored.access(ev.addr, ev.dev, ev.size);
        if store {
            self.stored.store(ev.pc, ev.dev, ev.size, ev.old, ev.new);
            self.rmw_pcs.store(ev.pc, ev.kind == EventKind::RmwStore);
        }
        let sampled = self.accesses.is_multiple_of(u64::from(self.opts.sample.max(1)));
        let tid = ev.tid;
        let site = self.sites.id((ev.pc, ev.stack));
        let start = self.thread(tid).last_acquire;
        let vc = self.clock(tid);
        let durable_now = store && !nt && device.durable(self.opts.persist_owner, ev.dev, u64::from(ev.size));
        let lane = self.opts.lanes && self.sync.lanes.protects(ev);
        let in_alloc = store && !self.thread(tid).allocs.is_empty();
        for (line, mask) in pieces(ev.dev, ev.size) {
            if !store {
                self.held.loaded(tid, line, mask);
            }
            // (A load learns the clocks of the stores it reads before it is checked.)
            let mut rf_new = (tid, NEVER);
            if let Some(rf) = &mut self.rf {
                if !store {
                    rf.loaded(tid, line, mask);
                    rf_new.1 = rf.own(tid);
                } else if durable_now {
                    // eADR: persisted as it is stored; a load that read it knows this epoch.
                    rf_new.1 = rf.own(tid);
                }
            }
            self.touch(tid, line, mask);
            if store {
                self.held.stored(tid, line, mask);
            }
            let mut w = Window {
                store,
                tid,
                line,
                mask,
                site,
                start,
                end: OPEN,
                state: if nt { State::Flushed } else { State::Dirty },
                vc,
                p_epoch: NEVER,
                lane,
                held: false,
                in_alloc,
                listed: false,
            };
            if durable_now {
                // eADR: durable at once; the window waits for the next release.
                w.state = State::Persisted;
                w.p_epoch = self.epoch(tid);
            }
            // Conflicts with the other kind's windows of other threads.
            let bits = granule_bits(mask);
            let mut replace = None;
            {
                let ids = self.by_line.take(line);
                for &e in &ids {
                    if e >> 32 & bits == 0 {
                        continue;
                    }
                    let id = e as u32;
                    // Looked at in place; copied only when it may conflict.
                    let o = self.get(id);
                    if o.tid == tid {
                        if o.store == store && o.site == site && o.mask & !mask == 0 {
                            // An earlier window of this site on bytes this access covers: for every
                            // later access of another thread, the new window conflicts whenever the
                            // old one does (it starts no earlier, so it ends no earlier and persists
                            // no earlier; in hb mode its clock is later), so it takes the old one's
                            // place. Memory follows distinct (thread, site, bytes), not accesses.
                            replace = Some(id);
                        }
                        continue;
                    }
                    if o.store == store || o.mask & mask == 0 || o.held {
                        continue;
                    }
                    let o = *o;
                    if self.conflicts(&w, &o) {
                        if w.lane && o.lane {
                            // The lanes' memory, both in lane sections: the lane orders them.
                            self.lane_ordered += 1;
                            continue;
                        }
                        if self.rf_orders(&w, id) {
                            self.rf_ordered += 1;
                            continue;
                        }
                        let (s, l) = if store { (&w, &o) } else { (&o, &w) };
                        let both = o.mask & mask;
                        let (ss, ls) = (self.sites.get(s.site), self.sites.get(l.site));
                        let e = if self.inferred.on_rmw_word(line, both) {
                            self.word_pairs.entry((ss, ls, line, both)).or_insert((s.tid, l.tid, 0))
                        } else {
                            self.pairs.entry((ss, ls)).or_insert((s.tid, l.tid, 0))
                        };
                        e.2 += 1;
                    }
                }
                self.by_line.put(line, ids);
            }
            if store {
                if let Some(rf) = &mut self.rf {
                    rf.stored(tid, line, mask);
                }
            }
            if !sampled || (!store && self.live <= 1) {
                // Checked against the open windows, but opens none of its own. (A load of the only
                // live thread needs none: its window closes at the thread's next release, and
                // every thread that could store later is created at or after that release, so
                // no store window of another thread can start before it closed; in hb mode the
                // creation orders the load before every such store.)
                if nt {
                    self.flush_line(tid, line);
                }
                continue;
            }
            let id = match replace {
                Some(id) => {
                    if self.get(id).held {
                        self.held.forget(line, id);
                    }
                    let o = self.get_mut(id);
                    let was_open = o.end == OPEN;
                    let listed = o.listed;
                    *o = w;
                    o.listed = listed;
                    // The new window covers the old one's bytes, perhaps more granules.
                    self.by_line.replace(line, |e| e as u32 == id, entry(id, bits));
                    if !was_open {
                        self.track(tid, store, line, id);
                    }
                    id
                }
                None => {
                    let id = self.alloc(w);
                    self.track(tid, store, line, id);
                    id
                }
            };
            self.rf_set(id, rf_new);
            if store && w.state == State::Persisted {
                self.list_persisted(tid, line, id);
            }
            if nt {
                self.flush_line(tid, line);
            }
        }
        // Pruning walks every window: do it after as many new windows as are live (amortised
        // constant time per window), and at least every PRUNE_EVERY.
        let live = self.windows.len() - self.free.len();
        if self.created_since_prune >= PRUNE_EVERY.max(live) {
            self.prune();
        }
    }

    /// Window `id` of `tid` is open: listed with the thread's store windows (by line) or load
    /// windows.
    fn track(&mut self, tid: u32, store: bool, line: u64, id: u32) {
        let t = self.threads.entry(tid).or_default();
        if store {
            t.stores.push(line, id, &self.windows);
        } else {
            t.loads.push(id);
        }
    }

    fn flush_line(&mut self, tid: u32, line: u64) {
        let Some(ids) = self.threads.get(&tid).and_then(|t| t.stores.get(line, &self.windows)) else { return };
        let mut any = false;
        for id in ids {
            let w = self.windows[id as usize].as_mut().expect("live window");
            if w.state == State::Dirty {
                w.state = State::Flushed;
            }
            any |= w.state == State::Flushed;
        }
        if any {
            self.thread(tid).flushed.insert(line);
        }
    }

    /// Marks `tid`'s store windows on `lines` that are durable now as persisted; inside an
    /// unlock call (with `unlock_fence`) they close at that release.
    fn settle(&mut self, device: &PmDevice, tid: u32, lines: Option<&FxHashSet<u64>>, fencing: bool) {
        self.settle_by(device, tid, lines, fencing, self.opts.persist_owner);
    }

    /// [`Vardalith::settle`] under durability rule `rule`.
    fn settle_by(
        &mut self,
        device: &PmDevice,
        tid: u32,
        lines: Option<&FxHashSet<u64>>,
        fencing: bool,
        rule: DurabilityRule,
    ) {
        let in_release = if self.opts.unlock_fence { self.thread(tid).in_release } else { None };
        let epoch = match in_release {
            Some((_, e)) => e,
            None => self.epoch(tid),
        };
        let mut todo = std::mem::take(&mut self.todo);
        todo.clear();
        let (stores, windows) = self.stores_of(tid);
        match lines {
            Some(l) => todo.extend(l.iter().copied().filter(|&l| stores.contains_key(l, windows))),
            None => todo.extend(stores.lines(windows)),
        }
        todo.sort_unstable();
        for &line in &todo {
            let mut ids = self.open_remove(tid, line).unwrap_or_default();
            // Compacted in place: the windows still open stay at the front.
            let mut open = 0;
            for j in 0..ids.len() {
                let id = ids[j];
                let w = *self.get(id);
                if w.state != State::Persisted {
                    let owner_fenced = fencing && w.state == State::Flushed;
                    if durable_bytes(device, rule, w.line, w.mask, tid, owner_fenced) == w.mask {
                        if w.in_alloc && self.opts.fresh_allocs && !self.thread(tid).allocs.is_empty() {
                            // The allocator's (or the constructor's) store, persisted before
                            // the allocation call returns: the object's initialisation, before
                            // any other thread can be handed it (`fresh_allocs`).
                            self.drop_initialisation(id);
                            continue;
                        }
                        let initial = w.store && self.irh.published(w.line, w.mask) == 0;
                        if initial && !self.held.hold(w.tid, w.line, w.mask, id, self.live) {
                            // Initialisation (the IRH): persisted before another thread
                            // touched its bytes. Nobody could read it in its window, whatever
                            // synchronisation publishes it later (a plain store of a pointer,
                            // an `xchg` of a root, which open no window boundary here).
                            self.drop_initialisation(id);
                            continue;
                        }
                        // (A held window goes on like any other, closing at the writer's next
                        // release, until the access that publishes its bytes decides it.)
                        self.rf_persisted(id, tid);
                        let w = self.get_mut(id);
                        w.held = initial;
                        w.state = State::Persisted;
                        w.p_epoch = epoch;
                        if let Some((step, _)) = in_release {
                            // Persisted by the releasing instruction: closed at that release.
                            self.close(id, step);
                            continue;
                        }
                        self.list_persisted(tid, line, id);
                    }
                }
                ids[open] = id;
                open += 1;
            }
            ids.truncate(open);
            if !ids.is_empty() {
                self.open_insert(tid, line, ids);
            }
        }
        self.todo = todo;
    }

    /// The program declared bytes `dev..dev + size` clean (`VALGRIND_PMC_SET_CLEAN`: PMDK's
    /// chunk footers and other state it rebuilds rather than persists). The declaration ends
    /// the store windows on those bytes, as pmemcheck forgets the stores: a window left with no
    /// bytes outside them closes now, persisted; one that keeps some loses the clean ones.
    fn declare_clean(&mut self, dev: u64, size: u32) {
        let mut tids: Vec<u32> = self.threads.keys().copied().collect();
        tids.sort_unstable();
        let step = self.step;
        for (line, clean) in pieces(dev, size) {
            for &tid in &tids {
                let Some(ids) = self.open_remove(tid, line) else { continue };
                let epoch = self.epoch(tid);
                let mut open = Ids::new();
                for id in ids {
                    let w = self.get_mut(id);
                    if w.mask & clean == 0 {
                        open.push(id);
                    } else if w.mask & !clean == 0 {
                        w.state = State::Persisted;
                        w.p_epoch = epoch;
                        w.end = step;
                    } else {
                        w.mask &= !clean;
                        open.push(id);
                    }
                }
                if !open.is_empty() {
                    self.open_insert(tid, line, open);
                }
            }
        }
    }

    /// The program freed the PM object `[ev.dev, ev.dev + ev.new)`: its windows end their life
    /// there. Every pair they made with windows of their own life was found when the later one
    /// opened; from now on they lose the freed bytes, and a window left with none conflicts with
    /// nothing (a store window still open is marked persisted, so its writer's next release
    /// closes it as any other: it was never persisted, but no access of the bytes' next life can
    /// read it). The IRH forgets who touched the bytes and the stores it holds there.
    fn free(&mut self, ev: &Event) {
        self.frees += 1;
        self.freed_bytes += ev.new;
        self.irh.forget_range(ev.dev, ev.new);
        for (line, freed) in range_pieces(ev.dev, ev.dev.saturating_add(ev.new)) {
            let ids = self.by_line.take(line);
            for &e in &ids {
                let id = e as u32;
                let Some(w) = self.windows[id as usize].as_mut() else { continue };
                if w.mask & freed == 0 {
                    continue;
                }
                w.mask &= !freed;
                if w.mask != 0 {
                    continue;
                }
                let (held, store, tid) = (w.held, w.store, w.tid);
                w.held = false;
                if held {
                    self.held.forget(line, id);
                }
                if store && self.get(id).state != State::Persisted {
                    let epoch = self.epoch(tid);
                    let w = self.get_mut(id);
                    w.state = State::Persisted;
                    w.p_epoch = epoch;
                }
            }
            self.by_line.put(line, ids);
            self.held.forget_bytes(line, freed);
        }
    }

    /// Lists store window `id` of `tid` on `line` as persisted since `tid`'s last release, for
    /// that release to close ([`Vardalith::release`]); once, however often it is persisted again.
    fn list_persisted(&mut self, tid: u32, line: u64, id: u32) {
        let w = self.get_mut(id);
        if !w.listed {
            w.listed = true;
            self.thread(tid).persisted.push((line, id));
        }
    }

    /// Window `id` was initialisation: as if it never opened (closed at step 0, persisted at
    /// epoch 0, so it conflicts with nothing).
    fn drop_initialisation(&mut self, id: u32) {
        let w = self.get_mut(id);
        w.state = State::Persisted;
        w.p_epoch = 0;
        w.end = 0;
        w.held = false;
    }

    /// The solo phase ended ([`Publication::created`]): `tid`'s store windows not yet durable
    /// span the creation, so the new thread can see them: they count for the IRH. (Once, at the
    /// first creation: a walk over the windows open then.)
    fn touch_pending(&mut self, tid: u32) {
        let open: Vec<(u64, u64)> = self
            .windows
            .iter()
            .flatten()
            .filter(|w| w.store && w.tid == tid && w.end == OPEN && w.state != State::Persisted)
            .map(|w| (w.line, w.mask))
            .collect();
        for (line, mask) in open {
            self.touch(tid, line, mask);
        }
    }

    /// IRH: registers an access by `tid` to `mask` of `line`; bytes it publishes decide the
    /// held store windows there ([`HeldStores::publish`]): one whose persist the access is not
    /// ordered after becomes a window like any other (and this access is checked against it);
    /// the others were initialisation.
    fn touch(&mut self, tid: u32, line: u64, mask: u64) {
        let published = self.irh.touch(tid, line, mask);
        if published == 0 || !self.held.any() {
            return;
        }
        let mut decided = std::mem::take(&mut self.decided);
        let windows = &self.windows;
        let writer = |id: u32| windows[id as usize].map_or(tid, |w| w.tid);
        self.held.publish(tid, line, published, writer, &mut decided);
        for &(id, _, unordered) in &decided {
            // The first publication of any of its bytes decides the whole window (HawkSet's
            // rule asks that none of them be published).
            let Some(w) = self.windows[id as usize].as_mut() else { continue };
            if !w.held || w.line != line {
                continue;
            }
            if unordered {
                w.held = false;
            } else {
                self.drop_initialisation(id);
            }
            self.held.forget(line, id);
        }
        decided.clear();
        self.decided = decided;
    }

    /// Closes window `id` at `end`.
    fn close(&mut self, id: u32, end: u64) {
        self.get_mut(id).end = end;
    }

    /// A release by `tid`: its load windows close, and its persisted store windows. At the
    /// thread's exit (`exit`) they do not close: the exit synchronises with a join of the thread
    /// alone (the paper's releases are unlocks and thread creation; its Figure 1's store region
    /// with no release after its persistence "lasts until the program ends"), so a load window
    /// of a thread that has not joined it still overlaps them. They close at that join
    /// ([`Vardalith::joined`]), or never.
    fn release(&mut self, device: &PmDevice, tid: u32, exit: bool) {
        let step = if exit { OPEN } else { self.step };
        // Another thread's persist of our stores is noticed here, under either rule: a store its
        // writer never persisted but another thread's flush and fence made durable (P-CLHT's
        // resize helpers copy into the new table, which the resizer persists whole before
        // publishing it) is durable from then on, and its window ends at the writer's next
        // release, as at its exit. Under the writer-only rule it stayed open to the end and
        // overlapped every later reader, though every later load reads durable bytes: the
        // spurious reports the paper names for own-thread persistence. The writer's own flushes
        // and fences still judge by `persist_owner`; under it only the lines another thread
        // flushed are looked at.
        let mut foreign = std::mem::take(&mut self.thread(tid).foreign_flushed);
        if self.opts.persist_owner == DurabilityRule::Hw {
            self.settle(device, tid, None, false);
        } else if !foreign.is_empty() {
            self.settle_by(device, tid, Some(&foreign), false, DurabilityRule::Hw);
        }
        let epoch = self.epoch(tid);
        let rif = self.opts.release_fence;
        let windows = &mut self.windows;
        let t = self.threads.entry(tid).or_default();
        let pending = &mut t.exit_pending;
        for id in t.loads.drain(..) {
            let w = windows[id as usize].as_mut().expect("live window");
            w.end = step;
            if exit {
                pending.push((id, (w.tid, w.line, w.site, w.start)));
            }
        }
        // A persisted window closes; one that is not stays open.
        let close = |w: &mut Window, id: u32, pending: &mut Vec<ExitPending>| {
            // (A held window the IRH decided was initialisation stays closed at 0.)
            if w.end == OPEN {
                w.end = step;
                if exit {
                    pending.push((id, (w.tid, w.line, w.site, w.start)));
                }
            }
        };
        if rif {
            for (_, id) in t.persisted.drain(..) {
                if let Some(w) = windows[id as usize].as_mut() {
                    w.listed = false;
                }
            }
            t.stores.retain(|id| {
                let w = windows[id as usize].as_mut().expect("live window");
                if w.state == State::Flushed {
                    w.state = State::Persisted;
                    w.p_epoch = epoch;
                }
                if w.state == State::Persisted {
                    close(w, id, pending);
                    false
                } else {
                    true
                }
            });
        } else {
            // Only the windows persisted since the last release: every listed window that is
            // persisted was made so since then (a release takes them all off), and one never
            // persisted (a counter never flushed) is not walked at every release, which made
            // the releases quadratic in the run (P-ART at 10,000 operations).
            for (line, id) in t.persisted.drain(..) {
                if let Some(w) = windows[id as usize].as_mut() {
                    w.listed = false;
                }
                let persisted = windows[id as usize].as_ref().is_some_and(|w| w.state == State::Persisted);
                if persisted && t.stores.remove_id(line, id, windows) {
                    let w = windows[id as usize].as_mut().expect("live window");
                    close(w, id, pending);
                }
            }
        }
        // Lines whose windows are still open (the flusher has not fenced yet) are looked at
        // again at the next release.
        if !foreign.is_empty() {
            foreign.retain(|&l| t.stores.contains_key(l, windows));
        }
        t.foreign_flushed = foreign;
    }

    fn on_sync(&mut self, ev: &Event, device: &PmDevice) {
        let tid = ev.tid;
        if ev.kind == EventKind::AtomicAccess {
            let _ = self.thread(tid);
            return self.held.order_atomic(&mut self.sync, ev, self.live);
        }
        match ev.kind {
            EventKind::SyncEnter(SyncKind::Join) => self.thread(tid).joining = true,
            EventKind::SyncReturn(SyncKind::Join) => self.thread(tid).joining = false,
            _ => {}
        }
        let fresh = self.opts.fresh_allocs;
        let mut sizes = std::mem::take(&mut self.thread(tid).allocs);
        self.irh.on_alloc(ev, &mut sizes, fresh);
        self.thread(tid).allocs = sizes;
        if let EventKind::SyncReturn(k) = ev.kind {
            if is_release_call(k) {
                self.thread(tid).in_release = None;
            }
        }
        let release_call = matches!(ev.kind, EventKind::SyncEnter(k) if is_release_call(k));
        let mut ops = std::mem::take(&mut self.ops);
        ops.clear();
        self.sync.translate(ev, |op| ops.push(op));
        for &op in &ops {
            self.apply(tid, op, device, release_call);
        }
        self.ops = ops;
    }

    /// Thread `tid` performs `op` (`release_call`: inside an unlock-like call).
    fn apply(&mut self, tid: u32, op: SyncOp, device: &PmDevice, release_call: bool) {
        {
            if matches!(op, SyncOp::LaneHold | SyncOp::LaneRelease) && !self.opts.lanes {
                return;
            }
            let is_release = matches!(
                op,
                SyncOp::Release { .. }
                    | SyncOp::Post { .. }
                    | SyncOp::Create { .. }
                    | SyncOp::Exit
                    | SyncOp::LaneRelease
            );
            let is_acquire =
                matches!(op, SyncOp::Acquire { .. } | SyncOp::Wait { .. } | SyncOp::Join { .. } | SyncOp::LaneHold);
            if op == SyncOp::Exit {
                // The writer is gone: a store of it that another thread's flush and fence made
                // durable (the hardware rule) is durable by now whatever the rule, and its
                // window closes at this exit, the writer's last release; loads ordered after
                // the exit (a join) read durable bytes.
                self.settle_by(device, tid, None, false, DurabilityRule::Hw);
            }
            if is_release {
                if release_call {
                    let e = self.epoch(tid);
                    self.thread(tid).in_release = Some((self.step, e));
                }
                self.release(device, tid, op == SyncOp::Exit && !self.hb_mode());
            }
            if let SyncOp::Join { child } = op {
                self.joined(child);
            }
            if let SyncOp::Create { child } = op {
                if let Some(solo) = self.irh.created() {
                    self.touch_pending(solo);
                }
                let step = self.step;
                self.thread(child).last_acquire = step;
            }
            self.hb.apply(tid, op);
            self.held.order(tid, op, self.live);
            if let Some(rf) = &mut self.rf {
                rf.apply(tid, op);
            }
            if self.hb_mode() {
                self.thread(tid).vc = None;
                if let SyncOp::Create { child } = op {
                    self.thread(child).vc = None;
                }
            }
            if is_acquire {
                let step = self.step;
                self.thread(tid).last_acquire = step;
            }
            if op == SyncOp::Exit {
                if !self.thread(tid).exited {
                    self.live -= 1;
                }
                self.thread(tid).exited = true;
                if !self.thread(tid).stores.is_empty() {
                    self.exited_with_stores += 1;
                }
            }
        }
    }

    /// A thread joined `child`: the windows its exit left open close now.
    fn joined(&mut self, child: u32) {
        let step = self.step;
        let Some(t) = self.threads.get_mut(&child) else { return };
        for (id, who) in t.exit_pending.drain(..) {
            // (A window the exiting thread adopted has its writer's id; an id freed and reused
            // since names another window.)
            if let Some(w) = self.windows[id as usize].as_mut() {
                if (w.tid, w.line, w.site, w.start) == who && w.end == OPEN {
                    w.end = step;
                }
            }
        }
    }

    /// Whether a thread that exited left a store window open on `line`.
    fn orphaned(&self, line: u64) -> bool {
        self.exited_with_stores > 0
            && self.threads.values().any(|t| t.exited && t.stores.contains_key(line, &self.windows))
    }

    /// Thread `tid` fenced lines it flushed where exited threads left store windows open: those
    /// its flush and fence made durable (the hardware rule) are persisted now, and since their
    /// writer can no longer persist or release anything, their windows close at `tid`'s next
    /// release, as if `tid` had stored them. A load ordered after that release (a join of
    /// `tid`) reads durable bytes.
    fn adopt(&mut self, device: &PmDevice, tid: u32) {
        let lines = std::mem::take(&mut self.thread(tid).flushed_orphans);
        let epoch = self.epoch(tid);
        let mut writers: Vec<u32> = self.threads.iter().filter(|(_, t)| t.exited).map(|(&k, _)| k).collect();
        writers.sort_unstable();
        for &line in &lines {
            for &w in &writers {
                let Some(mut ids) = self.open_remove(w, line) else { continue };
                let mut moved = Ids::new();
                ids.retain(|id| {
                    let id = *id;
                    let win = self.windows[id as usize].as_mut().expect("live window");
                    let base = win.line * LINE_SIZE;
                    let lo = u64::from(win.mask.trailing_zeros());
                    let hi = 64 - u64::from(win.mask.leading_zeros());
                    // A window whose bytes were all freed has none left to persist.
                    if win.mask == 0 || device.durable(DurabilityRule::Hw, base + lo, hi - lo) {
                        win.state = State::Persisted;
                        win.p_epoch = epoch;
                        moved.push(id);
                        false
                    } else {
                        true
                    }
                });
                if !ids.is_empty() {
                    self.open_insert(w, line, ids);
                }
                for id in moved {
                    self.open_push(tid, line, id);
                    self.thread(tid).persisted.push((line, id));
                }
            }
        }
        self.exited_with_stores = self.threads.values().filter(|t| t.exited && !t.stores.is_empty()).count();
        let mut lines = lines;
        lines.clear();
        self.thread(tid).flushed_orphans = lines;
    }

    /// Drops windows that can no longer conflict with any future access.
    fn prune(&mut self) {
        self.created_since_prune = 0;
        let live: Vec<u32> = self.threads.iter().filter(|(_, t)| !t.exited).map(|(&k, _)| k).collect();
        let dead: Vec<bool> = if self.hb_mode() {
            let clocks: Vec<(u32, u32)> = live.iter().map(|&t| (t, self.clock(t))).collect();
            let mut out = Vec::with_capacity(self.windows.len());
            for i in 0..self.windows.len() {
                let Some(w) = self.windows[i] else {
                    out.push(false);
                    continue;
                };
                // A load every live thread has seen: every future store comes after it. A store
                // whose persistence every live thread has seen: every future load comes after.
                let (owner, epoch) = if w.store { (w.tid, w.p_epoch) } else { (w.tid, self.at(w.vc, w.tid)) };
                let gone = epoch != NEVER && clocks.iter().all(|&(_, c)| self.at(c, owner) >= epoch);
                out.push(gone);
            }
            out
        } else {
            let floor = live
                .iter()
                .filter(|t| !self.threads[t].joining)
                .map(|t| self.threads[t].last_acquire)
                .min()
                .unwrap_or(u64::MAX);
            self.windows.iter().map(|w| w.as_ref().is_some_and(|w| w.end != OPEN && w.end <= floor)).collect()
        };
        for (i, gone) in dead.into_iter().enumerate() {
            if gone {
                if let Some(w) = self.windows[i].filter(|w| w.held) {
                    self.held.forget(w.line, i as u32);
                }
                self.windows[i] = None;
                self.free.push(i as u32);
            }
        }
        let windows = &self.windows;
        self.by_line.retain(|e| windows[e as u32 as usize].is_some());
        // Threads' open lists only hold open windows, which are never pruned in window mode; in
        // hb mode a pruned window may still be listed (a load not yet released).
        for t in self.threads.values_mut() {
            t.loads.retain(|&id| windows[id as usize].is_some());
            t.stores.retain(|id| windows[id as usize].is_some());
            // Entries of pruned windows (held ones the IRH later found were initialisation):
            // without a release they would pile up.
            t.persisted.retain(|&(_, id)| windows[id as usize].is_some_and(|w| w.listed));
        }
    }
}

impl WindowPass for Vardalith {
    fn pmdk_locks(&mut self) -> &mut PmdkLockCalls {
        &mut self.pmdk_locks
    }

    fn sync_calls(&mut self) -> (&mut SyncCalls, bool, bool) {
        (&mut self.calls, self.opts.sync_words, self.opts.strings)
    }

    fn annotations(&mut self) -> Option<&mut Annotations> {
        self.opts.annotations.then_some(&mut self.annotations)
    }

    fn inferred(&mut self) -> Option<&mut InferredLocks> {
        self.opts.infer_locks.then_some(&mut self.inferred)
    }

    fn on_lock_op(&mut self, ev: &Event, device: &PmDevice, op: SyncOp) {
        self.apply(ev.tid, op, device, false);
    }

    fn counted(&mut self) {
        self.step += 1;
    }

    fn declare_clean(&mut self, dev: u64, size: u32) {
        Vardalith::declare_clean(self, dev, size);
    }

    fn on_store(&mut self, ev: &Event, device: &PmDevice, nt: bool) {
        self.on_access(ev, device, true, nt);
    }

    fn on_load(&mut self, ev: &Event, device: &PmDevice) {
        self.on_access(ev, device, false, false);
    }

    fn on_flush(&mut self, ev: &Event, device: &PmDevice, op: FlushOp) {
        let line = ev.dev / LINE_SIZE;
        self.flush_line(ev.tid, line);
        if self.opts.persist_owner == DurabilityRule::Own {
            // Other threads' store windows on the line: their writers settle it with the
            // hardware rule at their next release ([`Vardalith::release`]).
            let windows = &self.windows;
            for (&w, t) in self.threads.iter_mut() {
                if w != ev.tid && !t.exited && t.stores.contains_key(line, windows) {
                    t.foreign_flushed.insert(line);
                }
            }
        }
        if self.orphaned(line) {
            self.thread(ev.tid).flushed_orphans.push(line);
        }
        if op == FlushOp::Clflush {
            let one: FxHashSet<u64> = std::iter::once(line).collect();
            self.settle(device, ev.tid, Some(&one), false);
            self.rf_foreign_persist(device, ev.tid, &one);
        }
    }

    fn on_fence(&mut self, ev: &Event, device: &PmDevice) {
        // The thread's flushed set is swapped with an empty one that keeps its capacity.
        let mut lines = std::mem::take(&mut self.fence_lines);
        std::mem::swap(&mut lines, &mut self.thread(ev.tid).flushed);
        if !lines.is_empty() {
            self.settle(device, ev.tid, Some(&lines), true);
            self.rf_foreign_persist(device, ev.tid, &lines);
        }
        if !self.thread(ev.tid).flushed_orphans.is_empty() {
            self.adopt(device, ev.tid);
        }
        lines.clear();
        self.fence_lines = lines;
    }

    /// Whatever of the thread's the call made durable is persisted now, as at a fence (its
    /// windows then close at the thread's next release: the exit a waiting parent is told of).
    fn on_persist(&mut self, ev: &Event, device: &PmDevice) {
        self.settle(device, ev.tid, None, false);
    }

    fn on_sync(&mut self, ev: &Event, device: &PmDevice) {
        Vardalith::on_sync(self, ev, device);
    }

    fn on_free(&mut self, ev: &Event, _device: &PmDevice) {
        if self.opts.frees {
            self.free(ev);
        }
    }
}

impl Analysis for Vardalith {
    fn name(&self) -> &'static str {
        "vardalith"
    }

    /// An overlap of two windows seen is a race whatever the program does next: the pairs are
    /// found when the second access happens, so they stand when the run hangs at the instruction
    /// budget, deadlocks or is interrupted (a server that never ends). What it cannot know then:
    /// a word whose first locked update would have come after the stop is not known as a lock,
    /// so its accesses count as data.
    fn reports_when_stopped(&self) -> bool {
        true
    }

    fn fork(&self) -> Option<Box<dyn Analysis>> {
        Some(Box::new(self.clone()))
    }

    fn interest(&self) -> Interest {
        crate::screen::interest(self.opts.infer_locks)
    }

    fn set_code(&mut self, code: &CodeInfo) {
        self.inferred.set_code(code);
    }

    fn on_event(&mut self, ev: &Event, device: &PmDevice) {
        crate::screen::dispatch(self, ev, device);
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("lane_holds", self.sync.lanes.holds),
            ("lane_ordered", self.lane_ordered),
            ("withdrawn_accesses", self.annotations.withdrawn_accesses),
            ("sync_accesses", self.calls.sync_accesses),
            ("store_releases", self.calls.store_releases),
            ("clipped_loads", self.calls.clipped_loads),
            ("dropped_loads", self.calls.dropped_loads),
            ("inferred_acquisitions", self.inferred.acquisitions),
            ("inferred_releases", self.inferred.releases),
            ("irh_held", self.held.count),
            ("irh_unordered_publications", self.held.unordered),
            ("frees", self.frees),
            ("freed_bytes", self.freed_bytes),
            ("rf_ordered", self.rf_ordered),
        ]
    }

    fn finish(&mut self, _device: &PmDevice) -> Vec<RawFinding> {
        let hb = self.hb_mode();
        // One finding per store site, its racing loads listed (as hawkset's, without an end
        // site: a window ends at a release, which is no part of the bug).
        let mut groups: Grouper<u64> = Grouper::new(MAX_LOADS);
        // Overlaps on the words of inferred locks are synchronisation; on other RMW words, data.
        self.inferred.settle();
        let lock_bytes = self.inferred.lock_bytes();
        for ((s, l, line, mask), (st, lt, n)) in std::mem::take(&mut self.word_pairs) {
            if !within(&lock_bytes, line, mask) {
                let e = self.pairs.entry((s, l)).or_insert((st, lt, 0));
                e.2 += n;
            }
        }
        for ((s, l), (st, lt, n)) in std::mem::take(&mut self.pairs) {
            // The read half of a locked read-modify-write (`rmw_loads=off`).
            if !self.opts.rmw_loads && self.rmw_pcs.contains(l.0) {
                continue;
            }
            let locations = [
                RawLocation { role: "store", pc: s.0, stack: s.1, tid: st },
                RawLocation { role: "load", pc: l.0, stack: l.1, tid: lt },
            ];
            groups.add(s.0, &locations, 1, n);
        }
        let (stored, irh) = (&self.stored, &self.irh);
        groups.finish(|&store_pc, _, _| Described {
            analysis: "vardalith",
            kind: "persistence-induced-race",
            message: if hb {
                "persistence-induced race: a load in another thread is neither ordered before this PM store nor after \
                 its persistence (happens-before), so it can read the store before it is durable"
                    .into()
            } else {
                "persistence-induced race: the store's window (from the acquire before it to the first release after \
                 its own persist) overlapped another thread's load window on the same PM bytes, so some interleaving \
                 lets the load read the store before it is durable"
                    .into()
            },
            class: "",
            // An offset candidate counts if some thread accessed the line it leads to.
            stored: stored.shape(store_pc, |dev| irh.touched(dev / LINE_SIZE) || stored.accessed(dev)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testkit::store_loads as pairs;

    type Sim<'a> = crate::testkit::Sim<&'a mut dyn Analysis>;

    const L: u64 = 0x100;
    const M: u64 = 0x200;

    fn run(opts: &str, body: impl FnOnce(&mut Sim)) -> Vec<(u64, Vec<u64>)> {
        let mut v = Vardalith::from_spec(opts).unwrap();
        let mut sim = Sim::new(&mut v);
        sim.store(1, 0x10, 0, 8);
        sim.persist(1, 0x11, 0);
        sim.create(1, 2);
        sim.create(1, 3);
        body(&mut sim);
        pairs(&sim.finish())
    }

    fn both(body: impl Fn(&mut Sim)) -> [Vec<(u64, Vec<u64>)>; 2] {
        [run("", &body), run("mode=hb", &body)]
    }

    fn race() -> Vec<(u64, Vec<u64>)> {
        vec![(0xa, vec![0xb])]
    }

    /// `reads_from=on`: a field persisted before the pointer to it is stored, read through the
    /// pointer, is ordered after its persist though the writer's window is still open (no
    /// release since); read without the pointer, or before the persist, it races. The same when
    /// another thread's flush and fence persisted it (the writer never did). And a load is
    /// ordered before a store whose thread read what the loader stored after a later persist.
    #[test]
    fn reads_from_edges_order_pairs_the_open_windows_do_not() {
        let field = |r: &Vec<(u64, Vec<u64>)>| r.iter().any(|(st, l)| *st == 0xa && l.contains(&0xb));
        let publish = |s: &mut Sim, through_pointer: bool| {
            s.store(2, 0xa, 64, 8);
            s.persist(2, 0xf, 64);
            s.store(2, 0xc, 128, 8);
            if through_pointer {
                s.load(3, 0xd, 128, 8);
            }
            s.load(3, 0xb, 64, 8);
        };
        for mode in ["", ":mode=hb"] {
            assert!(field(&run(&format!("irh=0{mode}"), |s| publish(s, true))), "{mode}");
            assert!(!field(&run(&format!("irh=0:reads_from=on{mode}"), |s| publish(s, true))), "{mode}");
            assert!(field(&run(&format!("irh=0:reads_from=on{mode}"), |s| publish(s, false))), "{mode}");
        }
        // The pointer, never persisted, still races with its reader.
        let r = run("irh=0:reads_from=on", |s| publish(s, true));
        assert!(r.iter().any(|(st, l)| *st == 0xc && l.contains(&0xd)), "{r:x?}");
        // Reading the field inside its window orders nothing.
        let r = run("irh=0:reads_from=on", |s| {
            s.store(2, 0xa, 64, 8);
            s.load(3, 0xb, 64, 8);
            s.persist(2, 0xf, 64);
            s.store(2, 0xc, 128, 8);
        });
        assert!(field(&r), "{r:x?}");
        // Persisted by another thread (3), which then publishes the pointer; 4 reads it.
        let helper = |s: &mut Sim, through_pointer: bool| {
            s.create(1, 4);
            s.store(2, 0xa, 64, 8);
            s.load(3, 0xe, 64, 8);
            s.store(3, 0xe1, 72, 8);
            s.persist(3, 0xf, 64);
            s.store(3, 0xc, 128, 8);
            if through_pointer {
                s.load(4, 0xd, 128, 8);
            }
            s.load(4, 0xb, 64, 8);
        };
        assert!(field(&run("irh=0", |s| helper(s, true))));
        assert!(!field(&run("irh=0:reads_from=on", |s| helper(s, true))));
        assert!(field(&run("irh=0:reads_from=on", |s| helper(s, false))));
        // A load, then the loader persists something and stores a flag the writer reads before
        // its store: the load is ordered before the store.
        let flag = |s: &mut Sim, read_flag: bool| {
            s.load(3, 0xb, 64, 8);
            s.store(3, 0xe, 192, 8);
            s.persist(3, 0xe1, 192);
            s.store(3, 0xc, 128, 8);
            if read_flag {
                s.load(2, 0xd, 128, 8);
            }
            s.store(2, 0xa, 64, 8);
        };
        assert!(field(&run("irh=0", |s| flag(s, true))));
        assert!(!field(&run("irh=0:reads_from=on", |s| flag(s, true))));
        assert!(field(&run("irh=0:reads_from=on", |s| flag(s, false))));
    }

    #[test]
    fn a_release_before_the_flush_keeps_the_window_open() {
        for r in both(|s| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.unlock(2, L);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
            s.persist(2, 0xf, 0);
        }) {
            assert_eq!(r, race());
        }
        for r in both(|s| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.persist(2, 0xf, 0);
            s.unlock(2, L);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
        }) {
            assert!(r.is_empty(), "{r:x?}");
        }
    }

    /// libpmemobj's lanes: thread 2 writes lane memory (bytes 0..64, excluded from
    /// transactions) in a transaction and persists it; thread 3 reads it in a transaction of
    /// its own while thread 2's window is still open (no release of thread 2 since). The lane
    /// orders them; the program's data would race.
    #[test]
    fn a_lane_orders_its_memory_between_lane_sections() {
        let body = |ignore: bool| {
            move |s: &mut Sim| {
                if ignore {
                    s.tx_ignore(1, 0, 64);
                }
                s.tx_begin(3);
                s.tx_begin(2);
                s.store(2, 0xa, 0, 8);
                s.persist(2, 0xf, 0);
                s.load(3, 0xb, 0, 8);
                s.tx_end(3);
                s.tx_end(2);
            }
        };
        for r in both(body(true)) {
            assert!(r.is_empty(), "{r:x?}");
        }
        for r in both(body(false)) {
            assert_eq!(r, race());
        }
        assert_eq!(run("lanes=off", body(true)), race());
        // The lane's release ends a persisted store's window: a reader taking its lane later
        // does not overlap it.
        let r = run("", |s| {
            s.tx_begin(2);
            s.store(2, 0xa, 0, 8);
            s.persist(2, 0xf, 0);
            s.tx_end(2);
            s.tx_begin(3);
            s.load(3, 0xb, 0, 8);
            s.tx_end(3);
        });
        assert!(r.is_empty(), "{r:x?}");
    }

    #[test]
    fn windows_overlap_though_the_load_executes_first() {
        // Thread 3's load window [lock M, unlock M] is still open when thread 2's store window
        // (from its lock L) contains the store.
        for r in both(|s| {
            s.lock(3, M);
            s.lock(2, L);
            s.load(3, 0xb, 0, 8);
            s.store(2, 0xa, 0, 8);
            s.unlock(3, M);
            s.persist(2, 0xf, 0);
            s.unlock(2, L);
        }) {
            assert_eq!(r, race());
        }
        // Closed before the store's window began: only the happens-before mode (which sees
        // that no synchronisation orders them) reports.
        let body = |s: &mut Sim| {
            s.lock(3, M);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, M);
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.persist(2, 0xf, 0);
            s.unlock(2, L);
        };
        assert!(run("", body).is_empty());
        assert_eq!(run("mode=hb", body), race());
        // The same lock orders them in both modes.
        let body = |s: &mut Sim| {
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.persist(2, 0xf, 0);
            s.unlock(2, L);
        };
        assert!(run("", body).is_empty());
        assert!(run("mode=hb", body).is_empty());
    }

    #[test]
    fn a_preemption_inside_the_unlock_gives_no_report() {
        // Thread 2 enters the unlock (the release), thread 3 acquires and loads before thread
        // 2's unlock returns (the futex wake preempted it).
        for r in both(|s| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.persist(2, 0xf, 0);
            s.enter(2, SyncKind::MutexUnlock, L, 0);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.ret(2, SyncKind::MutexUnlock, L, 0);
            s.unlock(3, L);
        }) {
            assert!(r.is_empty(), "{r:x?}");
        }
    }

    #[test]
    fn semaphores_order_the_persist_before_the_load() {
        for r in both(|s| {
            s.store(2, 0xa, 0, 8);
            s.persist(2, 0xf, 0);
            s.call(2, SyncKind::SemPost, 0x300, 0);
            s.call(3, SyncKind::SemWait, 0x300, 0);
            s.load(3, 0xb, 0, 8);
        }) {
            assert!(r.is_empty(), "{r:x?}");
        }
    }

    #[test]
    fn a_once_routines_persist_is_ordered_before_every_later_return() {
        // Thread 2 runs the routine inside its pthread_once (store, persist); thread 3's call
        // starts after thread 2's returned (the fast path: it only reads the control) and loads.
        for r in both(|s| {
            s.enter(2, SyncKind::Once, 0x400, 0);
            s.store(2, 0xa, 0, 8);
            s.persist(2, 0xf, 0);
            s.ret(2, SyncKind::Once, 0x400, 0);
            s.call(3, SyncKind::Once, 0x400, 0);
            s.load(3, 0xb, 0, 8);
        }) {
            assert!(r.is_empty(), "{r:x?}");
        }
        // A call on another control orders nothing (by Definition 1; the windows closed at the
        // first call's return, before the load's began).
        let r = run("mode=hb", |s| {
            s.enter(2, SyncKind::Once, 0x400, 0);
            s.store(2, 0xa, 0, 8);
            s.persist(2, 0xf, 0);
            s.ret(2, SyncKind::Once, 0x400, 0);
            s.call(3, SyncKind::Once, 0x440, 0);
            s.load(3, 0xb, 0, 8);
        });
        assert_eq!(r, race());
    }

    #[test]
    fn stores_never_persisted_stay_open_until_the_end() {
        for r in both(|s| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.unlock(2, L);
            s.exit(2);
            s.join(1, 2);
            s.load(1, 0xb, 0, 8);
        }) {
            assert_eq!(r, race());
        }
    }

    #[test]
    fn release_implies_fence_option() {
        let body = |s: &mut Sim| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.clwb(2, 0);
            s.unlock(2, L);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
            s.sfence(2, 0xf);
        };
        assert_eq!(run("", body), race());
        assert_eq!(run("mode=hb", body), race());
        assert!(run("release_fence=on", body).is_empty());
        assert!(run("release_fence=on:mode=hb", body).is_empty());
    }

    /// A `clwb` before a barrier, persisted by the thread's arrival (a locked instruction inside
    /// the wait): the window closes at the arrival's release, before the reader leaves the
    /// barrier (guest `ext_omp_fill_fixed`). Before, it stayed open to the next release.
    #[test]
    fn a_fence_inside_a_barrier_wait_closes_the_window_at_the_arrival() {
        let body = |s: &mut Sim| {
            s.store(2, 0xa, 0, 8);
            s.clwb(2, 0);
            s.barrier_fencing(&[2, 3]);
            s.load(3, 0xb, 0, 8);
        };
        assert!(run("", body).is_empty());
        assert!(run("mode=hb", body).is_empty());
        assert_eq!(run("unlock_fence=off", body), race());
        let unfenced = |s: &mut Sim| {
            s.store(2, 0xa, 0, 8);
            s.clwb(2, 0);
            s.barrier(&[2, 3]);
            s.load(3, 0xb, 0, 8);
            s.sfence(2, 0xf);
        };
        assert_eq!(run("", unfenced), race());
    }

    #[test]
    fn a_fence_inside_the_unlock_closes_the_window_there() {
        let body = |s: &mut Sim| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.clwb(2, 0);
            s.unlock_fencing(2, L);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
        };
        assert!(run("", body).is_empty());
        assert!(run("mode=hb", body).is_empty());
        assert_eq!(run("unlock_fence=off", body), race());
        assert_eq!(run("unlock_fence=off:mode=hb", body), race());
    }

    #[test]
    fn bytes_match_by_range() {
        for (off, size, hit) in [(4, 4, true), (8, 4, false)] {
            let r = run("", |s| {
                s.lock(2, L);
                s.store(2, 0xa, 0, 8);
                s.unlock(2, L);
                s.lock(3, L);
                s.load(3, 0xb, off, size);
                s.unlock(3, L);
                s.persist(2, 0xf, 0);
            });
            assert_eq!(!r.is_empty(), hit, "{off} {size}: {r:x?}");
        }
    }

    #[test]
    fn pruning_keeps_what_can_still_overlap() {
        let mut v = Vardalith::default();
        let mut s = Sim::new(&mut v);
        s.create(1, 2);
        s.create(1, 3);
        // Thread 3 never acquires: its windows reach back to its start.
        s.load(3, 0xb, 0, 8);
        for i in 0..(PRUNE_EVERY as u64 + 10) {
            s.lock(2, L);
            s.store(2, 0x20, 64 + (i % 64) * 8, 8);
            s.persist(2, 0x21, 64 + (i % 64) * 8);
            s.unlock(2, L);
        }
        s.lock(2, L);
        s.store(2, 0xa, 0, 8);
        s.unlock(2, L);
        assert_eq!(pairs(&s.finish()), race());
        assert!(v.windows.iter().flatten().count() < 200, "{}", v.windows.iter().flatten().count());
    }

    #[test]
    fn options_parse() {
        let o = VardalithOptions::parse("mode=hb:release_fence=on:persist_owner=any:unlock_fence=off").unwrap();
        assert_eq!(o.mode, OverlapMode::HappensBefore);
        assert!(o.release_fence && !o.unlock_fence);
        assert_eq!(o.persist_owner, DurabilityRule::Hw);
        assert!(VardalithOptions::parse("mode=x").is_err());
        assert!(!VardalithOptions::parse("lanes=off").unwrap().lanes && VardalithOptions::default().lanes);
    }
}
