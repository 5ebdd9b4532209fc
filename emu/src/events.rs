//! The event stream: what analyses see of an execution.
//!
//! Every access to PM and every persistence instruction becomes an [`Event`] in program order,
//! with its thread, PC, guest and device address, size, old and new value, the device's verdict
//! (the store id it assigned, what a flush or fence achieved) and the interned call stack. Events
//! are built on the stack and passed by reference: the hot path allocates nothing. An
//! [`Observer`] declares its [`Interest`]; only events some observer wants are built. PM loads
//! are always hooked (they are scheduling points) but become events only if wanted, DRAM
//! accesses are hooked only for observers that want all memory, and with no observer the device
//! alone is fed, so a run with no analyses pays almost nothing.

use crate::callstack::StackId;
use crate::decode::{FenceOp, FlushOp};
use crate::pm::{FenceOutcome, FlushOutcome, PmDevice, StoreId};
use crate::sync::SyncKind;

/// What kinds of event an observer wants, as bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interest(pub u16);

impl Interest {
    /// Nothing.
    pub const NONE: Interest = Interest(0);
    /// Loads from PM windows.
    pub const LOADS: Interest = Interest(1);
    /// Stores to PM windows (cached, non-temporal and the store half of locked instructions).
    pub const STORES: Interest = Interest(2);
    /// Flushes, fences, and the program's own declarations about PM (`SetClean`, PM
    /// registration).
    pub const PERSIST: Interest = Interest(4);
    /// Entries and returns of synchronisation functions, thread creation, join and exit.
    pub const SYNC: Interest = Interest(8);
    /// Every load and store, DRAM included (`dev` is 0 outside PM). Costly: every access of the
    /// program calls into ferrite. Wanted by data-race and atomicity detectors.
    pub const MEMORY: Interest = Interest(16);
    /// Crash points: just before every event that raises a persisted floor (a fence or locked
    /// instruction with flushes or NT stores pending, a clflush, msync/fsync, a durable write).
    pub const CRASH: Interest = Interest(32);
    /// Taint tracking ([`crate::taint`]): the observer names PM loads as taint sources
    /// ([`Observer::taint_source`]) and hears of every PM store whose value or address derives
    /// from one ([`Observer::on_tainted_store`]). Costly: a hook on every instruction and every
    /// memory access.
    pub const TAINT: Interest = Interest(64);
    /// Lock words in DRAM taken and given back by the program's own atomics
    /// ([`EventKind::WordAcquire`], [`EventKind::WordRelease`]): a word a locked
    /// compare-and-exchange or exchange turned from 0 to non-zero, and its return to 0 by the
    /// same thread. Cheap: only locked instructions on DRAM are looked at, and a held word is
    /// read again at the holder's next event.
    pub const LOCK_WORDS: Interest = Interest(128);
    /// With [`Interest::MEMORY`]: a DRAM store's event carries the bytes it overwrites in `old`
    /// (without it, 0). Reading them back costs the all-memory hook about a tenth of its time,
    /// and only passes that compare a store with what it replaced want them.
    pub const DRAM_OLD: Interest = Interest(256);
    /// Accesses to atomic objects in DRAM made by code compiled from C++'s `std::atomic`
    /// ([`EventKind::AtomicAccess`]): the release stores and acquire loads through which C++
    /// programs publish data (plain `mov`s on x86, which no PM hook sees when the object is in
    /// DRAM), and the accesses of a C program's own code to its static `_Atomic` objects
    /// (known from DWARF). Cheap: a code hook on each such instruction of the program, none
    /// elsewhere, and nothing at all in programs without such code or objects.
    pub const ATOMICS: Interest = Interest(512);

    /// Whether any kind of `other` is wanted.
    pub fn has(self, other: Interest) -> bool {
        self.0 & other.0 != 0
    }

    /// Both sets of kinds.
    pub fn union(self, other: Interest) -> Interest {
        Interest(self.0 | other.0)
    }
}

/// What happened: the kinds of [`Event`], and what their fields mean for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A load (from a PM window, or anywhere with [`Interest::MEMORY`]).
    Load,
    /// A cached store (also one element of a rep string instruction).
    Store,
    /// A non-temporal store.
    NtStore,
    /// The store half of a locked read-modify-write or `xchg` (its fence came first).
    RmwStore,
    /// A cache-line flush (`clflush`, `clflushopt`, `clwb`) of the line at `addr`; the device's
    /// outcome is in [`Event::flush`].
    Flush(FlushOp),
    /// A fence (`sfence`, `mfence`, or a locked instruction's implicit one); the device's
    /// outcome is in [`Event::fence`].
    Fence(FenceOp),
    /// A recognised synchronisation function was entered: `addr` is its first argument, `old`
    /// its second. libpmemobj's functions take the pool first ([`SyncKind::is_pmemobj`]): for
    /// them `addr` is the second argument (the `PMEMmutex`, `PMEMrwlock` or `PMEMcondvar`),
    /// `old` the third (the `PMEMmutex` of a condition wait) and `new` the pool. A custom lock's
    /// `addr` is its configured lock argument. A string or memory routine
    /// ([`SyncKind::Reads`]) reports the bytes its contract reads: `[addr, addr + (new as u32))`
    /// and `[old, old + (new >> 32))` (see [`crate::sync::SyncKind::entry`]).
    SyncEnter(SyncKind),
    /// It returned: `addr` is the entry's `addr`, `new` the result (the return value, or the
    /// out-parameter of a custom lock that reports success there: [`SyncKind::result`]).
    SyncReturn(SyncKind),
    /// The running thread created thread `new` (`addr`: its handle, the TLS pointer glibc passes
    /// to clone, which is also its `pthread_t`). `old` is 1 when `new` is a forked process's,
    /// in an address space of its own: its private memory is a copy of the creator's, which the
    /// same addresses no longer name (the [`EventKind::SharedMemory`] events just before say
    /// which memory both still share).
    ThreadCreate,
    /// Just before a fork's [`EventKind::ThreadCreate`]: DRAM `[addr, addr + old)` is a shared
    /// mapping (`MAP_SHARED`, System V shared memory) of the creator, which the child shares at
    /// the same addresses. PM windows are not reported (their accesses carry a device address).
    SharedMemory,
    /// The running thread exits.
    ThreadExit,
    /// The running thread's system call woke thread `new` from a futex wait on `addr`
    /// (`FUTEX_WAKE`, a requeue's wake, a robust or `clear_child_tid` wake).
    FutexWake,
    /// The other side of a [`EventKind::FutexWake`], reported right after it with `tid` the thread
    /// woken (which runs nothing in between) and `new` the thread that woke it.
    FutexWoken,
    /// The running thread's `wait4`/`waitid` reported that a child process exited, which thread
    /// `new` ended (its `exit_group`, last `exit` or fatal signal): everything that thread did
    /// happens before what the waiter does next, as after `pthread_join`. Reported right after
    /// the exit hand-off's [`EventKind::FutexWoken`], so passes that order threads only by
    /// creation and joins (HawkSet's model) order a forked child's work before its reaper's.
    ProcessReaped,
    /// A locked `cmpxchg` or `xchg` (the event's PC) turned the DRAM word `[addr, addr + size)`
    /// from 0 (`old`) to `new` != 0: taken, if it is a lock. Reported with
    /// [`Interest::LOCK_WORDS`] before the thread's next event (PM words come as their own
    /// accesses instead).
    WordAcquire,
    /// A DRAM word this thread took ([`EventKind::WordAcquire`]) is 0 again: given back. The
    /// store that cleared it is a plain `mov` no hook sees, so this is reported before the
    /// thread's first event after it (or before another thread runs); the PC is the start of
    /// the block where it was noticed, `old` the value the word had when taken.
    WordRelease,
    /// The running thread is about to access the atomic object `[addr, addr + size)` in DRAM,
    /// in code compiled from C++'s `std::atomic` or one of the program's C11 `_Atomic`
    /// objects (the event's PC is the instruction): `new` has bit 0 set if the
    /// instruction reads it (an acquire) and bit 1 if it writes it (a release); a locked
    /// read-modify-write does both. Reported with [`Interest::ATOMICS`] (atomics on PM come as
    /// the PM accesses they are).
    AtomicAccess,
    /// The running thread makes system call number `addr` (first argument in `new`, second in
    /// `old`), before the kernel handles it. Reported with [`Interest::SYNC`].
    Syscall,
    /// A system call of the running thread made the device range `[dev, dev + new)` durable
    /// (`msync(MS_SYNC)` of a PM mapping, `fsync`/`fdatasync` of a PM file, the durable part of
    /// a `pwrite`), as a fence makes the thread's flushed lines durable; the device's outcome is
    /// in [`Event::fence`]. Reported with [`Interest::PERSIST`] right after the device changed,
    /// so a pass closes the windows the call persisted before whatever the thread does next (an
    /// exit a waiting parent is told of, a lock release).
    Persist,
    /// A crash point: the device is about to make something durable (the event's PC is the
    /// instruction or system call about to do it). Observers may take the crash space now.
    CrashPoint,
    // The kinds below come from the program's own annotations: client requests in Valgrind's
    // protocol (pmemcheck's, as PMDK issues them), decoded by `crate::client`. Their PC is the
    // `xchg rbx, rbx` of the request; they say what the program *declares*, and change nothing
    // in the PM device.
    /// A transaction began (pmemcheck `START_TX`, `START_TX_N`): `new` is the transaction id
    /// named by `START_TX_N`, 0 for the thread's own transaction (`START_TX`, which PMDK uses).
    /// Transactions nest: each begin has its end. Reported with [`Interest::SYNC`].
    TxBegin,
    /// A transaction ended, committed or aborted (`END_TX`, `END_TX_N`): `new` as for
    /// [`EventKind::TxBegin`]. Reported with [`Interest::SYNC`].
    TxEnd,
    /// `[addr, addr + size)` was added to transaction `new` (`ADD_TO_TX`, `ADD_TO_TX_N`):
    /// the program declares that stores there belong to the transaction (PMDK has snapshotted
    /// the range into its undo log and flushes it at commit). `dev` is the device address of
    /// `addr` in PM, 0 outside PM; a range crossing a PM window's edge comes as one event per
    /// piece. Reported with [`Interest::SYNC`].
    TxAdd,
    /// `[addr, addr + size)` left transaction `new` (`REMOVE_FROM_TX`, `REMOVE_FROM_TX_N`);
    /// `dev` and pieces as for [`EventKind::TxAdd`]. Reported with [`Interest::SYNC`].
    TxRemove,
    /// The program declares that the bytes `[addr, addr + size)` need not be persisted
    /// (pmemcheck `SET_CLEAN`): stores made to them *before* this event are not a durability
    /// problem, later ones are judged afresh. PMDK uses it for pool state it rebuilds at every
    /// open (locks, run-time headers). The device is unchanged: a crash may still lose those
    /// bytes. `dev` and pieces as for [`EventKind::TxAdd`]. Reported with
    /// [`Interest::PERSIST`].
    SetClean,
    /// The program registers `[addr, addr + size)` as persistent memory to be checked
    /// (pmemcheck `REGISTER_PMEM_MAPPING`; libpmem and libpmemobj register every PM mapping
    /// they make). What is PM is still decided by the PM mount; `dev` and pieces as for
    /// [`EventKind::TxAdd`]. Reported with [`Interest::PERSIST`].
    PmRegister,
    /// The program withdraws `[addr, addr + size)` from checking (pmemcheck
    /// `REMOVE_PMEM_MAPPING`): under pmemcheck, stores made there while it stays withdrawn are
    /// not tracked at all. PMDK withdraws the run-time parts of its pool this way (lock words,
    /// the run-time fields of the pool header), and whole mappings before unmapping them.
    /// `dev` and pieces as for [`EventKind::TxAdd`]. Reported with [`Interest::PERSIST`].
    PmUnregister,
    /// The program excludes `[addr, addr + size)` from transaction checking for the rest of
    /// the run (pmemcheck `ADD_TO_GLOBAL_TX_IGNORE`): a store wholly inside such bytes is
    /// never "outside the transaction". PMDK excludes its own run-time state this way (the
    /// lanes' and heap's volatile parts it updates inside transactions without adding them).
    /// `dev` and pieces as for [`EventKind::TxAdd`]. Reported with [`Interest::SYNC`].
    TxIgnore,
    /// The program frees the object `[addr, addr + new)` (`dev`: its device address, 0 outside
    /// PM): its bytes' next life is a new object, whatever threads did to them in this one.
    /// Reported with [`Interest::SYNC`], just before the entry of the freeing call (today
    /// `pmemobj_free`, [`crate::sync::SyncKind::PmemobjFree`]; the PC and stack are the call's).
    Free,
}

impl EventKind {
    /// Whether it is one of the events through which threads order each other: a recognised
    /// synchronisation function's entry or return, thread creation and exit, a futex hand-off.
    pub fn orders_threads(self) -> bool {
        matches!(
            self,
            EventKind::SyncEnter(_)
                | EventKind::SyncReturn(_)
                | EventKind::ThreadCreate
                | EventKind::ThreadExit
                | EventKind::FutexWake
                | EventKind::FutexWoken
                | EventKind::ProcessReaped
        )
    }
}

/// One event. Addresses of flushes are the flushed address; fences have none.
#[derive(Clone, Copy, Debug)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The thread it happened in.
    pub tid: u32,
    /// The instruction (or the `syscall`) that made it.
    pub pc: u64,
    /// Guest virtual address.
    pub addr: u64,
    /// Device address (`file id << 40 | offset`).
    pub dev: u64,
    /// Bytes accessed (at most 8 for a single access; a whole range for kernel accesses).
    pub size: u32,
    /// Little-endian value before (stores) or read (loads), for accesses up to 8 bytes; 0 for
    /// loads outside PM (all-memory observers get no value: none uses it).
    pub old: u64,
    /// The value stored (stores), or the kind's own datum (see [`EventKind`]).
    pub new: u64,
    /// The thread's interned call stack at the event.
    pub stack: StackId,
    /// Retired instructions before this one.
    pub icount: u64,
    /// The device's id of a PM store.
    pub store: Option<StoreId>,
    /// What a flush did to its line.
    pub flush: Option<FlushOutcome>,
    /// What a fence made durable.
    pub fence: Option<FenceOutcome>,
}

/// How much an observer with [`Interest::MEMORY`] wants the all-memory events
/// ([`Observer::wants_memory`]). The machine puts the all-memory hooks in when the answer is not
/// [`MemoryWant::No`], before the next block runs (so the answer may turn from `No` only at an
/// event that orders threads, which is reported at a block's start or outside the engine), and
/// takes them out again, lazily, when it is `No` again (one translation flush each way).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum MemoryWant {
    /// No access from now until the next event that orders threads can change what the observer
    /// reports: oscs while no thread is inside a critical section and no byte has a history.
    No,
    /// Accesses matter now, and may stop mattering again (a critical section that may leave no
    /// history: glibc takes its loader's lock inside `pthread_create`).
    Now,
    /// Accesses matter from now on: the hooks stay in for the rest of the run.
    #[default]
    Always,
}

/// Something that watches the execution: the analyses' side of the stream.
pub trait Observer: std::any::Any {
    /// The kinds of event it wants; asked when it is installed.
    fn interest(&self) -> Interest;
    /// Called for each event of an interesting kind, after the device has seen it.
    fn on_event(&mut self, ev: &Event, device: &PmDevice);
    /// With [`Interest::TAINT`], called for each PM load after [`Observer::on_event`]: a
    /// non-zero id makes the loaded bytes a taint source carrying that id.
    fn taint_source(&mut self, _ev: &Event, _device: &PmDevice) -> u32 {
        0
    }
    /// With [`Interest::TAINT`], asked of a PM load before anything of it happens while nothing
    /// has been a taint source yet: whether [`Observer::taint_source`] could name it (it must not
    /// answer `false` for a load `taint_source` would name, as the device and the observer stand
    /// now; `true` is always safe). The machine puts the taint engine's hooks in only when this
    /// first says yes.
    fn may_taint(&self, _ev: &Event, _device: &PmDevice) -> bool {
        true
    }
    /// With [`Interest::MEMORY`]: whether the all-memory events are wanted now
    /// ([`MemoryWant`]). Asked once the guest has a second thread (before, the machine never
    /// puts the all-memory hooks in), then after each event that orders threads
    /// ([`EventKind::orders_threads`]) until the answer is [`MemoryWant::Always`].
    fn wants_memory(&self) -> MemoryWant {
        MemoryWant::Always
    }
    /// With [`Interest::TAINT`]: the PM store `ev` (kind `Store`, after it executed) wrote bytes
    /// derived from the sources `content`, or through an address derived from `address`.
    fn on_tainted_store(&mut self, _ev: &Event, _content: &[u32], _address: &[u32], _device: &PmDevice) {}
}
