//! The passes' unit-test kit: a synthetic execution that drives the PM device and a pass with
//! the events the machine would produce (PM stores, loads, flushes and fences; DRAM accesses;
//! lock, barrier, thread and transaction events).

use emu::callstack::StackId;
use emu::decode::{FenceOp, FlushOp};
use emu::events::{Event, EventKind, Interest};
use emu::pm::{device_addr, FenceKind, FlushKind, PmDevice, StoreKind};
use emu::sync::SyncKind;

use crate::{Analysis, RawFinding};

/// Lock and barrier addresses for DRAM tests.
pub(crate) const L1: u64 = 0x9000;
pub(crate) const L2: u64 = 0x9100;
pub(crate) const BARRIER: u64 = 0x9200;

/// An event as the machine builds it (no device verdicts, stack 0).
#[allow(clippy::too_many_arguments)]
pub(crate) fn ev(kind: EventKind, tid: u32, pc: u64, addr: u64, dev: u64, size: u32, old: u64, new: u64) -> Event {
    Event {
        kind,
        tid,
        pc,
        addr,
        dev,
        size,
        old,
        new,
        stack: StackId(0),
        icount: 0,
        store: None,
        flush: None,
        fence: None,
    }
}

/// A DRAM access or call event (`dev` 0).
pub(crate) fn dram(kind: EventKind, tid: u32, pc: u64, addr: u64, size: u32, old: u64, new: u64) -> Event {
    ev(kind, tid, pc, addr, 0, size, old, new)
}

/// A pass borrowed by a test that inspects it afterwards.
impl<A: Analysis + ?Sized> Analysis for &mut A {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn interest(&self) -> Interest {
        (**self).interest()
    }
    fn on_event(&mut self, ev: &Event, device: &PmDevice) {
        (**self).on_event(ev, device)
    }
    fn finish(&mut self, device: &PmDevice) -> Vec<RawFinding> {
        (**self).finish(device)
    }
}

/// A synthetic execution feeding `pass`.
pub(crate) struct Sim<P: Analysis> {
    pub(crate) dev: PmDevice,
    pub(crate) pass: P,
}

/// The handle of thread `tid` (glibc's descriptor, at the top of its 16 MiB-aligned stack
/// block, as hmtrace expects it).
pub(crate) fn handle(tid: u32) -> u64 {
    0x7000_0000 + u64::from(tid) * 0x100_0000
}

/// Device address of PM byte `off`.
pub(crate) fn pm(off: u64) -> u64 {
    device_addr(1, off)
}

impl<P: Analysis> Sim<P> {
    pub(crate) fn new(pass: P) -> Sim<P> {
        Sim { dev: PmDevice::default(), pass }
    }

    /// Feeds an event as it is.
    pub(crate) fn send(&mut self, e: Event) {
        self.pass.on_event(&e, &self.dev);
    }

    fn store_kind(&mut self, tid: u32, pc: u64, off: u64, size: u32, kind: StoreKind, ek: EventKind) {
        let d = pm(off);
        let old = vec![0u8; size as usize];
        let new = vec![0xabu8; size as usize];
        let id = self.dev.store(tid, d, &old, &new, kind, |_| [0u8; 64]);
        let mut e = ev(ek, tid, pc, 0x7000_0000 + off, d, size, 0, 0xab);
        e.store = Some(id);
        self.send(e);
    }

    /// A PM store of `size` bytes at PM offset `off`.
    pub(crate) fn store(&mut self, tid: u32, pc: u64, off: u64, size: u32) {
        self.store_kind(tid, pc, off, size, StoreKind::Cached, EventKind::Store);
    }

    /// A non-temporal PM store of 8 bytes.
    pub(crate) fn nt_store(&mut self, tid: u32, pc: u64, off: u64) {
        self.store_kind(tid, pc, off, 8, StoreKind::NonTemporal, EventKind::NtStore);
    }

    /// A PM load.
    pub(crate) fn load(&mut self, tid: u32, pc: u64, off: u64, size: u32) {
        self.send(ev(EventKind::Load, tid, pc, 0x7000_0000 + off, pm(off), size, 0, 0));
    }

    /// `clwb` of the line of PM offset `off`.
    pub(crate) fn clwb(&mut self, tid: u32, off: u64) {
        let out = self.dev.flush(tid, pm(off), FlushKind::Clwb);
        let mut e = ev(EventKind::Flush(FlushOp::Clwb), tid, 0xf1, 0x7000_0000 + off, pm(off), 64, 0, 0);
        e.flush = Some(out);
        self.send(e);
    }

    pub(crate) fn fence_kind(&mut self, tid: u32, pc: u64, kind: FenceKind, op: FenceOp) {
        let out = self.dev.fence(tid, kind);
        let mut e = ev(EventKind::Fence(op), tid, pc, 0, 0, 0, 0, 0);
        e.fence = Some(out);
        self.send(e);
    }

    pub(crate) fn sfence(&mut self, tid: u32, pc: u64) {
        self.fence_kind(tid, pc, FenceKind::Sfence, FenceOp::Sfence);
    }

    /// clwb + sfence of the line of `off`.
    pub(crate) fn persist(&mut self, tid: u32, pc: u64, off: u64) {
        self.clwb(tid, off);
        self.sfence(tid, pc);
    }

    pub(crate) fn enter(&mut self, tid: u32, kind: SyncKind, arg0: u64, arg1: u64) {
        self.send(ev(EventKind::SyncEnter(kind), tid, 0x5000, arg0, 0, 0, arg1, 0));
    }

    pub(crate) fn ret(&mut self, tid: u32, kind: SyncKind, arg0: u64, rv: u64) {
        self.send(ev(EventKind::SyncReturn(kind), tid, 0x5000, arg0, 0, 0, 0, rv));
    }

    /// A call that enters and returns `rv`.
    pub(crate) fn call(&mut self, tid: u32, kind: SyncKind, arg0: u64, rv: u64) {
        self.enter(tid, kind, arg0, 0);
        self.ret(tid, kind, arg0, rv);
    }

    pub(crate) fn lock(&mut self, tid: u32, l: u64) {
        self.call(tid, SyncKind::MutexLock, l, 0);
    }

    pub(crate) fn unlock(&mut self, tid: u32, l: u64) {
        self.call(tid, SyncKind::MutexUnlock, l, 0);
    }

    /// An unlock whose releasing instruction is locked (glibc's mutexes): a fence inside.
    pub(crate) fn unlock_fencing(&mut self, tid: u32, l: u64) {
        self.enter(tid, SyncKind::MutexUnlock, l, 0);
        self.fence_kind(tid, 0x5001, FenceKind::Locked, FenceOp::Locked);
        self.ret(tid, SyncKind::MutexUnlock, l, 0);
    }

    /// `tids` wait at one barrier and all leave it.
    pub(crate) fn barrier(&mut self, tids: &[u32]) {
        for t in tids {
            self.enter(*t, SyncKind::BarrierWait, BARRIER, 0);
        }
        for t in tids {
            self.ret(*t, SyncKind::BarrierWait, BARRIER, 0);
        }
    }

    /// `tids` arrive at one barrier, each by a locked instruction (a fence, as glibc's and
    /// libgomp's arrivals are), and all leave it.
    pub(crate) fn barrier_fencing(&mut self, tids: &[u32]) {
        for t in tids {
            self.enter(*t, SyncKind::BarrierWait, BARRIER, 0);
            self.fence_kind(*t, 0x5002, FenceKind::Locked, FenceOp::Locked);
        }
        for t in tids {
            self.ret(*t, SyncKind::BarrierWait, BARRIER, 0);
        }
    }

    /// `parent` creates `child`, whose handle ([`handle`]) is at the top of its stack block.
    pub(crate) fn create(&mut self, parent: u32, child: u32) {
        self.send(ev(EventKind::ThreadCreate, parent, 0x6000, handle(child), 0, 0, 0, u64::from(child)));
    }

    pub(crate) fn exit(&mut self, tid: u32) {
        self.send(ev(EventKind::ThreadExit, tid, 0x6001, 0, 0, 0, 0, 0));
    }

    pub(crate) fn join(&mut self, tid: u32, child: u32) {
        self.call(tid, SyncKind::Join, handle(child), 0);
    }

    /// libpmemobj excludes PM bytes `off..off + len` from transactions (its lanes' logs).
    pub(crate) fn tx_ignore(&mut self, tid: u32, off: u64, len: u32) {
        self.send(ev(EventKind::TxIgnore, tid, 0x7001, 0x7000_0000 + off, pm(off), len, 0, 0));
    }

    /// pmemcheck's `START_TX` / `END_TX` of the thread's own transaction.
    pub(crate) fn tx_begin(&mut self, tid: u32) {
        self.send(ev(EventKind::TxBegin, tid, 0x7002, 0, 0, 0, 0, 0));
    }

    pub(crate) fn tx_end(&mut self, tid: u32) {
        self.send(ev(EventKind::TxEnd, tid, 0x7003, 0, 0, 0, 0, 0));
    }

    /// A 4-byte DRAM load.
    pub(crate) fn read(&mut self, tid: u32, pc: u64, addr: u64) {
        self.send(dram(EventKind::Load, tid, pc, addr, 4, 0, 0));
    }

    /// A 4-byte DRAM store of `new` over `old`.
    pub(crate) fn write(&mut self, tid: u32, pc: u64, addr: u64, old: u64, new: u64) {
        self.send(dram(EventKind::Store, tid, pc, addr, 4, old, new));
    }

    pub(crate) fn finish(&mut self) -> Vec<RawFinding> {
        self.pass.finish(&self.dev)
    }

    /// The findings of `kind` as (first location's pc, second location's pc), sorted.
    pub(crate) fn pairs(&mut self, kind: &str) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self
            .finish()
            .into_iter()
            .filter(|f| f.kind == kind)
            .map(|f| (f.locations[0].pc, f.locations[1].pc))
            .collect();
        v.sort_unstable();
        v
    }
}

/// Each finding as (store pc, load pcs).
pub(crate) fn store_loads(f: &[RawFinding]) -> Vec<(u64, Vec<u64>)> {
    f.iter()
        .map(|f| {
            let store = f.locations.iter().find(|l| l.role == "store").map_or(0, |l| l.pc);
            let loads = f.locations.iter().filter(|l| l.role == "load").map(|l| l.pc).collect();
            (store, loads)
        })
        .collect()
}
