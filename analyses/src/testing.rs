//! Test scaffolding shared by the passes' unit tests: an event builder and a small driver that
//! feeds a pass synthetic thread, lock, barrier and memory events.

use emu::callstack::StackId;
use emu::events::{Event, EventKind};
use emu::pm::PmDevice;
use emu::sync::SyncKind;

use crate::Analysis;

pub(crate) const L1: u64 = 0x9000;
pub(crate) const L2: u64 = 0x9100;
pub(crate) const BARRIER: u64 = 0x9200;

pub(crate) fn ev(kind: EventKind, tid: u32, pc: u64, addr: u64, size: u32, old: u64, new: u64) -> Event {
    Event {
        kind,
        tid,
        pc,
        addr,
        dev: 0,
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

pub(crate) struct Sim<P: Analysis> {
    pub(crate) dev: PmDevice,
    pub(crate) pass: P,
}

impl<P: Analysis> Sim<P> {
    pub(crate) fn send(&mut self, e: Event) {
        self.pass.on_event(&e, &self.dev);
    }
    pub(crate) fn create(&mut self, parent: u32, child: u32) {
        self.send(ev(
            EventKind::ThreadCreate,
            parent,
            0,
            0x7000_0000 + u64::from(child) * 0x100_0000,
            0,
            0,
            u64::from(child),
        ));
    }
    pub(crate) fn lock(&mut self, tid: u32, l: u64) {
        self.send(ev(EventKind::SyncEnter(SyncKind::MutexLock), tid, 1, l, 0, 0, 0));
        self.send(ev(EventKind::SyncReturn(SyncKind::MutexLock), tid, 2, l, 0, 0, 0));
    }
    pub(crate) fn unlock(&mut self, tid: u32, l: u64) {
        self.send(ev(EventKind::SyncEnter(SyncKind::MutexUnlock), tid, 3, l, 0, 0, 0));
        self.send(ev(EventKind::SyncReturn(SyncKind::MutexUnlock), tid, 4, l, 0, 0, 0));
    }
    pub(crate) fn barrier(&mut self, tids: &[u32]) {
        for t in tids {
            self.send(ev(EventKind::SyncEnter(SyncKind::BarrierWait), *t, 5, BARRIER, 0, 0, 0));
        }
        for t in tids {
            self.send(ev(EventKind::SyncReturn(SyncKind::BarrierWait), *t, 6, BARRIER, 0, 0, 0));
        }
    }
    pub(crate) fn read(&mut self, tid: u32, pc: u64, addr: u64) {
        self.send(ev(EventKind::Load, tid, pc, addr, 4, 0, 0));
    }
    pub(crate) fn write(&mut self, tid: u32, pc: u64, addr: u64, old: u64, new: u64) {
        self.send(ev(EventKind::Store, tid, pc, addr, 4, old, new));
    }
    pub(crate) fn pairs(&mut self, kind: &str) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self
            .pass
            .finish(&self.dev)
            .into_iter()
            .filter(|f| f.kind == kind)
            .map(|f| (f.locations[0].pc, f.locations[1].pc))
            .collect();
        v.sort_unstable();
        v
    }
}
