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
//! - `pthread_once` (C11 `call_once` jumps to it): every return waits on the once control, and
//!   the returns of the calls entered before any call on that control returned post to it
//!   first ([`SyncAdapter::once_early`]);
//! - libpmemobj's locks (`pmemobj_mutex_*`, `pmemobj_rwlock_*`) are locks on the `PMEMmutex`
//!   (`PMEMrwlock`) object (the second argument: the machine reports it as the event's address),
//!   and its condition variables (`pmemobj_cond_wait(pop, cond, mutex)`, `_timedwait`,
//!   `_signal`, `_broadcast`) are treated as pthread's, on the `PMEMcondvar` and its
//!   `PMEMmutex`; every call to one of them holds HawkSet's pseudo-lock ([`PMDK_PSEUDO_LOCK`])
//!   from entry to return;
//! - libpmemobj's lanes ([`Lanes`]): a thread holds a lane from the start of its outermost
//!   transaction (pmemcheck's `START_TX`, a [`EventKind::TxBegin`] of its own transaction) to
//!   its end (`END_TX`), and for the duration of every call that holds one on its own
//!   ([`SyncKind::PmemobjLane`]: atomic allocations, frees, list operations); the outermost
//!   hold and release are [`SyncOp::LaneHold`] and [`SyncOp::LaneRelease`].
//!
//! [`HappensBefore`] keeps vector clocks for the ordering operations a detector chooses to
//! honour (HawkSet honours only create and join; HMTRace and OSCS honour all of them).

use emu::events::{Event, EventKind};
use emu::sync::{CustomOp, CustomSpec, LockMode, SyncKind};
use rustc_hash::FxHashMap;

/// How a lock is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Held alone (a mutex, a write lock).
    Exclusive,
    /// Held with other readers (a read lock).
    Shared,
}

/// A synchronisation operation by the thread of the event it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncOp {
    /// A lock acquired.
    Acquire {
        /// The lock's address.
        lock: u64,
        /// How it is held.
        mode: Mode,
    },
    /// A lock released.
    Release {
        /// The lock's address.
        lock: u64,
    },
    /// An ordering release on an object (condition variable signal, barrier arrival, sem_post).
    Post {
        /// The object's address.
        obj: u64,
    },
    /// An ordering acquire from an object (condition wait return, barrier departure, sem_wait).
    Wait {
        /// The object's address.
        obj: u64,
    },
    /// The thread created another.
    Create {
        /// The new thread.
        child: u32,
    },
    /// The thread joined another.
    Join {
        /// The joined thread.
        child: u32,
    },
    /// The thread exits.
    Exit,
    /// The thread takes one of libpmemobj's lanes (its outermost lane section begins): an
    /// acquire of a lock whose identity the run does not show, which protects only the lanes'
    /// memory ([`Lanes::protects`]). No happens-before edge: it orders nothing else.
    LaneHold,
    /// The thread gives its lane back (its outermost lane section ends): a release.
    LaneRelease,
}

/// Turns the machine's sync events into [`SyncOp`]s.
#[derive(Clone, Default, Debug)]
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
    /// libpmemobj's lanes: who holds one, and which PM bytes they protect.
    pub lanes: Lanes,
    /// Per thread: how deeply it is inside lock releases (an unlock's futex wake is the lock's
    /// business, not an ordering of its own).
    releasing: FxHashMap<u32, u32>,
    /// OpenMP's synchronisation, from libgomp's entry points ([`Omp`]).
    pub omp: Omp,
    /// `pthread_once` controls some call on which has returned: the init routine has completed
    /// (POSIX: "on return from pthread_once(), init_routine shall have completed").
    once_done: rustc_hash::FxHashSet<u64>,
    /// Per thread, its `pthread_once` calls under way (innermost last; an init routine may call
    /// pthread_once on another control): the control, and whether the call was entered before
    /// any call on it returned. Such a call may be the one that runs the init routine, so its
    /// return posts to the control before it waits on it: every later return then happens
    /// after the routine's completion (a fast-path call, which only reads the control's done
    /// state with an acquire load, posts nothing). The calls that arrived while the routine ran
    /// post their history before the call too, which orders a little more than the routine; the
    /// machine does not tell which of them ran it.
    once_early: FxHashMap<u32, Vec<(u64, bool)>>,
}

/// The sync object of a futex word's hand-offs: its address with the top bit set (guest
/// addresses stay below 2^48, barrier generations use bits 48–62).
fn futex_object(addr: u64) -> u64 {
    addr | 1 << 63
}

/// The sync object of a `pthread_once` control: its address with bits 61 and 63 set (apart from
/// futex words' objects, atomic objects' and OpenMP's).
fn once_object(addr: u64) -> u64 {
    addr | 5 << 61
}

/// The sync object of a C++ atomic object's word ([`EventKind::AtomicAccess`]): its 8-byte word
/// with the top two bits set (apart from futex words' objects, which set only the top bit).
fn atomic_object(addr: u64) -> u64 {
    (addr & !7) | 3 << 62
}

/// HawkSet's acquire-release pseudo-lock: held for the duration of every libpmemobj lock call,
/// so that the PM accesses inside PMDK's lock implementation (its locks live in PM, with their
/// lazy reinitialisation) are mutually protected rather than races among themselves.
pub const PMDK_PSEUDO_LOCK: u64 = u64::MAX - 1;

/// The lock of libpmemobj's lanes ([`Lanes`]) where a detector keeps locksets: held from
/// [`SyncOp::LaneHold`] to [`SyncOp::LaneRelease`], protecting only the lanes' memory.
pub const PMDK_LANE_LOCK: u64 = u64::MAX - 2;

/// The object of a barrier's generation (`round` in the top bits; guest addresses stay below
/// 2^48).
fn barrier_round(addr: u64, round: u64) -> u64 {
    addr ^ ((round & 0x7fff) << 48)
}

impl SyncAdapter {
    /// Calls `out` with each operation `ev` stands for (none for non-sync events). Passes that
    /// use [`SyncAdapter::lanes`] also pass the transaction events (`TxBegin`, `TxEnd`,
    /// `TxIgnore`).
    pub fn translate(&mut self, ev: &Event, mut out: impl FnMut(SyncOp)) {
        self.translate_actors(ev, |_, op| out(op));
    }

    /// [`SyncAdapter::translate`], naming with each operation the thread of happens-before time
    /// it is by: the event's thread, or the OpenMP task it is running ([`Omp::actor`]; a task's
    /// start is by the task, its end too). Passes that do not keep task clocks use
    /// [`SyncAdapter::translate`] and see a task's operations as its thread's.
    pub fn translate_actors(&mut self, ev: &Event, mut out: impl FnMut(u32, SyncOp)) {
        if let EventKind::SyncEnter(k) | EventKind::SyncReturn(k) = ev.kind {
            if k.is_omp_runtime() || k == SyncKind::OmpBody {
                self.omp.event(ev, k, &mut out);
                return;
            }
        }
        let actor = self.omp.actor(ev.tid);
        let mut out = |op| out(actor, op);
        match self.lanes.observe(ev) {
            Some(true) => out(SyncOp::LaneHold),
            Some(false) => out(SyncOp::LaneRelease),
            None => {}
        }
        match ev.kind {
            EventKind::ThreadCreate => {
                let child = ev.new as u32;
                if ev.addr != 0 {
                    self.handles.insert(ev.addr, child);
                }
                self.omp.created(ev.tid, child);
                out(SyncOp::Create { child });
            }
            EventKind::ThreadExit => {
                self.omp.threads.remove(&ev.tid);
                out(SyncOp::Exit)
            }
            // libgomp's own futex hand-offs (its barriers, locks, task queue) are not edges: the
            // entry points give the ones OpenMP guarantees, and the rest is the order the
            // runtime happened to pick.
            EventKind::FutexWake | EventKind::FutexWoken
                if self.omp.in_runtime(if ev.kind == EventKind::FutexWake { ev.tid } else { ev.new as u32 }) => {}
            // A futex hand-off (a barrier's release by a runtime the pass does not know, a
            // custom event, an unrecognised lock's contended path): what the waker did before
            // the wake happens before what the woken thread does after its wait returns.
            EventKind::FutexWake if !self.releasing.contains_key(&ev.tid) => {
                out(SyncOp::Post { obj: futex_object(ev.addr) })
            }
            EventKind::FutexWoken if !self.releasing.contains_key(&(ev.new as u32)) => {
                out(SyncOp::Wait { obj: futex_object(ev.addr) })
            }
            // A reaped child process: its last thread joined, as a thread's by pthread_join.
            EventKind::ProcessReaped => out(SyncOp::Join { child: ev.new as u32 }),
            // An atomic object of C++ in DRAM: a store releases it, a load acquires it (what the
            // store before it released), a read-modify-write does both. Keyed by its 8-byte word.
            EventKind::AtomicAccess => {
                let obj = atomic_object(ev.addr);
                if ev.new & 1 != 0 {
                    out(SyncOp::Wait { obj });
                }
                if ev.new & 2 != 0 {
                    out(SyncOp::Post { obj });
                }
            }
            EventKind::SyncEnter(kind) if kind.is_release() => {
                *self.releasing.entry(ev.tid).or_default() += 1;
                self.enter(ev, kind, &mut out);
            }
            EventKind::SyncReturn(kind) if kind.is_release() => {
                if let Some(d) = self.releasing.get_mut(&ev.tid) {
                    *d -= 1;
                    if *d == 0 {
                        self.releasing.remove(&ev.tid);
                    }
                }
                self.leave(ev, kind, &mut out);
            }
            EventKind::SyncEnter(kind) => self.enter(ev, kind, &mut out),
            EventKind::SyncReturn(kind) => self.leave(ev, kind, &mut out),
            _ => {}
        }
    }

    /// The operations of entering the recognised function `kind`.
    fn enter(&mut self, ev: &Event, kind: SyncKind, mut out: impl FnMut(SyncOp)) {
        match kind {
            SyncKind::MutexUnlock | SyncKind::RwUnlock | SyncKind::SpinUnlock => out(SyncOp::Release { lock: ev.addr }),
            SyncKind::Custom(c) if c.op == CustomOp::Release => out(SyncOp::Release { lock: ev.addr }),
            SyncKind::PmemobjUnlock => {
                out(SyncOp::Release { lock: ev.addr });
                out(SyncOp::Acquire { lock: PMDK_PSEUDO_LOCK, mode: Mode::Exclusive });
            }
            SyncKind::PmemobjLock | SyncKind::PmemobjRdlock => {
                out(SyncOp::Acquire { lock: PMDK_PSEUDO_LOCK, mode: Mode::Exclusive })
            }
            SyncKind::CondWait | SyncKind::PmemobjCondWait => {
                self.cond_mutex.insert(ev.tid, ev.old);
                out(SyncOp::Release { lock: ev.old });
                if kind.is_pmemobj() {
                    out(SyncOp::Acquire { lock: PMDK_PSEUDO_LOCK, mode: Mode::Exclusive });
                }
            }
            SyncKind::CondSignal
            | SyncKind::CondBroadcast
            | SyncKind::PmemobjCondSignal
            | SyncKind::PmemobjCondBroadcast
            | SyncKind::SemPost => {
                out(SyncOp::Post { obj: ev.addr });
                if kind.is_pmemobj() {
                    out(SyncOp::Acquire { lock: PMDK_PSEUDO_LOCK, mode: Mode::Exclusive });
                }
            }
            SyncKind::Once => {
                let early = !self.once_done.contains(&ev.addr);
                self.once_early.entry(ev.tid).or_default().push((ev.addr, early));
            }
            SyncKind::BarrierWait => {
                let round = self.barrier_rounds.entry((ev.addr, ev.tid)).or_insert(0);
                *round += 1;
                out(SyncOp::Post { obj: barrier_round(ev.addr, *round) })
            }
            _ => {}
        }
    }

    /// The operations of returning from the recognised function `kind`.
    fn leave(&mut self, ev: &Event, kind: SyncKind, mut out: impl FnMut(SyncOp)) {
        let ok = kind.succeeded(ev.new);
        match kind {
            SyncKind::MutexLock
            | SyncKind::MutexTrylock
            | SyncKind::SpinLock
            | SyncKind::SpinTrylock
            | SyncKind::RwWrlock
            | SyncKind::RwTryWrlock
                if ok =>
            {
                out(SyncOp::Acquire { lock: ev.addr, mode: Mode::Exclusive })
            }
            SyncKind::Custom(c) if c.op != CustomOp::Release && ok => {
                let mode = match c.mode {
                    LockMode::Exclusive => Mode::Exclusive,
                    LockMode::Shared => Mode::Shared,
                };
                out(SyncOp::Acquire { lock: ev.addr, mode })
            }
            SyncKind::RwRdlock | SyncKind::RwTryRdlock if ok => {
                out(SyncOp::Acquire { lock: ev.addr, mode: Mode::Shared })
            }
            SyncKind::CondWait | SyncKind::PmemobjCondWait => {
                if kind.is_pmemobj() {
                    out(SyncOp::Release { lock: PMDK_PSEUDO_LOCK });
                }
                // The mutex is reacquired even when the wait times out.
                out(SyncOp::Wait { obj: ev.addr });
                if let Some(m) = self.cond_mutex.remove(&ev.tid) {
                    out(SyncOp::Acquire { lock: m, mode: Mode::Exclusive });
                }
            }
            SyncKind::PmemobjCondSignal | SyncKind::PmemobjCondBroadcast => {
                out(SyncOp::Release { lock: PMDK_PSEUDO_LOCK })
            }
            SyncKind::BarrierWait if ok => {
                let round = self.barrier_rounds.get(&(ev.addr, ev.tid)).copied().unwrap_or(0);
                out(SyncOp::Wait { obj: barrier_round(ev.addr, round) })
            }
            SyncKind::SemWait | SyncKind::SemTrywait if ok => out(SyncOp::Wait { obj: ev.addr }),
            SyncKind::Once => {
                let calls = self.once_early.get_mut(&ev.tid);
                let early = calls.and_then(|c| c.pop()).is_some_and(|(_, early)| early);
                if early {
                    out(SyncOp::Post { obj: once_object(ev.addr) });
                }
                self.once_done.insert(ev.addr);
                out(SyncOp::Wait { obj: once_object(ev.addr) });
            }
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
}

/// An OpenMP happens-before object: `kind` in bits 52–55, `id` below, bits 61–62 set (no guest
/// address, futex object or sync location has them).
fn omp_object(kind: u64, id: u64) -> u64 {
    3 << 61 | kind << 52 | (id & ((1 << 52) - 1))
}
/// A parallel region's fork (its master's entry), by region.
const OMP_FORK: u64 = 1;
/// A region's join: each of its threads' body ends and each of its tasks' ends.
const OMP_JOIN: u64 = 2;
/// A barrier of a region (`region << 24 | round`).
const OMP_BARRIER: u64 = 3;
/// The tasks a barrier completes (`region << 24 | round`).
const OMP_ROUND_TASKS: u64 = 4;
/// A task's creation, by task (a taskloop's, by the taskloop's id).
const OMP_TASK_CREATE: u64 = 5;
/// A task's end, by task.
const OMP_TASK_END: u64 = 6;
/// The ends of a thread's or task's child tasks (what `taskwait` waits for), by parent.
const OMP_CHILDREN: u64 = 7;
/// The ends of a taskgroup's tasks and their descendants, by group.
const OMP_GROUP: u64 = 8;
/// Logical thread ids of tasks (happens-before "threads" of their own): above every tid.
pub const OMP_TASK_BASE: u32 = 0x4000_0000;
/// `GOMP_TASK_FLAG_NOGROUP` (libgomp.h): a taskloop without its implicit taskgroup.
const GOMP_TASK_FLAG_NOGROUP: u64 = 1 << 11;
const BLOOM: u64 = (1 << 28) - 1;

/// A body running on a thread ([`SyncKind::OmpBody`]).
#[derive(Debug, Clone, Copy)]
struct Frame {
    /// The thread's libgomp depth before the body began.
    saved: u32,
    /// Whose happens-before time the body is: the thread's, or a task's.
    actor: u32,
    /// The task it runs, if it is one.
    task: Option<u32>,
    /// The parallel region, if it is a region's body (an implicit task).
    region: Option<u64>,
    /// The region's barriers this thread has entered.
    round: u32,
    /// Inside one of them now.
    in_barrier: bool,
    /// A task's stack pointer at entry.
    sp: u64,
    /// A section of a `sections` construct (pushed by the return of `GOMP_sections_next`,
    /// popped by the thread's next call), not a body.
    section: bool,
}

/// What [`Omp`] follows of an OS thread.
#[derive(Clone, Debug, Default)]
struct OmpThread {
    /// Open libgomp calls since the innermost body began (a pool thread starts at 1: its code
    /// outside bodies is libgomp's).
    depth: u32,
    frames: Vec<Frame>,
    /// `GOMP_task` calls in progress: the task each creates, and whether its body ran inside
    /// the call (undeferred: the creator continues after it).
    creating: Vec<(u32, bool)>,
    /// `GOMP_taskloop` calls in progress: the implicit taskgroup of each, if any.
    taskloops: Vec<Option<u64>>,
    /// The stack pointer at the entry of the `GOMP_sections_next` call in progress.
    sections_sp: u64,
    /// The dependences of the `GOMP_taskwait_depend` call in progress.
    taskwait_deps: u64,
    /// The last `omp_set_num_threads` argument (0: none): the team size of its later regions
    /// without a `num_threads` clause.
    num_threads: u64,
}

/// What [`Omp`] keeps of a thread of happens-before time (a thread or a task).
#[derive(Clone, Debug, Default)]
struct Logical {
    /// Child tasks since the last `taskwait`: id, out and in dependence filters.
    children: Vec<(u32, u64, u64)>,
    /// Taskgroups it belongs to (its creator's, inherited) and those it opened, innermost last.
    groups: Vec<u64>,
}

/// A task created and not started yet.
#[derive(Debug, Clone, Copy)]
struct Pending {
    id: u32,
    body: u64,
    /// The first bytes of its argument, and how many count.
    first: u64,
    size: u8,
}

/// A task's place: whose child it is, the groups and the barrier that complete it, the
/// tasks its dependences wait for.
#[derive(Clone, Debug, Default)]
struct TaskInfo {
    parent: u32,
    groups: Vec<u64>,
    region: Option<(u64, u32)>,
    deps: Vec<u32>,
}

/// A taskloop in progress: its body's runs are tasks created at its entry.
#[derive(Clone, Debug)]
struct Taskloop {
    id: u32,
    body: u64,
    creator: u32,
    groups: Vec<u64>,
    region: Option<(u64, u32)>,
}

/// An open parallel region.
#[derive(Debug, Clone, Copy)]
struct Region {
    id: u64,
    body: u64,
    data: u64,
    master: u32,
    /// A team of one thread (`num_threads(1)`, `if(0)`, `omp_set_num_threads(1)`): its
    /// sections run one after another on that thread.
    alone: bool,
}

/// OpenMP's happens-before, from libgomp's entry points (gcc's runtime; the program's code
/// calls them and they call its outlined bodies):
/// - a parallel region's fork (`GOMP_parallel*` entry) happens before each of its threads'
///   body; each body's end, and each task of the region, before the master's return;
/// - a barrier (`GOMP_barrier`, the implicit ones of `GOMP_loop_end`, `GOMP_sections_end`):
///   the region's arrivals of one round before its departures, and the tasks created before
///   it (or inside it) before its departures;
/// - `critical` (unnamed, named), `atomic` under libgomp's lock, `ordered` and
///   `omp_*_lock` are locks ([`SyncOp::Acquire`], [`SyncOp::Release`]);
/// - a task is a thread of happens-before time of its own (its *actor*, an id from
///   [`OMP_TASK_BASE`]), whichever OS thread runs it: it starts from its creator's time at
///   `GOMP_task` and from the ends of the earlier sibling tasks its dependences name (out/inout
///   against earlier out/inout/in, in against earlier out/inout; addresses compared through
///   28-bit Bloom filters, so a collision can add an edge, never drop one); its end happens
///   before its creator's next `taskwait` (and a `taskwait depend` whose dependences conflict
///   with its own), the end of every taskgroup it is in, the barrier that completes it and the
///   region's join; the sections of a region whose team is one thread (its `num_threads`
///   argument, else the master's last `omp_set_num_threads`) are not tasks, they run in order. An undeferred task (run inside its `GOMP_task`)
///   ends before its creator continues. Taskloops (`GOMP_taskloop`) make a task of each run
///   of their body, complete at the taskloop's return unless `nogroup`.
///
/// Everything else libgomp does (its task queue's lock, its barrier words, futex hand-offs,
/// loop scheduling) orders nothing here: that is the order the runtime happened to pick, and
/// a race between unordered tasks must show in the one run. Task bodies are told apart by
/// their body function and the first bytes of their argument (libgomp copies the creator's
/// data into the task); two pending tasks of one body whose arguments start alike are taken in
/// creation order.
#[derive(Clone, Debug, Default)]
pub struct Omp {
    threads: FxHashMap<u32, OmpThread>,
    logical: FxHashMap<u32, Logical>,
    regions: Vec<Region>,
    pending: Vec<Pending>,
    tasks: FxHashMap<u32, TaskInfo>,
    taskloops: Vec<Taskloop>,
    next_region: u64,
    next_task: u32,
    next_group: u64,
    /// Tasks created (for the run's statistics and tests).
    pub tasks_created: u64,
    /// Stack memory a task's start or end made dead (`[lo, hi)`, below the body's entry stack
    /// pointer), for a pass to forget: the next task the thread runs reuses it, and is not
    /// ordered with the one before.
    pub dead_stack: Option<(u64, u64)>,
    /// Happens-before objects no operation will wait on again (a started task's creation, the
    /// ends of children a `taskwait` collected), for a pass to drop ([`HappensBefore::forget`]).
    pub dead_objects: Vec<u64>,
    /// Tasks that ended, with the number of posts their end made (each a new epoch after
    /// their last access): their clocks will not be read again ([`HappensBefore::retire`]).
    pub dead_actors: Vec<(u32, u32)>,
}

/// How far below a task body's entry stack pointer its frames are taken to reach.
const TASK_STACK: u64 = 32 << 10;

impl Omp {
    /// Whose happens-before time thread `tid` runs now: the task whose body it is in, else its
    /// own.
    pub fn actor(&self, tid: u32) -> u32 {
        self.threads.get(&tid).and_then(|t| t.frames.last()).map_or(tid, |f| f.actor)
    }

    /// Whether `tid` is running libgomp's code now (inside an entry point, or a pool thread
    /// outside the bodies it runs).
    pub fn in_runtime(&self, tid: u32) -> bool {
        self.threads.get(&tid).is_some_and(|t| t.depth > 0)
    }

    /// `creator` made thread `child`: from inside libgomp, a pool thread.
    pub fn created(&mut self, creator: u32, child: u32) {
        if self.in_runtime(creator) {
            self.threads.entry(child).or_default().depth = 1;
        }
    }

    /// The region frame (implicit task) `tid` is in, innermost.
    fn region_frame(&mut self, tid: u32) -> Option<&mut Frame> {
        self.threads.get_mut(&tid)?.frames.iter_mut().rev().find(|f| f.region.is_some())
    }

    /// Whether `tid` runs in a region whose team is one thread.
    fn in_team_of_one(&mut self, tid: u32) -> bool {
        let Some(id) = self.region_frame(tid).and_then(|f| f.region) else { return false };
        self.regions.iter().any(|r| r.id == id && r.alone)
    }

    /// The barrier that completes a task created by `tid` now: the next one of its region,
    /// or the one it is in.
    fn completing_barrier(&mut self, tid: u32) -> Option<(u64, u32)> {
        let f = self.region_frame(tid)?;
        Some((f.region?, f.round + u32::from(!f.in_barrier)))
    }

    fn logical(&mut self, actor: u32) -> &mut Logical {
        self.logical.entry(actor).or_default()
    }

    fn new_task(&mut self) -> u32 {
        self.next_task += 1;
        self.tasks_created += 1;
        OMP_TASK_BASE + self.next_task
    }

    /// The operations of an entry or return of an OpenMP kind `kind` (`ev` is its event).
    fn event(&mut self, ev: &Event, kind: SyncKind, out: &mut impl FnMut(u32, SyncOp)) {
        let t = ev.tid;
        let enter = matches!(ev.kind, EventKind::SyncEnter(_));
        if kind == SyncKind::OmpBody {
            if enter {
                self.body_enter(ev, out);
            } else {
                self.body_return(t, out);
            }
            return;
        }
        if enter && matches!(kind, SyncKind::OmpSectionsNext | SyncKind::OmpSectionsEnd | SyncKind::OmpBarrier) {
            self.end_section(t, out);
        }
        let st = self.threads.entry(t).or_default();
        if enter {
            st.depth += 1;
        } else {
            st.depth = st.depth.saturating_sub(1);
        }
        let actor = self.actor(t);
        match (kind, enter) {
            (SyncKind::OmpParallel, true) => {
                self.next_region += 1;
                let id = self.next_region;
                let asked = if ev.new != 0 { ev.new } else { self.threads.get(&t).map_or(0, |s| s.num_threads) };
                self.regions.push(Region { id, body: ev.addr, data: ev.old, master: t, alone: asked == 1 });
                out(actor, SyncOp::Post { obj: omp_object(OMP_FORK, id) });
            }
            (SyncKind::OmpParallel, false) => {
                if let Some(i) = self.regions.iter().rposition(|r| r.master == t) {
                    let r = self.regions.remove(i);
                    out(actor, SyncOp::Wait { obj: omp_object(OMP_JOIN, r.id) });
                    self.taskloops.retain(|l| l.region.map(|x| x.0) != Some(r.id));
                }
            }
            (SyncKind::OmpBarrier, _) | (SyncKind::OmpSingleCopyStart, false) => {
                let copy = kind == SyncKind::OmpSingleCopyStart;
                if copy && ev.new == 0 {
                    // The winner: no barrier in this call.
                    return;
                }
                let Some(f) = self.region_frame(t) else { return };
                if copy {
                    // A barrier met inside the call, seen only at its return.
                    f.round += 1;
                    let key = f.region.unwrap_or(0) << 24 | u64::from(f.round);
                    out(actor, SyncOp::Post { obj: omp_object(OMP_BARRIER, key) });
                    out(actor, SyncOp::Wait { obj: omp_object(OMP_BARRIER, key) });
                    out(actor, SyncOp::Wait { obj: omp_object(OMP_ROUND_TASKS, key) });
                    return;
                }
                if enter {
                    f.round += 1;
                    f.in_barrier = true;
                } else {
                    f.in_barrier = false;
                }
                let key = f.region.unwrap_or(0) << 24 | u64::from(f.round);
                if enter {
                    out(actor, SyncOp::Post { obj: omp_object(OMP_BARRIER, key) });
                } else {
                    out(actor, SyncOp::Wait { obj: omp_object(OMP_BARRIER, key) });
                    out(actor, SyncOp::Wait { obj: omp_object(OMP_ROUND_TASKS, key) });
                }
            }
            (SyncKind::OmpSectionsNext, true) => self.threads.entry(t).or_default().sections_sp = ev.new,
            (SyncKind::OmpSetNumThreads, true) => self.threads.entry(t).or_default().num_threads = ev.addr,
            (SyncKind::OmpSectionsNext, false) if ev.new as u32 != 0 && !self.in_team_of_one(t) => {
                // A section: a task of its own, created and started here, complete at the
                // sections' barrier or the region's join.
                let id = self.new_task();
                let region = self.completing_barrier(t);
                let groups = self.logical(actor).groups.clone();
                self.tasks.insert(id, TaskInfo { parent: actor, groups, region, deps: Vec::new() });
                let obj = omp_object(OMP_TASK_CREATE, u64::from(id));
                out(actor, SyncOp::Post { obj });
                out(id, SyncOp::Wait { obj });
                let st = self.threads.entry(t).or_default();
                let sp = st.sections_sp;
                let depth = st.depth;
                st.frames.push(Frame {
                    saved: depth,
                    actor: id,
                    task: Some(id),
                    region: None,
                    round: 0,
                    in_barrier: false,
                    sp,
                    section: true,
                });
                self.dead_stack = Some((sp.saturating_sub(TASK_STACK), sp));
            }
            (SyncKind::OmpAcquire(_), false) => out(actor, SyncOp::Acquire { lock: ev.addr, mode: Mode::Exclusive }),
            (SyncKind::OmpTryAcquire, false) if kind.succeeded(ev.new) => {
                out(actor, SyncOp::Acquire { lock: ev.addr, mode: Mode::Exclusive })
            }
            (SyncKind::OmpRelease(_), true) => out(actor, SyncOp::Release { lock: ev.addr }),
            (SyncKind::OmpTask, true) => self.create_task(t, actor, ev, out),
            (SyncKind::OmpTask, false) => {
                if let Some((id, inline)) = self.threads.get_mut(&t).and_then(|s| s.creating.pop()) {
                    if inline {
                        out(actor, SyncOp::Wait { obj: omp_object(OMP_TASK_END, u64::from(id)) });
                    }
                }
            }
            (SyncKind::OmpTaskwaitDepend, true) => self.threads.entry(t).or_default().taskwait_deps = ev.new,
            (SyncKind::OmpTaskwaitDepend, false) => {
                // The children the dependences name (compared as `GOMP_task` compares a new
                // task's with its earlier siblings'), not the others.
                let deps = self.threads.get(&t).map_or(0, |s| s.taskwait_deps);
                let (outs, ins) = (deps & BLOOM, deps >> 28 & BLOOM);
                for c in &self.logical(actor).children {
                    if outs & (c.1 | c.2) != 0 || ins & c.1 != 0 {
                        out(actor, SyncOp::Wait { obj: omp_object(OMP_TASK_END, u64::from(c.0)) });
                    }
                }
            }
            (SyncKind::OmpTaskwait, false) => {
                let children = std::mem::take(&mut self.logical(actor).children);
                self.dead_objects.extend(children.iter().map(|c| omp_object(OMP_TASK_END, u64::from(c.0))));
                out(actor, SyncOp::Wait { obj: omp_object(OMP_CHILDREN, u64::from(actor)) });
            }
            (SyncKind::OmpTaskgroupStart, true) => {
                self.next_group += 1;
                let g = self.next_group;
                self.logical(actor).groups.push(g);
            }
            (SyncKind::OmpTaskgroupEnd, false) => {
                if let Some(g) = self.logical(actor).groups.pop() {
                    out(actor, SyncOp::Wait { obj: omp_object(OMP_GROUP, g) });
                }
            }
            (SyncKind::OmpTaskloop, true) => {
                let group = (ev.old & GOMP_TASK_FLAG_NOGROUP == 0).then(|| {
                    self.next_group += 1;
                    self.next_group
                });
                let mut groups = self.logical(actor).groups.clone();
                groups.extend(group);
                let id = self.new_task();
                let region = self.completing_barrier(t);
                self.taskloops.push(Taskloop { id, body: ev.addr, creator: actor, groups, region });
                self.threads.entry(t).or_default().taskloops.push(group);
                out(actor, SyncOp::Post { obj: omp_object(OMP_TASK_CREATE, u64::from(id)) });
            }
            (SyncKind::OmpTaskloop, false) => {
                if let Some(Some(g)) = self.threads.get_mut(&t).and_then(|s| s.taskloops.pop()) {
                    out(actor, SyncOp::Wait { obj: omp_object(OMP_GROUP, g) });
                }
            }
            _ => {}
        }
    }

    /// `GOMP_task` entered by thread `t` running `actor`.
    fn create_task(&mut self, t: u32, actor: u32, ev: &Event, out: &mut impl FnMut(u32, SyncOp)) {
        let id = self.new_task();
        let (outs, ins) = (ev.new & BLOOM, ev.new >> 28 & BLOOM);
        let region = self.completing_barrier(t);
        let parent = self.logical(actor);
        let deps: Vec<u32> = if outs | ins == 0 {
            Vec::new()
        } else {
            parent.children.iter().filter(|c| outs & (c.1 | c.2) != 0 || ins & c.1 != 0).map(|c| c.0).collect()
        };
        parent.children.push((id, outs, ins));
        let groups = parent.groups.clone();
        self.tasks.insert(id, TaskInfo { parent: actor, groups, region, deps });
        self.pending.push(Pending { id, body: ev.addr, first: ev.old, size: (ev.new >> 56) as u8 });
        self.threads.entry(t).or_default().creating.push((id, false));
        out(actor, SyncOp::Post { obj: omp_object(OMP_TASK_CREATE, u64::from(id)) });
    }

    /// A body entered by `ev.tid`: a region's (its fork happens before), a pending task's (it
    /// starts), a taskloop's (a task of it starts), or an unknown one (run as the code that
    /// called it).
    fn body_enter(&mut self, ev: &Event, out: &mut impl FnMut(u32, SyncOp)) {
        let t = ev.tid;
        let below = self.actor(t);
        let st = self.threads.entry(t).or_default();
        let saved = std::mem::take(&mut st.depth);
        let mut frame =
            Frame { saved, actor: below, task: None, region: None, round: 0, in_barrier: false, sp: 0, section: false };
        if let Some(r) = self.regions.iter().rev().find(|r| r.body == ev.pc && r.data == ev.addr) {
            frame.actor = t;
            frame.region = Some(r.id);
            out(t, SyncOp::Wait { obj: omp_object(OMP_FORK, r.id) });
        } else if let Some(i) = self.pending_task(ev.pc, ev.old) {
            let p = self.pending.remove(i);
            if let Some(c) = self.threads.get_mut(&t).and_then(|s| s.creating.last_mut()) {
                if c.0 == p.id {
                    c.1 = true;
                }
            }
            frame.actor = p.id;
            frame.task = Some(p.id);
            out(p.id, SyncOp::Wait { obj: omp_object(OMP_TASK_CREATE, u64::from(p.id)) });
            self.dead_objects.push(omp_object(OMP_TASK_CREATE, u64::from(p.id)));
            for d in self.tasks.get(&p.id).map(|i| i.deps.as_slice()).unwrap_or(&[]) {
                out(p.id, SyncOp::Wait { obj: omp_object(OMP_TASK_END, u64::from(*d)) });
            }
        } else if let Some(l) = self.taskloops.iter().rev().find(|l| l.body == ev.pc) {
            let (lid, creator, groups, region) = (l.id, l.creator, l.groups.clone(), l.region);
            let id = self.new_task();
            self.tasks.insert(id, TaskInfo { parent: creator, groups, region, deps: Vec::new() });
            frame.actor = id;
            frame.task = Some(id);
            out(id, SyncOp::Wait { obj: omp_object(OMP_TASK_CREATE, u64::from(lid)) });
        }
        if let Some(id) = frame.task {
            let groups = self.tasks.get(&id).map(|i| i.groups.clone()).unwrap_or_default();
            self.logical(id).groups = groups;
            self.dead_stack = Some((ev.new.saturating_sub(TASK_STACK), ev.new));
            frame.sp = ev.new;
        }
        self.threads.entry(t).or_default().frames.push(frame);
    }

    /// The pending task whose body is `body` and whose argument starts with `first`, else the
    /// oldest of that body.
    fn pending_task(&self, body: u64, first: u64) -> Option<usize> {
        let fits = |p: &Pending| {
            let n = u32::from(p.size.min(8)) * 8;
            let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            first & mask == p.first & mask
        };
        self.pending
            .iter()
            .position(|p| p.body == body && fits(p))
            .or_else(|| self.pending.iter().position(|p| p.body == body))
    }

    /// A body returns on `t`: a task ends (before its creator's taskwait, its groups' ends,
    /// its barrier and its region's join), a region's thread's body ends (before the join).
    fn body_return(&mut self, t: u32, out: &mut impl FnMut(u32, SyncOp)) {
        self.end_section(t, out);
        let Some(st) = self.threads.get_mut(&t) else { return };
        let Some(f) = st.frames.pop() else { return };
        st.depth = f.saved;
        self.end(f, out);
    }

    /// Ends the section `t` runs, if it runs one.
    fn end_section(&mut self, t: u32, out: &mut impl FnMut(u32, SyncOp)) {
        let Some(st) = self.threads.get_mut(&t) else { return };
        if st.frames.last().is_some_and(|f| f.section) {
            let f = st.frames.pop().expect("checked");
            self.end(f, out);
        }
    }

    /// The end of the body, task or section of frame `f`.
    fn end(&mut self, f: Frame, out: &mut impl FnMut(u32, SyncOp)) {
        if let Some(id) = f.task {
            let info = self.tasks.remove(&id).unwrap_or_default();
            if let Some(l) = self.logical.remove(&id) {
                self.dead_objects.extend(l.children.iter().map(|c| omp_object(OMP_TASK_END, u64::from(c.0))));
            }
            self.dead_objects.push(omp_object(OMP_CHILDREN, u64::from(id)));
            let posts = 2 + info.groups.len() as u32 + if info.region.is_some() { 2 } else { 0 };
            self.dead_actors.push((id, posts));
            self.dead_stack = Some((f.sp.saturating_sub(TASK_STACK), f.sp));
            let post = |kind, key: u64| SyncOp::Post { obj: omp_object(kind, key) };
            out(id, post(OMP_TASK_END, u64::from(id)));
            out(id, post(OMP_CHILDREN, u64::from(info.parent)));
            for g in info.groups {
                out(id, post(OMP_GROUP, g));
            }
            if let Some((r, round)) = info.region {
                out(id, post(OMP_ROUND_TASKS, r << 24 | u64::from(round)));
                out(id, post(OMP_JOIN, r));
            }
        }
        if let Some(r) = f.region {
            out(f.actor, SyncOp::Post { obj: omp_object(OMP_JOIN, r) });
        }
    }
}

/// libpmemobj's lanes, as far as a run shows them.
///
/// Every libpmemobj transaction and every atomic allocation, free or list operation runs while
/// its thread holds a *lane* (PMDK's `lane_hold`/`lane_release`, `src/libpmemobj/lane.c`): a
/// lock word in DRAM taken by compare-and-swap, which gives the thread the lane's undo and redo
/// logs in the pool. The next holder of the lane reuses the logs, so log memory written by one
/// thread and read by another is ordered by the lane, not a race. Debian's libpmemobj is
/// stripped (`lane_hold` is not exported) and issues no annotation for pmemcheck in it, so the
/// lane sections are taken from what the run does show:
/// - a transaction (pmemcheck's `START_TX` .. `END_TX` of the thread's own transaction, which
///   libpmemobj issues just before its outermost `lane_hold` and after the `lane_release` that
///   ends it: the section contains the hold);
/// - a call of an exported function that holds a lane inside ([`SyncKind::PmemobjLane`]).
///
/// Which lane a thread holds is not seen, so the lanes act as one lock that protects only the
/// memory they guard: the bytes libpmemobj excludes from transaction checking for the whole run
/// (`ADD_TO_GLOBAL_TX_IGNORE`, [`EventKind::TxIgnore`]: the lanes' logs, the heap's zone and
/// chunk headers, the persistent statistics, the state it updates in lane sections without
/// adding it to a transaction). Two accesses of those bytes, each inside a lane section of its
/// thread, are ordered; anything else a lane section touches is not (transactions do not
/// isolate the program's data).
#[derive(Clone, Default, Debug)]
pub struct Lanes {
    /// Per thread: how deeply it is in lane sections (they nest: a transaction inside a
    /// transaction, an atomic allocation inside one).
    depth: FxHashMap<u32, u32>,
    /// Device ranges `[start, end)` of the lanes' memory, sorted, disjoint, not adjacent.
    memory: Vec<(u64, u64)>,
    /// Lane sections entered (outermost ones).
    pub holds: u64,
}

impl Lanes {
    /// Follows `ev` (any event): `Some(true)` when its thread takes a lane (its outermost lane
    /// section begins), `Some(false)` when it gives it back.
    pub fn observe(&mut self, ev: &Event) -> Option<bool> {
        match ev.kind {
            // A transaction id of the program's own (`START_TX_N`) is no lane.
            EventKind::TxBegin if ev.new == 0 => self.enter(ev.tid),
            EventKind::TxEnd if ev.new == 0 => self.leave(ev.tid),
            EventKind::SyncEnter(SyncKind::PmemobjLane | SyncKind::PmemobjAlloc | SyncKind::PmemobjFree) => {
                self.enter(ev.tid)
            }
            EventKind::SyncReturn(SyncKind::PmemobjLane | SyncKind::PmemobjAlloc | SyncKind::PmemobjFree) => {
                self.leave(ev.tid)
            }
            EventKind::TxIgnore if ev.dev != 0 && ev.size > 0 => {
                self.add(ev.dev, ev.dev + u64::from(ev.size));
                None
            }
            EventKind::ThreadExit => self.depth.remove(&ev.tid).filter(|&d| d > 0).map(|_| false),
            _ => None,
        }
    }

    fn enter(&mut self, tid: u32) -> Option<bool> {
        let d = self.depth.entry(tid).or_insert(0);
        *d += 1;
        (*d == 1).then(|| {
            self.holds += 1;
            true
        })
    }

    fn leave(&mut self, tid: u32) -> Option<bool> {
        let d = self.depth.get_mut(&tid)?;
        if *d == 0 {
            return None;
        }
        *d -= 1;
        (*d == 0).then_some(false)
    }

    fn add(&mut self, lo: u64, hi: u64) {
        let (mut lo, mut hi) = (lo, hi);
        self.memory.retain(|&(s, e)| {
            let touch = s <= hi && lo <= e;
            if touch {
                lo = lo.min(s);
                hi = hi.max(e);
            }
            !touch
        });
        let i = self.memory.partition_point(|m| m.0 < lo);
        self.memory.insert(i, (lo, hi));
    }

    /// Whether thread `tid` holds a lane now.
    pub fn inside(&self, tid: u32) -> bool {
        self.depth.get(&tid).is_some_and(|&d| d > 0)
    }

    /// Whether the device bytes `[dev, dev + len)` are wholly lane memory.
    pub fn is_lane_memory(&self, dev: u64, len: u64) -> bool {
        let i = self.memory.partition_point(|m| m.0 <= dev);
        i > 0 && dev + len <= self.memory[i - 1].1
    }

    /// Whether the PM access `ev` is protected by its thread's lane: made inside a lane section,
    /// to lane memory.
    pub fn protects(&self, ev: &Event) -> bool {
        ev.dev != 0 && self.inside(ev.tid) && self.is_lane_memory(ev.dev, u64::from(ev.size.max(1)))
    }
}

/// Which threads are inside a libpmemobj lock or condition-variable call. PMDK's locks and
/// condition variables live in PM, so their own loads and stores (the lock words, the pthread
/// objects inside them, the lazy reinitialisation) are PM accesses; HawkSet's pseudo-lock makes
/// them mutually protected, and PM detectors leave them out.
#[derive(Clone, Default, Debug)]
pub struct PmdkLockCalls {
    depth: FxHashMap<u32, u32>,
}

impl PmdkLockCalls {
    /// Follows `ev` (any event).
    pub fn observe(&mut self, ev: &Event) {
        match ev.kind {
            EventKind::SyncEnter(k) if k.is_pmemobj() => *self.depth.entry(ev.tid).or_default() += 1,
            EventKind::SyncReturn(k) if k.is_pmemobj() => {
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

    /// Whether thread `tid` is inside a libpmemobj lock or condition-variable call.
    pub fn inside(&self, tid: u32) -> bool {
        self.depth.get(&tid).is_some_and(|&d| d > 0)
    }
}

/// The recognised calls each thread is inside, for the passes that follow PM accesses: which
/// accesses are a synchronisation primitive's own, and which bytes a string routine's load
/// really reads.
///
/// - **Synchronisation accesses are not data.** A lock lives in memory, in PM too (a pthread
///   mutex in a pool, a custom CAS lock word in a hash bucket): the lock function's own loads,
///   compare-and-swaps and release stores of its lock word race with other threads' lock
///   attempts by design. An access made inside a recognised call that locks something
///   ([`SyncKind::lock_bytes`]: pthread's, libpmemobj's, a `--config` custom lock's), to the
///   bytes of the object that call synchronises on, is such an access ([`SyncCalls::is_sync_access`]).
///   What else the function touches (CLHT's lock function checks the table's resize pointer)
///   stays data.
/// - **A string routine reads what its contract says.** glibc's vector `strcmp`, `strlen`, ...
///   read 16 or 32 aligned bytes at a time, before the string's start and past its terminator;
///   the machine reports each routine's contract at its entry ([`SyncKind::Reads`]), and a load
///   inside one counts only for the bytes within it ([`SyncCalls::clip`]).
/// - **A custom lock released without a call.** A `--config` lock whose release the program
///   does not make as a call (a macro or an inlined store: P-CLHT's `LOCK_RLS(lock)` is
///   `*lock = 0`, while HawkSet's `pclht.cfg` names a `lock_rel` function this version lacks) is
///   released when its holder stores the free value 0 to the lock's word, outside the lock's
///   own calls ([`SyncCalls::released_by_store`]). Otherwise every acquisition would be held
///   until the thread exits, and two threads that ever took the same lock would share it in
///   every lockset from then on: every later pair of theirs protected.
///
/// Allocation-free once warm: each thread's stack of open calls keeps its capacity, and the
/// held custom locks their map's.
#[derive(Clone, Default, Debug)]
pub struct SyncCalls {
    threads: FxHashMap<u32, Vec<OpenCall>>,
    /// Custom locks held, by (thread, lock address): the lock word's size and how many times
    /// it is held (recursive acquisitions).
    custom_held: FxHashMap<(u32, u64), (u32, u32)>,
    /// Custom locks released by a store of 0 to their word rather than by a call.
    pub store_releases: u64,
    /// Calls open in all threads together (nothing to check when 0).
    open: u32,
    /// Accesses found to be a primitive's own ([`SyncCalls::is_sync_access`]).
    pub sync_accesses: u64,
    /// Loads inside string routines trimmed to their contract, and those left with no byte.
    pub clipped_loads: u64,
    /// Loads inside string routines that read no byte of the contract.
    pub dropped_loads: u64,
}

#[derive(Clone, Copy, Debug)]
struct OpenCall {
    kind: SyncKind,
    /// The entry's `addr`, `old`, `new`.
    addr: u64,
    old: u64,
    new: u64,
}

/// What is left of a load inside a string routine ([`SyncCalls::clip`]): up to two pieces
/// `(guest address, device address, size)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clip {
    /// Not inside a string routine: the load as it is.
    Whole,
    /// These pieces (the second's size 0 when there is one).
    Pieces([(u64, u64, u32); 2]),
}

impl SyncCalls {
    /// Follows `ev` (any event).
    pub fn observe(&mut self, ev: &Event) {
        match ev.kind {
            EventKind::SyncEnter(kind) => {
                if let SyncKind::Custom(CustomSpec { op: CustomOp::Release, .. }) = kind {
                    self.drop_custom(ev.tid, ev.addr);
                }
                self.threads.entry(ev.tid).or_default().push(OpenCall {
                    kind,
                    addr: ev.addr,
                    old: ev.old,
                    new: ev.new,
                });
                self.open += 1;
            }
            EventKind::SyncReturn(kind) => {
                if let SyncKind::Custom(c) = kind {
                    if c.op != CustomOp::Release && kind.succeeded(ev.new) {
                        let e = self.custom_held.entry((ev.tid, ev.addr)).or_insert((0, 0));
                        *e = (u32::from(c.lock_size.max(1)), e.1 + 1);
                    }
                }
                let Some(calls) = self.threads.get_mut(&ev.tid) else { return };
                // The innermost call of that kind returns (the machine pairs them by frame; a
                // longjmp out of a call loses its return, which the next return of an outer
                // one repairs).
                if let Some(i) = calls.iter().rposition(|c| c.kind == kind) {
                    self.open -= (calls.len() - i) as u32;
                    calls.truncate(i);
                }
            }
            EventKind::ThreadExit => {
                if let Some(calls) = self.threads.get_mut(&ev.tid) {
                    self.open -= calls.len() as u32;
                    calls.clear();
                }
                if !self.custom_held.is_empty() {
                    self.custom_held.retain(|&(t, _), _| t != ev.tid);
                }
            }
            _ => {}
        }
    }

    /// One hold of custom lock `lock` by `tid` ends (its release call, or its word's store).
    fn drop_custom(&mut self, tid: u32, lock: u64) -> bool {
        match self.custom_held.get_mut(&(tid, lock)) {
            Some(e) if e.1 > 1 => e.1 -= 1,
            Some(_) => {
                self.custom_held.remove(&(tid, lock));
            }
            None => return false,
        }
        true
    }

    /// Whether the access `ev` releases a `--config` custom lock its thread holds without a
    /// call: a store of 0 to the lock's address (within its `lock_size`; in PM, or anywhere for a
    /// pass that sees all memory), or a DRAM lock word
    /// seen back at 0 ([`EventKind::WordRelease`]), made outside the calls that lock that word.
    /// A custom release function's own store is not one (its entry already released the
    /// lock). Returns the lock released (its address, the lock's id).
    pub fn released_by_store(&mut self, ev: &Event) -> Option<u64> {
        if self.custom_held.is_empty() {
            return None;
        }
        match ev.kind {
            // A PM store, or a DRAM one for the passes that see all memory (the window passes
            // see DRAM lock words only as `WordRelease`).
            EventKind::Store | EventKind::RmwStore => {
                if ev.new & crate::inferred_locks::value_mask(ev.size) != 0 {
                    return None;
                }
            }
            EventKind::WordRelease => {}
            _ => return None,
        }
        let &(size, _) = self.custom_held.get(&(ev.tid, ev.addr))?;
        if ev.size > size || self.is_own(ev) {
            return None;
        }
        self.drop_custom(ev.tid, ev.addr);
        self.store_releases += 1;
        Some(ev.addr)
    }

    fn calls(&self, tid: u32) -> &[OpenCall] {
        if self.open == 0 {
            return &[];
        }
        self.threads.get(&tid).map_or(&[], |v| v.as_slice())
    }

    /// Whether the access `ev` (a load or store) is a synchronisation primitive's own: made
    /// inside a recognised call that locks an object, to that object's bytes (counted in
    /// [`SyncCalls::sync_accesses`]).
    pub fn is_sync_access(&mut self, ev: &Event) -> bool {
        let own = self.is_own(ev);
        if own {
            self.sync_accesses += 1;
        }
        own
    }

    /// [`SyncCalls::is_sync_access`] without counting it.
    pub fn is_own(&self, ev: &Event) -> bool {
        let end = ev.addr.saturating_add(u64::from(ev.size.max(1)));
        self.calls(ev.tid)
            .iter()
            .any(|c| c.kind.lock_bytes().is_some_and(|n| ev.addr < c.addr.saturating_add(u64::from(n)) && c.addr < end))
    }

    /// The bytes of the load `ev` that the string routine it is made in reads by its contract
    /// (its innermost open call, if that is a [`SyncKind::Reads`]).
    pub fn clip(&mut self, ev: &Event) -> Clip {
        let Some(c) = self.calls(ev.tid).last().copied() else { return Clip::Whole };
        if !matches!(c.kind, SyncKind::Reads(_)) {
            return Clip::Whole;
        }
        let (lo, hi) = (ev.addr, ev.addr + u64::from(ev.size));
        let mut out = [(0u64, 0u64, 0u32); 2];
        let mut n = 0;
        for (start, len) in [(c.addr, c.new & 0xffff_ffff), (c.old, c.new >> 32)] {
            let (a, b) = (lo.max(start), hi.min(start.saturating_add(len)));
            if len > 0 && a < b {
                out[n] = (a, ev.dev + (a - lo), (b - a) as u32);
                n += 1;
            }
        }
        // Two overlapping pieces (both strings cover the bytes) are one.
        if n == 2 && out[1].0 < out[0].0 + u64::from(out[0].2) && out[0].0 < out[1].0 + u64::from(out[1].2) {
            let a = out[0].0.min(out[1].0);
            let b = (out[0].0 + u64::from(out[0].2)).max(out[1].0 + u64::from(out[1].2));
            out = [(a, ev.dev + (a - lo), (b - a) as u32), (0, 0, 0)];
            n = 1;
        }
        if n == 0 {
            self.dropped_loads += 1;
        } else if out[0].2 != ev.size || n == 2 {
            self.clipped_loads += 1;
        } else {
            return Clip::Whole;
        }
        Clip::Pieces(out)
    }
}

/// Which threads are inside a recognised synchronisation function (between its
/// [`EventKind::SyncEnter`] and [`EventKind::SyncReturn`]): the memory accesses of the primitive
/// itself (lock words, futex state, barrier counters) are not the program's and a detector that
/// watches all memory ignores them. Counts nest; a thread's count is dropped when it exits.
///
/// OpenMP: a body gcc outlined ([`SyncKind::OmpBody`]) is the program's code even when libgomp
/// calls it from inside an entry point (a region's body on its master, a task run at a
/// barrier): the bracket starts afresh in it and resumes when it returns. A thread created
/// from inside a libgomp entry point is a pool thread, inside libgomp except in the bodies it
/// runs.
#[derive(Clone, Default, Debug)]
pub struct SyncBracket {
    depth: FxHashMap<u32, u32>,
    /// Per thread: open libgomp calls (a part of `depth`).
    omp: FxHashMap<u32, u32>,
    /// Per thread: `(depth, omp)` outside each body it is in.
    saved: FxHashMap<u32, Vec<(u32, u32)>>,
}

impl SyncBracket {
    /// Follows one event (call before translating it: a return ends the bracket first). A
    /// libpmemobj call that only holds a lane ([`SyncKind::PmemobjLane`], an allocation whose
    /// constructor is the program's code) is no synchronisation function here, nor is a string
    /// or memory routine ([`SyncKind::Reads`], whose accesses are its caller's).
    pub fn observe(&mut self, ev: &Event) {
        match ev.kind {
            EventKind::SyncEnter(
                SyncKind::PmemobjLane | SyncKind::PmemobjAlloc | SyncKind::PmemobjFree | SyncKind::Reads(_),
            )
            | EventKind::SyncReturn(
                SyncKind::PmemobjLane | SyncKind::PmemobjAlloc | SyncKind::PmemobjFree | SyncKind::Reads(_),
            ) => {}
            EventKind::SyncEnter(SyncKind::OmpBody) => {
                let d = self.depth.insert(ev.tid, 0).unwrap_or(0);
                let o = self.omp.insert(ev.tid, 0).unwrap_or(0);
                self.saved.entry(ev.tid).or_default().push((d, o));
            }
            EventKind::SyncReturn(SyncKind::OmpBody) => {
                if let Some((d, o)) = self.saved.get_mut(&ev.tid).and_then(|s| s.pop()) {
                    self.depth.insert(ev.tid, d);
                    self.omp.insert(ev.tid, o);
                }
            }
            EventKind::SyncEnter(k) => {
                *self.depth.entry(ev.tid).or_insert(0) += 1;
                if k.is_omp_runtime() {
                    *self.omp.entry(ev.tid).or_insert(0) += 1;
                }
            }
            EventKind::SyncReturn(k) => {
                if let Some(d) = self.depth.get_mut(&ev.tid) {
                    *d = d.saturating_sub(1);
                }
                if k.is_omp_runtime() {
                    if let Some(d) = self.omp.get_mut(&ev.tid) {
                        *d = d.saturating_sub(1);
                    }
                }
            }
            EventKind::ThreadCreate if self.omp.get(&ev.tid).is_some_and(|d| *d > 0) => {
                self.depth.insert(ev.new as u32, 1);
                self.omp.insert(ev.new as u32, 1);
            }
            EventKind::ThreadExit => {
                self.depth.remove(&ev.tid);
                self.omp.remove(&ev.tid);
                self.saved.remove(&ev.tid);
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
    /// The clock's value for a thread's slot.
    pub fn get(&self, slot: usize) -> u32 {
        self.0.get(slot).copied().unwrap_or(0)
    }

    /// Sets a thread's slot.
    pub fn set(&mut self, slot: usize, v: u32) {
        if self.0.len() <= slot {
            self.0.resize(slot + 1, 0);
        }
        self.0[slot] = v;
    }

    /// The pointwise maximum with `other`.
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
    /// Creation and join order threads.
    pub create_join: bool,
    /// Post/wait on condition variables, barriers, semaphores.
    pub objects: bool,
    /// Release → later acquire of the same lock.
    pub locks: bool,
}

/// How many of the most recently freed slots [`HappensBefore::adopt`] looks at.
const ADOPT_LOOK: usize = 64;

/// A vector clock as [`HappensBefore`] keeps it: its non-zero components, `(slot, value)`
/// sorted by slot. Dense clocks cost their highest slot in every copy and join; OpenMP tasks
/// are threads of time of their own, and a recursive task program (`fib`: every task creates
/// its children before any `taskwait`, so no later task knows an earlier one's end and no slot
/// is reused) has one slot per task while each task's clock holds only its ancestors' and the
/// subtrees it waited for: copies and joins cost what a clock knows, not the task count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sparse(Vec<(u32, u32)>);

impl Sparse {
    fn get(&self, slot: usize) -> u32 {
        let slot = slot as u32;
        match self.0.binary_search_by_key(&slot, |e| e.0) {
            Ok(i) => self.0[i].1,
            Err(_) => 0,
        }
    }

    fn set(&mut self, slot: usize, v: u32) {
        let slot = slot as u32;
        match self.0.binary_search_by_key(&slot, |e| e.0) {
            Ok(i) => self.0[i].1 = v,
            Err(i) => self.0.insert(i, (slot, v)),
        }
    }

    /// The pointwise maximum with `other`, merged through `scratch` (kept by the caller, so
    /// that joins do not allocate once it has grown).
    fn join(&mut self, other: &Sparse, scratch: &mut Vec<(u32, u32)>) {
        if other.0.is_empty() {
            return;
        }
        if self.0.is_empty() {
            self.0.clone_from(&other.0);
            return;
        }
        if other.0.len() * 8 < self.0.len() {
            // A small clock into a large one (a task's end into what a barrier or a taskwait
            // collects): one search each. Slots are given in increasing order, so a new one
            // lands at the end, and inserting costs nothing to move.
            for &(slot, v) in &other.0 {
                match self.0.binary_search_by_key(&slot, |e| e.0) {
                    Ok(i) => self.0[i].1 = self.0[i].1.max(v),
                    Err(i) => self.0.insert(i, (slot, v)),
                }
            }
            return;
        }
        scratch.clear();
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            let (x, y) = (a[i], b[j]);
            if x.0 == y.0 {
                scratch.push((x.0, x.1.max(y.1)));
                i += 1;
                j += 1;
            } else if x.0 < y.0 {
                scratch.push(x);
                i += 1;
            } else {
                scratch.push(y);
                j += 1;
            }
        }
        scratch.extend_from_slice(&a[i..]);
        scratch.extend_from_slice(&b[j..]);
        std::mem::swap(&mut self.0, scratch);
    }

    fn dense(&self) -> VectorClock {
        let mut v = VectorClock::default();
        for &(s, x) in &self.0 {
            v.set(s as usize, x);
        }
        v
    }
}

/// A dense copy of a thread's clock that follows it cheaply ([`HappensBefore::clock_into`]):
/// only the components set by the previous copy are cleared.
#[derive(Clone, Debug, Default)]
pub struct ClockCopy {
    /// The clock, dense (components of slots the thread does not know are 0).
    pub vc: VectorClock,
    set: Vec<u32>,
}

/// Vector clocks per thread, per sync object and per lock.
#[derive(Clone, Debug)]
pub struct HappensBefore {
    edges: Edges,
    slots: FxHashMap<u32, usize>,
    threads: FxHashMap<u32, Sparse>,
    objects: FxHashMap<u64, Sparse>,
    locks: FxHashMap<u64, Sparse>,
    exited: FxHashMap<u32, Sparse>,
    /// Slots of retired threads of time ([`HappensBefore::retire`]), newest last: the epoch of
    /// the owner's last access and its final epoch (above every epoch it published). A new
    /// thread of time whose first operation waits on a clock that knows the former takes the
    /// slot over ([`HappensBefore::adopt`]).
    free: Vec<(usize, u32, u32)>,
    /// The next slot never given.
    next_slot: usize,
    /// The merge buffer of joins.
    scratch: Vec<(u32, u32)>,
}

impl HappensBefore {
    /// Vector clocks with these edges.
    pub fn new(edges: Edges) -> HappensBefore {
        HappensBefore {
            edges,
            slots: FxHashMap::default(),
            threads: FxHashMap::default(),
            objects: FxHashMap::default(),
            locks: FxHashMap::default(),
            exited: FxHashMap::default(),
            free: Vec::new(),
            next_slot: 0,
            scratch: Vec::new(),
        }
    }

    /// The dense slot of a thread id.
    pub fn slot(&mut self, tid: u32) -> usize {
        let next = &mut self.next_slot;
        *self.slots.entry(tid).or_insert_with(|| {
            *next += 1;
            *next - 1
        })
    }

    /// The thread's current clock (its own component at least 1), dense.
    pub fn clock(&mut self, tid: u32) -> VectorClock {
        self.ensure(tid);
        self.threads[&tid].dense()
    }

    /// Makes `out` the thread's current clock, in time proportional to the components it and
    /// the previous copy know (not to the highest slot).
    pub fn clock_into(&mut self, tid: u32, out: &mut ClockCopy) {
        self.ensure(tid);
        for &s in &out.set {
            out.vc.0[s as usize] = 0;
        }
        out.set.clear();
        for &(s, v) in &self.threads[&tid].0 {
            out.vc.set(s as usize, v);
            out.set.push(s);
        }
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
        // As `ensure` then an increment, with one look-up of the slot and of the clock.
        let s = self.slot(tid);
        let c = self.threads.entry(tid).or_default();
        let v = c.get(s).max(1) + 1;
        c.set(s, v);
    }

    /// Applies one operation by `tid`.
    pub fn apply(&mut self, tid: u32, op: SyncOp) {
        if let SyncOp::Wait { obj } = op {
            if !self.free.is_empty() && !self.slots.contains_key(&tid) {
                self.adopt(tid, obj);
            }
        }
        self.ensure(tid);
        match op {
            // A thread cannot create itself; `get_disjoint_mut` would panic on the same key.
            SyncOp::Create { child } if child == tid => self.tick(tid),
            SyncOp::Create { child } if self.edges.create_join => {
                self.ensure(child);
                let [Some(c), Some(k)] = self.threads.get_disjoint_mut([&tid, &child]) else {
                    return;
                };
                k.join(c, &mut self.scratch);
                self.tick(tid);
            }
            SyncOp::Join { child } if self.edges.create_join => {
                let c = self.exited.get(&child).or_else(|| self.threads.get(&child)).cloned();
                if let Some(c) = c {
                    self.threads.get_mut(&tid).expect("ensured").join(&c, &mut self.scratch);
                }
            }
            SyncOp::Exit => {
                let c = self.threads[&tid].clone();
                self.exited.insert(tid, c);
            }
            // Posts, waits, releases and acquires reuse the clocks' buffers: a lock-heavy
            // program releases millions of times.
            SyncOp::Post { obj } if self.edges.objects => {
                self.objects.entry(obj).or_default().join(&self.threads[&tid], &mut self.scratch);
                self.tick(tid);
            }
            SyncOp::Wait { obj } if self.edges.objects => {
                if let Some(c) = self.objects.get(&obj) {
                    self.threads.get_mut(&tid).expect("ensured").join(c, &mut self.scratch);
                }
            }
            SyncOp::Release { lock } if self.edges.locks => {
                self.locks.entry(lock).or_default().0.clone_from(&self.threads[&tid].0);
                self.tick(tid);
            }
            SyncOp::Acquire { lock, .. } if self.edges.locks => {
                if let Some(c) = self.locks.get(&lock) {
                    self.threads.get_mut(&tid).expect("ensured").join(c, &mut self.scratch);
                }
            }
            _ => {}
        }
    }

    /// Starts a new epoch of `tid` and returns it: everything the thread did so far is before
    /// it, and only a clock that later learns it (by an edge from the thread) is after.
    pub fn advance(&mut self, tid: u32) -> u32 {
        self.tick(tid);
        self.own(tid)
    }

    /// The thread's own component: its current epoch.
    pub fn own(&mut self, tid: u32) -> u32 {
        self.ensure(tid);
        let s = self.slot(tid);
        self.threads[&tid].get(s)
    }

    /// How much of thread `of`'s time thread `tid` has seen: `of`'s epochs up to this one
    /// happen before `tid` now.
    pub fn knows(&mut self, tid: u32, of: u32) -> u32 {
        self.ensure(tid);
        let s = self.slot(of);
        self.threads[&tid].get(s)
    }

    /// Whether `tid`'s clock is `c` (a copy taken by [`HappensBefore::copy_clock`]).
    pub(crate) fn clock_is(&mut self, tid: u32, c: &Sparse) -> bool {
        self.ensure(tid);
        self.threads[&tid] == *c
    }

    /// Copies `tid`'s clock into `out` (reusing its buffer).
    pub(crate) fn copy_clock(&mut self, tid: u32, out: &mut Sparse) {
        self.ensure(tid);
        out.0.clone_from(&self.threads[&tid].0);
    }

    /// An edge from a clock copied earlier (a store's release clock) to `tid` now: `tid` learns
    /// all it knew, transitively.
    pub(crate) fn acquire_clock(&mut self, tid: u32, c: &Sparse) {
        self.ensure(tid);
        let HappensBefore { threads, scratch, .. } = self;
        threads.get_mut(&tid).expect("ensured").join(c, scratch);
    }

    /// Drops a sync object's clock (nothing will wait on it again).
    pub fn forget(&mut self, obj: u64) {
        self.objects.remove(&obj);
    }

    /// Drops a finished thread of happens-before time's clock (an OpenMP task that ended:
    /// nothing joins it, and it runs no more; its last `posts` operations were posts, after
    /// its last access) and frees its slot for a later one ([`HappensBefore::adopt`]).
    pub fn retire(&mut self, tid: u32, posts: u32) {
        if let (Some(c), Some(s)) = (self.threads.remove(&tid), self.slots.remove(&tid)) {
            let last = c.get(s);
            self.free.push((s, last.saturating_sub(posts), last));
        }
    }

    /// Gives `tid`, new, the slot of a retired thread of time whose last access the clock of
    /// `obj` (which `tid` starts by waiting on) knows, if one of the most recently freed has
    /// one, its epochs continuing above every epoch the old owner published. Sound: a clock
    /// that knows an epoch of the new owner knows, through its start, every access of the old
    /// owner, and one that knows only the old owner's epochs knows none of the new owner's, so
    /// a record of either is ordered before exactly the clocks that saw it. Without it, each
    /// OpenMP task would add a component to every clock, and a program with 10⁶ tasks would
    /// join clocks of 10⁶ components.
    fn adopt(&mut self, tid: u32, obj: u64) {
        let Some(c) = self.objects.get(&obj) else { return };
        let n = self.free.len();
        let Some(i) = (n.saturating_sub(ADOPT_LOOK)..n).rev().find(|&i| c.get(self.free[i].0) >= self.free[i].1) else {
            return;
        };
        let (s, _, last) = self.free.swap_remove(i);
        let mut own = c.clone();
        own.set(s, last);
        self.slots.insert(tid, s);
        self.threads.insert(tid, own);
    }

    /// Whether the event at clock `earlier` (by thread `t1`) happens before thread `t2` now.
    pub fn ordered_before(&mut self, earlier: &VectorClock, t2: u32) -> bool {
        self.ensure(t2);
        let now = &self.threads[&t2];
        earlier.0.iter().enumerate().all(|(i, v)| *v <= now.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_clocks_join_as_dense_ones_do() {
        // Pseudo-random clocks (a fixed LCG: deterministic), joined both ways (merge, and the
        // small-into-large path), against the dense join.
        let mut x = 12345u64;
        let mut next = move |m: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let mut scratch = Vec::new();
        for round in 0..200 {
            let (na, nb) = if round % 2 == 0 { (next(40), next(40)) } else { (next(400), next(3)) };
            let (mut a, mut b) = (Sparse::default(), Sparse::default());
            let (mut da, mut db) = (VectorClock::default(), VectorClock::default());
            for _ in 0..na {
                let (s, v) = (next(500) as usize, next(9) as u32 + 1);
                a.set(s, v);
                da.set(s, v);
            }
            for _ in 0..nb {
                let (s, v) = (next(500) as usize, next(9) as u32 + 1);
                b.set(s, v);
                db.set(s, v);
            }
            a.join(&b, &mut scratch);
            da.join(&db);
            assert!(a.0.windows(2).all(|w| w[0].0 < w[1].0), "sorted, no duplicate slot");
            assert_eq!(a.dense().0, da.0[..a.dense().0.len()].to_vec());
            assert!(da.0[a.dense().0.len()..].iter().all(|v| *v == 0));
            // A dense copy follows the clock, clearing what the previous copy set.
            let mut hb = HappensBefore::new(Edges { create_join: true, objects: true, locks: true });
            let mut copy = ClockCopy::default();
            hb.threads.insert(7, a.clone());
            hb.slots.insert(7, a.0.last().map_or(0, |e| e.0 as usize));
            hb.clock_into(7, &mut copy);
            hb.threads.insert(7, b.clone());
            hb.slots.insert(7, b.0.last().map_or(0, |e| e.0 as usize));
            hb.clock_into(7, &mut copy);
            for s in 0..500 {
                assert_eq!(copy.vc.get(s), hb.threads[&7].get(s));
            }
        }
    }

    #[test]
    fn a_retired_slot_goes_only_to_a_thread_of_time_that_knows_its_owners_accesses() {
        let all = Edges { create_join: true, objects: true, locks: true };
        let mut hb = HappensBefore::new(all);
        let (creator, a, b, c) = (1, 100, 101, 102);
        // The creator starts task a; a accesses at `at`, then ends with one post.
        hb.apply(creator, SyncOp::Post { obj: 1 });
        hb.apply(a, SyncOp::Wait { obj: 1 });
        let (slot_a, at) = (hb.slot(a), hb.own(a));
        hb.apply(a, SyncOp::Post { obj: 2 });
        hb.retire(a, 1);
        // b starts before the creator waited for a's end: a slot of its own, a's access unseen.
        hb.apply(creator, SyncOp::Post { obj: 3 });
        hb.apply(b, SyncOp::Wait { obj: 3 });
        assert_ne!(hb.slot(b), slot_a);
        assert!(hb.clock(b).get(slot_a) < at);
        // After the wait, c takes a's slot over, ordered after a's access; b, which knows only
        // a's time, is not ordered after c's.
        hb.apply(creator, SyncOp::Wait { obj: 2 });
        hb.apply(creator, SyncOp::Post { obj: 4 });
        hb.apply(c, SyncOp::Wait { obj: 4 });
        assert_eq!(hb.slot(c), slot_a);
        assert!(hb.clock(c).get(slot_a) >= at);
        let c_at = hb.own(c);
        hb.apply(b, SyncOp::Wait { obj: 2 });
        assert!(hb.clock(b).get(slot_a) >= at, "b waited for a's end");
        assert!(hb.clock(b).get(slot_a) < c_at, "b does not know c's accesses");
    }

    #[test]
    fn create_join_and_objects_order_threads() {
        let mut hb = HappensBefore::new(Edges { create_join: true, objects: true, locks: false });
        let before_create = hb.clock(1);
        hb.apply(1, SyncOp::Create { child: 2 });
        assert!(hb.ordered_before(&before_create, 2));
        let child_work = hb.clock(2);
        assert!(!hb.ordered_before(&child_work, 1));
        hb.apply(2, SyncOp::Post { obj: 9 });
        hb.apply(1, SyncOp::Wait { obj: 9 });
        assert!(hb.ordered_before(&child_work, 1));
        let late = hb.clock(2);
        hb.apply(2, SyncOp::Exit);
        hb.apply(1, SyncOp::Join { child: 2 });
        assert!(hb.ordered_before(&late, 1));
    }

    fn event(kind: EventKind, tid: u32, addr: u64, dev: u64, size: u32, old: u64) -> Event {
        Event {
            kind,
            tid,
            pc: 0,
            addr,
            dev,
            size,
            old,
            new: 0,
            stack: Default::default(),
            icount: 0,
            store: None,
            flush: None,
            fence: None,
        }
    }

    fn ops(a: &mut SyncAdapter, ev: Event) -> Vec<SyncOp> {
        let mut v = Vec::new();
        a.translate(&ev, |op| v.push(op));
        v
    }

    #[test]
    fn pmemobj_condition_variables_are_condition_variables_on_the_pmemobj_mutex() {
        let mut a = SyncAdapter::default();
        // pmemobj_cond_wait(pop, cond = 0x300, mutex = 0x100): the event names cond, old mutex.
        let enter = ops(&mut a, event(EventKind::SyncEnter(SyncKind::PmemobjCondWait), 2, 0x300, 0, 0, 0x100));
        assert_eq!(
            enter,
            vec![SyncOp::Release { lock: 0x100 }, SyncOp::Acquire { lock: PMDK_PSEUDO_LOCK, mode: Mode::Exclusive }]
        );
        let signal = ops(&mut a, event(EventKind::SyncEnter(SyncKind::PmemobjCondSignal), 3, 0x300, 0, 0, 0));
        assert_eq!(signal[0], SyncOp::Post { obj: 0x300 });
        let ret = ops(&mut a, event(EventKind::SyncReturn(SyncKind::PmemobjCondWait), 2, 0x300, 0, 0, 0));
        assert_eq!(
            ret,
            vec![
                SyncOp::Release { lock: PMDK_PSEUDO_LOCK },
                SyncOp::Wait { obj: 0x300 },
                SyncOp::Acquire { lock: 0x100, mode: Mode::Exclusive }
            ]
        );
    }

    #[test]
    fn lanes_are_held_by_transactions_and_lane_calls_and_guard_the_ignored_bytes() {
        let mut a = SyncAdapter::default();
        ops(&mut a, event(EventKind::TxIgnore, 1, 0x7000, 0x1_0000, 0x100, 0));
        assert!(a.lanes.is_lane_memory(0x1_0080, 8) && !a.lanes.is_lane_memory(0x1_00fc, 8));
        assert_eq!(ops(&mut a, event(EventKind::TxBegin, 2, 0, 0, 0, 0)), vec![SyncOp::LaneHold]);
        // Nested: an atomic allocation inside the transaction, a nested transaction.
        assert!(ops(&mut a, event(EventKind::SyncEnter(SyncKind::PmemobjLane), 2, 0, 0, 0, 0)).is_empty());
        assert!(ops(&mut a, event(EventKind::TxBegin, 2, 0, 0, 0, 0)).is_empty());
        assert!(ops(&mut a, event(EventKind::TxEnd, 2, 0, 0, 0, 0)).is_empty());
        assert!(ops(&mut a, event(EventKind::SyncReturn(SyncKind::PmemobjLane), 2, 0, 0, 0, 0)).is_empty());
        let mut load = event(EventKind::Load, 2, 0, 0x1_0080, 8, 0);
        assert!(a.lanes.protects(&load));
        load.dev = 0x2_0000;
        assert!(!a.lanes.protects(&load));
        assert_eq!(ops(&mut a, event(EventKind::TxEnd, 2, 0, 0, 0, 0)), vec![SyncOp::LaneRelease]);
        load.dev = 0x1_0080;
        assert!(!a.lanes.protects(&load));
        // A thread that exits in a lane section gives it back.
        assert_eq!(
            ops(&mut a, event(EventKind::SyncEnter(SyncKind::PmemobjLane), 3, 0, 0, 0, 0)),
            vec![SyncOp::LaneHold]
        );
        assert_eq!(ops(&mut a, event(EventKind::ThreadExit, 3, 0, 0, 0, 0)), vec![SyncOp::LaneRelease, SyncOp::Exit]);
        assert_eq!(a.lanes.holds, 2);
    }

    /// Feeds OpenMP events to an adapter and applies their operations to vector clocks.
    struct OmpSim {
        a: SyncAdapter,
        hb: HappensBefore,
    }

    impl OmpSim {
        fn new() -> OmpSim {
            OmpSim {
                a: SyncAdapter::default(),
                hb: HappensBefore::new(Edges { create_join: true, objects: true, locks: true }),
            }
        }
        fn send(&mut self, kind: EventKind, tid: u32, pc: u64, addr: u64, old: u64, new: u64) {
            let mut ev = event(kind, tid, addr, 0, 0, old);
            ev.pc = pc;
            ev.new = new;
            let mut ops = Vec::new();
            self.a.translate_actors(&ev, |who, op| ops.push((who, op)));
            for (who, op) in ops {
                self.hb.apply(who, op);
            }
        }
        fn enter(&mut self, kind: SyncKind, tid: u32, pc: u64, addr: u64, old: u64, new: u64) {
            self.send(EventKind::SyncEnter(kind), tid, pc, addr, old, new);
        }
        fn leave(&mut self, kind: SyncKind, tid: u32) {
            self.send(EventKind::SyncReturn(kind), tid, 0, 0, 0, 0);
        }
        /// The clock of whoever runs on `tid` now.
        fn now(&mut self, tid: u32) -> VectorClock {
            let who = self.a.omp.actor(tid);
            self.hb.clock(who)
        }
        fn before(&mut self, c: &VectorClock, tid: u32) -> bool {
            let who = self.a.omp.actor(tid);
            self.hb.ordered_before(c, who)
        }
    }

    const BODY: u64 = 0x401000;
    const TASK_A: u64 = 0x402000;
    const TASK_B: u64 = 0x403000;

    #[test]
    fn openmp_tasks_are_ordered_by_their_declared_edges_only() {
        let mut s = OmpSim::new();
        // Thread 1 forks a region whose body thread 2 runs too (a pool thread).
        s.enter(SyncKind::OmpParallel, 1, 0, BODY, 0x7000, 0);
        s.send(EventKind::ThreadCreate, 1, 0, 0, 0, 2);
        assert!(s.a.omp.in_runtime(2));
        s.enter(SyncKind::OmpBody, 2, BODY, 0x7000, 0, 0x7f00_0000);
        assert!(!s.a.omp.in_runtime(2));
        s.enter(SyncKind::OmpBody, 1, BODY, 0x7000, 0, 0x7e00_0000);
        // Thread 1 creates task A (depend out: x) and task B (depend in: x), then task C with
        // no dependence; one bloom bit stands for x.
        let x = emu::sync::omp_depend_bit(0x5000);
        let before_create = s.now(1);
        s.enter(SyncKind::OmpTask, 1, 0, TASK_A, 1, x | 1 << 56);
        s.leave(SyncKind::OmpTask, 1);
        s.enter(SyncKind::OmpTask, 1, 0, TASK_B, 2, x << 28 | 1 << 56);
        s.leave(SyncKind::OmpTask, 1);
        s.enter(SyncKind::OmpTask, 1, 0, TASK_A, 3, 1 << 56);
        s.leave(SyncKind::OmpTask, 1);
        let after_create = s.now(1);
        // Thread 2 runs task A (argument starting with 1), then the third task (with 3).
        s.enter(SyncKind::OmpBarrier, 2, 0, 0, 0, 0);
        s.enter(SyncKind::OmpBody, 2, TASK_A, 0x9000, 1, 0x7f00_0000);
        assert!(s.a.omp.actor(2) >= OMP_TASK_BASE);
        assert!(s.before(&before_create, 2), "creation happens before the task");
        assert!(!s.before(&after_create, 2), "the creator's later work does not");
        let in_a = s.now(2);
        s.leave(SyncKind::OmpBody, 2);
        s.enter(SyncKind::OmpBody, 2, TASK_A, 0x9100, 3, 0x7f00_0000);
        assert!(!s.before(&in_a, 2), "one thread ran both, but the tasks are not ordered");
        let in_c = s.now(2);
        s.leave(SyncKind::OmpBody, 2);
        // Thread 1 runs task B: after A (its dependence), not after C.
        s.enter(SyncKind::OmpTaskwait, 1, 0, 0, 0, 0);
        s.enter(SyncKind::OmpBody, 1, TASK_B, 0x9200, 2, 0x7e00_0000);
        assert!(s.before(&in_a, 1) && !s.before(&in_c, 1));
        let in_b = s.now(1);
        s.leave(SyncKind::OmpBody, 1);
        s.leave(SyncKind::OmpTaskwait, 1);
        // After the taskwait: every child.
        assert!(s.before(&in_b, 1) && s.before(&in_c, 1));
        // Thread 2 leaves the barrier thread 1 has not reached: nothing of thread 1's yet.
        let t1 = s.now(1);
        s.enter(SyncKind::OmpBarrier, 1, 0, 0, 0, 0);
        s.leave(SyncKind::OmpBarrier, 1);
        s.leave(SyncKind::OmpBarrier, 2);
        assert!(s.before(&t1, 2) && s.before(&in_b, 2));
        // The join: thread 2's body end before the master's return.
        let t2 = s.now(2);
        s.leave(SyncKind::OmpBody, 2);
        s.leave(SyncKind::OmpBody, 1);
        s.leave(SyncKind::OmpParallel, 1);
        assert!(s.before(&t2, 1));
        assert_eq!(s.a.omp.tasks_created, 3);
    }

    #[test]
    fn locks_order_only_when_asked() {
        let mut hb = HappensBefore::new(Edges { create_join: true, objects: true, locks: false });
        hb.apply(1, SyncOp::Create { child: 2 });
        let w = hb.clock(1);
        hb.apply(1, SyncOp::Release { lock: 5 });
        hb.apply(2, SyncOp::Acquire { lock: 5, mode: Mode::Exclusive });
        assert!(!hb.ordered_before(&w, 2));
        let mut hb = HappensBefore::new(Edges { create_join: true, objects: true, locks: true });
        hb.apply(1, SyncOp::Create { child: 2 });
        let w = hb.clock(1);
        hb.apply(1, SyncOp::Release { lock: 5 });
        hb.apply(2, SyncOp::Acquire { lock: 5, mode: Mode::Exclusive });
        assert!(hb.ordered_before(&w, 2));
    }
}
