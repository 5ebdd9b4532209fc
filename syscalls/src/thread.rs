//! Threads: clone and clone3, thread exit, futexes, yielding and sleeping, and the scheduling
//! decision after each point.
//!
//! Follows Linux for what pthreads use: `clone`/`clone3` with CLONE_VM|CLONE_THREAD and the
//! usual companions (SIGHAND, SETTLS, PARENT_SETTID, CHILD_SETTID, CHILD_CLEARTID); the child
//! inherits every register (general, XMM, MXCSR, x87) with RAX = 0, runs on `stack` (clone) or
//! `stack + stack_size` (clone3), and PARENT_SETTID is written before either thread runs. At
//! thread exit CHILD_CLEARTID is zeroed and futex-woken, and the robust-futex list is walked
//! (FUTEX_OWNER_DIED). `exit` ends one thread, `exit_group` the process.
//!
//! Futexes: WAIT, WAKE, WAIT_BITSET, WAKE_BITSET, REQUEUE, CMP_REQUEUE, WAKE_OP and
//! `futex_waitv` (a thread queued on several words, woken on any), keyed by
//! (process, address), or, without FUTEX_PRIVATE_FLAG on a shared mapping, by what it maps (a PM
//! line's device address, a shared page) so that processes meet there. Timeouts are relative for WAIT and absolute for WAIT_BITSET, on
//! the virtual clock. Which of several waiters a wake picks is a seeded choice of the scheduler,
//! as Linux gives no order. Priority-inheritance operations are [`crate::pifutex`]'s.
//!
//! `clone` without CLONE_VM is a fork ([`crate::procs`]). Left out: CLONE_VM without
//! CLONE_THREAD (posix_spawn's; refused with ENOSYS and named), CLONE_PIDFD, namespaces. A signal interrupts a futex wait or a sleep
//! ([`Interrupted`], decided in [`Kernel::deliver_pending`]).

use std::collections::BTreeSet;

use emu::sched::Point;
use emu::{Machine, Reg};
use rustc_hash::FxHashMap;

pub use crate::pifutex::PiWait;
use crate::{err, Errno, Kernel, SysResult};

const CLONE_VM: u64 = 0x100;
const CLONE_FS: u64 = 0x200;
const CLONE_FILES: u64 = 0x400;
const CLONE_SIGHAND: u64 = 0x800;
const CLONE_THREAD: u64 = 0x10000;
const CLONE_SYSVSEM: u64 = 0x40000;
const CLONE_SETTLS: u64 = 0x80000;
const CLONE_PARENT_SETTID: u64 = 0x10_0000;
const CLONE_CHILD_CLEARTID: u64 = 0x20_0000;
const CLONE_DETACHED: u64 = 0x40_0000;
const CLONE_CHILD_SETTID: u64 = 0x100_0000;
const THREAD_FLAGS: u64 = CLONE_VM
    | CLONE_FS
    | CLONE_FILES
    | CLONE_SIGHAND
    | CLONE_THREAD
    | CLONE_SYSVSEM
    | CLONE_SETTLS
    | CLONE_PARENT_SETTID
    | CLONE_CHILD_CLEARTID
    | CLONE_DETACHED
    | CLONE_CHILD_SETTID;

pub(crate) const FUTEX_WAITERS: u32 = 0x8000_0000;
pub(crate) const FUTEX_OWNER_DIED: u32 = 0x4000_0000;
pub(crate) const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
const ALL_BITS: u32 = u32::MAX;

/// Why a thread cannot run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Blocked in FUTEX_WAIT on `addr` until woken (or `deadline`, virtual ns since boot).
    Futex {
        /// The futex word's key (`Kernel::futex_key`): its process and address, or what a
        /// shared futex maps.
        addr: u64,
        /// FUTEX_WAIT_BITSET's bits (all for FUTEX_WAIT): a wake must share one.
        bitset: u32,
        /// When the wait times out (ETIMEDOUT), if it does.
        deadline: Option<u64>,
    },
    /// Blocked in `futex_waitv` on every key of its [`KThread::futexv`] at once, until a wake
    /// on any of them (the call then returns that key's index) or `deadline` (virtual ns since
    /// boot).
    FutexV {
        /// When the wait times out (ETIMEDOUT), if it does.
        deadline: Option<u64>,
    },
    /// Sleeping until `deadline` (virtual ns since boot).
    Sleep {
        /// When it wakes.
        deadline: u64,
    },
    /// `clock_nanosleep` on another thread's or a process's CPU clock, until that clock reads
    /// what its entry in the timers' table says ([`crate::timers::CpuSleep`]): it advances only
    /// while that thread or process runs, so this wait has no deadline on the boot clock.
    CpuSleep,
    /// Blocked in a call on descriptors (read, write, accept, connect, poll, epoll_wait,
    /// select ...) until one of the objects in its [`KThread::io_keys`] changes readiness, or
    /// until `deadline` (virtual ns since boot; poll's timeout). Its RIP is back at the
    /// `syscall` and RAX holds the call's number: woken, it makes the call again, which
    /// completes or blocks anew (restart on wake, as Linux's ERESTARTSYS).
    Io {
        /// When the call gives up (its timeout), if it does.
        deadline: Option<u64>,
    },
    /// The parent of a `vfork` (or `clone(CLONE_VFORK)`) until its child execs or ends: nothing
    /// else wakes it, not even a signal (Linux's wait is killable only), since the child may be
    /// running on its memory.
    Vfork {
        /// The child's pid.
        child: u32,
    },
    /// Held by PMRace's targeted interleaving (`emu::sched::Hold`): a reader at a sync-point
    /// load until the matching store (`until: None`), or that store's writer until `until`
    /// instructions have retired (the readers go first).
    Held {
        /// The instruction count the writer's wait ends at; `None` for a reader.
        until: Option<u64>,
    },
}

/// The kernel's view of a guest thread.
#[derive(Clone, Debug)]
pub struct KThread {
    /// Its thread id.
    pub tid: u32,
    /// The process it belongs to (its thread group id).
    pub pid: u32,
    /// CLONE_CHILD_CLEARTID / `set_tid_address`: zeroed and futex-woken at exit.
    pub clear_child_tid: u64,
    /// `set_robust_list`'s head, walked at exit.
    pub robust_list: u64,
    /// What it waits for; `None` when it can run. Changed only through `Kernel::set_wait`.
    pub wait: Option<Wait>,
    /// Order of arrival among waiters, for fairness of the seeded choice's candidates.
    pub wait_seq: u64,
    /// Backtrace where it blocked, for deadlock reports.
    pub blocked_at: Vec<u64>,
    /// Blocked signals.
    pub sigmask: u64,
    /// The alternate signal stack: ss_sp, ss_flags, ss_size.
    pub altstack: [u64; 3],
    /// The readiness keys ([`crate::fd::Pipe::id`] ...) a [`Wait::Io`] waits on.
    pub io_keys: Vec<u64>,
    /// The absolute deadline of the call on descriptors being restarted, so a restart does not
    /// start its timeout again; `None` when no call is under way (or it has no timeout).
    pub io_deadline: Option<u64>,
    /// The deadline of a sleep or a timed futex wait that a signal woke without a handler to
    /// run (ignored once sent, taken elsewhere): Linux makes such a call again through its
    /// restart block (`hrtimer_nanosleep_restart`, `futex_wait_restart`) for the time it had
    /// left, so the call made again takes this deadline instead of its relative timeout.
    pub restart_deadline: Option<u64>,
    /// Signals sent to it alone (tkill/tgkill, SIGPIPE, a timer with its id), pending until it
    /// takes them: one instance of a standard signal, a real-time one's in the order sent. Its
    /// process's are in [`crate::Kernel::shared_pending`].
    pub sigpending: Vec<crate::signal::SigInfo>,
    /// It is parked at a `syscall` it makes again when it runs (a blocked call on descriptors,
    /// `wait4`, `rt_sigsuspend`): a signal delivered then interrupts that call.
    pub in_call: bool,
    /// The mask `rt_sigsuspend`, `ppoll`, `pselect6` or `epoll_pwait` replaced for the call's
    /// duration, for the frame of the signal that ends it (or restored when the call returns).
    pub saved_mask: Option<u64>,
    /// The signals `rt_sigtimedwait` waits for while it is blocked in it (0: not in one).
    pub sigwait: u64,
    /// A futex wait or a sleep a signal interrupted: its result is decided when the signal is
    /// delivered ([`Kernel::deliver_pending`]).
    pub interrupted: Option<Interrupted>,
    /// Its name (NUL-padded, at most 15 bytes): what `prctl(PR_SET_NAME)` or the last
    /// `execve` gave it; `None`: the first program's file name.
    pub comm: Option<[u8; 16]>,
    /// The instructions retired while it ran, in ns of the virtual CPU (one each), charged at
    /// each scheduling decision that switches away from it ([`Kernel::charge_cpu`]).
    pub cpu_ns: u64,
    /// What its futex wait with no bitset (`Wait::Futex { bitset: 0, .. }`) is: a
    /// priority-inheritance wait ([`PiWait`]). Meaningful only while it waits so.
    pub pi_wait: PiWait,
    /// The futex keys a [`Wait::FutexV`] waits on, in the order of `futex_waitv`'s vector (a
    /// key named twice is queued once, at its first index).
    pub futexv: Vec<u64>,
    /// `sched_setaffinity`'s CPUs (a bit each, as Linux's mask), none of them above `--cpus`;
    /// empty: every CPU. Inherited by the threads and processes it makes.
    pub affinity: Vec<u64>,
}

/// A wait a signal cut short, parked after its `syscall` with RAX still the call's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interrupted {
    /// A futex wait, with a timeout or not: restarted under `SA_RESTART` (Linux's ERESTARTSYS)
    /// without one, or with one in futex2's `futex_wait` and `futex_waitv` (absolute); the
    /// classic call with one returns EINTR (its restart block is not taken under a handler).
    Futex {
        /// It had a timeout.
        timed: bool,
        /// When it would have timed out (virtual ns since boot), for a restart without a
        /// handler ([`KThread::restart_deadline`]).
        deadline: Option<u64>,
    },
    /// A priority-inheritance futex wait ([`crate::pifutex`]): made again after the handler,
    /// or, once moved to its PI futex by `FUTEX_CMP_REQUEUE_PI`, ended with EAGAIN.
    FutexPi {
        /// It had been moved.
        requeued: bool,
    },
    /// `nanosleep` or `clock_nanosleep` until `deadline` (virtual ns since boot): EINTR, with
    /// the time left written to `rem` for a relative sleep.
    Sleep {
        /// When it would have woken.
        deadline: u64,
    },
    /// `clock_nanosleep` on a CPU clock until it reads `until`: EINTR, with the CPU time left
    /// written to `rem` for a relative sleep (0 and success if the clock got there already).
    CpuSleep {
        /// The clock.
        clock: crate::time::CpuClock,
        /// The instant on it.
        until: u64,
    },
}

/// Who is runnable and who waits for what, derived from the threads' [`Wait`]s and kept in step
/// with every change of one ([`Kernel::set_wait`]): a scheduling point, a futex wake or the
/// search for the next deadline costs O(log n) in the number of threads, never a scan of them.
#[derive(Clone, Debug, Default)]
pub(crate) struct WaitIndex {
    /// Threads that can run, sorted by id.
    runnable: Vec<u32>,
    /// Futex waits and sleeps with a deadline: (deadline in virtual ns, tid).
    deadlines: BTreeSet<(u64, u32)>,
    /// Writers held by the targeted interleaving until an instruction count: (count, tid).
    held_until: BTreeSet<(u64, u32)>,
    /// Readers held until the hold's store, sorted by id.
    held_readers: Vec<u32>,
    /// When each held reader gives up waiting: (instruction count, tid) (entries of readers
    /// released meanwhile are dropped when they come up).
    reader_deadlines: BTreeSet<(u64, u32)>,
    /// A held reader was released as the privileged thread (PMRace's one per run).
    privileged_chosen: bool,
    /// Futex waiters by address, in arrival order: (wait_seq, tid, bitset); a bitset of 0 is a
    /// priority-inheritance wait ([`crate::pifutex`]).
    pub(crate) futex: FxHashMap<u64, Vec<(u64, u32, u32)>>,
    /// The owner of each PI futex that has waiters (or a grant), by key ([`crate::pifutex`]).
    pub(crate) pi_owner: std::collections::BTreeMap<u64, u32>,
    /// PI futexes handed to a waiter by an owner that ended: (waiter, key), taken when the
    /// waiter makes its call again.
    pub(crate) pi_grants: Vec<(u32, u64)>,
    /// Threads in [`Wait::Io`] by readiness key, sorted by id.
    pub(crate) io: FxHashMap<u64, Vec<u32>>,
    /// Threads of stopped processes (`SIGSTOP` ...), sorted by id: one that could run is in
    /// `parked` instead of `runnable` until its process is continued ([`crate::procs`]).
    stopped: Vec<u32>,
    /// Threads of stopped processes that could run, sorted by id.
    parked: Vec<u32>,
}

/// futex2's flags (`FUTEX2_*`, include/uapi/linux/futex.h).
const FUTEX2_SIZE_U32: u32 = 2;
const FUTEX2_SIZE_MASK: u32 = 3;
const FUTEX2_NUMA: u32 = 4;
const FUTEX2_MPOL: u32 = 8;
const FUTEX2_PRIVATE: u32 = 128;
const FUTEX2_VALID_MASK: u32 = FUTEX2_SIZE_MASK | FUTEX2_NUMA | FUTEX2_MPOL | FUTEX2_PRIVATE;

/// Linux's `futex2_to_flags` and `futex_flags_valid`: known flags, and 32-bit words only.
fn futex2_flags_valid(flags: u32) -> Result<(), Errno> {
    if flags & !FUTEX2_VALID_MASK != 0 || flags & FUTEX2_SIZE_MASK != FUTEX2_SIZE_U32 {
        return err(libc::EINVAL);
    }
    Ok(())
}

impl WaitIndex {
    /// The index of a process whose only thread, `tid`, is running.
    pub(crate) fn new(tid: u32) -> WaitIndex {
        WaitIndex { runnable: vec![tid], ..WaitIndex::default() }
    }

    /// The earliest deadline of a wait, in virtual ns.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|x| x.0)
    }

    /// The earliest instruction count at which a hold of the targeted interleaving or of delay
    /// injection ends: a held writer's wait, or the patience of a reader still held (the
    /// deadlines of readers released meanwhile end nothing). Few threads are held at once.
    pub(crate) fn next_hold_end(&self) -> Option<u64> {
        let writer = self.held_until.first().map(|x| x.0);
        let reader = self.reader_deadlines.iter().find(|x| self.held_readers.binary_search(&x.1).is_ok()).map(|x| x.0);
        writer.into_iter().chain(reader).min()
    }

    fn insert_sorted(v: &mut Vec<u32>, tid: u32) {
        if let Err(i) = v.binary_search(&tid) {
            v.insert(i, tid);
        }
    }

    fn remove_sorted(v: &mut Vec<u32>, tid: u32) {
        if let Ok(i) = v.binary_search(&tid) {
            v.remove(i);
        }
    }

    /// Queues thread `tid`, arrived at position `seq`, as a waiter on futex `key`.
    fn queue_futex(futex: &mut FxHashMap<u64, Vec<(u64, u32, u32)>>, key: u64, seq: u64, tid: u32, bitset: u32) {
        let q = futex.entry(key).or_default();
        // Requeued waiters keep their arrival order among the ones already there.
        let i = q.partition_point(|x| (x.0, x.1) < (seq, tid));
        q.insert(i, (seq, tid, bitset));
    }

    /// Takes thread `tid` out of the waiters on futex `key`.
    fn unqueue_futex(futex: &mut FxHashMap<u64, Vec<(u64, u32, u32)>>, key: u64, tid: u32) {
        if let Some(q) = futex.get_mut(&key) {
            q.retain(|x| x.1 != tid);
            if q.is_empty() {
                futex.remove(&key);
            }
        }
    }

    /// Thread `tid` enters state `w` (`None`: runnable), having arrived at position `seq`.
    pub(crate) fn add(&mut self, tid: u32, w: Option<Wait>, seq: u64) {
        match w {
            None if self.stopped.binary_search(&tid).is_ok() => Self::insert_sorted(&mut self.parked, tid),
            None => Self::insert_sorted(&mut self.runnable, tid),
            Some(Wait::Futex { addr, bitset, deadline }) => {
                Self::queue_futex(&mut self.futex, addr, seq, tid, bitset);
                if let Some(d) = deadline {
                    self.deadlines.insert((d, tid));
                }
            }
            Some(Wait::Sleep { deadline })
            | Some(Wait::Io { deadline: Some(deadline) })
            | Some(Wait::FutexV { deadline: Some(deadline) }) => {
                self.deadlines.insert((deadline, tid));
            }
            Some(Wait::Io { deadline: None })
            | Some(Wait::Vfork { .. })
            | Some(Wait::FutexV { deadline: None })
            | Some(Wait::CpuSleep) => {}
            Some(Wait::Held { until: Some(n) }) => {
                self.held_until.insert((n, tid));
            }
            Some(Wait::Held { until: None }) => Self::insert_sorted(&mut self.held_readers, tid),
        }
    }

    /// Thread `tid` stops (`true`: its process stopped) or goes on: a stopped thread that could
    /// run waits in `parked`, and comes back to `runnable` when its process is continued.
    pub(crate) fn set_stopped(&mut self, tid: u32, stopped: bool) {
        if stopped {
            Self::insert_sorted(&mut self.stopped, tid);
            if let Ok(i) = self.runnable.binary_search(&tid) {
                self.runnable.remove(i);
                Self::insert_sorted(&mut self.parked, tid);
            }
        } else {
            Self::remove_sorted(&mut self.stopped, tid);
            if let Ok(i) = self.parked.binary_search(&tid) {
                self.parked.remove(i);
                Self::insert_sorted(&mut self.runnable, tid);
            }
        }
    }

    /// Whether thread `tid` can run now (it waits for nothing and its process is not stopped).
    pub(crate) fn is_runnable(&self, tid: u32) -> bool {
        self.runnable.binary_search(&tid).is_ok()
    }

    /// Thread `tid` leaves state `w`.
    pub(crate) fn remove(&mut self, tid: u32, w: Option<Wait>) {
        match w {
            None => {
                Self::remove_sorted(&mut self.runnable, tid);
                Self::remove_sorted(&mut self.parked, tid);
            }
            Some(Wait::Futex { addr, deadline, .. }) => {
                Self::unqueue_futex(&mut self.futex, addr, tid);
                if let Some(d) = deadline {
                    self.deadlines.remove(&(d, tid));
                }
            }
            Some(Wait::Sleep { deadline })
            | Some(Wait::Io { deadline: Some(deadline) })
            | Some(Wait::FutexV { deadline: Some(deadline) }) => {
                self.deadlines.remove(&(deadline, tid));
            }
            Some(Wait::Io { deadline: None })
            | Some(Wait::Vfork { .. })
            | Some(Wait::FutexV { deadline: None })
            | Some(Wait::CpuSleep) => {}
            Some(Wait::Held { until: Some(n) }) => {
                self.held_until.remove(&(n, tid));
            }
            Some(Wait::Held { until: None }) => Self::remove_sorted(&mut self.held_readers, tid),
        }
    }
}

/// What the scheduler found when nothing could run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deadlock {
    /// Each live thread with the backtrace of its blocking call.
    pub threads: Vec<(u32, Vec<u64>)>,
}

/// Creates the parked child of a clone or fork: the caller's registers with RAX = 0, on `stack`
/// if given, with the TLS `tls` under CLONE_SETTLS.
pub(crate) fn spawn_child(m: &mut Machine, tid: u32, flags: u64, stack: u64, tls: u64) -> Result<(), Errno> {
    let mut regs = vec![(Reg::RAX, 0)];
    if stack != 0 {
        regs.push((Reg::RSP, stack));
    }
    if flags & CLONE_SETTLS != 0 {
        regs.push((Reg::FS_BASE, tls));
    }
    m.spawn_thread(tid, &regs).map_err(|_| Errno(libc::ENOMEM))
}

impl KThread {
    /// A runnable thread of the first process with nothing registered.
    pub fn new(tid: u32) -> KThread {
        KThread {
            tid,
            pid: crate::process::PID,
            clear_child_tid: 0,
            robust_list: 0,
            wait: None,
            wait_seq: 0,
            blocked_at: Vec::new(),
            sigmask: 0,
            altstack: [0, 2, 0],
            io_keys: Vec::new(),
            io_deadline: None,
            restart_deadline: None,
            sigpending: Vec::new(),
            in_call: false,
            saved_mask: None,
            sigwait: 0,
            interrupted: None,
            comm: None,
            cpu_ns: 0,
            pi_wait: PiWait::Lock,
            futexv: Vec::new(),
            affinity: Vec::new(),
        }
    }
}

impl Kernel {
    pub(crate) fn thread_mut(&mut self, tid: u32) -> &mut KThread {
        self.threads.entry(tid).or_insert_with(|| KThread::new(tid))
    }

    /// Every change of a thread's wait goes through here, so that [`WaitIndex`] stays exact.
    /// `seq`, if given, is the thread's new place in the order of arrival among waiters.
    pub(crate) fn set_wait(&mut self, tid: u32, w: Option<Wait>, seq: Option<u64>) {
        let Some(t) = self.threads.get_mut(&tid) else { return };
        let old = t.wait;
        t.wait = w;
        if let Some(seq) = seq {
            t.wait_seq = seq;
        }
        if w.is_none() {
            t.blocked_at.clear();
        }
        let seq = t.wait_seq;
        if matches!(old, Some(Wait::Io { .. })) {
            for k in std::mem::take(&mut t.io_keys) {
                if let Some(q) = self.waits.io.get_mut(&k) {
                    WaitIndex::remove_sorted(q, tid);
                    if q.is_empty() {
                        self.waits.io.remove(&k);
                    }
                }
            }
        }
        if old == Some(Wait::CpuSleep) && w != Some(Wait::CpuSleep) {
            // Woken, interrupted or gone: its clock's instant is of no more use.
            self.timers.forget_sleep(tid);
        }
        if matches!(w, Some(Wait::Io { .. })) {
            for &k in &t.io_keys {
                WaitIndex::insert_sorted(self.waits.io.entry(k).or_default(), tid);
            }
        }
        // A futex_waitv waiter is queued on each of its keys, as one plain waiter is on its one.
        if matches!(old, Some(Wait::FutexV { .. })) {
            for k in std::mem::take(&mut t.futexv) {
                // A key named twice was queued once; the second removal finds nothing.
                WaitIndex::unqueue_futex(&mut self.waits.futex, k, tid);
            }
        }
        if matches!(w, Some(Wait::FutexV { .. })) {
            for (i, &k) in t.futexv.iter().enumerate() {
                if !t.futexv[..i].contains(&k) {
                    WaitIndex::queue_futex(&mut self.waits.futex, k, seq, tid, ALL_BITS);
                }
            }
        }
        self.waits.remove(tid, old);
        self.waits.add(tid, w, seq);
    }

    /// Thread `tid` is gone (its process ended): out of every wait and the index.
    pub(crate) fn drop_thread(&mut self, tid: u32) {
        self.set_wait(tid, None, None);
        self.waits.set_stopped(tid, false);
        if let Some(t) = self.threads.remove(&tid) {
            self.waits.remove(tid, t.wait);
            // Its process's signals chosen for it go to another thread.
            self.retarget_shared(t.pid);
        }
    }

    /// The object behind readiness key `key` changed (bytes arrived or left, a peer closed, a
    /// connection was queued): every thread blocked on it makes its call again.
    pub(crate) fn io_ready(&mut self, key: u64) {
        self.io_epoch += 1;
        let Some(q) = self.waits.io.get(&key) else { return };
        // Cleared by set_wait as each leaves; a copy of the few ids, not of the index.
        let tids: Vec<u32> = q.clone();
        for tid in tids {
            self.set_wait(tid, None, None);
        }
    }

    /// Some descriptor was closed: its objects' ends may have closed with it (a pipe's last
    /// writer, a socket's peer), which only the descriptions' drops know. Every thread blocked
    /// on descriptors looks again; those whose call still cannot complete block again.
    pub(crate) fn io_ready_all(&mut self) {
        self.io_epoch += 1;
        if self.waits.io.is_empty() {
            return;
        }
        let mut tids: Vec<u32> = self.waits.io.values().flatten().copied().collect();
        tids.sort_unstable();
        tids.dedup();
        for tid in tids {
            self.set_wait(tid, None, None);
        }
    }

    /// The running thread blocks in a call on descriptors (the call returned [`crate::RESTART`]
    /// after naming its keys in `Kernel::block_keys`): RIP goes back to the `syscall` and RAX
    /// to the call's number `nr`, so that, woken, the thread makes the call again.
    pub(crate) fn block_io(&mut self, m: &mut Machine, nr: u64) {
        let cur = self.current;
        let keys = std::mem::take(&mut self.block_keys);
        let pc = m.pc();
        m.set_reg(Reg::RIP, pc.wrapping_sub(2));
        m.set_reg(Reg::RAX, nr);
        let wake = self.block_wake.take();
        let t = self.thread_mut(cur);
        // Woken at its timeout or when a timer it watches expires, whichever comes first.
        let deadline = match (t.io_deadline, wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        t.io_keys = keys;
        t.in_call = true;
        self.block(m, Wait::Io { deadline });
    }

    /// Whether the running thread's call on descriptors, which waits `timeout_ns` (`None`:
    /// forever), has timed out. Its deadline is computed on the first try and kept across
    /// restarts, so waking and blocking again does not start the timeout afresh.
    pub(crate) fn io_deadline(&mut self, m: &Machine, timeout_ns: Option<u64>) -> bool {
        let now = self.now_ns(m);
        let cur = self.current;
        let t = self.thread_mut(cur);
        if t.io_deadline.is_none() {
            t.io_deadline = timeout_ns.map(|ns| now.saturating_add(ns));
        }
        t.io_deadline.is_some_and(|d| d <= now)
    }

    /// The deadline a sleep or futex wait made again after a signal without a handler keeps
    /// ([`KThread::restart_deadline`]), taken by the call made again.
    pub(crate) fn take_restart_deadline(&mut self) -> Option<u64> {
        let cur = self.current;
        self.threads.get_mut(&cur).and_then(|t| t.restart_deadline.take())
    }

    /// The running thread's call on descriptors completed: a later call starts afresh.
    pub(crate) fn io_done(&mut self) {
        let cur = self.current;
        if let Some(t) = self.threads.get_mut(&cur) {
            t.io_deadline = None;
        }
    }

    /// Threads that can run now, sorted.
    pub fn runnable(&self) -> Vec<u32> {
        self.waits.runnable.clone()
    }

    /// Whether the running thread can go on: a stop signal may have stopped its process.
    pub fn current_runnable(&self) -> bool {
        self.waits.is_runnable(self.current)
    }

    /// How many threads can run now.
    pub fn runnable_count(&self) -> usize {
        self.waits.runnable.len()
    }

    /// Threads alive (running, runnable or waiting).
    pub fn live_threads(&self) -> usize {
        self.threads.len()
    }

    /// The tids of the threads alive, in order.
    pub fn thread_ids(&self) -> Vec<u32> {
        self.threads.keys().copied().collect()
    }

    /// `membarrier`: every command is a no-op that succeeds, since the machine runs one thread
    /// at a time and each switch orders memory as a barrier would. The query lists the
    /// commands Linux 6.x has (`MEMBARRIER_CMD_*`, glibc's and liburcu's choices among them).
    /// The private expedited commands need their registration first (EPERM, as Linux's
    /// `membarrier_private_expedited`): liburcu and .NET register, then test that they did.
    pub(crate) fn membarrier(&mut self, cmd: i32, flags: u32) -> SysResult {
        // Up to MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE; the RSEQ pair is left
        // out, as ferrite has no rseq (its registration is ENOSYS).
        const ALL: i32 = 1 | 2 | 4 | 8 | 16 | 32 | 64;
        // PRIVATE_EXPEDITED (8) and its _SYNC_CORE (32): each registered by the next bit up.
        const PRIVATE: i32 = 8 | 32;
        const REGISTER: i32 = 4 | 16 | 64;
        if flags != 0 || cmd < 0 || cmd & (cmd - 1) != 0 || (cmd != 0 && cmd & ALL == 0) {
            return err(libc::EINVAL);
        }
        if cmd == 0 {
            return Ok(ALL as u64);
        }
        let pid = self.pid;
        let Some(p) = self.procs.get_mut(&pid) else { return Ok(0) };
        if cmd & REGISTER != 0 {
            p.ctl.membarrier |= cmd as u8;
        } else if cmd & PRIVATE != 0 && p.ctl.membarrier & (cmd << 1) as u8 == 0 {
            return err(libc::EPERM);
        }
        Ok(0)
    }

    /// clone(2): `flags, stack, parent_tid, child_tid, tls`.
    pub(crate) fn clone_thread(
        &mut self,
        m: &mut Machine,
        flags: u64,
        stack: u64,
        ptid: u64,
        ctid: u64,
        tls: u64,
    ) -> SysResult {
        // Linux's `copy_process` refuses these combinations before anything else: a thread
        // shares its signal handlers, and shared handlers need a shared address space (and a
        // new mount or user namespace cannot share the file-system root).
        const CLONE_FS: u64 = 0x200;
        const CLONE_NEWNS: u64 = 0x2_0000;
        const CLONE_NEWUSER: u64 = 0x1000_0000;
        if (flags & CLONE_THREAD != 0 && flags & CLONE_SIGHAND == 0)
            || (flags & CLONE_SIGHAND != 0 && flags & CLONE_VM == 0)
            || (flags & CLONE_FS != 0 && flags & (CLONE_NEWNS | CLONE_NEWUSER) != 0)
        {
            return err(libc::EINVAL);
        }
        if flags & CLONE_VM == 0 || flags & CLONE_THREAD == 0 {
            // A new process: a copy of the address space, or (CLONE_VM) the same one.
            return match self.fork(m, flags, stack, ptid, ctid, tls)? {
                Some(pid) => Ok(pid),
                None => err(crate::VFORKED),
            };
        }
        if flags & !(THREAD_FLAGS | 0xff) != 0 {
            self.note_named(m, 56, "clone with unsupported flags");
            return err(libc::EINVAL);
        }
        let tid = self.new_tid()?;
        if flags & CLONE_PARENT_SETTID != 0 {
            m.write(ptid, &tid.to_le_bytes(), false)?;
        }
        if flags & CLONE_CHILD_SETTID != 0 {
            m.write(ctid, &tid.to_le_bytes(), false)?;
        }
        spawn_child(m, tid, flags, stack, tls)?;
        let (mask, comm, affinity) =
            self.threads.get(&self.current).map(|t| (t.sigmask, t.comm, t.affinity.clone())).unwrap_or_default();
        let pid = self.pid;
        let t = self.thread_mut(tid);
        // The child inherits the signal mask, the name and the CPUs it may run on; a thread
        // sharing the address space starts without an alternate stack.
        t.sigmask = mask;
        t.comm = comm;
        t.affinity = affinity;
        t.pid = pid;
        if flags & CLONE_CHILD_CLEARTID != 0 {
            t.clear_child_tid = ctid;
        }
        self.waits.add(tid, None, 0);
        self.created.push((tid, if flags & CLONE_SETTLS != 0 { tls } else { 0 }, false));
        Ok(u64::from(tid))
    }

    /// A thread id for a new thread or process, or EAGAIN past `--max-threads`.
    pub(crate) fn new_tid(&mut self) -> Result<u32, Errno> {
        if self.threads.len() >= self.max_threads {
            return Err(Errno(libc::EAGAIN));
        }
        let tid = self.next_tid;
        self.next_tid += 1;
        Ok(tid)
    }

    /// clone3(2): a `struct clone_args` of 64, 80 or 88 bytes, or a larger one (up to a page)
    /// whose bytes past the 88 Linux 6.1 knows are zero, as `copy_struct_from_user` takes it.
    pub(crate) fn clone3(&mut self, m: &mut Machine, args: u64, size: u64) -> SysResult {
        if size > 4096 {
            return err(libc::E2BIG);
        }
        if size < 64 {
            return err(libc::EINVAL);
        }
        if size > 88 {
            let mut tail = vec![0u8; (size - 88) as usize];
            m.read(args + 88, &mut tail).map_err(|_| Errno(libc::EFAULT))?;
            if tail.iter().any(|&b| b != 0) {
                return err(libc::E2BIG);
            }
        }
        let f = |i: u64| m.read_u64(args + 8 * i);
        let (flags, _pidfd, ctid, ptid, exit_signal, stack, stack_size, tls) =
            (f(0)?, f(1)?, f(2)?, f(3)?, f(4)?, f(5)?, f(6)?, f(7)?);
        if size >= 80 && f(9)? != 0 {
            return err(libc::EINVAL); // set_tid
        }
        if exit_signal != 0 && flags & CLONE_THREAD != 0 {
            return err(libc::EINVAL);
        }
        let top = if stack != 0 { stack.checked_add(stack_size).ok_or(Errno(libc::EINVAL))? } else { 0 };
        self.clone_thread(m, flags, top, ptid, ctid, tls)
    }

    pub(crate) fn set_tid_address(&mut self, ptr: u64) -> SysResult {
        let cur = self.current;
        self.thread_mut(cur).clear_child_tid = ptr;
        Ok(u64::from(cur))
    }

    pub(crate) fn set_robust_list(&mut self, head: u64, len: u64) -> SysResult {
        if len != 24 {
            return err(libc::EINVAL);
        }
        let cur = self.current;
        self.thread_mut(cur).robust_list = head;
        Ok(0)
    }

    /// The running thread ends (`exit`). Returns whether it was the last of its process.
    pub(crate) fn exit_thread(&mut self, m: &mut Machine) -> bool {
        let cur = self.current;
        let t = self.threads.get(&cur).cloned().unwrap_or_else(|| KThread::new(cur));
        self.walk_robust_list(m, cur, t.robust_list);
        self.pi_exit(m, cur);
        if t.clear_child_tid != 0 && m.write(t.clear_child_tid, &0u32.to_le_bytes(), false).is_ok() {
            let key = self.futex_key(m, t.clear_child_tid, false);
            self.wake(m, key, t.clear_child_tid, 1, ALL_BITS);
        }
        if let Some(t) = self.threads.remove(&cur) {
            self.waits.remove(cur, t.wait);
        }
        !self.threads.values().any(|t| t.pid == self.pid)
    }

    pub(crate) fn walk_robust_list(&mut self, m: &mut Machine, tid: u32, head: u64) {
        if head == 0 {
            return;
        }
        let (Ok(first), Ok(offset), Ok(pending)) = (m.read_u64(head), m.read_u64(head + 8), m.read_u64(head + 16))
        else {
            return;
        };
        // Each pointer's low bit says its lock is a PI futex (Linux's `fetch_robust_entry`).
        let mut entries = Vec::new();
        let mut e = first;
        // Bounded like Linux's ROBUST_LIST_LIMIT, so a corrupt list cannot hang the kernel.
        for _ in 0..2048 {
            if e & !1 == head || e & !1 == 0 {
                break;
            }
            entries.push(e);
            match m.read_u64(e & !1) {
                Ok(next) => e = next,
                Err(_) => break,
            }
        }
        if pending & !1 != 0 {
            entries.push(pending);
        }
        for e in entries {
            let (pi, word) = (e & 1 != 0, (e & !1).wrapping_add(offset));
            let Ok(v) = m.read_u32(word) else { continue };
            if v & FUTEX_TID_MASK == tid {
                let nv = (v & FUTEX_WAITERS) | FUTEX_OWNER_DIED;
                // A PI futex's waiter is handed the lock by `pi_exit` instead of woken here.
                if m.write(word, &nv.to_le_bytes(), false).is_ok() && v & FUTEX_WAITERS != 0 && !pi {
                    let key = self.futex_key(m, word, false);
                    self.wake(m, key, word, 1, ALL_BITS);
                }
            }
        }
    }

    /// Wakes up to `n` waiters on `addr` whose bitset meets `bits`; which ones is the seeded
    /// scheduler's choice. Returns how many woke.
    /// `key` is the futex's ([`Kernel::futex_key`]), `addr` the word the caller named.
    fn wake(&mut self, m: &mut Machine, key: u64, addr: u64, n: u64, bits: u32) -> u64 {
        let mut woken = 0;
        while woken < n {
            let Some(q) = self.waits.futex.get(&key) else { break };
            // The waiters whose bitset meets `bits`, in arrival order, counted then indexed:
            // nothing is collected.
            let matching = |x: &&(u64, u32, u32)| x.2 & bits != 0;
            let count = q.iter().filter(matching).count();
            if count == 0 {
                break;
            }
            let k = m.scheduler().choose(count);
            let Some(&(_, pick, _)) = self.waits.futex.get(&key).and_then(|q| q.iter().filter(matching).nth(k)) else {
                break;
            };
            // A futex_waitv waiter returns the index of the futex that woke it.
            let ret = match self.threads.get(&pick) {
                Some(t) if matches!(t.wait, Some(Wait::FutexV { .. })) => {
                    t.futexv.iter().position(|&k| k == key).unwrap_or(0) as u64
                }
                _ => 0,
            };
            self.resume(m, pick, ret);
            self.woken.push((pick, addr));
            woken += 1;
        }
        woken
    }

    /// Makes a blocked thread runnable with `ret` as its system call's result.
    pub(crate) fn resume(&mut self, m: &mut Machine, tid: u32, ret: u64) {
        self.set_wait(tid, None, None);
        m.set_parked_reg(tid, Reg::RAX, ret);
    }

    pub(crate) fn block(&mut self, m: &Machine, w: Wait) {
        let cur = self.current;
        let seq = self.wait_counter;
        self.wait_counter += 1;
        m.backtrace_into(&mut self.thread_mut(cur).blocked_at);
        self.set_wait(cur, Some(w), Some(seq));
    }

    /// The monotonic deadline of futex2's absolute timeout at `timeout` (none when 0) on
    /// `clockid` (`CLOCK_REALTIME` or `CLOCK_MONOTONIC`, else EINVAL), as `futex_wait` and
    /// `futex_waitv` take it.
    fn futex2_deadline(&self, m: &Machine, timeout: u64, clockid: i32) -> Result<Option<u64>, Errno> {
        if timeout == 0 {
            return Ok(None);
        }
        let realtime = match clockid {
            libc::CLOCK_REALTIME => true,
            libc::CLOCK_MONOTONIC => false,
            _ => return err(libc::EINVAL),
        };
        let t = self.read_timeout(m, timeout)?;
        Ok(Some(if realtime { t.saturating_sub(self.realtime_offset_ns()) } else { t }))
    }

    fn read_timeout(&self, m: &Machine, addr: u64) -> Result<u64, Errno> {
        let s = m.read_u64(addr)? as i64;
        let ns = m.read_u64(addr + 8)? as i64;
        if s < 0 || !(0..1_000_000_000).contains(&ns) {
            return err(libc::EINVAL);
        }
        Ok((s as u64).saturating_mul(1_000_000_000).saturating_add(ns as u64))
    }

    /// Linux's `get_futex_key` checks of a futex word that is not read: 4-byte aligned
    /// (EINVAL), below the top of user space (EFAULT), and, for a shared futex, whose key is
    /// its page, mapped (EFAULT). A wake on a bad address is then an error, not 0 woken.
    fn futex_word_ok(m: &Machine, addr: u64, private: bool) -> Result<(), Errno> {
        if !addr.is_multiple_of(4) {
            return err(libc::EINVAL);
        }
        if addr.checked_add(4).is_none_or(|e| e > crate::mem::STACK_TOP) {
            return err(libc::EFAULT);
        }
        let page = addr & !(emu::PAGE - 1);
        if !private && m.mem.first_hole(page, page + emu::PAGE).is_some() {
            return err(libc::EFAULT);
        }
        Ok(())
    }

    /// futex(2). Returns `Ok(None)` when the calling thread blocked.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn futex(
        &mut self,
        m: &mut Machine,
        addr: u64,
        op: i32,
        val: u64,
        timeout: u64,
        addr2: u64,
        val3: u64,
    ) -> Result<Option<u64>, Errno> {
        let cmd = op & 0x7f;
        let realtime = op & 256 != 0;
        let private = op & 128 != 0;
        // Only the waits with an absolute timeout take FUTEX_CLOCK_REALTIME (FUTEX_WAIT ignores
        // it); with any other operation it is ENOSYS, as Linux's `do_futex`.
        if realtime && !matches!(cmd, 0 | 9 | 11 | 13) {
            return err(libc::ENOSYS);
        }
        let key = self.futex_key(m, addr, private);
        match cmd {
            0 | 9 => {
                let bitset = if cmd == 9 { val3 as u32 } else { ALL_BITS };
                if bitset == 0 {
                    return err(libc::EINVAL);
                }
                if !addr.is_multiple_of(4) {
                    return err(libc::EINVAL);
                }
                if m.read_u32(addr)? != val as u32 {
                    return err(libc::EAGAIN);
                }
                // Made again after a signal no handler took: the time it had left.
                let restarted = self.take_restart_deadline();
                let deadline = if timeout == 0 {
                    None
                } else if let Some(d) = restarted {
                    Some(d)
                } else {
                    let t = self.read_timeout(m, timeout)?;
                    let now = self.now_ns(m);
                    Some(if cmd == 9 {
                        // Absolute, on CLOCK_MONOTONIC (or CLOCK_REALTIME with the flag).
                        if realtime {
                            t.saturating_sub(self.realtime_offset_ns())
                        } else {
                            t
                        }
                    } else {
                        now.saturating_add(t)
                    })
                };
                if let Some(d) = deadline {
                    if d <= self.now_ns(m) {
                        return err(libc::ETIMEDOUT);
                    }
                }
                self.block(m, Wait::Futex { addr: key, bitset, deadline });
                Ok(None)
            }
            1 | 10 => {
                let bits = if cmd == 10 { val3 as u32 } else { ALL_BITS };
                Self::futex_word_ok(m, addr, private)?;
                if bits == 0 || self.has_pi_waiters(key) {
                    return err(libc::EINVAL);
                }
                Ok(Some(self.wake(m, key, addr, val.min(i32::MAX as u64), bits)))
            }
            3 | 4 => {
                Self::futex_word_ok(m, addr, private)?;
                Self::futex_word_ok(m, addr2, private)?;
                if self.has_pi_waiters(key) {
                    return err(libc::EINVAL);
                }
                if cmd == 4 && m.read_u32(addr)? != val3 as u32 {
                    return err(libc::EAGAIN);
                }
                let woken = self.wake(m, key, addr, val.min(i32::MAX as u64), ALL_BITS);
                let key2 = self.futex_key(m, addr2, private);
                // The requeue count is passed in the timeout argument's register.
                let moved = self.requeue(key, key2, timeout);
                // Both count the waiters woken and requeued (`futex_requeue`'s `task_count`;
                // the man page's "woken" for FUTEX_REQUEUE is not what Linux returns).
                Ok(Some(woken + moved))
            }
            5 => {
                // WAKE_OP: *addr2 = op(*addr2, oparg); wake val on addr; if cmp(old, cmparg) wake val2 on addr2.
                let encoded = val3 as u32;
                let kind = (encoded >> 28) & 7;
                let shift = encoded >> 31 != 0;
                let cmp = (encoded >> 24) & 15;
                let mut oparg = (encoded >> 12) & 0xfff;
                let cmparg = encoded & 0xfff;
                if shift {
                    oparg = 1u32.checked_shl(oparg).unwrap_or(0);
                }
                let old = m.read_u32(addr2)?;
                let new = match kind {
                    0 => oparg,
                    1 => old.wrapping_add(oparg),
                    2 => old | oparg,
                    3 => old & !oparg,
                    4 => old ^ oparg,
                    _ => return err(libc::ENOSYS),
                };
                m.write(addr2, &new.to_le_bytes(), false)?;
                let mut woken = self.wake(m, key, addr, val.min(i32::MAX as u64), ALL_BITS);
                let (o, c) = (old as i32, cmparg as i32);
                let hit = match cmp {
                    0 => o == c,
                    1 => o != c,
                    2 => o < c,
                    3 => o <= c,
                    4 => o > c,
                    5 => o >= c,
                    _ => return err(libc::ENOSYS),
                };
                if hit {
                    let key2 = self.futex_key(m, addr2, private);
                    woken += self.wake(m, key2, addr2, timeout.min(i32::MAX as u64), ALL_BITS);
                }
                Ok(Some(woken))
            }
            // FUTEX_LOCK_PI's timeout is on CLOCK_REALTIME, FUTEX_LOCK_PI2's on CLOCK_MONOTONIC.
            6 => self.futex_lock_pi(m, addr, key, timeout, true, false),
            13 => self.futex_lock_pi(m, addr, key, timeout, realtime, false),
            8 => self.futex_lock_pi(m, addr, key, 0, false, true),
            7 => self.futex_unlock_pi(m, addr, key).map(Some),
            11 => {
                let key2 = self.futex_key(m, addr2, private);
                self.futex_wait_requeue_pi(m, addr, key, val, timeout, realtime, addr2, key2)
            }
            12 => {
                let key2 = self.futex_key(m, addr2, private);
                self.futex_cmp_requeue_pi(m, addr, key, val, timeout, addr2, key2, val3).map(Some)
            }
            _ => err(libc::ENOSYS),
        }
    }

    /// Moves up to `n` of the oldest waiters left on `key` to `key2`; returns how many moved.
    fn requeue(&mut self, key: u64, key2: u64, n: u64) -> u64 {
        let mut moved = 0;
        let waiters: Vec<u32> = self
            .waits
            .futex
            .get(&key)
            .map(|q| q.iter().take(n.min(usize::MAX as u64) as usize).map(|x| x.1).collect())
            .unwrap_or_default();
        for tid in waiters {
            match self.threads.get(&tid).and_then(|t| t.wait) {
                Some(Wait::Futex { bitset, deadline, .. }) => {
                    self.set_wait(tid, Some(Wait::Futex { addr: key2, bitset, deadline }), None)
                }
                Some(Wait::FutexV { .. }) => self.requeue_v(tid, key, key2),
                _ => continue,
            }
            moved += 1;
        }
        moved
    }

    /// The key of a futex2 word (Linux's `get_futex_key` with futex2's flags): 4-byte aligned,
    /// or 8 with `FUTEX2_NUMA`, whose word is followed by a 32-bit node id: -1
    /// (`FUTEX_NO_NODE`) is replaced by the node of the caller, written back (this machine has
    /// one, node 0), any node but 0 is EINVAL; EFAULT when the node cannot be read or written.
    /// `FUTEX2_MPOL` picks a node from the mapping's memory policy, which no mapping here has:
    /// the same as without it.
    fn futex2_key(&mut self, m: &mut Machine, uaddr: u64, flags: u32) -> Result<u64, Errno> {
        let numa = flags & FUTEX2_NUMA != 0;
        if !uaddr.is_multiple_of(if numa { 8 } else { 4 }) {
            return err(libc::EINVAL);
        }
        if numa {
            let naddr = uaddr.wrapping_add(4);
            match m.read_u32(naddr)? {
                u32::MAX => m.write(naddr, &0u32.to_le_bytes(), false)?,
                0 => {}
                _ => return err(libc::EINVAL),
            }
        }
        Ok(self.futex_key(m, uaddr, flags & FUTEX2_PRIVATE != 0))
    }

    /// futex_wait(2) (futex2, 455): `FUTEX_WAIT_BITSET` with futex2's flags and an absolute
    /// timeout on `clockid`. In the order of Linux's `sys_futex_wait`: EINVAL for unknown flags,
    /// a size other than 32 bits, a value or mask wider than the word, another clock (EFAULT
    /// for an unreadable timeout, EINVAL for a bad one), a mask of 0, a misaligned word or a
    /// bad node; EFAULT for a word it cannot read; EAGAIN when it does not hold `val`;
    /// ETIMEDOUT when the deadline has passed. Returns `Ok(None)` when the caller blocked.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn futex2_wait(
        &mut self,
        m: &mut Machine,
        uaddr: u64,
        val: u64,
        mask: u64,
        flags: u32,
        timeout: u64,
        clockid: i32,
    ) -> Result<Option<u64>, Errno> {
        futex2_flags_valid(flags)?;
        if val >> 32 != 0 || mask >> 32 != 0 {
            return err(libc::EINVAL);
        }
        let deadline = self.futex2_deadline(m, timeout, clockid)?;
        if mask == 0 {
            return err(libc::EINVAL);
        }
        let key = self.futex2_key(m, uaddr, flags)?;
        if m.read_u32(uaddr)? != val as u32 {
            return err(libc::EAGAIN);
        }
        if deadline.is_some_and(|d| d <= self.now_ns(m)) {
            return err(libc::ETIMEDOUT);
        }
        self.block(m, Wait::Futex { addr: key, bitset: mask as u32, deadline });
        Ok(None)
    }

    /// futex_wake(2) (futex2, 454): `FUTEX_WAKE_BITSET` with futex2's flags, checked as
    /// `sys_futex_wake` does; `nr` 0 wakes nobody (`FLAGS_STRICT`; the old call wakes one),
    /// a negative `nr` one. EINVAL on a futex a PI waiter waits on.
    pub(crate) fn futex2_wake(&mut self, m: &mut Machine, uaddr: u64, mask: u64, nr: i32, flags: u32) -> SysResult {
        futex2_flags_valid(flags)?;
        if mask >> 32 != 0 || mask == 0 {
            return err(libc::EINVAL);
        }
        let key = self.futex2_key(m, uaddr, flags)?;
        if nr == 0 {
            return Ok(0);
        }
        if self.has_pi_waiters(key) {
            return err(libc::EINVAL);
        }
        Ok(self.wake(m, key, uaddr, nr.max(1) as u64, mask as u32))
    }

    /// futex_requeue(2) (futex2, 456): `FUTEX_CMP_REQUEUE` between the two `struct
    /// futex_waitv` at `waiters` (the first's `val` is the compared value), each with its own
    /// flags, parsed as `futex_parse_waitv` does (EFAULT, EINVAL for a flag, size, reserved
    /// field or value); then EINVAL for words of different flags, a negative count or a misaligned word, EFAULT for an
    /// unreadable first word, EAGAIN when it does not hold its value. Wakes `nr_wake`, moves up
    /// to `nr_requeue` of the rest, returns both counts together.
    pub(crate) fn futex2_requeue(
        &mut self,
        m: &mut Machine,
        waiters: u64,
        flags: u32,
        nr_wake: i32,
        nr_requeue: i32,
    ) -> SysResult {
        if flags != 0 || waiters == 0 {
            return err(libc::EINVAL);
        }
        let mut w = [(0u64, 0u64, 0u32); 2];
        for (i, e) in w.iter_mut().enumerate() {
            let a = waiters.wrapping_add(24 * i as u64);
            let (val, uaddr, fl, reserved) =
                (m.read_u64(a)?, m.read_u64(a + 8)?, m.read_u32(a + 16)?, m.read_u32(a + 20)?);
            if fl & !FUTEX2_VALID_MASK != 0 || reserved != 0 {
                return err(libc::EINVAL);
            }
            futex2_flags_valid(fl)?;
            if val >> 32 != 0 {
                return err(libc::EINVAL);
            }
            *e = (val, uaddr, fl);
        }
        // Linux wants both words' flags the same, as `futex(2)`'s one op has.
        if w[0].2 != w[1].2 {
            return err(libc::EINVAL);
        }
        if nr_wake < 0 || nr_requeue < 0 {
            return err(libc::EINVAL);
        }
        let key = self.futex2_key(m, w[0].1, w[0].2)?;
        let key2 = self.futex2_key(m, w[1].1, w[1].2)?;
        if m.read_u32(w[0].1)? != w[0].0 as u32 {
            return err(libc::EAGAIN);
        }
        if self.has_pi_waiters(key) {
            return err(libc::EINVAL);
        }
        let woken = if nr_wake == 0 { 0 } else { self.wake(m, key, w[0].1, nr_wake as u64, ALL_BITS) };
        Ok(woken + self.requeue(key, key2, nr_requeue as u64))
    }

    /// futex_waitv(2): waits on up to 128 futexes at once, `waiters` pointing to `nr` `struct
    /// futex_waitv` (`val`, `uaddr`, `flags`, `__reserved`), with an absolute `timeout` on
    /// `clockid` (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`). Checked in the order of Linux's
    /// `sys_futex_waitv`, `futex_parse_waitv` and `futex_wait_multiple_setup`: EINVAL for any
    /// `flags`, no waiters or more than 128, another clock, a bad `timespec`, an entry's flags
    /// other than `FUTEX2_SIZE_U32` with `FUTEX2_PRIVATE`, a reserved field set, a value wider
    /// than 32 bits or a misaligned word; EFAULT for memory it cannot read; EAGAIN when a word
    /// (compared in the vector's order) does not hold its value; ETIMEDOUT when the deadline has
    /// passed. Otherwise the thread blocks, queued on every word, and a wake on any of them
    /// returns its index. Returns `Ok(None)` when the calling thread blocked.
    pub(crate) fn futex_waitv(
        &mut self,
        m: &mut Machine,
        waiters: u64,
        nr: u32,
        flags: u32,
        timeout: u64,
        clockid: i32,
    ) -> Result<Option<u64>, Errno> {
        const FUTEX_WAITV_MAX: u32 = 128;
        if flags != 0 || nr == 0 || nr > FUTEX_WAITV_MAX || waiters == 0 {
            return err(libc::EINVAL);
        }
        let deadline = self.futex2_deadline(m, timeout, clockid)?;
        let mut words = Vec::with_capacity(nr as usize);
        for i in 0..u64::from(nr) {
            let e = waiters.wrapping_add(24 * i);
            let (val, uaddr, fl, reserved) =
                (m.read_u64(e)?, m.read_u64(e + 8)?, m.read_u32(e + 16)?, m.read_u32(e + 20)?);
            // Only 32-bit futexes, private or shared, with a node id after the word or not.
            if fl & !FUTEX2_VALID_MASK != 0 || reserved != 0 {
                return err(libc::EINVAL);
            }
            futex2_flags_valid(fl)?;
            if val > u64::from(u32::MAX) {
                return err(libc::EINVAL);
            }
            words.push((uaddr, val as u32, fl));
        }
        // Every key first (`get_futex_key`: a misaligned word is EINVAL, a node is checked),
        // then the values.
        let mut keys = Vec::with_capacity(words.len());
        for &(uaddr, _, fl) in &words {
            keys.push(self.futex2_key(m, uaddr, fl)?);
        }
        for &(uaddr, val, _) in &words {
            if m.read_u32(uaddr)? != val {
                return err(libc::EAGAIN);
            }
        }
        if deadline.is_some_and(|d| d <= self.now_ns(m)) {
            return err(libc::ETIMEDOUT);
        }
        let cur = self.current;
        self.thread_mut(cur).futexv = keys;
        self.block(m, Wait::FutexV { deadline });
        Ok(None)
    }

    /// A futex_waitv waiter `tid` on `key` moves to `key2` (FUTEX_REQUEUE, FUTEX_CMP_REQUEUE).
    fn requeue_v(&mut self, tid: u32, key: u64, key2: u64) {
        let Some(t) = self.threads.get_mut(&tid) else { return };
        if key == key2 {
            return;
        }
        let queued_on_key2 = t.futexv.contains(&key2);
        for k in t.futexv.iter_mut().filter(|k| **k == key) {
            *k = key2;
        }
        WaitIndex::unqueue_futex(&mut self.waits.futex, key, tid);
        if !queued_on_key2 {
            WaitIndex::queue_futex(&mut self.waits.futex, key2, t.wait_seq, tid, ALL_BITS);
        }
    }

    /// nanosleep and clock_nanosleep: with other threads, the sleeper blocks until the virtual
    /// clock passes its deadline; alone, the clock jumps there.
    pub(crate) fn sleep_until(&mut self, m: &Machine, deadline: u64) -> Option<u64> {
        if self.threads.len() <= 1 && self.timers.is_empty() {
            // Alone in the machine (every process counted), and no timer can cut the sleep
            // short: no one could run meanwhile.
            let now = self.now_ns(m);
            self.rng.slept_ns += deadline.saturating_sub(now);
            return Some(0);
        }
        self.block(m, Wait::Sleep { deadline });
        None
    }

    /// The running thread is held by the targeted interleaving (see [`Wait::Held`]); the caller
    /// then schedules. RIP stays where it is (at the load, for a reader).
    pub fn hold(&mut self, m: &Machine, until: Option<u64>) {
        self.block(m, Wait::Held { until });
        if until.is_none() {
            // A deadline of an earlier holding of this thread no longer applies.
            let tid = self.current;
            self.waits.reader_deadlines.retain(|&(_, t)| t != tid);
            self.waits.reader_deadlines.insert((m.icount() + emu::sched::READER_PATIENCE, self.current));
        }
    }

    /// The hold's store happened: every held reader becomes runnable. Returns them.
    pub fn release_held(&mut self) -> Vec<u32> {
        let out = self.waits.held_readers.clone();
        for &tid in &out {
            self.set_wait(tid, None, None);
        }
        out
    }

    /// Nothing runs but threads held by the targeted interleaving: the waiting writer goes on,
    /// else the `privileged`-th held reader (by id, wrapping) is released and never held again
    /// (PMRace's Pitfall-2). Returns whether a thread was released.
    fn release_privileged(&mut self, m: &mut Machine) -> bool {
        // The writer with the lowest id, as the scan by id used to find.
        let writer: Option<u32> = self.waits.held_until.iter().map(|x| x.1).min();
        let readers = &self.waits.held_readers;
        let tid = match (writer, readers.is_empty()) {
            (Some(w), _) => w,
            (None, false) if !m.hold_is_publication() || (readers.len() >= 2 && !self.waits.privileged_chosen) => {
                let r = readers[self.privileged as usize % readers.len()];
                self.waits.privileged_chosen = true;
                m.bypass_hold(r);
                r
            }
            (None, false) => {
                // A publication hold whose privileged thread is chosen already (and now waits
                // for something else: a barrier, a join), or one reader alone is held: the
                // lowest held reader passes this load once and may be held at its next one (a
                // word hold keeps PMRace's rule: every such release is a privileged thread).
                let r = readers[0];
                m.pass_hold(r);
                r
            }
            (None, true) => return false,
        };
        self.set_wait(tid, None, None);
        true
    }

    /// After a scheduling point: wakes expired waits, picks the thread to run, switches to it.
    /// `exited` says the running thread is gone. Returns the deadlock if no thread can ever run.
    /// Costs O(log n) in the number of threads (plus the threads it wakes).
    pub fn schedule(&mut self, m: &mut Machine, point: Point, exited: bool) -> Result<(), Deadlock> {
        let cur = self.current;
        self.wake_expired(m);
        if self.waits.runnable.is_empty() {
            self.release_privileged(m);
        }
        // Nothing runs: jump the virtual clock to the earliest deadline of a wait or a timer.
        // A timer whose signal wakes no one (blocked, or pending already) is worth at most a
        // jump or two each: after that only a wait's deadline can make a thread runnable.
        let mut idle_jumps = 0;
        while self.waits.runnable.is_empty() {
            let wait = self.waits.deadlines.first().map(|x| x.0);
            let timer = if idle_jumps <= self.timers.len() + 1 { self.timers.next_boot_deadline() } else { None };
            let d = match (wait, timer) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if self.listen.is_some() {
                // Host clients may wake someone: recording waits for them (until the deadline).
                let wait = d.map(|d| d.saturating_sub(self.now_ns(m)));
                let again = self.listen_point(Some(wait));
                if !self.waits.runnable.is_empty() {
                    break;
                }
                if again {
                    continue;
                }
            }
            let Some(d) = d else {
                let threads = self.threads.values().map(|t| (t.tid, t.blocked_at.clone())).collect();
                return Err(Deadlock { threads });
            };
            let now = self.now_ns(m);
            self.rng.slept_ns += d.saturating_sub(now);
            self.wake_expired(m);
            idle_jumps += 1;
        }
        let runnable = &self.waits.runnable;
        let next = if runnable.len() == 1 && !exited && runnable[0] == cur {
            cur
        } else {
            let icount = m.icount();
            let next = m.scheduler().pick(runnable, cur, point);
            if let Some(d) = m.scheduler().decisions.last_mut() {
                if d.at == 0 {
                    d.at = icount;
                }
            }
            next
        };
        if next != cur || exited {
            // What ran since the last switch is the running process's CPU time.
            self.charge_cpu(m);
            let pid = self.threads.get(&next).map_or(self.pid, |t| t.pid);
            if pid != self.pid {
                self.switch_process(m, pid);
                // A process continued since it last ran tells its parent now.
                self.tell_continued(pid);
            }
            // A switch cannot fail for a thread the kernel knows: both sides are kept together.
            let _ = m.switch_to(next, exited);
            self.current = next;
        }
        // Counted after the switch: a continued process's parent it tells may have woken.
        let others = self.waits.runnable.len().saturating_sub(1);
        m.set_runnable_others(others);
        m.new_quantum();
        self.arm_timer_stop(m);
        Ok(())
    }

    /// Wakes every wait whose deadline passed, and every held writer whose wait is over: the
    /// earliest ones only, in order, so nothing but what wakes is looked at.
    fn wake_expired(&mut self, m: &mut Machine) {
        // Timers first: a signal they send may cut a wait short that expires at the same time.
        self.fire_timers(m);
        // A writer held for its wait goes on once enough instructions have retired.
        let icount = m.icount();
        while let Some(&(n, tid)) = self.waits.held_until.first() {
            if n > icount {
                break;
            }
            self.set_wait(tid, None, None);
        }
        // A reader held too long (the thread it waits for waits for it, or never stores) stops
        // waiting and is never held again: PMRace's Pitfall-3, its hung sync point disabled.
        while let Some(&(n, tid)) = self.waits.reader_deadlines.first() {
            if n > icount {
                break;
            }
            self.waits.reader_deadlines.remove(&(n, tid));
            if self.waits.held_readers.binary_search(&tid).is_ok() {
                m.bypass_hold(tid);
                self.set_wait(tid, None, None);
            }
        }
        let now = self.now_ns(m);
        while let Some(&(d, tid)) = self.waits.deadlines.first() {
            if d > now {
                break;
            }
            let w = self.threads.get(&tid).and_then(|t| t.wait);
            if matches!(w, Some(Wait::Io { .. })) {
                // The call is made again: its timeout has passed, or a timer it watches expired.
                self.set_wait(tid, None, None);
                continue;
            }
            let futex = matches!(w, Some(Wait::Futex { .. } | Wait::FutexV { .. }));
            let ret = if futex { (-(libc::ETIMEDOUT as i64)) as u64 } else { 0 };
            self.resume(m, tid, ret);
        }
    }
}
