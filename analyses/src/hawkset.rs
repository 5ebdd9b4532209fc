//! `hawkset`: persistence-induced races predicted from one execution with PM-aware, timed
//! locksets (Oliveira, Gonçalves & Matos, *HawkSet: Automatic, Application-Agnostic, and Efficient
//! Concurrent PM Bug Detection*, EuroSys 2025).
//!
//! # The bug
//! A *persistence-induced race* (the paper's Definition 1): thread T2 loads a PM value that
//! thread T1 stored and that is not yet guaranteed durable. If T2 acts on the value (answers a
//! client, derives another PM store from it) and the machine then crashes before T1's persist,
//! the effect survives and its cause does not. Such code can be free of data races: the store
//! and the load may both hold the same mutex (Fig. 1c: the persist is just outside the critical
//! section). Only store→load pairs count; store–store pairs carry no causal dependency (§3.1.1).
//!
//! # The algorithm
//! HawkSet does not need to observe the racy interleaving. For every PM store it computes the
//! **effective lockset**: the locks held continuously from the store until the end of its
//! *window*, which ends when the writer makes the store durable (its own flush, then its own
//! fence: [`DurabilityRule::Own`], the paper's worst-case cache), or when the writer overwrites
//! the bytes, or when the writer exits. A lock counts only if it is held *in the same
//! acquisition* at both ends: each thread numbers its acquisitions (try-locks included) and each
//! held lock carries its number, so unlock–relock between the store and the persist (Fig. 2b)
//! leaves the lock out (*timed locksets*, §3.1.2). Every PM load records the thread's lockset.
//! Locks are the recognised lock calls, `--config`'s custom locks, and locks built from atomics
//! on PM words with no function to name, inferred from their words' accesses
//! ([`crate::inferred_locks`]; they protect only if the end of the run confirms them; a thread
//! keeps at most [`MAX_TENTATIVE`] of those not yet confirmed, see [`Hawkset::bound_tentative`]).
//! At the end of the run a store record and a load record race when
//! - they are by different threads and share at least one byte (size-aware: an 8-byte store and
//!   a 4-byte load at offset 4 share bytes 4..7);
//! - their vector clocks are concurrent, where clocks advance **only at thread creation and
//!   join** (§3.1.2; locks, condition variables, semaphores and barriers order nothing here:
//!   lock protection is the lockset's business), and the store's clock is taken at the **end**
//!   of its window: a store made before `pthread_create` but persisted after it races with the
//!   new thread (Fig. 3, Store3/Persist3);
//! - no lock is in both the store's effective lockset and the load's lockset (timestamps are
//!   ignored across threads; a read-write lock protects unless both hold it shared).
//!
//! The **initialization removal heuristic** (IRH, §3.1.3) drops stores that were made durable
//! before any second thread touched their bytes: fresh memory is commonly initialised without
//! a lock, persisted, and only then published. Publication is tracked per byte; with threshold N
//! (`irh=N`, default 1, 0 disables) a byte is published when N+1 distinct threads have accessed
//! it. Loads are filtered when they happen (the publishing access itself is kept); stores are
//! filtered *when their window closes by a persist*, so a store still pending when another
//! thread touches its bytes survives, and stores that were never persisted (overwritten, or
//! left at exit) always survive.
//!
//! HawkSet applies the heuristic in the order the run happened to take, so whether the simplest
//! race is reported depends on the schedule: a writer that stores under a lock and persists
//! after the unlock, read under the lock by a thread that happened to come second, is dropped
//! as initialisation. By default (`irh_order=causal`) a store persisted before its bytes were
//! published is held until the publishing access, and dropped only if its persist *happens
//! before* that access: by program order, create/join, a lock released after the persist and
//! acquired before the access, a post and its wait, or a PM load by the accessing thread of a
//! line the writer stored after the persist (a reads-from edge: how lock-free code publishes a
//! fresh node, through a pointer). Otherwise it is a store record like any other. Initialisation
//! published by any of these is removed in every schedule; an order only the schedule made
//! removes nothing. The causal rule also leaves out the accesses the first thread makes before
//! it creates another (a pool formatted by `main` happens before every other thread's access,
//! so it publishes nothing; its stores pending at the creation count). `irh_order=observed` is
//! HawkSet's rule.
//!
//! Findings are counted as HawkSet's published counts are (its artifact's `count_unique_races`
//! keys its reports by the store's program frame alone): one per store *site* (instruction),
//! whatever ended its windows. A finding's locations are the `store`, then, each distinct one
//! once, the `fence`s that persisted it and the `overwrite`s that replaced it before a persist
//! (none for windows that ended at the thread's exit), and up to [`MAX_LOADS`] racing `load`s.
//! The read half of a locked read-modify-write is no racing load (`rmw_loads=off`, as HawkSet's
//! code, which records a locked instruction as a fence and a store): its own store carries the
//! value it read back into the same bytes.
//!
//! # Definitions and choices where the paper is open
//! - **Acquire and release** come from [`SyncAdapter`]: an acquisition when a lock call returns
//!   successfully, a release when an unlock call is entered. Mutexes, spinlocks, read-write locks
//!   (shared or exclusive), the mutex of a condition wait, and custom lock functions from the
//!   user's configuration ([`emu::sync::SyncKind::Custom`]) are all locks,
//!   and so are libpmemobj's (`pmemobj_mutex_*`, `pmemobj_rwlock_*`, the mutex of
//!   `pmemobj_cond_wait`). libpmemobj's lanes ([`crate::sync::Lanes`]) are one more lock,
//!   [`crate::sync::PMDK_LANE_LOCK`], held in lane sections, which counts only on the lanes'
//!   memory (`lanes=off` ignores it). Recursive acquisitions are kept as separate entries.
//! - **Fences** are `sfence`, `mfence` and every locked instruction or `xchg` with memory, on PM
//!   or not, as the device treats them; a PM-targeted locked RMW is first a fence, then a store
//!   (its own implicit fence does not persist it). `clflush` persists at once under the default
//!   `--flush-model intel`; under `strict` it needs a fence, as in HawkSet's code.
//! - **Durability** is asked of the device rather than re-simulated: after a flush or fence of
//!   the writer, a byte's window is closed when the device says it is durable by the chosen rule
//!   ([`DurabilityRule::Own`] by default; `persist_owner=any` switches to the hardware rule,
//!   where any thread's flush and that thread's fence persist what was visible). A byte whose
//!   latest store now belongs to another thread is closed when its writer flushed and fenced it
//!   (HawkSet's per-thread cache).
//! - **Non-temporal stores** (`nt=paper`, the default): the NT store's data is recorded as
//!   already flushed, so it is durable at the writer's next fence, as the paper says ("require a
//!   fence"). `nt=source` follows HawkSet's code: the NT store only flushes its line and its data
//!   is not recorded.
//! - **A fence inside an unlock call** (`unlock_fence=on`, the default): glibc releases a mutex or
//!   rwlock with a locked instruction, which is also a fence, so a `clwb` just before
//!   `pthread_mutex_unlock` is persisted by the very instruction that releases the lock; no other
//!   thread can acquire the lock in between. Such a fence is credited with the lockset held
//!   before the release. HawkSet itself sees the release at the call's entry and would report it;
//!   `unlock_fence=off` restores that. Calls that release by a locked read-modify-write (a
//!   barrier's arrival, glibc's or libgomp's, and `sem_post`) are treated alike, and the fence
//!   also takes the clock from before the release: a `clwb` before `#pragma omp for`'s implicit
//!   barrier is durable before any thread leaves it.
//! - **Records left at exit** (`unpersisted=on`, the default, which the paper's evaluation
//!   scripts pass as `-unpersisted`): a store overwritten by its own thread before being
//!   persisted, or still pending when its thread exits (or when the program ends), is a record
//!   whose window ended there; with `unpersisted=off` such stores are never reported.
//! - **Happens-before** (`hb=end`, the default, is the paper's check: the writer's clock at the
//!   end of the window is concurrent with the load's). It prunes a load that is ordered *inside*
//!   the window — a thread created after the store and joined before the persist — although that
//!   load can read the unpersisted value. `hb=window` checks both ends instead: the end does not
//!   happen before the load, and the load does not happen before the store.
//! - **msync, fsync and durable pwrite** ([`emu::events::EventKind::Persist`]) end the windows
//!   of their thread's stores they made durable at the call; another thread's stores they made
//!   durable are noticed at that thread's next flush or fence or at its exit.
//! - **Frees end a location's history** (`frees=on`, the default; HawkSet never resets its
//!   per-byte state). A PM object freed by `pmemobj_free` ([`emu::events::EventKind::Free`])
//!   ends a life of its bytes, as ThreadSanitizer clears its shadow at a free: the store
//!   windows still open there end at the free (never persisted: recorded, and paired with the
//!   loads of their own life, which read a value that was visible and never durable), and the
//!   bytes' records are checked at the end of the run among themselves only. An access after the
//!   object is handed out again is to a new object: the allocator hands the bytes out only after
//!   the free, and a freed PM object's content is dead (no recovery reads it as that object).
//!   Loads made inside libpmemobj's allocation calls are the allocator's (`fresh_allocs`).
//! - **Reads-from edges** (`reads_from=off`, the default, as the paper's clocks: create and join
//!   only). With `reads_from=on` a load that read (transitively: the storing thread's clock at
//!   its store travels with it) a store its writer made after a window ended is ordered after
//!   that window's end ([`crate::irh::ReadsFrom`]): a node initialised, persisted and then
//!   published through a pointer is not racing with the readers that followed the pointer. The
//!   edge is an order of this run: a load that learnt the writer's later epoch through a read it
//!   does not depend on (a flag, then an independent field) is ordered too, which another
//!   schedule might not do, so it can hide races; and only this direction is used (a load made
//!   before a store's publication is still paired with it).
//! - **What the program declares to pmemcheck** (`annotations=on`, the default; see
//!   [`crate::annotations`] and docs/pmdk.md): accesses to PM it withdrew from checking
//!   (libpmemobj's run-time pool state) are not PM accesses, and bytes it declares clean leave
//!   their store windows unrecorded (it does not rely on them after a crash). The paper is
//!   silent on such state; without this, libpmemobj's own bookkeeping is reported.
//!
//! # What it can miss
//! It is predictive only over the accesses this run executed: code paths not taken, and loads of
//! bytes no other thread stored to in this run, are not checked. Locks taken by inlined code or
//! hand-written spin loops that are not named as custom locks look like no lock at all (more
//! reports, not fewer). The IRH's causal order sees PM reads-from edges and the recognised
//! synchronisation, not DRAM: initialisation published through a plain or atomic store to a
//! DRAM pointer that the reader loads without a lock is reported (`irh_order=observed` drops it
//! whenever the reader came second in this run). With `irh_order=observed`, a store persisted
//! before any second thread touched its bytes *in this run* is dropped, even if in another
//! schedule a reader could load it before the persist. Reads-from edges are kept per line, so a
//! load of another word of the line the writer stored after the persist also orders. A program that declares
//! PM clean or withdraws it from pmemcheck's checking is believed: a race on such bytes is not
//! reported unless `annotations=off`.
//!
//! # Sources of false positives, and the options for them
//! A report means "no lock and no create/join edge orders this load after the persist". It is
//! not proof that the race can happen:
//! - **Other synchronisation**: semaphores, condition variables, barriers, flags and atomics
//!   order nothing for HawkSet (guest `pi_sem_persist`). Vardalith's windows do honour them.
//! - **Lock-free code**: loads that are correct by design (validated by a version, a CAS) race
//!   with every persisted store; HawkSet's authors classify these as benign by hand.
//! - **Memory reuse**: memory freed and reallocated is already published, so its unlocked
//!   re-initialisation is reported (the paper's memcached FPs) unless the free is seen
//!   (`pmemobj_free`, `frees=on`); a program's own allocator's frees are not.
//! - **Flush-on-read**: a reader that flushes what it read is safe under the hardware rule;
//!   `persist_owner=any` accepts it.
//! - **CAS-based locks** not named as custom locks.

use emu::decode::FlushOp;
use emu::events::{Event, EventKind, Interest};
use emu::pm::{DurabilityRule, PmDevice, LINE_SIZE};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::annotations::Annotations;
use crate::group::{Described, Grouper, StoreShapes};
use crate::inferred_locks::{is_inferred, within, InferredLocks};
pub use crate::irh::IrhOrder;
use crate::irh::{HeldStores, Publication};
use crate::options::{option_pairs, parse_bool, parse_owner};
use crate::persist::{
    durable_bytes, is_release_call, pieces, Interner, LineKeyed, LineRecords, RmwSites, ShadowSlab, Site, SiteIds,
};
use crate::screen::WindowPass;
use crate::sync::{
    Edges, HappensBefore, Mode, PmdkLockCalls, SyncAdapter, SyncCalls, SyncOp, VectorClock, PMDK_LANE_LOCK,
};
use crate::{Analysis, CodeInfo, RawFinding, RawLocation};

/// At most this many racing load sites are listed per finding (all are counted).
pub const MAX_LOADS: usize = 8;

/// How non-temporal stores are treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NtSemantics {
    /// The NT store's data is pending as if already flushed: durable at the writer's next fence.
    Paper,
    /// HawkSet's code: the NT store flushes its line; its own data is not recorded.
    Source,
}

/// The pass's options; see the module documentation. Set from `--analyses
/// hawkset:irh=0:unpersisted=off` (see [`HawksetOptions::parse`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HawksetOptions {
    /// Initialization removal heuristic: a byte is published once `irh + 1` distinct threads
    /// have accessed it; 0 disables the heuristic.
    pub irh: u32,
    /// Report stores whose window ended without a persist (overwritten, or pending at exit).
    pub unpersisted: bool,
    /// Whose flush and fence make a store durable.
    pub persist_owner: DurabilityRule,
    /// How non-temporal stores are treated.
    pub nt: NtSemantics,
    /// A fence executed inside an unlock call persists under the lockset held before the unlock.
    pub unlock_fence: bool,
    /// How a store record and a load are judged unordered (see [`HbCheck`]).
    pub hb: HbCheck,
    /// libpmemobj's lanes ([`crate::sync::Lanes`]) are a lock on the lanes' memory.
    pub lanes: bool,
    /// PM the program withdrew from pmemcheck's checking (`REMOVE_PMEM_MAPPING`) is not PM for
    /// the pass, and bytes it declares clean (`SET_CLEAN`) leave their store windows.
    pub annotations: bool,
    /// Which synchronisation orders accesses besides locksets ([`Edges`]).
    pub edges: EdgeSet,
    /// A lock function's own accesses to its lock word are synchronisation, not data.
    pub sync_words: bool,
    /// A load inside a string or memory routine counts only for the bytes its contract reads.
    pub strings: bool,
    /// Locks built from atomics are inferred from the accesses to their PM words
    /// ([`crate::inferred_locks`]).
    pub infer_locks: bool,
    /// Which stores the IRH removes ([`IrhOrder`]).
    pub irh_order: IrhOrder,
    /// An object libpmemobj's allocator hands out (`pmemobj_alloc`, `_zalloc`, `_xalloc`) is
    /// unpublished for the IRH, whatever threads did to its bytes in an earlier life.
    pub fresh_allocs: bool,
    /// The read half of a locked read-modify-write (`lock xadd`, `lock cmpxchg`, `xchg`) is a
    /// racing load. Off by default, as in HawkSet's code (the paper is silent): the instruction's
    /// own store carries what it read into the same bytes.
    pub rmw_loads: bool,
    /// A freed PM object's history ends at its free ([`emu::events::EventKind::Free`]): its
    /// store windows still open end there, and its records pair only with records of the same
    /// life (an access after the object is handed out again is to a new object).
    pub frees: bool,
    /// PM reads-from edges order a store's window before the loads that read (transitively) a
    /// store its writer made after the window ended ([`crate::irh::ReadsFrom`]). Off by default,
    /// as HawkSet's clocks (create/join only); see docs/analyses/hawkset.md.
    pub reads_from: bool,
}

/// The happens-before edges the pass honours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeSet {
    /// Thread creation and join only, as the paper (§3.1.2).
    Paper,
    /// Also semaphores, barriers and condition variables (a post or signal before the wait
    /// that returns after it): a store persisted before a `sem_post` cannot race with a load
    /// after the `sem_wait` it lets through. Locks still protect only through locksets.
    Sync,
}

/// How the create/join clocks decide that a store and a load are unordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HbCheck {
    /// The paper's Algorithm 1: the writer's clock at the end of the window is concurrent with
    /// the load's (neither happens before the other).
    End,
    /// Both ends of the window: the end does not happen before the load, and the load does not
    /// happen before the store. Also reports a load ordered inside the window (a thread created
    /// after the store and joined before the persist).
    Window,
}

impl Default for HawksetOptions {
    fn default() -> Self {
        HawksetOptions {
            irh: 1,
            unpersisted: true,
            persist_owner: DurabilityRule::Own,
            nt: NtSemantics::Paper,
            unlock_fence: true,
            hb: HbCheck::End,
            lanes: true,
            annotations: true,
            edges: EdgeSet::Sync,
            sync_words: true,
            strings: true,
            infer_locks: true,
            irh_order: IrhOrder::Causal,
            fresh_allocs: true,
            rmw_loads: false,
            frees: true,
            reads_from: false,
        }
    }
}

impl HawksetOptions {
    /// Parses `irh=N`, `unpersisted=on|off`, `persist_owner=own|any`, `nt=paper|source`,
    /// `unlock_fence=on|off`, `hb=end|window`, `edges=paper|sync`, `lanes=on|off`,
    /// `annotations=on|off`, `sync_words=on|off`, `strings=on|off`, `infer_locks=on|off`,
    /// `irh_order=observed|causal`, `fresh_allocs=on|off`, `rmw_loads=on|off`, `frees=on|off`,
    /// `reads_from=on|off`, separated by `:`.
    pub fn parse(spec: &str) -> Result<HawksetOptions, String> {
        let mut o = HawksetOptions::default();
        for (k, v) in option_pairs(spec)? {
            match k {
                "irh" => o.irh = v.parse().map_err(|_| format!("irh={v}: expected a number"))?,
                "unpersisted" => o.unpersisted = parse_bool(k, v)?,
                "persist_owner" => o.persist_owner = parse_owner(k, v)?,
                "nt" => {
                    o.nt = match v {
                        "paper" => NtSemantics::Paper,
                        "source" => NtSemantics::Source,
                        _ => return Err(format!("nt={v}: expected paper or source")),
                    }
                }
                "unlock_fence" => o.unlock_fence = parse_bool(k, v)?,
                "lanes" => o.lanes = parse_bool(k, v)?,
                "annotations" => o.annotations = parse_bool(k, v)?,
                "hb" => {
                    o.hb = match v {
                        "end" => HbCheck::End,
                        "window" => HbCheck::Window,
                        _ => return Err(format!("hb={v}: expected end or window")),
                    }
                }
                "edges" => {
                    o.edges = match v {
                        "paper" | "create-join" => EdgeSet::Paper,
                        "sync" => EdgeSet::Sync,
                        _ => return Err(format!("edges={v}: expected paper or sync")),
                    }
                }
                "sync_words" => o.sync_words = parse_bool(k, v)?,
                "strings" => o.strings = parse_bool(k, v)?,
                "infer_locks" => o.infer_locks = parse_bool(k, v)?,
                "irh_order" => o.irh_order = IrhOrder::parse(v)?,
                "fresh_allocs" => o.fresh_allocs = parse_bool(k, v)?,
                "rmw_loads" => o.rmw_loads = parse_bool(k, v)?,
                "frees" => o.frees = parse_bool(k, v)?,
                "reads_from" => o.reads_from = parse_bool(k, v)?,
                _ => {
                    return Err(format!(
                        "unknown hawkset option `{k}` (irh, unpersisted, persist_owner, nt, unlock_fence, hb, edges, \
                         lanes, annotations, sync_words, strings, infer_locks, irh_order, fresh_allocs, rmw_loads, \
                         frees, reads_from)"
                    ))
                }
            }
        }
        Ok(o)
    }
}

/// A lock held by a thread, with the thread's acquisition number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Held {
    lock: u64,
    mode: Mode,
    ts: u32,
}

/// A store not yet out of its window: bytes `mask` of its line. 24 bytes: a line's list holds
/// one inline in 32 (its site is interned, and `flushed` is the top bit of the thread id, which
/// no thread id reaches).
#[derive(Clone, Copy, Debug)]
struct Piece {
    mask: u64,
    /// The store's site, interned in [`Hawkset::sites`].
    site: u32,
    /// The writer's thread id, and [`FLUSHED`]: the writer flushed these bytes after the store
    /// (or it was an NT store).
    tid_flushed: u32,
    /// Timed lockset (id) at the store.
    ls: u32,
    /// Writer's clock at the store.
    vc: u32,
}

/// [`Piece::tid_flushed`]'s flag.
const FLUSHED: u32 = 1 << 31;
/// [`Piece::tid_flushed`]'s flag: the store was made inside one of libpmemobj's allocation calls.
const IN_ALLOC: u32 = 1 << 30;

impl Piece {
    fn tid(&self) -> u32 {
        self.tid_flushed & !(FLUSHED | IN_ALLOC)
    }
    fn flushed(&self) -> bool {
        self.tid_flushed & FLUSHED != 0
    }
    fn in_alloc(&self) -> bool {
        self.tid_flushed & IN_ALLOC != 0
    }
}

/// What ended a store's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum End {
    /// A fence (or clflush) made it durable.
    Fence(Site),
    /// The writer stored to the bytes again first.
    Overwrite(Site),
    /// The writer exited (or the program ended) with the store pending.
    Exit,
    /// Durable without an event of its writer the pass saw (another thread's fence or
    /// msync), noticed at exit.
    Durable,
    /// Its memory was freed (the call at this site, by this thread) with the store still
    /// pending.
    Freed(Site, u32),
}

/// A store whose window has ended, deduplicated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct StoreRec {
    line: u64,
    mask: u64,
    tid: u32,
    site: Site,
    end: End,
    flushed: bool,
    /// Effective lockset (untimed id).
    eff: u32,
    /// Writer's clock at the end of the window.
    vc: u32,
    /// Writer's clock at the store.
    vc_store: u32,
    /// `reads_from=on`: the writer's epoch in the reads-from clocks at the end of the window
    /// (`u32::MAX`: never ordered by them; 0 with the option off).
    rf_end: u32,
}

/// A load, deduplicated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct LoadRec {
    line: u64,
    mask: u64,
    tid: u32,
    site: Site,
    /// Lockset (untimed id).
    ls: u32,
    vc: u32,
    /// `reads_from=on`: the loader's reads-from clock (id in [`Hawkset::rf_clocks`]).
    rf: u32,
}

/// A record kept back by its thread ([`Thread::deferred`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Deferred {
    Store(StoreRec),
    Load(LoadRec),
}

impl LineKeyed for StoreRec {
    fn line_mask(&self) -> (u64, u64) {
        (self.line, self.mask)
    }
    fn at(&self, line: u64, mask: u64) -> Self {
        StoreRec { line, mask, ..*self }
    }
}

impl LineKeyed for LoadRec {
    fn line_mask(&self) -> (u64, u64) {
        (self.line, self.mask)
    }
    fn at(&self, line: u64, mask: u64) -> Self {
        LoadRec { line, mask, ..*self }
    }
}

#[derive(Clone, Default, Debug)]
struct Thread {
    held: Vec<Held>,
    acquisitions: u32,
    /// Cached ids of the current timed lockset and vector clock.
    ls: Option<u32>,
    vc: Option<u32>,
    /// Inside a release call: the timed lockset and the vector clock before its release (a
    /// fence inside the call persists under the lock, and before any thread can leave a
    /// barrier whose arrival posts).
    pre_release: Option<(u32, u32)>,
    /// Lines where the thread has pending pieces, for its exit: those it stored to, each once
    /// in a row, and compacted to the lines still pending when the list fills its buffer (so it
    /// holds about what is pending, not every line the thread ever stored to).
    lines: Vec<u64>,
    /// Lines flushed (or NT-stored) since the thread's last fence: what its next fence checks.
    flushed: FxHashSet<u64>,
    /// Sizes asked of the PMDK allocations the thread is in (their entries), innermost last.
    allocs: Vec<u64>,
    exited: bool,
    /// Records whose lockset holds an inferred lock this thread still holds unconfirmed, in the
    /// order made, kept back until that lock is decided ([`Hawkset::defer`]); and the same
    /// records as a set, so that each is kept back once.
    deferred: Vec<Deferred>,
    deferred_set: FxHashSet<Deferred>,
    /// Cached id of its reads-from clock (`reads_from=on`).
    rf: Option<u32>,
}

/// The pass. Memory follows distinct PM bytes, sites, locksets and clocks, not accesses: records
/// are deduplicated, and a store's pending state lives only until its window ends.
#[derive(Clone)]
pub struct Hawkset {
    opts: HawksetOptions,
    sync: SyncAdapter,
    pmdk_locks: PmdkLockCalls,
    /// The recognised calls each thread is in: lock words, string routines' contracts.
    calls: SyncCalls,
    /// What the program declared through pmemcheck's client requests.
    annotations: Annotations,
    /// Locks inferred from atomics on PM words.
    inferred: InferredLocks,
    /// What each store site wrote (pointers, values, counters), for the findings.
    stored: StoreShapes,
    /// Vector clocks with create/join edges (and post/wait ones with `edges=sync`).
    hb: HappensBefore,
    threads: FxHashMap<u32, Thread>,
    /// Timed locksets (sorted held locks with acquisition numbers), interned.
    timed: Interner<Vec<Held>>,
    /// Untimed locksets (sorted, deduplicated), interned.
    plain: Interner<Vec<(u64, Mode)>>,
    /// Vector clocks without trailing zeros, interned.
    clocks: Interner<Vec<u32>>,
    /// Memo of timed intersections: (timed, timed) → untimed.
    inter: FxHashMap<(u32, u32), u32>,
    /// Line → stores whose window is open there; each byte is in at most one piece per thread.
    /// A 4-byte slot per line of a touched page, and a list (one piece inline) only while the
    /// line has pending stores: most lines are persisted soon after they are stored.
    pending: ShadowSlab<PieceList>,
    /// The pending stores' sites.
    sites: SiteIds,
    /// Line → IRH publication state (only lines some PM access touched).
    irh: Publication,
    /// Stores persisted before their bytes were published (`irh_order=causal`), named by their
    /// context in `stores`, until the publishing access decides whether they were initialisation.
    held: HeldStores,
    /// Scratch: the held stores an access decided.
    decided: Vec<(u32, u64, bool)>,
    /// Threads seen and not exited.
    live: u32,
    /// Closed store windows → how many times each was recorded.
    stores: LineRecords<StoreRec>,
    /// Loads that passed the IRH → count.
    loads: LineRecords<LoadRec>,
    /// Scratch buffer for the sync adapter's operations.
    ops: Vec<SyncOp>,
    /// Buffers of pending lists that outgrew their slot, kept for reuse, and scratch buffers: a
    /// store, a flush or a fence allocates nothing once the pass has warmed up.
    spare_lists: Vec<Vec<Piece>>,
    closed: Vec<(Piece, u64)>,
    fence_lines: Vec<u64>,
    /// The locked read-modify-writes that stored to PM (`rmw_loads=off`).
    rmw_pcs: RmwSites,
    /// The run stopped before the program ended: a store still pending was not persisted
    /// *before the stop*, which says nothing of later.
    stopped: bool,
    /// Untimed lockset → the same without its unconfirmed inferred locks, and whether it had
    /// any; valid while `inferred.confirmations` is `strip_epoch`.
    strip: FxHashMap<u32, (u32, bool)>,
    strip_epoch: u64,
    /// Records kept back so far ([`Hawkset::defer`]).
    deferred: u64,
    /// Frees seen (`frees=on`): each ends a life of the bytes it frees.
    lives: u32,
    /// Records of ended lives: (life, line, bytes, context in `stores` or `loads`), in the
    /// order of the frees and, within one, of the lines. They pair only among themselves.
    retired_stores: Vec<(u32, u64, u64, u32)>,
    retired_loads: Vec<(u32, u64, u64, u32)>,
    /// Scratch for the records a free takes out of a line.
    taken: Vec<(u64, u32)>,
    /// Bytes freed (`frees=on`), for `--host-stats`.
    freed_bytes: u64,
    /// Reads-from clocks (`reads_from=on`), and their copies kept by load records, interned.
    rf: Option<Box<crate::irh::ReadsFrom>>,
    rf_clocks: Interner<Vec<u32>>,
}

/// Spare buffers of pending lists kept for reuse.
const SPARE_LISTS: usize = 64;

/// At most this many unconfirmed inferred locks are kept held by a thread at once
/// ([`Hawkset::bound_tentative`]).
pub const MAX_TENTATIVE: usize = 4;

/// At most this many records are kept back per thread while it holds unconfirmed inferred
/// locks ([`Hawkset::defer`]).
pub const MAX_DEFERRED: usize = 1 << 14;

/// The stores pending on a line: one inline (most lines have one writer at a time), so a line
/// costs its slot in the page's block and nothing else.
type PieceList = smallvec::SmallVec<[Piece; 1]>;

impl Default for Hawkset {
    fn default() -> Self {
        Hawkset::new(HawksetOptions::default())
    }
}

impl Hawkset {
    /// The pass with these options.
    pub fn new(opts: HawksetOptions) -> Hawkset {
        Hawkset {
            opts,
            sync: SyncAdapter::default(),
            pmdk_locks: PmdkLockCalls::default(),
            calls: SyncCalls::default(),
            annotations: Annotations::default(),
            inferred: InferredLocks::default(),
            stored: StoreShapes::default(),
            hb: HappensBefore::new(Edges { create_join: true, objects: opts.edges == EdgeSet::Sync, locks: false }),
            threads: FxHashMap::default(),
            timed: Interner::default(),
            plain: Interner::default(),
            clocks: Interner::default(),
            inter: FxHashMap::default(),
            pending: ShadowSlab::default(),
            spare_lists: Vec::new(),
            sites: SiteIds::default(),
            irh: Publication::new(opts.irh, opts.irh_order),
            held: HeldStores::new(opts.irh_order == IrhOrder::Causal),
            decided: Vec::new(),
            live: 0,
            stores: LineRecords::default(),
            loads: LineRecords::default(),
            ops: Vec::new(),
            closed: Vec::new(),
            fence_lines: Vec::new(),
            rmw_pcs: RmwSites::default(),
            stopped: false,
            strip: FxHashMap::default(),
            strip_epoch: 0,
            deferred: 0,
            lives: 0,
            retired_stores: Vec::new(),
            retired_loads: Vec::new(),
            taken: Vec::new(),
            freed_bytes: 0,
            rf: opts.reads_from.then(|| Box::new(crate::irh::ReadsFrom::new(opts.edges == EdgeSet::Sync))),
            rf_clocks: Interner::default(),
        }
    }

    /// From an option string (`irh=0:unpersisted=off`).
    pub fn from_spec(spec: &str) -> Result<Hawkset, String> {
        Ok(Hawkset::new(HawksetOptions::parse(spec)?))
    }

    fn thread(&mut self, tid: u32) -> &mut Thread {
        if !self.threads.contains_key(&tid) {
            self.live += 1;
        }
        self.threads.entry(tid).or_default()
    }

    /// The thread's current timed lockset id.
    fn lockset(&mut self, tid: u32) -> u32 {
        if let Some(id) = self.thread(tid).ls {
            return id;
        }
        let mut held = self.thread(tid).held.clone();
        held.sort_unstable();
        let id = self.timed.id(held);
        self.thread(tid).ls = Some(id);
        id
    }

    /// The lockset a fence by `tid` persists under, and its clock if not the current one (see
    /// `unlock_fence`).
    fn fence_context(&mut self, tid: u32) -> (u32, Option<u32>) {
        let pre = self.thread(tid).pre_release;
        match pre {
            Some((ls, vc)) if self.opts.unlock_fence => (ls, Some(vc)),
            _ => (self.lockset(tid), None),
        }
    }

    /// The thread's current vector clock id.
    fn clock(&mut self, tid: u32) -> u32 {
        if let Some(id) = self.thread(tid).vc {
            return id;
        }
        // Interned as it comes: a dense copy of a sparse clock ends at its last non-zero slot.
        let id = self.clocks.id(self.hb.clock(tid).0);
        self.thread(tid).vc = Some(id);
        id
    }

    /// `reads_from=on`: `tid` loads bytes `mask` of `line` (learning the clocks of the stores it
    /// reads); the id of its reads-from clock now. 0 with the option off.
    fn rf_clock(&mut self, tid: u32, line: u64, mask: u64) -> u32 {
        let Some(rf) = &mut self.rf else { return 0 };
        let changed = rf.loaded(tid, line, mask);
        let t = self.threads.entry(tid).or_default();
        match t.rf {
            Some(id) if !changed => id,
            _ => {
                let id = self.rf_clocks.id(rf.clock(tid));
                t.rf = Some(id);
                id
            }
        }
    }

    /// Timed intersection of two timed locksets, as an untimed lockset id.
    fn effective(&mut self, a: u32, b: u32) -> u32 {
        if let Some(&id) = self.inter.get(&(a, b)) {
            return id;
        }
        let (x, y) = (self.timed.get(a), self.timed.get(b));
        let mut set: Vec<(u64, Mode)> = x.iter().filter(|h| y.contains(h)).map(|h| (h.lock, h.mode)).collect();
        set.sort_unstable();
        set.dedup();
        let id = self.plain.id(set);
        self.inter.insert((a, b), id);
        id
    }

    /// The untimed lockset of a timed one.
    fn untimed(&mut self, timed: u32) -> u32 {
        self.effective(timed, timed)
    }

    /// IRH: registers an access by `tid` to `mask` of `line`; bytes it publishes decide the
    /// held stores there: one persisted before an access not ordered after it is a store record
    /// like any other; the others were initialisation and go.
    fn touch(&mut self, tid: u32, line: u64, mask: u64) {
        let published = self.irh.touch(tid, line, mask);
        if published == 0 || !self.held.any() {
            return;
        }
        let mut decided = std::mem::take(&mut self.decided);
        let stores = &self.stores;
        self.held.publish(tid, line, published, |ctx| stores.record(ctx, line, 0).tid, &mut decided);
        for (ctx, part, unordered) in decided.drain(..) {
            if unordered {
                let rec = self.stores.record(ctx, line, part);
                self.keep_store(rec);
            }
        }
        self.decided = decided;
    }

    /// The solo phase ended ([`Publication::created`]): `tid`'s stores whose windows are still
    /// open are accesses the new thread can see, and count for the IRH.
    fn touch_pending(&mut self, tid: u32) {
        let mut lines = self.thread(tid).lines.clone();
        lines.sort_unstable();
        lines.dedup();
        for line in lines {
            let mask = self
                .pending
                .get_mut_if(line)
                .map_or(0, |list| list.iter().filter(|p| p.tid() == tid).fold(0, |m, p| m | p.mask));
            if mask != 0 {
                self.touch(tid, line, mask);
            }
        }
    }

    /// Keeps `rec`, persisted (or overwritten) before its bytes were published, until they are
    /// ([`HeldStores::hold`]).
    fn hold_tentative(&mut self, rec: StoreRec) {
        let ctx = self.stores.context_of(&rec);
        self.held.hold(rec.tid, rec.line, rec.mask, ctx, self.live);
    }

    fn published(&self, line: u64, mask: u64) -> u64 {
        self.irh.published(line, mask)
    }

    /// Ends the window of bytes `mask` of `piece` (of `line`) with `end`, under the writer's
    /// timed lockset `end_ls`.
    /// `end_vc`: the writer's clock the window ends at, if not its current one (a fence inside a
    /// release call persists before that release).
    fn record(&mut self, line: u64, piece: Piece, mask: u64, end: End, end_ls: u32, end_vc: Option<u32>) {
        let all = mask;
        let mask = match end {
            // The allocator's own store, persisted before the allocation call returns: it
            // initialises the object (or the allocator's metadata) before any other thread can
            // be handed it; the object is fresh when the call returns (`fresh_allocs`), whatever
            // threads did to its bytes in an earlier life.
            End::Fence(_) | End::Durable
                if self.opts.fresh_allocs
                    && piece.in_alloc()
                    && self.threads.get(&piece.tid()).is_some_and(|t| !t.allocs.is_empty()) =>
            {
                return
            }
            End::Fence(_) | End::Durable => self.published(line, mask),
            End::Overwrite(_) | End::Exit | End::Freed(..) if !self.opts.unpersisted => return,
            // Overwritten before a second thread touched the bytes: nobody else could see the
            // value in its window (a fresh node zeroed, then filled).
            End::Overwrite(_) => self.published(line, mask),
            End::Exit | End::Freed(..) => mask,
        };
        let early = all & !mask;
        if mask == 0 && early == 0 {
            return;
        }
        let eff = self.effective(piece.ls, end_ls);
        let vc = match end_vc {
            Some(vc) => vc,
            None => self.clock(piece.tid()),
        };
        let rf_end = match (&mut self.rf, end) {
            (None, _) => 0,
            // The free ends the window in another thread, and no load after it reads the bytes'
            // old life: nothing to order.
            (Some(_), End::Freed(..)) => u32::MAX,
            (Some(rf), _) => rf.window_end(piece.tid()),
        };
        let rec = StoreRec {
            line,
            mask,
            tid: piece.tid(),
            site: self.sites.get(piece.site),
            end,
            flushed: piece.flushed(),
            eff,
            vc,
            vc_store: piece.vc,
            rf_end,
        };
        if mask != 0 {
            self.keep_store(rec);
        }
        if early != 0 {
            self.hold_tentative(rec.at(line, early));
        }
    }

    /// Notes where PM lies in the guest's address space (for telling pointers).
    fn note_pm(&mut self, ev: &Event) {
        self.stored.access(ev.addr, ev.dev, ev.size);
    }

    fn on_store(&mut self, ev: &Event, device: &PmDevice, nt: bool) {
        let tid = ev.tid;
        let site = (ev.pc, ev.stack);
        self.note_pm(ev);
        self.stored.store(ev.pc, ev.dev, ev.size, ev.old, ev.new);
        self.rmw_pcs.store(ev.pc, ev.kind == EventKind::RmwStore);
        let ls = self.lockset(tid);
        let durable_now = device.durable(self.opts.persist_owner, ev.dev, u64::from(ev.size));
        let in_alloc = if self.threads.get(&tid).is_some_and(|t| !t.allocs.is_empty()) { IN_ALLOC } else { 0 };
        for (line, mask) in pieces(ev.dev, ev.size) {
            self.touch(tid, line, mask);
            self.held.stored(tid, line, mask);
            // Same-thread overwrite of pending bytes ends their window.
            let mut ended: Vec<(Piece, u64)> = Vec::new();
            if let Some(list) = self.pending.get_mut_if(line) {
                for p in list.iter_mut().filter(|p| p.tid() == tid && p.mask & mask != 0) {
                    ended.push((*p, p.mask & mask));
                    p.mask &= !mask;
                }
                list.retain(|p| p.mask != 0);
            }
            for (p, m) in ended {
                self.record(line, p, m, End::Overwrite(site), ls, None);
            }
            if let Some(rf) = &mut self.rf {
                rf.stored(tid, line, mask);
            }
            if nt {
                // The NT store first acts as a flush of its line by this thread.
                self.flush_line(tid, line);
                if self.opts.nt == NtSemantics::Source {
                    continue;
                }
            }
            if durable_now && !nt {
                // eADR: durable as it executes; its window is empty.
                continue;
            }
            let vc = self.clock(tid);
            let piece = Piece {
                mask,
                site: self.sites.id(site),
                tid_flushed: tid | if nt { FLUSHED } else { 0 } | in_alloc,
                ls,
                vc,
            };
            let list = self.pending.get_mut(line);
            if list.len() == list.inline_size() && !list.spilled() {
                // A second piece: onto a buffer a line gave back, not a new allocation.
                let mut v = self.spare_lists.pop().unwrap_or_default();
                v.extend(list.drain(..));
                *list = PieceList::from_vec(v);
            }
            list.push(piece);
            self.note_pending_line(tid, line);
            let t = self.thread(tid);
            if nt {
                t.flushed.insert(line);
            }
        }
    }

    /// Notes that `tid` has a piece pending on `line`. A full list is first compacted to the
    /// lines where the thread still has pieces pending: amortised constant time per store, and
    /// the buffer doubles only when most of it is still pending.
    fn note_pending_line(&mut self, tid: u32, line: u64) {
        self.thread(tid);
        let Hawkset { threads, pending, .. } = self;
        let t = threads.get_mut(&tid).expect("thread noted above");
        if t.lines.last() == Some(&line) {
            return;
        }
        if t.lines.len() == t.lines.capacity() && t.lines.len() >= 64 {
            t.lines.sort_unstable();
            t.lines.dedup();
            t.lines.retain(|&l| pending.get_mut_if(l).is_some_and(|list| list.iter().any(|p| p.tid() == tid)));
        }
        t.lines.push(line);
    }

    /// `line` has no pending store left: its list goes back to the slab, and one that grew out
    /// of its slot gives its buffer back to the spares.
    fn forget_line(&mut self, line: u64) {
        if let Some(list) = self.pending.get_mut_if(line) {
            if !list.is_empty() {
                return;
            }
            if list.spilled() {
                let v = std::mem::take(list).into_vec();
                if self.spare_lists.len() < SPARE_LISTS {
                    self.spare_lists.push(v);
                }
            }
            self.pending.release(line);
        }
    }

    /// The program declared bytes `dev..dev + size` clean (`VALGRIND_PMC_SET_CLEAN`: PMDK's
    /// chunk footers and other state it rebuilds rather than persists): pmemcheck forgets the
    /// stores there, and their windows end unrecorded, since no crash can lose what the program
    /// does not rely on.
    fn declare_clean(&mut self, dev: u64, size: u32) {
        for (line, clean) in pieces(dev, size) {
            let Some(list) = self.pending.get_mut_if(line) else { continue };
            for p in list.iter_mut() {
                p.mask &= !clean;
            }
            list.retain(|p| p.mask != 0);
            if list.is_empty() {
                self.forget_line(line);
            }
        }
    }

    /// A flush of `line` by `tid`: its pending bytes there are now flushed, and its next fence
    /// looks at the line.
    fn flush_line(&mut self, tid: u32, line: u64) {
        let any = self.opts.persist_owner == DurabilityRule::Hw;
        let mut touched = false;
        if let Some(list) = self.pending.get_mut_if(line) {
            for p in list.iter_mut() {
                if p.tid() == tid {
                    p.tid_flushed |= FLUSHED;
                    touched = true;
                } else if any {
                    touched = true;
                }
            }
        }
        if touched {
            self.thread(tid).flushed.insert(line);
        }
    }

    /// Closes the windows on `lines` that are durable now, by an event of `tid` ending at `end`
    /// (`fencing`: the event is a fence of `tid`).
    fn settle(&mut self, device: &PmDevice, tid: u32, lines: &[u64], end: End, fencing: bool) {
        let rule = self.opts.persist_owner;
        let any = rule == DurabilityRule::Hw;
        for &line in lines {
            let Some(list) = self.pending.get_mut_if(line) else { continue };
            let mut closed = std::mem::take(&mut self.closed);
            closed.clear();
            for p in list.iter_mut().filter(|p| p.tid() == tid || any) {
                let owner_fenced = fencing && p.tid() == tid && p.flushed();
                let d = durable_bytes(device, rule, line, p.mask, p.tid(), owner_fenced);
                if d != 0 {
                    closed.push((*p, d));
                    p.mask &= !d;
                }
            }
            list.retain(|p| p.mask != 0);
            if list.is_empty() {
                self.forget_line(line);
            }
            for &(p, m) in &closed {
                let (end_ls, end_vc) =
                    if p.tid() == tid { self.fence_context(tid) } else { (self.lockset(p.tid()), None) };
                self.record(line, p, m, end, end_ls, end_vc);
            }
            self.closed = closed;
        }
    }

    /// The thread exits (or the program ends): every pending store of it ends its window.
    fn exit_thread(&mut self, device: &PmDevice, tid: u32) {
        let lines: Vec<u64> = {
            let t = self.thread(tid);
            t.flushed.clear();
            let mut v = std::mem::take(&mut t.lines);
            v.sort_unstable();
            v.dedup();
            v
        };
        let ls = self.lockset(tid);
        let rule = self.opts.persist_owner;
        for line in lines {
            let Some(list) = self.pending.get_mut_if(line) else { continue };
            let mine: Vec<Piece> = list.iter().copied().filter(|p| p.tid() == tid).collect();
            list.retain(|p| p.tid() != tid);
            if list.is_empty() {
                self.forget_line(line);
            }
            for p in mine {
                let d = durable_bytes(device, rule, line, p.mask, p.tid(), false);
                if d != 0 {
                    self.record(line, p, d, End::Durable, ls, None);
                }
                if p.mask & !d != 0 {
                    self.record(line, p, p.mask & !d, End::Exit, ls, None);
                }
            }
        }
        let t = self.thread(tid);
        if !t.exited {
            t.exited = true;
            self.live -= 1;
        }
    }

    /// The program freed the PM object `[ev.dev, ev.dev + ev.new)`: the history of its bytes
    /// ends, as ThreadSanitizer clears its shadow at a free. Every thread's store still pending
    /// there ends its window at the free ([`End::Freed`]): it was never persisted, so it is
    /// recorded as an unpersisted store and races with the loads of its life (the value was
    /// visible and never durable), but no load of a later life can read it (the allocator hands
    /// the bytes out again only after the free, and a PM allocator's freed object is dead: its
    /// content is nothing a recovery reads as this object). The records of the bytes, stores and
    /// loads, are retired as one life, checked at the end among themselves only; the IRH
    /// forgets who touched the bytes and the stores it holds there (initialisation of an object
    /// no second thread touched in its life).
    fn free(&mut self, ev: &Event) {
        self.lives += 1;
        self.freed_bytes += ev.new;
        let life = self.lives;
        let site = (ev.pc, ev.stack);
        self.irh.forget_range(ev.dev, ev.new);
        let end = ev.dev.saturating_add(ev.new);
        let mut closed = std::mem::take(&mut self.closed);
        let mut taken = std::mem::take(&mut self.taken);
        for (line, mask) in crate::persist::range_pieces(ev.dev, end) {
            closed.clear();
            if let Some(list) = self.pending.get_mut_if(line) {
                for p in list.iter_mut().filter(|p| p.mask & mask != 0) {
                    closed.push((*p, p.mask & mask));
                    p.mask &= !mask;
                }
                list.retain(|p| p.mask != 0);
                if list.is_empty() {
                    self.forget_line(line);
                }
            }
            for &(p, m) in &closed {
                let ls = self.lockset(p.tid());
                self.record(line, p, m, End::Freed(site, ev.tid), ls, None);
            }
            self.held.forget_bytes(line, mask);
        }
        // After the windows the free ended were recorded: a window made under a lock its
        // thread still holds unconfirmed is kept back too, and must retire with its life (it
        // was lost: P-CLHT's `table_tmp`, whose resizer still held an inferred lock unconfirmed).
        self.decide_deferred_in(ev.dev, end);
        for (line, mask) in crate::persist::range_pieces(ev.dev, end) {
            taken.clear();
            self.stores.take_bytes(line, mask, &mut taken);
            self.retired_stores.extend(taken.iter().map(|&(m, c)| (life, line, m, c)));
            taken.clear();
            self.loads.take_bytes(line, mask, &mut taken);
            self.retired_loads.extend(taken.iter().map(|&(m, c)| (life, line, m, c)));
        }
        self.closed = closed;
        self.taken = taken;
    }

    fn on_load(&mut self, ev: &Event) {
        let tid = ev.tid;
        let site = (ev.pc, ev.stack);
        self.note_pm(ev);
        if self.opts.fresh_allocs && self.threads.get(&tid).is_some_and(|t| !t.allocs.is_empty()) {
            // Inside one of libpmemobj's allocation calls: the allocator reading the memory it
            // is about to hand out (or its constructor reading the new object). Nothing another
            // thread stores to the object can reach such a load: the object is not yet
            // anyone's, and what its bytes held before belonged to a freed object.
            return;
        }
        let mut ls = None;
        for (line, m) in pieces(ev.dev, ev.size) {
            self.held.loaded(tid, line, m);
            // The IRH removes only stores persisted before a second thread touched their bytes
            // (§3.1.3); a load is never initialisation, but it does publish the bytes.
            self.touch(tid, line, m);
            let l = match ls {
                Some(l) => l,
                None => {
                    let timed = self.lockset(tid);
                    let u = self.untimed(timed);
                    ls = Some(u);
                    u
                }
            };
            let vc = self.clock(tid);
            let rf = self.rf_clock(tid, line, m);
            self.keep_load(LoadRec { line, mask: m, tid, site, ls: l, vc, rf });
        }
    }

    fn on_sync(&mut self, ev: &Event, device: &PmDevice) {
        let tid = ev.tid;
        if ev.kind == EventKind::AtomicAccess {
            let _ = self.thread(tid);
            return self.held.order_atomic(&mut self.sync, ev, self.live);
        }
        let fresh = self.opts.fresh_allocs;
        let mut sizes = std::mem::take(&mut self.thread(tid).allocs);
        self.irh.on_alloc(ev, &mut sizes, fresh);
        self.thread(tid).allocs = sizes;
        if let EventKind::SyncEnter(k) = ev.kind {
            // The outermost release call's lockset (pmemobj_cond_wait calls pthread_cond_wait).
            if is_release_call(k) && self.thread(tid).pre_release.is_none() {
                let ls = self.lockset(tid);
                let vc = self.clock(tid);
                self.thread(tid).pre_release = Some((ls, vc));
            }
        }
        if let EventKind::SyncReturn(k) = ev.kind {
            if is_release_call(k) {
                self.thread(tid).pre_release = None;
            }
        }
        let mut ops = std::mem::take(&mut self.ops);
        ops.clear();
        self.sync.translate(ev, |op| ops.push(op));
        for &op in &ops {
            self.apply(tid, op, device);
        }
        self.ops = ops;
    }

    /// Thread `tid` performs `op`.
    fn apply(&mut self, tid: u32, op: SyncOp, device: &PmDevice) {
        self.order(tid, op);
        if let Some(rf) = &mut self.rf {
            rf.apply(tid, op);
            self.thread(tid).rf = None;
            if let SyncOp::Create { child } = op {
                self.thread(child).rf = None;
            }
        }
        {
            match op {
                SyncOp::Acquire { lock, mode } => {
                    let t = self.thread(tid);
                    // The PMDK pseudo-lock is untimed: accesses inside any two libpmemobj lock
                    // calls are protected, as HawkSet's acquire-release list intends.
                    let ts = if lock == crate::sync::PMDK_PSEUDO_LOCK {
                        0
                    } else {
                        t.acquisitions += 1;
                        t.acquisitions
                    };
                    t.held.push(Held { lock, mode, ts });
                    t.ls = None;
                    if is_inferred(lock) {
                        self.bound_tentative(tid);
                    }
                }
                SyncOp::Release { lock } => {
                    let t = self.thread(tid);
                    if let Some(i) = t.held.iter().rposition(|h| h.lock == lock) {
                        t.held.remove(i);
                        t.ls = None;
                    }
                    if is_inferred(lock) {
                        // Confirmed now: the records it kept back are decided.
                        self.drain(tid, false);
                    }
                }
                SyncOp::Create { child } => {
                    if let Some(solo) = self.irh.created() {
                        self.touch_pending(solo);
                    }
                    self.hb.apply(tid, op);
                    self.thread(tid).vc = None;
                    self.thread(child).vc = None;
                }
                SyncOp::Join { .. } | SyncOp::Post { .. } | SyncOp::Wait { .. } => {
                    // Posts and waits order only with `edges=sync` (the clocks' edges say so).
                    self.hb.apply(tid, op);
                    self.thread(tid).vc = None;
                }
                SyncOp::Exit => {
                    self.exit_thread(device, tid);
                    self.hb.apply(tid, op);
                }
                SyncOp::LaneHold if self.opts.lanes => {
                    // A lane: a lock (timed, like any) that protects only the lanes' memory.
                    let t = self.thread(tid);
                    t.acquisitions += 1;
                    let ts = t.acquisitions;
                    t.held.push(Held { lock: PMDK_LANE_LOCK, mode: Mode::Exclusive, ts });
                    t.ls = None;
                }
                SyncOp::LaneRelease => {
                    let t = self.thread(tid);
                    if let Some(i) = t.held.iter().rposition(|h| h.lock == PMDK_LANE_LOCK) {
                        t.held.remove(i);
                        t.ls = None;
                    }
                }
                SyncOp::LaneHold => {}
            }
        }
    }

    /// Keeps at most [`MAX_TENTATIVE`] unconfirmed inferred locks in `tid`'s held list, dropping
    /// the oldest beyond it.
    ///
    /// A sequentially consistent `std::atomic` store compiles to `xchg`, a locked instruction:
    /// one that puts a non-zero value into a zero word (a fresh node's child pointer or key
    /// byte) looks like an acquisition ([`crate::inferred_locks`]) that is never released. A
    /// thread doing that on every operation held thousands of such "locks", and each of its
    /// acquisitions interned a lockset as long as all of them: memory quadratic in the
    /// operations (P-ART at 2,000 operations: 300 MB of locksets). Dropping the oldest
    /// unconfirmed one changes no finding unless the thread itself later releases it (or a
    /// thread that does not hold the word stores 0 to it) while another thread takes it:
    /// a word nobody has released yet is taken by no other thread while this one holds it,
    /// so no other lockset can share it. Locking code holds far fewer unconfirmed locks at once
    /// (a lock's first acquisitions, nested); confirmed ones are never dropped.
    fn bound_tentative(&mut self, tid: u32) {
        let Hawkset { threads, inferred, .. } = self;
        let Some(t) = threads.get_mut(&tid) else { return };
        let tentative = |h: &Held| is_inferred(h.lock) && !inferred.confirmed(h.lock);
        if t.held.iter().filter(|h| tentative(h)).count() > MAX_TENTATIVE && self.drop_tentative(tid) {
            self.drain(tid, false);
        }
    }

    /// Drops the oldest unconfirmed inferred lock `tid` holds; whether there was one.
    fn drop_tentative(&mut self, tid: u32) -> bool {
        let Hawkset { threads, inferred, .. } = self;
        let Some(t) = threads.get_mut(&tid) else { return false };
        match t.held.iter().position(|h| is_inferred(h.lock) && !inferred.confirmed(h.lock)) {
            Some(i) => {
                t.held.remove(i);
                t.ls = None;
                true
            }
            None => false,
        }
    }

    /// What untimed lockset `id` becomes in a record of thread `tid`: `None` while `tid` still
    /// holds one of its inferred locks unconfirmed (the record waits: [`Hawkset::defer`]);
    /// otherwise the set without its inferred locks not confirmed by now (with `force`,
    /// whatever the thread holds: at the end of the run).
    fn record_lockset(&mut self, id: u32, tid: u32, force: bool) -> Option<u32> {
        if self.inferred.acquisitions == 0 {
            return Some(id);
        }
        if self.strip_epoch != self.inferred.confirmations {
            self.strip.clear();
            self.strip_epoch = self.inferred.confirmations;
        }
        let (stripped, unconfirmed) = match self.strip.get(&id) {
            Some(&v) => v,
            None => {
                let set = self.plain.get(id);
                let n = set.len();
                let keep: Vec<(u64, Mode)> = set.iter().copied().filter(|&(l, _)| self.inferred.confirmed(l)).collect();
                let v = if keep.len() == n { (id, false) } else { (self.plain.id(keep), true) };
                self.strip.insert(id, v);
                v
            }
        };
        if !unconfirmed || force {
            return Some(stripped);
        }
        let Some(t) = self.threads.get(&tid) else { return Some(stripped) };
        let pending =
            self.plain.get(id).iter().any(|&(l, _)| !self.inferred.confirmed(l) && t.held.iter().any(|h| h.lock == l));
        (!pending).then_some(stripped)
    }

    /// Keeps store record `rec` (or keeps it back: [`Hawkset::defer`]).
    fn keep_store(&mut self, rec: StoreRec) {
        match self.record_lockset(rec.eff, rec.tid, false) {
            Some(eff) => self.stores.insert(StoreRec { eff, ..rec }),
            None => self.defer(rec.tid, Deferred::Store(rec)),
        }
    }

    /// Keeps load record `rec` (or keeps it back: [`Hawkset::defer`]).
    fn keep_load(&mut self, rec: LoadRec) {
        match self.record_lockset(rec.ls, rec.tid, false) {
            Some(ls) => self.loads.insert(LoadRec { ls, ..rec }),
            None => self.defer(rec.tid, Deferred::Load(rec)),
        }
    }

    /// Keeps back a record of `tid` whose lockset holds an inferred lock `tid` still holds
    /// unconfirmed, until that lock is decided: released by `tid` (a lock, confirmed: it stays
    /// in the record) or dropped from `tid`'s locks ([`Hawkset::bound_tentative`]: no lock, left
    /// out of the record).
    ///
    /// Whether a word is a lock is known only once its holder releases it. A record made under
    /// an unconfirmed lock used to be kept at once with its whole lockset, so every `xchg`
    /// that fills a fresh word (a sequentially consistent `std::atomic` store: an acquisition
    /// never released) gave the thread a new lockset and each of its later accesses a new
    /// record, on every line it touched again (P-ART's root and inner nodes: lists of
    /// thousands of records per line, each insert a scan of them). The lock protects nothing
    /// until it is confirmed, and no other thread can hold it before its holder releases it
    /// (it is non-zero), so a record needs it only if this thread releases it later; kept
    /// back until then, records carry only locks that are (or end up) locks.
    ///
    /// At most [`MAX_DEFERRED`] records are kept back per thread: beyond, the thread's oldest
    /// unconfirmed lock is dropped as if [`MAX_TENTATIVE`] newer ones had come (a counter
    /// bumped from 0 once and never reset would keep every later record back).
    fn defer(&mut self, tid: u32, d: Deferred) {
        let t = self.thread(tid);
        if !t.deferred_set.insert(d) {
            return;
        }
        t.deferred.push(d);
        let full = t.deferred.len() > MAX_DEFERRED;
        self.deferred += 1;
        if full {
            while self.threads.get(&tid).is_some_and(|t| t.deferred.len() > MAX_DEFERRED) && self.drop_tentative(tid) {
                self.drain(tid, false);
            }
        }
    }

    /// Keeps the records `tid` kept back whose locks are decided now (with `force`: all of
    /// them, at the end of the run).
    fn drain(&mut self, tid: u32, force: bool) {
        let Some(t) = self.threads.get_mut(&tid) else { return };
        if t.deferred.is_empty() {
            return;
        }
        let list = std::mem::take(&mut t.deferred);
        let mut rest = Vec::new();
        for d in list {
            let ls = match d {
                Deferred::Store(s) => s.eff,
                Deferred::Load(l) => l.ls,
            };
            let Some(ls) = self.record_lockset(ls, tid, force) else {
                rest.push(d);
                continue;
            };
            if let Some(t) = self.threads.get_mut(&tid) {
                t.deferred_set.remove(&d);
            }
            match d {
                Deferred::Store(s) => self.stores.insert(StoreRec { eff: ls, ..s }),
                Deferred::Load(l) => self.loads.insert(LoadRec { ls, ..l }),
            }
        }
        if let Some(t) = self.threads.get_mut(&tid) {
            t.deferred = rest;
        }
    }

    /// Keeps now, in every thread, the records kept back ([`Hawkset::defer`]) on the bytes
    /// `[start, end)`, which a free is about to retire: they belong to the life that ends, and
    /// kept later they would join the next one. Their unconfirmed locks count for nothing, as at
    /// the end of a run (an unconfirmed lock protects nothing in the check either).
    fn decide_deferred_in(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        let (first, last) = (start / LINE_SIZE, (end - 1) / LINE_SIZE);
        let mut tids: Vec<u32> = self.threads.iter().filter(|(_, t)| !t.deferred.is_empty()).map(|(&k, _)| k).collect();
        tids.sort_unstable();
        for tid in tids {
            let Some(t) = self.threads.get_mut(&tid) else { continue };
            let now: Vec<Deferred> = t
                .deferred
                .extract_if(.., |d| {
                    let line = match d {
                        Deferred::Store(s) => s.line,
                        Deferred::Load(l) => l.line,
                    };
                    (first..=last).contains(&line)
                })
                .collect();
            for d in now {
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.deferred_set.remove(&d);
                }
                match d {
                    Deferred::Store(s) => {
                        let eff = self.record_lockset(s.eff, tid, true).unwrap_or(s.eff);
                        self.stores.insert(StoreRec { eff, ..s });
                    }
                    Deferred::Load(l) => {
                        let ls = self.record_lockset(l.ls, tid, true).unwrap_or(l.ls);
                        self.loads.insert(LoadRec { ls, ..l });
                    }
                }
            }
        }
    }

    /// The edge `op` makes in the IRH's causal clocks ([`HeldStores::order`]).
    fn order(&mut self, tid: u32, op: SyncOp) {
        let _ = self.thread(tid);
        self.held.order(tid, op, self.live);
    }

    /// Whether `a` (an untimed effective lockset) and `b` share a lock held exclusively by at
    /// least one side. The lanes' pseudo-lock counts only for bytes that are `lane_memory`.
    fn protects(&self, a: u32, b: u32, lane_memory: bool) -> bool {
        let (x, y) = (self.plain.get(a), self.plain.get(b));
        x.iter().any(|&(l, m)| {
            (lane_memory || l != PMDK_LANE_LOCK)
                && self.inferred.confirmed(l)
                && y.iter().any(|&(l2, m2)| l == l2 && (m == Mode::Exclusive || m2 == Mode::Exclusive))
        })
    }

    /// Whether clock `a` happens before (or equals) clock `b`.
    fn le(&self, a: u32, b: u32) -> bool {
        VectorClock(self.clocks.get(a).clone()).le(&VectorClock(self.clocks.get(b).clone()))
    }

    /// Whether the store record `s` and a load at clock `l` are unordered by create/join.
    fn unordered(&self, s: &StoreRec, l: u32) -> bool {
        // With post/wait edges a load can be ordered inside the window (after the store and
        // before the persist: a barrier or a condition signal between them), which is a race:
        // both ends are checked. The paper's edges (create and join) check the end alone.
        match (self.opts.hb, self.opts.edges) {
            (HbCheck::End, EdgeSet::Paper) => !self.le(s.vc, l) && !self.le(l, s.vc),
            _ => !self.le(s.vc, l) && !self.le(l, s.vc_store),
        }
    }
}

impl WindowPass for Hawkset {
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
        self.apply(ev.tid, op, device);
    }

    fn declare_clean(&mut self, dev: u64, size: u32) {
        Hawkset::declare_clean(self, dev, size);
    }

    fn on_store(&mut self, ev: &Event, device: &PmDevice, nt: bool) {
        Hawkset::on_store(self, ev, device, nt);
    }

    fn on_load(&mut self, ev: &Event, _device: &PmDevice) {
        Hawkset::on_load(self, ev);
    }

    fn on_flush(&mut self, ev: &Event, device: &PmDevice, op: FlushOp) {
        let line = ev.dev / LINE_SIZE;
        self.flush_line(ev.tid, line);
        if op == FlushOp::Clflush {
            self.settle(device, ev.tid, &[line], End::Fence((ev.pc, ev.stack)), false);
        }
    }

    fn on_fence(&mut self, ev: &Event, device: &PmDevice) {
        let mut lines = std::mem::take(&mut self.fence_lines);
        lines.clear();
        lines.extend(self.thread(ev.tid).flushed.drain());
        if !lines.is_empty() {
            lines.sort_unstable();
            self.settle(device, ev.tid, &lines, End::Fence((ev.pc, ev.stack)), true);
        }
        self.fence_lines = lines;
    }

    /// The windows the call made durable end at it: a process that persists with `msync` and
    /// exits is done with its stores before the parent that waits for it reads them.
    fn on_persist(&mut self, ev: &Event, device: &PmDevice) {
        let (lo, hi) = (ev.dev / LINE_SIZE, ev.dev.saturating_add(ev.new).div_ceil(LINE_SIZE));
        let mut lines = std::mem::take(&mut self.fence_lines);
        lines.clear();
        lines.extend(self.thread(ev.tid).lines.iter().copied().filter(|l| (lo..hi).contains(l)));
        if !lines.is_empty() {
            lines.sort_unstable();
            lines.dedup();
            self.settle(device, ev.tid, &lines, End::Fence((ev.pc, ev.stack)), false);
        }
        self.fence_lines = lines;
    }

    fn on_sync(&mut self, ev: &Event, device: &PmDevice) {
        Hawkset::on_sync(self, ev, device);
    }

    fn on_free(&mut self, ev: &Event, _device: &PmDevice) {
        if self.opts.frees {
            self.free(ev);
        }
    }
}

impl Analysis for Hawkset {
    fn name(&self) -> &'static str {
        "hawkset"
    }

    /// A race seen is a race whatever the program does next: a load in another thread while a
    /// store was unpersisted and unprotected has happened, so the findings stand when the run
    /// hangs at the instruction budget, deadlocks or is interrupted (a server that never ends).
    /// A store still pending at the stop has its window end there ("not before the run
    /// stopped"). What it cannot know: a word whose first locked update would have come later
    /// is not yet an inferred lock, so its accesses count as data.
    fn reports_when_stopped(&self) -> bool {
        true
    }

    fn stopped(&mut self) {
        self.stopped = true;
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
            ("withdrawn_accesses", self.annotations.withdrawn_accesses),
            ("sync_accesses", self.calls.sync_accesses),
            ("store_releases", self.calls.store_releases),
            ("clipped_loads", self.calls.clipped_loads),
            ("dropped_loads", self.calls.dropped_loads),
            ("inferred_acquisitions", self.inferred.acquisitions),
            ("inferred_releases", self.inferred.releases),
            ("irh_held", self.held.count),
            ("irh_unordered_publications", self.held.unordered),
            ("store_records", self.stores.counts().0),
            ("load_records", self.loads.counts().0),
            ("record_contexts", self.stores.counts().1 + self.loads.counts().1),
            ("deferred_records", self.deferred),
            ("frees", u64::from(self.lives)),
            ("freed_bytes", self.freed_bytes),
            ("reads_from_clocks", self.rf_clocks.values.len() as u64),
        ]
    }

    fn finish(&mut self, device: &PmDevice) -> Vec<RawFinding> {
        let mut live: Vec<u32> = self.threads.iter().filter(|(_, t)| !t.exited).map(|(&k, _)| k).collect();
        live.sort_unstable();
        for tid in live {
            self.exit_thread(device, tid);
        }
        // Accesses to words found to be locks after they were recorded are synchronisation.
        self.inferred.settle();
        // The records kept back: their unconfirmed locks are no locks now.
        let mut tids: Vec<u32> = self.threads.keys().copied().collect();
        tids.sort_unstable();
        for tid in tids {
            self.drain(tid, true);
        }
        let lock_bytes = self.inferred.lock_bytes();
        // One finding per store site, as HawkSet counts its reports (below); each window end
        // (tag: 0 fence, 1 overwrite, 2 exit, 3 durable otherwise) and flushed or not, per site.
        let mut groups: Grouper<u64> = Grouper::new(MAX_LOADS);
        // (tags seen, some window flushed and then overwritten or left unfenced).
        let mut ends: FxHashMap<u64, (u8, bool)> = FxHashMap::default();
        let rmw_pcs = (!self.opts.rmw_loads).then_some(&self.rmw_pcs);
        let mut conc: FxHashMap<(u32, u32, u32), bool> = FxHashMap::default();
        let mut prot: FxHashMap<(u32, u32, bool), bool> = FxHashMap::default();
        let mut tids: Vec<u32> = self.threads.keys().copied().collect();
        tids.sort_unstable();
        let rf_slots: FxHashMap<u32, usize> = match &mut self.rf {
            Some(rf) => tids.iter().map(|&t| (t, rf.slot(t))).collect(),
            None => FxHashMap::default(),
        };
        // One line at a time, in order: only a line's records are ever materialised (all of
        // them at once cost more than the pass's whole state per line). Then the ended lives of
        // freed bytes, one (life, line) at a time: their records pair only among themselves.
        let (mut stores, mut loads): (Vec<StoreRec>, Vec<LoadRec>) = (Vec::new(), Vec::new());
        let mut check = |line: u64, stores: &mut Vec<StoreRec>, loads: &mut Vec<LoadRec>| {
            stores.retain(|k| !within(&lock_bytes, line, k.mask));
            if stores.is_empty() {
                return;
            }
            stores.sort_unstable_by_key(|s| (s.site, s.end, s.tid, s.mask, s.eff, s.vc, s.flushed));
            loads.retain(|l| !within(&lock_bytes, line, l.mask) && !rmw_pcs.is_some_and(|r| r.contains(l.site.0)));
            loads.sort_unstable_by_key(|l| (l.site, l.tid, l.mask, l.ls, l.vc));
            for l in loads.iter() {
                for s in stores.iter() {
                    if s.tid == l.tid || s.mask & l.mask == 0 {
                        continue;
                    }
                    if !*conc.entry((s.vc, s.vc_store, l.vc)).or_insert_with(|| self.unordered(s, l.vc)) {
                        continue;
                    }
                    // The load read (transitively) a store the writer made after the window.
                    if s.rf_end != u32::MAX
                        && rf_slots
                            .get(&s.tid)
                            .is_some_and(|&k| self.rf_clocks.get(l.rf).get(k).is_some_and(|&e| e >= s.rf_end))
                    {
                        continue;
                    }
                    let both = s.mask & l.mask;
                    let lo = u64::from(both.trailing_zeros());
                    let hi = 64 - u64::from(both.leading_zeros());
                    let lane = self.sync.lanes.is_lane_memory(line * LINE_SIZE + lo, hi - lo);
                    if *prot.entry((s.eff, l.ls, lane)).or_insert_with(|| self.protects(s.eff, l.ls, lane)) {
                        continue;
                    }
                    let store = RawLocation { role: "store", pc: s.site.0, stack: s.site.1, tid: s.tid };
                    let load = RawLocation { role: "load", pc: l.site.0, stack: l.site.1, tid: l.tid };
                    let (tag, end) = match s.end {
                        End::Fence(f) => (0, Some(RawLocation { role: "fence", pc: f.0, stack: f.1, tid: s.tid })),
                        End::Overwrite(o) => {
                            (1, Some(RawLocation { role: "overwrite", pc: o.0, stack: o.1, tid: s.tid }))
                        }
                        End::Exit => (2, None),
                        End::Durable => (3, None),
                        End::Freed(f, t) => (4, Some(RawLocation { role: "free", pc: f.0, stack: f.1, tid: t })),
                    };
                    let e = ends.entry(s.site.0).or_insert((0, false));
                    e.0 |= 1 << tag;
                    e.1 |= s.flushed && matches!(tag, 1 | 2 | 4);
                    match end {
                        Some(e) => groups.add(s.site.0, &[store, e, load], 1, 1),
                        None => groups.add(s.site.0, &[store, load], 1, 1),
                    }
                }
            }
        };
        for line in self.loads.lines() {
            stores.clear();
            stores.extend(self.stores.at_line(line));
            if stores.is_empty() {
                continue;
            }
            loads.clear();
            loads.extend(self.loads.at_line(line));
            check(line, &mut stores, &mut loads);
        }
        // Both lists are in (life, line) order, as the frees made them.
        let (rs, rl) = (&self.retired_stores, &self.retired_loads);
        let mut j = 0;
        let mut i = 0;
        while i < rs.len() {
            let key = (rs[i].0, rs[i].1);
            stores.clear();
            while i < rs.len() && (rs[i].0, rs[i].1) == key {
                stores.push(self.stores.record(rs[i].3, key.1, rs[i].2));
                i += 1;
            }
            while j < rl.len() && (rl[j].0, rl[j].1) < key {
                j += 1;
            }
            loads.clear();
            while j < rl.len() && (rl[j].0, rl[j].1) == key {
                loads.push(self.loads.record(rl[j].3, key.1, rl[j].2));
                j += 1;
            }
            if !loads.is_empty() {
                check(key.1, &mut stores, &mut loads);
            }
        }
        let stored = &self.stored;
        let self_loads = &self.loads;
        groups.finish(|&store_pc, _, _| {
            let (tags, unfenced) = ends.get(&store_pc).copied().unwrap_or((1, false));
            let hows: Vec<&str> = [
                "persisted by a fence outside the locks its readers hold",
                "overwritten by its own thread before it was persisted",
                if self.stopped {
                    "never persisted by its thread, or not before the run stopped"
                } else {
                    "never persisted by its thread"
                },
                "made durable only later, by another thread's persist of the same bytes or by msync/fsync, after \
                 the locks were released",
                "never persisted before its memory was freed",
            ]
            .into_iter()
            .enumerate()
            .filter(|(i, _)| tags & (1 << i) != 0)
            .map(|(_, h)| h)
            .collect();
            let how = format!("{}{}", hows.join(", or "), if unfenced { " (some flushed, never fenced)" } else { "" });
            Described {
                analysis: "hawkset",
                kind: "persistence-induced-race",
                message: format!(
                    "persistence-induced race: a PM store {how}; loads in other threads, holding no common lock and not \
                     ordered by create/join, can read it before it is durable"
                ),
                // No class: one finding per store site, whatever its windows were (a class that
                // varied between runs would split a site when runs are merged).
                class: "",
                // An offset candidate counts if some thread loaded the line it leads to.
                stored: stored.shape(store_pc, |dev| self_loads.at_line(dev / LINE_SIZE).next().is_some()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testkit::store_loads as pairs;

    type Sim<'a> = crate::testkit::Sim<&'a mut dyn Analysis>;
    use emu::decode::FenceOp;
    use emu::pm::FenceKind;
    use emu::sync::{CustomLockKind, SyncKind};

    const L: u64 = 0x100;
    const M: u64 = 0x200;

    /// Main (1) initialises and persists bytes 0..32 (publishing them for the IRH once a second
    /// thread touches them) and creates threads 2 and 3. A helper thread (9) was created and
    /// joined first: accesses of the only thread there has been publish nothing (the causal
    /// rule's solo phase), and these tests are about the race check on published bytes.
    fn start(sim: &mut Sim) {
        sim.create(1, 9);
        sim.exit(9);
        sim.join(1, 9);
        for off in (0..32).step_by(8) {
            sim.store(1, 0x10, off, 8);
        }
        sim.persist(1, 0x11, 0);
        sim.create(1, 2);
        sim.create(1, 3);
    }

    fn run(opts: &str, body: impl FnOnce(&mut Sim)) -> Vec<(u64, Vec<u64>)> {
        let mut h = Hawkset::from_spec(opts).unwrap();
        let mut sim = Sim::new(&mut h);
        start(&mut sim);
        body(&mut sim);
        pairs(&sim.finish())
    }

    /// Fig. 1c: stored under L, persisted after unlocking, loaded under L.
    fn fig1c(s: &mut Sim) {
        fig1c_at(s, 0);
    }

    /// Fig. 1c at offset `off` of the pool (64 and beyond: bytes main never touched).
    fn fig1c_at(s: &mut Sim, off: u64) {
        s.lock(2, L);
        s.store(2, 0xa, off, 8);
        s.unlock(2, L);
        s.persist(2, 0xf, off);
        s.lock(3, L);
        s.load(3, 0xb, off, 8);
        s.unlock(3, L);
    }

    /// Thread `tid` frees the PM object `[off, off + len)`.
    fn free(s: &mut Sim, tid: u32, off: u64, len: u64) {
        s.send(crate::testkit::ev(EventKind::Free, tid, 0xfe, 0x7000_0000 + off, crate::testkit::pm(off), 0, 0, len));
    }

    /// A store of one life of the bytes (never persisted) and a load of the next life (after
    /// the free and the new object's initialisation) are no race; a load of the same life is.
    #[test]
    fn a_free_ends_the_bytes_history() {
        let lives = |s: &mut Sim, load_before_free: bool| {
            s.store(2, 0xa, 64, 8);
            if load_before_free {
                s.load(3, 0xc, 64, 8);
            }
            free(s, 2, 64, 64);
            s.store(3, 0xd, 64, 8);
            s.persist(3, 0xf, 64);
            s.load(3, 0xb, 64, 8);
            s.load(4, 0xb, 64, 8);
        };
        let r = run("irh=0", |s| lives(s, false));
        assert!(r.iter().all(|(st, _)| *st != 0xa), "{r:x?}");
        let r = run("irh=0:frees=off", |s| lives(s, false));
        assert!(r.iter().any(|(st, l)| *st == 0xa && l.contains(&0xb)), "{r:x?}");
        let r = run("irh=0", |s| lives(s, true));
        assert_eq!(r.iter().find(|(st, _)| *st == 0xa).map(|(_, l)| l.clone()), Some(vec![0xc]), "{r:x?}");
    }

    /// A node's field persisted before the pointer to it is stored: a reader that reached the
    /// field through the pointer is ordered after the persist with `reads_from=on`; one that
    /// read the field itself (inside its window) or without the pointer is not.
    #[test]
    fn reads_from_edges_order_a_load_after_the_persist_it_follows() {
        let publish = |s: &mut Sim, through_pointer: bool| {
            s.store(2, 0xa, 64, 8);
            s.persist(2, 0xf, 64);
            s.store(2, 0xc, 128, 8);
            if through_pointer {
                s.load(3, 0xd, 128, 8);
            }
            s.load(3, 0xb, 64, 8);
        };
        let field = |r: &Vec<(u64, Vec<u64>)>| r.iter().any(|(st, l)| *st == 0xa && l.contains(&0xb));
        assert!(field(&run("irh=0", |s| publish(s, true))));
        assert!(!field(&run("irh=0:reads_from=on", |s| publish(s, true))));
        assert!(field(&run("irh=0:reads_from=on", |s| publish(s, false))));
        // The pointer itself, never persisted, still races with its reader.
        let r = run("irh=0:reads_from=on", |s| publish(s, true));
        assert!(r.iter().any(|(st, l)| *st == 0xc && l.contains(&0xd)), "{r:x?}");
        // Reading the field's own store inside its window orders nothing.
        let r = run("irh=0:reads_from=on", |s| {
            s.store(2, 0xa, 64, 8);
            s.load(3, 0xb, 64, 8);
            s.persist(2, 0xf, 64);
            s.store(2, 0xc, 128, 8);
        });
        assert!(field(&r), "{r:x?}");
    }

    #[test]
    fn persist_after_unlock_is_reported_and_inside_is_not() {
        assert_eq!(run("", fig1c), vec![(0xa, vec![0xb])]);
        // The load may come first: the analysis is predictive.
        let r = run("", |s| {
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.unlock(2, L);
            s.persist(2, 0xf, 0);
        });
        assert_eq!(r, vec![(0xa, vec![0xb])]);
        let r = run("", |s| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.persist(2, 0xf, 0);
            s.unlock(2, L);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
        });
        assert!(r.is_empty(), "{r:x?}");
    }

    #[test]
    fn unlock_relock_gets_a_new_timestamp() {
        let r = run("", |s| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.unlock(2, L);
            s.lock(2, L);
            s.persist(2, 0xf, 0);
            s.unlock(2, L);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
        });
        assert_eq!(r, vec![(0xa, vec![0xb])]);
        // A recursive acquisition inside keeps the outer one.
        let r = run("", |s| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.lock(2, L);
            s.unlock(2, L);
            s.persist(2, 0xf, 0);
            s.unlock(2, L);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
        });
        assert!(r.is_empty(), "{r:x?}");
    }

    /// libpmemobj's lanes: bytes 32..64 are lane memory (excluded from transactions). Thread 2
    /// writes and persists them in a transaction, thread 3 reads them in one: the lane orders
    /// them. Outside lane sections, or on other bytes, the lane protects nothing.
    #[test]
    fn a_lane_protects_only_the_lanes_memory_inside_lane_sections() {
        let lanes = |s: &mut Sim, reader_in_tx: bool, off: u64| {
            s.tx_ignore(1, 32, 32);
            s.tx_begin(2);
            s.store(2, 0xa, off, 8);
            s.persist(2, 0xf, off);
            s.tx_end(2);
            if reader_in_tx {
                s.tx_begin(3);
            }
            s.load(3, 0xb, off, 8);
            if reader_in_tx {
                s.tx_end(3);
            }
        };
        let r = run("irh=0", |s| lanes(s, true, 32));
        assert!(r.is_empty(), "{r:x?}");
        let r = run("irh=0", |s| lanes(s, false, 32));
        assert_eq!(r, vec![(0xa, vec![0xb])]);
        let r = run("irh=0:lanes=off", |s| lanes(s, true, 32));
        assert_eq!(r, vec![(0xa, vec![0xb])]);
        // The program's data in a transaction is not lane memory.
        assert_eq!(run("", |s| lanes(s, true, 0)), vec![(0xa, vec![0xb])]);
        // An atomic allocation holds a lane for the duration of its call.
        let r = run("irh=0", |s| {
            s.tx_ignore(1, 32, 32);
            s.enter(2, SyncKind::PmemobjLane, 0, 0);
            s.store(2, 0xa, 32, 8);
            s.persist(2, 0xf, 32);
            s.ret(2, SyncKind::PmemobjLane, 0, 0);
            s.tx_begin(3);
            s.load(3, 0xb, 32, 8);
            s.tx_end(3);
        });
        assert!(r.is_empty(), "{r:x?}");
    }

    /// `pmemobj_cond_wait(pop, cond, mutex)` releases the PMEMmutex (its third argument, the
    /// event's `old`) and reacquires it: a store before the wait and persisted after it is not
    /// protected by the mutex.
    #[test]
    fn a_pmemobj_condition_wait_releases_the_mutex() {
        let body = |wait: bool| {
            move |s: &mut Sim| {
                s.call(2, SyncKind::PmemobjLock, L, 0);
                s.store(2, 0xa, 0, 8);
                if wait {
                    s.enter(2, SyncKind::PmemobjCondWait, 0x300, L);
                    s.call(3, SyncKind::PmemobjLock, L, 0);
                    s.load(3, 0xb, 0, 8);
                    s.call(3, SyncKind::PmemobjCondSignal, 0x300, 0);
                    s.call(3, SyncKind::PmemobjUnlock, L, 0);
                    s.ret(2, SyncKind::PmemobjCondWait, 0x300, 0);
                }
                s.persist(2, 0xf, 0);
                s.call(2, SyncKind::PmemobjUnlock, L, 0);
                if !wait {
                    s.call(3, SyncKind::PmemobjLock, L, 0);
                    s.load(3, 0xb, 0, 8);
                    s.call(3, SyncKind::PmemobjUnlock, L, 0);
                }
            }
        };
        assert_eq!(run("", body(true)), vec![(0xa, vec![0xb])]);
        assert!(run("", body(false)).is_empty());
    }

    #[test]
    fn different_locks_race() {
        let r = run("", |s| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.persist(2, 0xf, 0);
            s.unlock(2, L);
            s.lock(3, M);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, M);
        });
        assert_eq!(r, vec![(0xa, vec![0xb])]);
    }

    #[test]
    fn try_locks_count_only_when_they_succeed() {
        let body = |ok: bool| {
            move |s: &mut Sim| {
                s.call(2, SyncKind::MutexTrylock, L, if ok { 0 } else { 16 });
                s.store(2, 0xa, 0, 8);
                s.persist(2, 0xf, 0);
                if ok {
                    s.unlock(2, L);
                }
                s.lock(3, L);
                s.load(3, 0xb, 0, 8);
                s.unlock(3, L);
            }
        };
        assert!(run("", body(true)).is_empty());
        assert_eq!(run("", body(false)), vec![(0xa, vec![0xb])]);
    }

    fn custom(kind: CustomLockKind) -> SyncKind {
        emu::sync::CustomLock::new("lock", kind).sync_kind()
    }

    #[test]
    fn spinlocks_and_custom_locks_protect() {
        for (acq, rel) in [
            (SyncKind::SpinLock, SyncKind::SpinUnlock),
            (custom(CustomLockKind::Acquire), custom(CustomLockKind::Release)),
            (custom(CustomLockKind::TryAcquire { success: Some(1), failure: None }), custom(CustomLockKind::Release)),
        ] {
            let rv = if matches!(acq, SyncKind::Custom(c) if c.op == emu::sync::CustomOp::TryAcquire) { 1 } else { 0 };
            let r = run("", |s| {
                s.call(2, acq, L, rv);
                s.store(2, 0xa, 0, 8);
                s.persist(2, 0xf, 0);
                s.call(2, rel, L, 0);
                s.call(3, acq, L, rv);
                s.load(3, 0xb, 0, 8);
                s.call(3, rel, L, 0);
            });
            assert!(r.is_empty(), "{acq:?}: {r:x?}");
        }
    }

    #[test]
    fn rwlocks_protect_unless_both_sides_are_shared() {
        let body = |writer: SyncKind| {
            move |s: &mut Sim| {
                s.call(2, writer, L, 0);
                s.store(2, 0xa, 0, 8);
                s.persist(2, 0xf, 0);
                s.call(2, SyncKind::RwUnlock, L, 0);
                s.call(3, SyncKind::RwRdlock, L, 0);
                s.load(3, 0xb, 0, 8);
                s.call(3, SyncKind::RwUnlock, L, 0);
            }
        };
        assert!(run("", body(SyncKind::RwWrlock)).is_empty());
        assert_eq!(run("", body(SyncKind::RwRdlock)), vec![(0xa, vec![0xb])]);
    }

    #[test]
    fn clocks_are_taken_at_the_end_of_the_window() {
        // Stored and persisted before creating the reader: ordered.
        let mut h = Hawkset::default();
        let mut s = Sim::new(&mut h);
        s.create(1, 2);
        s.join(1, 2); // thread 2 never touches byte 0: publish it with thread 2 below
        s.store(1, 0x10, 0, 8);
        s.persist(1, 0x11, 0);
        s.create(1, 3);
        s.load(3, 0xb, 0, 8);
        assert!(pairs(&s.finish()).is_empty());
        // Stored before, persisted after creating the reader: Fig. 3's Store3.
        let mut h = Hawkset::default();
        let mut s = Sim::new(&mut h);
        s.create(1, 2);
        s.store(2, 0x12, 0, 8);
        s.persist(2, 0x13, 0);
        s.exit(2);
        s.join(1, 2);
        s.store(1, 0xa, 0, 8);
        s.create(1, 3);
        s.persist(1, 0xf, 0);
        s.load(3, 0xb, 0, 8);
        assert_eq!(pairs(&s.finish()), vec![(0xa, vec![0xb])]);
    }

    #[test]
    fn a_load_inside_the_window_needs_both_ends() {
        // Main stores, creates a reader that loads, joins it, and only then persists: the load
        // happens before the end of the window, so the paper's check (its edges, its `hb=end`)
        // prunes it; `hb=window`, and the default that also honours post/wait edges, see that
        // it does not happen before the store.
        let body = |s: &mut Sim| {
            s.store(1, 0xa, 0, 8);
            s.create(1, 4);
            s.load(4, 0xb, 0, 8);
            s.exit(4);
            s.join(1, 4);
            s.persist(1, 0xf, 0);
        };
        assert!(run("edges=paper", body).is_empty());
        assert_eq!(run("edges=paper:hb=window", body), vec![(0xa, vec![0xb])]);
        assert_eq!(run("", body), vec![(0xa, vec![0xb])]);
        // A load before the store stays ordered in both.
        let before = |s: &mut Sim| {
            s.create(1, 4);
            s.load(4, 0xb, 0, 8);
            s.exit(4);
            s.join(1, 4);
            s.store(1, 0xa, 0, 8);
        };
        assert!(run("hb=window", before).is_empty());
    }

    #[test]
    fn join_orders_the_joined_thread_before_the_joiner() {
        let r = run("", |s| {
            s.store(2, 0xa, 0, 8); // never persisted: a record at thread 2's exit
            s.exit(2);
            s.join(1, 2);
            s.load(1, 0xb, 0, 8);
        });
        assert!(r.is_empty(), "{r:x?}");
        // ... but not a thread that is still running.
        let r = run("", |s| {
            s.store(2, 0xa, 0, 8);
            s.exit(2);
            s.load(3, 0xb, 0, 8);
        });
        assert_eq!(r, vec![(0xa, vec![0xb])]);
    }

    #[test]
    fn initialization_removal_heuristic() {
        // Bytes 64.. were never touched by main: thread 2 initialises and persists them before
        // thread 3 reads them, with nothing ordering the two: HawkSet's rule drops the store
        // for the order this run happened to pick; the causal rule keeps it.
        let body = |s: &mut Sim| {
            s.store(2, 0xa, 64, 8);
            s.persist(2, 0xf, 64);
            s.lock(3, L);
            s.load(3, 0xb, 64, 8);
            s.unlock(3, L);
        };
        assert!(run("irh_order=observed", body).is_empty());
        assert_eq!(run("", body), vec![(0xa, vec![0xb])]);
        assert_eq!(run("irh=0", body), vec![(0xa, vec![0xb])]);
        // Still pending when the second thread touches the bytes: kept.
        let r = run("", |s| {
            s.store(2, 0xa, 64, 8);
            s.load(3, 0xb, 64, 8);
            s.persist(2, 0xf, 64);
        });
        assert_eq!(r, vec![(0xa, vec![0xb])]);
        // irh=2: a third thread is needed to publish.
        let body = |s: &mut Sim| {
            s.store(1, 0x10, 128, 8);
            s.persist(1, 0x11, 128);
            s.store(2, 0xa, 128, 8);
            s.persist(2, 0xf, 128);
            s.load(3, 0xb, 128, 8);
        };
        assert!(run("irh=2:irh_order=observed", body).is_empty());
        assert_eq!(run("irh=2", body), vec![(0xa, vec![0xb]), (0x10, vec![0xb])]);
    }

    #[test]
    fn initialisation_published_after_its_persist_is_removed() {
        // Published under a lock released after the persist: the reader's lock acquisition
        // orders its load after the persist.
        let r = run("", |s| {
            s.store(2, 0xa, 64, 8);
            s.persist(2, 0xf, 64);
            s.lock(2, L);
            s.unlock(2, L);
            s.lock(3, L);
            s.load(3, 0xb, 64, 8);
            s.unlock(3, L);
        });
        assert!(r.is_empty(), "{r:x?}");
        // Published by a plain PM store of a pointer after the persist, which the reader loads
        // first (reads-from).
        let r = run("", |s| {
            s.store(2, 0xa, 64, 8);
            s.persist(2, 0xf, 64);
            s.store(2, 0x20, 128, 8);
            s.persist(2, 0x21, 128);
            s.load(3, 0x30, 128, 8);
            s.load(3, 0xb, 64, 8);
        });
        assert!(r.iter().all(|(store, _)| *store != 0xa), "{r:x?}");
        // The lock released before the persist orders nothing after it (HawkSet's Fig. 1c in
        // the order where the writer finishes first).
        assert_eq!(run("", |s| fig1c_at(s, 64)), vec![(0xa, vec![0xb])]);
        // A value loaded from the very store the reader races with is no publication of it.
        let r = run("", |s| {
            s.store(2, 0xa, 64, 8);
            s.persist(2, 0xf, 64);
            s.load(3, 0xb, 64, 8);
        });
        assert_eq!(r, vec![(0xa, vec![0xb])]);
    }

    #[test]
    fn bytes_match_by_range() {
        let body = |load_off: u64, size: u32| {
            move |s: &mut Sim| {
                s.store(2, 0xa, 0, 8);
                s.persist(2, 0xf, 0);
                s.load(3, 0xb, load_off, size);
            }
        };
        assert_eq!(run("", body(4, 4)), vec![(0xa, vec![0xb])]);
        assert_eq!(run("", body(6, 4)), vec![(0xa, vec![0xb])]);
        assert!(run("", body(8, 4)).is_empty());
        assert!(run("", body(16, 8)).is_empty());
    }

    #[test]
    fn locked_instructions_are_fences() {
        let r = run("", |s| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.clwb(2, 0);
            s.fence_kind(2, 0xf, FenceKind::Locked, FenceOp::Locked);
            s.unlock(2, L);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
        });
        assert!(r.is_empty(), "{r:x?}");
    }

    /// A `clwb` before a barrier, persisted by the thread's arrival (a locked instruction inside
    /// the wait): the store is durable before any thread leaves the barrier (`#pragma omp for`'s
    /// implicit barrier, guest `ext_omp_fill_fixed`). Before, the fence's clock was the one after
    /// the arrival's post, concurrent with the reader's.
    #[test]
    fn a_fence_inside_a_barrier_wait_persists_before_its_release() {
        let body = |s: &mut Sim| {
            s.store(2, 0xa, 0, 8);
            s.clwb(2, 0);
            s.barrier_fencing(&[2, 3]);
            s.load(3, 0xb, 0, 8);
        };
        assert!(run("", body).is_empty());
        assert_eq!(run("unlock_fence=off", body), vec![(0xa, vec![0xb])]);
        // Without the fence inside the wait the store stays pending past the barrier.
        let unfenced = |s: &mut Sim| {
            s.store(2, 0xa, 0, 8);
            s.clwb(2, 0);
            s.barrier(&[2, 3]);
            s.load(3, 0xb, 0, 8);
            s.sfence(2, 0xf);
        };
        assert_eq!(run("", unfenced), vec![(0xa, vec![0xb])]);
    }

    #[test]
    fn a_fence_inside_the_unlock_persists_under_the_lock() {
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
        assert_eq!(run("unlock_fence=off", body), vec![(0xa, vec![0xb])]);
    }

    #[test]
    fn overwrites_and_exits_end_windows() {
        // Overwritten outside the lock before any persist.
        let body = |s: &mut Sim| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.unlock(2, L);
            s.store(2, 0xc, 0, 8);
            s.lock(2, L);
            s.persist(2, 0xf, 0);
            s.unlock(2, L);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
        };
        let r = run("", body);
        assert!(r.contains(&(0xa, vec![0xb])) && r.contains(&(0xc, vec![0xb])), "{r:x?}");
        assert_eq!(run("unpersisted=off", body), vec![(0xc, vec![0xb])]);
        // Never persisted: a record at exit.
        let body = |s: &mut Sim| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.unlock(2, L);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
            s.exit(2);
        };
        assert_eq!(run("", body), vec![(0xa, vec![0xb])]);
        assert!(run("unpersisted=off", body).is_empty());
    }

    /// Main formats the pool before it creates any thread (a `memset` of the mapping); a worker
    /// then fills a node, persists it and hands it over by a lock (or by a PM pointer the reader
    /// loads): the worker's store is the first of the bytes' concurrent life, initialisation
    /// (it was reported while main's formatting counted as a thread's touch). A store main
    /// leaves pending across the creation still counts (Fig. 3), and HawkSet's rule
    /// (`irh_order=observed`) counts main's formatting as before.
    #[test]
    fn formatting_before_the_first_thread_publishes_nothing() {
        let body = |s: &mut Sim| {
            for off in (0..64).step_by(8) {
                s.store(1, 0x10, off, 8);
            }
            s.persist(1, 0x11, 0);
            s.create(1, 2);
            s.create(1, 3);
            s.store(2, 0xa, 0, 8);
            s.persist(2, 0xf, 0);
            s.lock(2, L);
            s.store(2, 0xc, 8, 8); // the commit, in the lock
            s.persist(2, 0xf, 8);
            s.unlock(2, L);
            s.lock(3, L);
            s.load(3, 0xd, 8, 8);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
        };
        let fresh = |opts: &str| {
            let mut h = Hawkset::from_spec(opts).unwrap();
            let mut s = Sim::new(&mut h);
            body(&mut s);
            pairs(&s.finish())
        };
        assert!(fresh("").is_empty(), "{:x?}", fresh(""));
        assert_eq!(fresh("irh_order=observed"), vec![(0xa, vec![0xb])]);
        // Fig. 3: main's store pending across the creation is seen by the new thread.
        let mut h = Hawkset::default();
        let mut s = Sim::new(&mut h);
        s.store(1, 0xa, 0, 8);
        s.create(1, 2);
        s.persist(1, 0xf, 0);
        s.load(2, 0xb, 0, 8);
        assert_eq!(pairs(&s.finish()), vec![(0xa, vec![0xb])]);
    }

    #[test]
    fn nt_stores_need_the_writers_fence() {
        let body = |s: &mut Sim| {
            s.lock(2, L);
            s.nt_store(2, 0xa, 0);
            s.unlock(2, L);
            s.sfence(2, 0xf);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
        };
        assert_eq!(run("", body), vec![(0xa, vec![0xb])]);
        assert!(run("nt=source", body).is_empty());
    }

    #[test]
    fn whose_flush_counts() {
        // Thread 2 stores under L; thread 3 flushes and fences it under L; thread 3 loads under L.
        let body = |s: &mut Sim| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.unlock(2, L);
            s.lock(3, L);
            s.persist(3, 0xf, 0);
            s.unlock(3, L);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
            s.exit(2);
        };
        // Own rule: thread 2 never persisted it.
        assert_eq!(run("", body), vec![(0xa, vec![0xb])]);
        // Hardware rule: durable at thread 3's fence, but thread 2 no longer held L then.
        assert_eq!(run("persist_owner=any", body), vec![(0xa, vec![0xb])]);
        let held = |s: &mut Sim| {
            s.lock(2, L);
            s.store(2, 0xa, 0, 8);
            s.persist(3, 0xf, 0);
            s.unlock(2, L);
            s.lock(3, L);
            s.load(3, 0xb, 0, 8);
            s.unlock(3, L);
        };
        assert!(run("persist_owner=any", held).is_empty());
        assert_eq!(run("", held), vec![(0xa, vec![0xb])]);
    }

    #[test]
    fn options_parse() {
        let o = HawksetOptions::parse("irh=0:unpersisted=off:persist_owner=any:nt=source").unwrap();
        assert_eq!(o.irh, 0);
        assert!(!o.unpersisted);
        assert_eq!(o.persist_owner, DurabilityRule::Hw);
        assert_eq!(o.nt, NtSemantics::Source);
        assert!(HawksetOptions::parse("bogus=1").is_err());
        assert!(HawksetOptions::parse("irh").is_err());
        assert_eq!(HawksetOptions::parse("").unwrap(), HawksetOptions::default());
    }
}
