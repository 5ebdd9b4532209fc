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
pub struct Interest(pub u8);

impl Interest {
    pub const NONE: Interest = Interest(0);
    pub const LOADS: Interest = Interest(1);
    pub const STORES: Interest = Interest(2);
    pub const PERSIST: Interest = Interest(4);
    /// Entries and returns of synchronisation functions, thread creation, join and exit.
    pub const SYNC: Interest = Interest(8);
    /// Every load and store, DRAM included (`dev` is 0 outside PM). Costly: every access of the
    /// program calls into ferrite. Wanted by data-race and atomicity detectors.
    pub const MEMORY: Interest = Interest(16);
    /// Crash points: just before every event that raises a persisted floor (a fence or locked
    /// instruction with flushes or NT stores pending, a clflush, msync/fsync, a durable write).
    pub const CRASH: Interest = Interest(32);

    pub fn has(self, other: Interest) -> bool {
        self.0 & other.0 != 0
    }

    pub fn union(self, other: Interest) -> Interest {
        Interest(self.0 | other.0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Load,
    /// A cached store (also one element of a rep string instruction).
    Store,
    /// A non-temporal store.
    NtStore,
    /// The store half of a locked read-modify-write or `xchg` (its fence came first).
    RmwStore,
    Flush(FlushOp),
    Fence(FenceOp),
    /// A recognised synchronisation function was entered: `addr` is its first argument, `old`
    /// its second.
    SyncEnter(SyncKind),
    /// It returned: `addr` is its first argument (at entry), `new` the return value.
    SyncReturn(SyncKind),
    /// The running thread created thread `new` (`addr`: its handle, the TLS pointer glibc passes
    /// to clone, which is also its `pthread_t`).
    ThreadCreate,
    /// The running thread exits.
    ThreadExit,
    /// The running thread makes system call number `addr` (first argument in `new`, second in
    /// `old`), before the kernel handles it. Reported with [`Interest::SYNC`].
    Syscall,
    /// A crash point: the device is about to make something durable (the event's PC is the
    /// instruction or system call about to do it). Observers may take the crash space now.
    CrashPoint,
}

/// One event. Addresses of flushes are the flushed address; fences have none.
#[derive(Clone, Copy, Debug)]
pub struct Event {
    pub kind: EventKind,
    pub tid: u32,
    pub pc: u64,
    /// Guest virtual address.
    pub addr: u64,
    /// Device address (`file id << 40 | offset`).
    pub dev: u64,
    pub size: u32,
    /// Little-endian value before (stores) or read (loads), for accesses up to 8 bytes.
    pub old: u64,
    pub new: u64,
    pub stack: StackId,
    /// Retired instructions before this one.
    pub icount: u64,
    pub store: Option<StoreId>,
    pub flush: Option<FlushOutcome>,
    pub fence: Option<FenceOutcome>,
}

/// Something that watches the execution: the analyses' side of the stream.
pub trait Observer: std::any::Any {
    fn interest(&self) -> Interest;
    /// Called for each event of an interesting kind, after the device has seen it.
    fn on_event(&mut self, ev: &Event, device: &PmDevice);
}
