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
//! The same snapshots serve any machine at any instruction boundary ([`Machine::checkpoint`]):
//! every parked thread's context (copied through the engine), the scheduler, the PM device and
//! windows, what steers the schedule. A recovery's snapshot ([`Machine::snapshot`]) is restored
//! on other crash images' files, so it refuses what would tie it to the files it was taken on:
//! PM and shared file mappings (and, being taken before anything ran in parallel, more than one
//! thread). Both capture the taint engine's state ([`crate::taint::TaintState`]): its label sets,
//! memory shadow and register shadows; what it decoded stays, as the engine's translations do.
//!
//! With several processes ([`Machine::checkpoint_spaces`], [`Machine::restore_spaces`]) every
//! other process's address space is held the same way (its table and pages, PM windows, SIGBUS
//! ranges, physical slot), given by the kernel's process table, which gets them back restored
//! in the same order: a live space at a slot the snapshot has is restored in place, swapped in
//! as the running one for the while (so its unchanged registrations and translations stay), a
//! slot it lacks is released, and a process that ended since gets a new space at its slot.

use rustc_hash::FxHashMap;

use super::{engine, state, AddressSpace, EmuError, Machine};
use crate::callstack::{CallStack, StackTable};
use crate::client::ClientState;
use crate::memory::MemorySnapshot;
use crate::pm::PmDevice;
use crate::sched::{Delays, Hold, Scheduler};
use crate::sync::SyncKind;

/// What the hooks remember of the run so far.
struct RunState {
    callstack: CallStack,
    tid: u32,
    stacks: StackTable,
    pm: PmDevice,
    pm_hash: u64,
    words: super::state::LockWords,
    sched: Scheduler,
    runnable_others: usize,
    quantum_end: u64,
    timer_at: u64,
    last_point: u64,
    sync_fns: FxHashMap<u64, SyncKind>,
    client: ClientState,
    dirty: Vec<u32>,
    hold: Option<Hold>,
    hold_signalled: bool,
    hold_signals: u32,
    hold_rearm_at: u64,
    hold_bypass: Vec<u32>,
    hold_pass: Vec<u32>,
    held: u32,
    delays: Option<Delays>,
    delay_pending: Option<u64>,
    release_pending: bool,
    /// The taint engine's shadows and label sets, with taint tracking.
    taint: Option<crate::taint::TaintState>,
    /// Whether the taint hooks were in.
    taint_hooked: bool,
    /// The loads of the instruction stopped at the first taint source (its count could be an
    /// instruction's of the restored run).
    taint_replay: super::state::TaintReplay,
    /// The all-memory hooks: whether they were in, in for good, the observer still asked, its
    /// latest answer, and whether that answer was still to be acted on
    /// ([`Machine::settle_memory_hooks`]).
    dram: (bool, bool, bool, crate::events::MemoryWant, bool),
}

/// A parked thread: its registers and shadow call stack.
struct SavedThread {
    tid: u32,
    ctx: unicorn_engine::Context,
    callstack: CallStack,
}

/// The address space of a process that was not running: its memory, PM windows and ranges past
/// the end of a file, at its physical slot.
struct SavedSpace {
    base: u64,
    memory: MemorySnapshot,
    windows: Vec<(u64, u64, u64)>,
    sigbus: Vec<(u64, u64)>,
}

/// The machine at a stop between two `run`s, as plain data.
pub struct MachineSnapshot {
    memory: MemorySnapshot,
    ctx: unicorn_engine::Context,
    icount: u64,
    rand_state: u64,
    run: RunState,
    /// The parked threads, by tid.
    parked: Vec<SavedThread>,
    /// PM windows (start, end, device address).
    windows: Vec<(u64, u64, u64)>,
    /// Ranges past the end of their file.
    sigbus: Vec<(u64, u64)>,
    /// The running process's physical slot base (0 without processes).
    base: u64,
    /// The other processes' address spaces, in the order the caller gave them.
    spaces: Vec<SavedSpace>,
    /// Whether the machine had had processes.
    processes: bool,
}

impl MachineSnapshot {
    /// Bytes of guest memory contents the snapshot holds.
    pub fn saved_bytes(&self) -> usize {
        self.memory.saved_bytes() + self.spaces.iter().map(|s| s.memory.saved_bytes()).sum::<usize>()
    }

    /// Bytes of guest memory contents no other snapshot shares (what dropping it frees; see
    /// [`crate::memory::MemorySnapshot::unshared_bytes`]).
    pub fn unshared_bytes(&self) -> usize {
        self.memory.unshared_bytes() + self.spaces.iter().map(|s| s.memory.unshared_bytes()).sum::<usize>()
    }

    /// How many address spaces of processes that were not running it holds.
    pub fn other_spaces(&self) -> usize {
        self.spaces.len()
    }

    /// The retired-instruction count it was taken at.
    pub fn icount(&self) -> u64 {
        self.icount
    }
}

impl Machine {
    /// The machine as it is now for a recovery's warm engine, or `None` if it holds what such a
    /// snapshot must not: more than one thread, PM mappings or shared file mappings (restored
    /// for another crash image, their bytes would be written into that image's files), a PMRace
    /// hold or delay injection.
    pub fn snapshot(&self) -> Option<MachineSnapshot> {
        let st = self.uc.get_data();
        let simple = self.parked.is_empty()
            && self.pm_hooks.is_empty()
            && self.sigbus.is_empty()
            && st.pm.windows.is_empty()
            && st.steer.hold.is_none()
            && st.steer.delays.is_none()
            && st.clock.limit_pc.is_none()
            && !st.steer.release_pending
            && st.steer.delay_pending.is_none()
            && !self.mem.regions().any(|r| matches!(r.backing, crate::Backing::SharedFile { .. }));
        if !simple {
            return None;
        }
        self.checkpoint()
    }

    /// [`Machine::checkpoint`] of a machine without other processes' address spaces: `None`
    /// once the guest has forked or exec'ed (use [`Machine::checkpoint_spaces`] then).
    pub fn checkpoint(&self) -> Option<MachineSnapshot> {
        if self.processes {
            return None;
        }
        self.checkpoint_spaces(&[]).ok()
    }

    /// The whole machine as it is now, at any stop of [`Machine::run`] (any instruction
    /// boundary: [`Machine::stop_at`] stops at an exact count), restorable any number of times
    /// with [`Machine::restore`]: every thread's registers and call stack, the scheduler with its
    /// quantum and random stream, the PM device and windows, PMRace's hold and delay injection.
    /// The contents of files behind shared mappings are the caller's to keep (restore them
    /// first). `spaces` are the address spaces of every process that is not running (the
    /// kernel's process table holds them), in an order the caller keeps: [`Machine::restore_spaces`]
    /// gives them back in that order. Each one's memory is captured as the running one's is
    /// (copies of touched pages, shared with the previous snapshot where the host tracks
    /// written pages; shared mappings' pages; a block several processes map is saved with
    /// each); with taint tracking, the taint engine's state too. Refused, with the reason, in
    /// the middle of a PM store being undone, or when `spaces` are not every other process's.
    pub fn checkpoint_spaces(&self, spaces: &[&AddressSpace]) -> Result<MachineSnapshot, &'static str> {
        let st = self.uc.get_data();
        // A torn or undone store is only ever pending inside `run` (it takes both before it
        // returns).
        if st.pm.torn.is_some() || st.pm.undo.is_some() {
            return Err("a PM store is half done");
        }
        // The first process's slot (0) and every other slot taken: each is one process's.
        let mut bases: Vec<u64> = spaces.iter().map(|s| s.mem.base()).chain([self.mem.base()]).collect();
        bases.sort_unstable();
        let slots = self.slots.iter().map(|&s| u64::from(s) << state::SLOT_SHIFT);
        if !bases.iter().copied().eq([0].into_iter().chain(slots)) {
            return Err("another process's address space was not given");
        }
        let err = "the engine cannot copy a thread's registers";
        let mut ctx = self.uc.context_alloc().map_err(|_| err)?;
        self.uc.context_save(&mut ctx).map_err(|_| err)?;
        let mut parked = Vec::with_capacity(self.parked.len());
        for (&tid, p) in &self.parked {
            let copy = self.copy_context(&p.ctx, &ctx).ok_or(err)?;
            parked.push(SavedThread { tid, ctx: copy, callstack: p.callstack.clone() });
        }
        // Keyed by tid, so that restoring is the same whatever the hash map's order.
        parked.sort_unstable_by_key(|t| t.tid);
        let sigbus: Vec<(u64, u64)> = self.sigbus.iter().map(|&(s, e, _)| (s, e)).collect();
        let s = &st.steer;
        let spaces = spaces
            .iter()
            .map(|a| {
                let sigbus: Vec<(u64, u64)> = a.sigbus.iter().map(|&(s, e, _)| (s, e)).collect();
                SavedSpace { base: a.mem.base(), memory: a.mem.snapshot(&sigbus), windows: a.windows.clone(), sigbus }
            })
            .collect();
        Ok(MachineSnapshot {
            memory: self.mem.snapshot(&sigbus),
            ctx,
            icount: self.icount,
            rand_state: self.rand_state,
            run: RunState {
                callstack: st.callstack.clone(),
                tid: st.tid,
                stacks: st.stacks.clone(),
                pm: st.pm.device.clone(),
                pm_hash: st.pm.hash,
                words: st.obs.words.clone(),
                sched: s.sched.clone(),
                runnable_others: s.runnable_others,
                quantum_end: s.quantum_end,
                timer_at: s.timer_at,
                last_point: st.clock.last_point,
                sync_fns: st.code.sync_fns.clone(),
                client: st.pm.client.clone(),
                dirty: s.dirty.clone(),
                hold: s.hold.clone(),
                hold_signalled: s.hold_signalled,
                hold_signals: s.hold_signals,
                hold_rearm_at: s.hold_rearm_at,
                hold_bypass: s.hold_bypass.clone(),
                hold_pass: s.hold_pass.clone(),
                held: s.held,
                delays: s.delays.clone(),
                delay_pending: s.delay_pending,
                release_pending: s.release_pending,
                taint: st.obs.taint.as_deref().map(crate::taint::Taint::save),
                taint_hooked: st.obs.taint_hooked,
                taint_replay: st.obs.replay.clone(),
                dram: (
                    self.dram_hooks.is_some(),
                    self.dram_final,
                    st.obs.memory_asking,
                    st.obs.memory_want,
                    st.obs.memory_due,
                ),
            },
            parked,
            windows: st.pm.windows.clone(),
            sigbus,
            base: self.mem.base(),
            spaces,
            processes: self.processes,
        })
    }

    /// A copy of the context `ctx`, through the engine (Unicorn copies contexts only into and
    /// out of its CPU); `running` is put back in the engine afterwards.
    fn copy_context(
        &self,
        ctx: &unicorn_engine::Context,
        running: &unicorn_engine::Context,
    ) -> Option<unicorn_engine::Context> {
        let mut copy = self.uc.context_alloc().ok()?;
        self.uc.context_restore(ctx).ok()?;
        let saved = self.uc.context_save(&mut copy);
        self.uc.context_restore(running).ok()?;
        saved.ok()?;
        Some(copy)
    }

    /// Puts the machine back as it was at `snap`, keeping the engine's translations (those of
    /// code whose mapping changed are dropped). The debugger's breakpoints and watchpoints stay.
    /// For a snapshot without other processes' address spaces, of a machine that holds none.
    pub fn restore(&mut self, snap: &MachineSnapshot) -> Result<(), EmuError> {
        if !snap.spaces.is_empty() || !self.slots.is_empty() {
            return Err(EmuError::Memory(crate::memory::MemError::Engine));
        }
        self.restore_spaces(snap, Vec::new()).map(drop)
    }

    /// [`Machine::restore`] of a machine with processes: `live` are the address spaces of the
    /// processes that are not running now (the kernel's process table gives them up), and the
    /// result those of `snap`'s, in the order [`Machine::checkpoint_spaces`] was given them.
    /// An address space at the same physical slot as one of the snapshot's is restored in place
    /// (its registrations and translations of unchanged code stay, as the running one's do);
    /// the others' are released, and a process that has ended since gets a new one at its
    /// slot, registered with the snapshot's table.
    pub fn restore_spaces(
        &mut self,
        snap: &MachineSnapshot,
        mut live: Vec<AddressSpace>,
    ) -> Result<Vec<AddressSpace>, EmuError> {
        // The budget's hook is at a PC of the process running now.
        if let Some(id) = self.limit_hook.take() {
            let _ = self.uc.remove_hook(id);
        }
        if let Some(at) = self.uc.get_data_mut().clock.limit_pc.take() {
            self.code_changed(at, at + 1);
        }
        if !snap.spaces.is_empty() || snap.base != 0 {
            // A snapshot of this machine with other processes was taken in virtual-TLB mode,
            // which the machine never leaves; entering it again does nothing.
            self.enter_virtual_tlb()?;
        }
        // The snapshot's running process's slot becomes the running one.
        if self.mem.base() != snap.base {
            let mut other = self.swap_in(&mut live, snap.base);
            other.registered = true;
            live.push(other);
        }
        // Spaces of slots the snapshot does not have go.
        let (keep, gone): (Vec<AddressSpace>, Vec<AddressSpace>) =
            live.into_iter().partition(|s| snap.spaces.iter().any(|t| t.base == s.mem.base()));
        for s in gone {
            self.release_address_space(s);
        }
        let mut keep = keep;
        let mut out = Vec::with_capacity(snap.spaces.len());
        for saved in &snap.spaces {
            // Restored as the running one is: swapped in for the while.
            let mut space = self.swap_in(&mut keep, saved.base);
            self.restore_running_space(&saved.memory, &saved.windows, &saved.sigbus);
            let raw = self.raw_begin();
            self.take_running(&mut space);
            self.raw_end(raw);
            out.push(space);
        }
        self.restore_running_space(&snap.memory, &snap.windows, &snap.sigbus);
        self.processes |= snap.processes;
        self.restore_threads(snap)?;
        Ok(out)
    }

    /// Makes the space at `base` (taken from `spaces`, or a new empty one) the running one,
    /// registered with the engine, and returns the one that was running.
    fn swap_in(&mut self, spaces: &mut Vec<AddressSpace>, base: u64) -> AddressSpace {
        let mut space = match spaces.iter().position(|s| s.mem.base() == base) {
            Some(i) => spaces.swap_remove(i),
            None => self.new_space(base),
        };
        let raw = self.raw_begin();
        if !space.registered {
            space.registered = self.register(&space.mem);
        }
        self.take_running(&mut space);
        self.raw_end(raw);
        space
    }

    /// An empty address space at `base`, its slot taken (for a process that ended since the
    /// snapshot); its regions are registered when it is restored.
    fn new_space(&mut self, base: u64) -> AddressSpace {
        let slot = (base >> state::SLOT_SHIFT) as u32;
        if slot != 0 {
            self.slots.insert(slot);
        }
        self.registered += 1;
        AddressSpace::empty(base)
    }

    /// Puts the running address space's memory, PM windows and SIGBUS ranges back as `memory`,
    /// `windows` and `sigbus` have them.
    fn restore_running_space(&mut self, memory: &MemorySnapshot, windows: &[(u64, u64, u64)], sigbus: &[(u64, u64)]) {
        // Hooks of PM windows and SIGBUS ranges the snapshot does not have go first (deleting a
        // hook invalidates the translations of its range only); those it has are kept.
        if self.uc.get_data().pm.windows != windows {
            let raw = self.raw_begin();
            for (_, ids) in std::mem::take(&mut self.pm_hooks) {
                for id in ids {
                    let _ = self.uc.remove_hook(id);
                }
            }
            self.raw_end(raw);
            self.uc.get_data_mut().pm.windows.clear();
            for &w in windows {
                self.add_window(w);
            }
        }
        if !self.sigbus.iter().map(|&(s, e, _)| (s, e)).eq(sigbus.iter().copied()) {
            let raw = self.raw_begin();
            for (_, _, ids) in std::mem::take(&mut self.sigbus) {
                for id in ids {
                    let _ = self.uc.remove_hook(id);
                }
            }
            self.raw_end(raw);
            for &(s, e) in sigbus {
                self.add_sigbus_range(s, e);
            }
        }
        // Unicorn drops the translations of what it unregisters through the TLB: raw.
        let raw = self.raw_begin();
        let changed = self.mem.restore(&mut self.uc, memory);
        self.raw_end(raw);
        for (start, end) in changed {
            self.code_changed(start, end);
        }
        // The snapshot's mappings may differ from those the decoder knows.
        self.note_writable_code(true);
    }

    /// The threads, the clock and what the hooks remember, as at `snap`.
    fn restore_threads(&mut self, snap: &MachineSnapshot) -> Result<(), EmuError> {
        self.parked.clear();
        for t in &snap.parked {
            let ctx = self
                .copy_context(&t.ctx, &snap.ctx)
                .ok_or(EmuError::Engine(unicorn_engine::unicorn_const::uc_error::NOMEM))?;
            self.parked.insert(t.tid, super::threads::Parked { ctx, callstack: t.callstack.clone() });
        }
        self.uc.context_restore(&snap.ctx).map_err(engine)?;
        self.icount = snap.icount;
        self.rand_state = snap.rand_state;
        let budget = self.budget;
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
        st.steer.timer_at = r.timer_at;
        st.clock.last_point = r.last_point;
        st.clock.limit = budget;
        st.clock.prev_term = super::Term::Other;
        st.code.sync_fns = r.sync_fns.clone();
        st.obs.words = r.words.clone();
        st.pm.client = r.client.clone();
        st.steer.dirty = r.dirty.clone();
        st.stop = None;
        st.invalid = None;
        st.error = None;
        st.pm.torn = None;
        st.pm.undo = None;
        st.code.to_hook.clear();
        st.steer.hold = r.hold.clone();
        st.steer.hold_signalled = r.hold_signalled;
        st.steer.hold_signals = r.hold_signals;
        st.steer.hold_rearm_at = r.hold_rearm_at;
        st.steer.hold_bypass = r.hold_bypass.clone();
        st.steer.hold_pass = r.hold_pass.clone();
        st.steer.held = r.held;
        st.steer.delays = r.delays.clone();
        st.steer.delay_pending = r.delay_pending;
        st.steer.release_pending = r.release_pending;
        if let (Some(t), Some(saved)) = (st.obs.taint.as_deref_mut(), &r.taint) {
            t.restore(saved);
        }
        st.obs.replay = r.taint_replay.clone();
        st.obs.taint_began = None;
        // The all-memory hooks as they were (a snapshot is taken only where they follow the
        // observer's answers, [`Machine::memory_hooks_final`]): this run may have put them in or
        // out since, or for good. An observer installed next is asked afresh
        // ([`Machine::set_observer`]).
        let (hooked, dram_final, asking, want, due) = r.dram;
        st.obs.memory_asking = asking;
        st.obs.memory_want = want;
        st.obs.memory_due = due;
        self.dram_final = dram_final;
        self.set_dram_hooks(hooked);
        // The taint hooks are never taken out again: a snapshot taken before they went in is
        // restored with them in. That run is the same: until the first source nothing is tainted,
        // so the taint hook and the engine's memory hook change nothing, and the first source is
        // a source without the stop that would have put them in (which only re-runs its load
        // instruction). Specials' own code hooks are gone; the taint hook acts for them.
        if r.taint_hooked {
            self.hook_taint();
        }
        Ok(())
    }
}

impl Machine {
    /// Seeds the scheduler and delay injection with `seed`, as a run whose schedule seed is
    /// `seed` has them at this point, if nothing the run decided so far depended on their seed
    /// ([`Scheduler::reseeded`]); false, with nothing changed, otherwise. With a snapshot taken
    /// before the first scheduling point at which two threads could run, every schedule of an
    /// exploration goes on from it with its own seed.
    pub fn reseed_schedule(&mut self, seed: u64) -> bool {
        let st = self.uc.get_data_mut();
        let Some(sched) = st.steer.sched.reseeded(seed) else { return false };
        let delays = match &st.steer.delays {
            Some(d) => match d.reseeded(seed) {
                Some(d) => Some(d),
                None => return false,
            },
            None => None,
        };
        st.steer.sched = sched;
        st.steer.delays = delays;
        true
    }
}
