//! Snapshots of the whole machine as plain data, restorable many times into the same warm engine.
//!
//! Crash testing recovers thousands of images with the same program. A fresh engine translates
//! the program again for each of them, and translation dominates a short recovery's cost. A
//! snapshot taken once, before the recovery first touches the PM files, is restored into the
//! engine that took it for every image: guest memory (the table and the touched pages of each
//! host block, copied back only where they may have changed), the running thread's registers, the
//! retired-instruction count, the shadow call stack and interned stacks, the PM device, the
//! scheduler, and what the hooks remember of the run. Everything the engine translated — before or
//! after the snapshot, for any image — stays valid, because the code at every address is the same
//! in each restored run: regions that are unchanged are not re-registered with Unicorn, and one
//! whose registration changed loses its translations and decoded blocks.
//!
//! Why a restored run is the same run as a fresh one, instruction for instruction: the schedule is
//! defined by retired-instruction counts and events, and a translated block's extent depends only
//! on its start address and the code there, never on which blocks were translated before.
//! [`MachineConfig::warm`](super::MachineConfig::warm) makes every memory access call the hooks
//! from the start, so mapping the PM pool later flushes nothing. `tests/crash.rs` checks that
//! recoveries from a snapshot report exactly what fresh ones do.
//!
//! What a snapshot refuses (the caller then runs every recovery fresh): more than one thread,
//! PM mappings, a PMRace hold, delay injection or taint tracking in effect.

use rustc_hash::FxHashMap;

use super::{engine, EmuError, Machine};
use crate::callstack::{CallStack, StackTable};
use crate::client::ClientState;
use crate::memory::MemorySnapshot;
use crate::pm::PmDevice;
use crate::sched::Scheduler;
use crate::sync::SyncKind;

/// What the hooks remember of the run so far.
struct RunState {
    callstack: CallStack,
    tid: u32,
    stacks: StackTable,
    pm: PmDevice,
    pm_hash: u64,
    sched: Scheduler,
    runnable_others: usize,
    quantum_end: u64,
    last_point: u64,
    sync_fns: FxHashMap<u64, SyncKind>,
    client: ClientState,
    dirty: Vec<u32>,
}

/// The machine at a stop between two `run`s (a system call), as plain data.
pub struct MachineSnapshot {
    memory: MemorySnapshot,
    ctx: unicorn_engine::Context,
    icount: u64,
    rand_state: u64,
    run: RunState,
}

impl MachineSnapshot {
    /// Bytes of guest memory contents the snapshot holds.
    pub fn saved_bytes(&self) -> usize {
        self.memory.saved_bytes()
    }
}

impl Machine {
    /// The machine as it is now, or `None` if it holds what a snapshot does not capture.
    pub fn snapshot(&self) -> Option<MachineSnapshot> {
        let st = self.uc.get_data();
        let simple = self.parked.is_empty()
            && self.pm_hooks.is_empty()
            && self.sigbus.is_empty()
            && st.pm.windows.is_empty()
            && st.obs.taint.is_none()
            && st.steer.hold.is_none()
            && st.steer.delays.is_none()
            && st.clock.limit_pc.is_none()
            && st.pm.torn.is_none()
            && !st.steer.release_pending
            && st.steer.delay_pending.is_none()
            // Restoring would write old bytes into the host file behind a shared mapping.
            && !self.mem.regions().any(|r| matches!(r.backing, crate::Backing::SharedFile { .. }));
        if !simple {
            return None;
        }
        let mut ctx = self.uc.context_alloc().ok()?;
        self.uc.context_save(&mut ctx).ok()?;
        Some(MachineSnapshot {
            memory: self.mem.snapshot(),
            ctx,
            icount: self.icount,
            rand_state: self.rand_state,
            run: RunState {
                callstack: st.callstack.clone(),
                tid: st.tid,
                stacks: st.stacks.clone(),
                pm: st.pm.device.clone(),
                pm_hash: st.pm.hash,
                sched: st.steer.sched.clone(),
                runnable_others: st.steer.runnable_others,
                quantum_end: st.steer.quantum_end,
                last_point: st.clock.last_point,
                sync_fns: st.code.sync_fns.clone(),
                client: st.pm.client.clone(),
                dirty: st.steer.dirty.clone(),
            },
        })
    }

    /// Puts the machine back as it was at `snap`, keeping the engine's translations.
    pub fn restore(&mut self, snap: &MachineSnapshot) -> Result<(), EmuError> {
        // Hooks of the last run's PM windows, SIGBUS ranges and budget stop go first: deleting a
        // hook invalidates the translations of its range only.
        for (_, ids) in std::mem::take(&mut self.pm_hooks) {
            for id in ids {
                let _ = self.uc.remove_hook(id);
            }
        }
        for (_, _, ids) in std::mem::take(&mut self.sigbus) {
            for id in ids {
                let _ = self.uc.remove_hook(id);
            }
        }
        if let Some(id) = self.limit_hook.take() {
            let _ = self.uc.remove_hook(id);
        }
        self.parked.clear();
        let changed = self.mem.restore(&mut self.uc, &snap.memory);
        for (start, end) in changed {
            self.code_changed(start, end);
        }
        self.uc.context_restore(&snap.ctx).map_err(engine)?;
        self.icount = snap.icount;
        self.rand_state = snap.rand_state;
        let st = self.uc.get_data_mut();
        let r = &snap.run;
        st.callstack = r.callstack.clone();
        st.tid = r.tid;
        st.stacks = r.stacks.clone();
        st.pm.device = r.pm.clone();
        st.pm.hash = r.pm_hash;
        st.steer.sched = r.sched.clone();
        st.steer.runnable_others = r.runnable_others;
        st.steer.quantum_end = r.quantum_end;
        st.clock.last_point = r.last_point;
        st.code.sync_fns = r.sync_fns.clone();
        st.pm.client = r.client.clone();
        st.steer.dirty = r.dirty.clone();
        st.pm.windows.clear();
        st.clock.limit_pc = None;
        st.stop = None;
        st.invalid = None;
        st.error = None;
        st.pm.torn = None;
        st.pm.undo = None;
        st.code.to_hook.clear();
        st.steer.hold = None;
        st.steer.hold_signalled = false;
        st.steer.hold_bypass.clear();
        st.steer.held = 0;
        st.steer.delays = None;
        st.steer.delay_pending = None;
        st.steer.release_pending = false;
        Ok(())
    }
}
