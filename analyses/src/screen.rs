//! The event prologue of the passes that follow PM store windows (`hawkset`, `vardalith`): what
//! every event goes through before the pass's own logic sees it, and the dispatch by kind.
//!
//! Screened out first, the same way for both passes:
//! - PM accesses made inside libpmemobj's own lock functions ([`PmdkLockCalls`]): its locks live
//!   in PM, and their implementation is protected by the pseudo-lock the pass already holds;
//! - a synchronisation primitive's own accesses to its lock word ([`SyncCalls::is_sync_access`]:
//!   a pthread mutex or a custom CAS lock placed in PM), which are synchronisation, not data
//!   (the pass's `sync_words=off` keeps them);
//! - what the program declared to pmemcheck ([`Annotations`], with the pass's `annotations=on`):
//!   accesses to PM it withdrew from checking are not PM accesses, and bytes it declared clean
//!   end their store windows unrecorded.
//!
//! - accesses to a PM word inferred to be a lock ([`InferredLocks`]: a locked RMW takes it from 0,
//!   its holder stores 0 back), whose acquisitions and releases reach the pass as lock
//!   operations ([`WindowPass::on_lock_op`]; the pass's `infer_locks=off` leaves them data).
//!
//! - a `--config` lock's release made as a plain store of 0 to its word, not as a call
//!   ([`SyncCalls::released_by_store`]): a release, and the store is the lock's own access.
//!
//! A free of a PM object ([`EventKind::Free`]) reaches the pass as [`WindowPass::on_free`].
//!
//! A load made inside a string or memory routine is trimmed to the bytes the routine's contract
//! reads ([`SyncCalls::clip`]; `strings=off` keeps the whole vector load). What is left reaches
//! the pass as a store, a load, a flush, a fence or a synchronisation event ([`WindowPass`]).

use emu::decode::FlushOp;
use emu::events::{Event, EventKind, Interest};
use emu::pm::PmDevice;

use crate::annotations::{Annotations, Screen};
use crate::inferred_locks::InferredLocks;
use crate::sync::{Clip, PmdkLockCalls, SyncCalls, SyncOp};

/// A pass over PM store windows, fed by [`dispatch`].
pub(crate) trait WindowPass {
    /// The pass's view of libpmemobj's lock calls.
    fn pmdk_locks(&mut self) -> &mut PmdkLockCalls;
    /// The pass's view of the recognised calls each thread is in, and whether it leaves out
    /// lock words (`sync_words`) and trims string routines' loads (`strings`).
    fn sync_calls(&mut self) -> (&mut SyncCalls, bool, bool);
    /// What the program declared to pmemcheck, if the pass honours it (`annotations=on`).
    fn annotations(&mut self) -> Option<&mut Annotations>;
    /// The pass's lock inference, if it infers locks from atomics (`infer_locks=on`).
    fn inferred(&mut self) -> Option<&mut InferredLocks>;
    /// A lock operation inferred from the access `ev` (before the access itself is handed on,
    /// if it is not screened out).
    fn on_lock_op(&mut self, ev: &Event, device: &PmDevice, op: SyncOp);
    /// Every event that was not inside a libpmemobj lock function, before anything else
    /// screens it (vardalith numbers them).
    fn counted(&mut self) {}
    /// The program declared PM bytes clean: their windows end unrecorded.
    fn declare_clean(&mut self, dev: u64, size: u32);
    /// A PM store (`nt`: non-temporal).
    fn on_store(&mut self, ev: &Event, device: &PmDevice, nt: bool);
    /// A PM load.
    fn on_load(&mut self, ev: &Event, device: &PmDevice);
    /// A flush of the line at `ev.dev`.
    fn on_flush(&mut self, ev: &Event, device: &PmDevice, op: FlushOp);
    /// A fence (or a locked instruction, which fences).
    fn on_fence(&mut self, ev: &Event, device: &PmDevice);
    /// A system call of `ev.tid` made the device range `[ev.dev, ev.dev + ev.new)` durable
    /// ([`EventKind::Persist`]: msync, fsync, a durable pwrite).
    fn on_persist(&mut self, ev: &Event, device: &PmDevice);
    /// A synchronisation call, a thread's creation or exit, or a transaction boundary.
    fn on_sync(&mut self, ev: &Event, device: &PmDevice);
    /// The program freed the PM object `[ev.dev, ev.dev + ev.new)` ([`EventKind::Free`]): the
    /// history of its bytes ends (the pass's `frees=off` ignores it).
    fn on_free(&mut self, ev: &Event, device: &PmDevice);
}

/// The events a window pass needs: PM accesses, persistence, synchronisation (C++ atomics on
/// DRAM among it: a release store and the acquire loads that read it order threads as a post
/// and its waits), and DRAM lock words when it infers locks ([`crate::inferred_locks`]).
pub(crate) fn interest(infer_locks: bool) -> Interest {
    let i =
        Interest::LOADS.union(Interest::STORES).union(Interest::PERSIST).union(Interest::SYNC).union(Interest::ATOMICS);
    if infer_locks {
        i.union(Interest::LOCK_WORDS)
    } else {
        i
    }
}

/// Screens `ev` and hands it to the pass's handler for its kind.
pub(crate) fn dispatch<P: WindowPass>(pass: &mut P, ev: &Event, device: &PmDevice) {
    let locks = pass.pmdk_locks();
    locks.observe(ev);
    let access = matches!(ev.kind, EventKind::Load | EventKind::Store | EventKind::RmwStore | EventKind::NtStore);
    if access && ev.kind != EventKind::NtStore && locks.inside(ev.tid) {
        // PMDK's own lock implementation (its locks live in PM): the pseudo-lock protects it.
        return;
    }
    pass.counted();
    // Before the inferred locks screen the access: a configured lock released by a plain store
    // of 0 (P-CLHT's `LOCK_RLS` macro) is also an inferred lock's word.
    let (calls, _, _) = pass.sync_calls();
    calls.observe(ev);
    let released = calls.released_by_store(ev);
    if let Some(lock) = released {
        pass.on_lock_op(ev, device, SyncOp::Release { lock });
    }
    if let Some(inferred) = pass.inferred() {
        let seen = inferred.observe(ev);
        if let Some(op) = seen.op {
            pass.on_lock_op(ev, device, op);
        }
        if seen.screen {
            return;
        }
    }
    let (calls, words, strings) = pass.sync_calls();
    // The release store is the lock's own access to its word, as an unlock call's would be.
    if access && ev.dev != 0 && words && (released.is_some() || calls.is_sync_access(ev)) {
        return;
    }
    let clip = if ev.kind == EventKind::Load && ev.dev != 0 && strings { calls.clip(ev) } else { Clip::Whole };
    if let Some(annotations) = pass.annotations() {
        match annotations.screen(ev) {
            Screen::Keep => {}
            Screen::Withdrawn => return,
            Screen::Clean => {
                pass.declare_clean(ev.dev, ev.size);
                return;
            }
        }
    }
    match ev.kind {
        EventKind::Store | EventKind::RmwStore if ev.dev != 0 => pass.on_store(ev, device, false),
        EventKind::NtStore if ev.dev != 0 => pass.on_store(ev, device, true),
        EventKind::Load if ev.dev != 0 => match clip {
            Clip::Whole => pass.on_load(ev, device),
            Clip::Pieces(pieces) => {
                for (addr, dev, size) in pieces {
                    if size > 0 {
                        pass.on_load(&Event { addr, dev, size, ..*ev }, device);
                    }
                }
            }
        },
        EventKind::Flush(op) => pass.on_flush(ev, device, op),
        EventKind::Fence(_) => pass.on_fence(ev, device),
        EventKind::Persist => pass.on_persist(ev, device),
        EventKind::SyncEnter(_)
        | EventKind::SyncReturn(_)
        | EventKind::ThreadCreate
        | EventKind::ThreadExit
        | EventKind::FutexWake
        | EventKind::FutexWoken
        | EventKind::ProcessReaped
        | EventKind::AtomicAccess
        | EventKind::TxBegin
        | EventKind::TxEnd
        | EventKind::TxIgnore => pass.on_sync(ev, device),
        EventKind::Free if ev.dev != 0 && ev.new != 0 => pass.on_free(ev, device),
        _ => {}
    }
}
