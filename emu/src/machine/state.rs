//! What the hooks touch: [`HookState`], the engine's user data.

use super::*;

/// State the hooks touch. Lives inside the engine (its user data), so hooks reach it without
/// locks; everything else reaches it through [`Machine`]. Grouped by concern: counting
/// instructions ([`BlockClock`]), knowing the code ([`CodeKnowledge`]), the PM device and its
/// windows ([`PmState`]), the observers ([`Observing`]) and what steers the scheduler from inside
/// the engine ([`Steering`]).
pub struct HookState {
    /// Where the running thread is in the instruction count.
    pub(super) clock: BlockClock,
    /// What the hooks know of the guest's code.
    pub(super) code: CodeKnowledge,
    /// The PM device, the guest's windows onto it, and what the program declared about them.
    pub(super) pm: PmState,
    /// The observer (the passes) and what it wants.
    pub(super) obs: Observing,
    /// The scheduler and the interleaving steering that must act from inside hooks.
    pub(super) steer: Steering,
    /// Why the engine stopped, set by the hook that stopped it (the first reason wins).
    pub(super) stop: Option<Stop>,
    /// The kind and address of the last invalid memory access (for `si_addr`).
    pub(super) invalid: Option<(MemType, u64)>,
    /// A hook that failed says why here (it never panics into C).
    pub(super) error: Option<String>,
    /// The running guest thread.
    pub(super) tid: u32,
    /// The running thread's shadow call stack.
    pub(super) callstack: CallStack,
    /// Interned call stacks of every thread.
    pub(super) stacks: StackTable,
    /// What the engine's translation cache did (for `--host-stats` and `ferrite bench`).
    pub(crate) tcg: TranslationStats,
    /// Watchpoints and the instruction to resume from, while a debugger is attached.
    pub(super) debug: Option<Box<super::debug::DebugState>>,
    /// How guest (virtual) addresses map to the addresses Unicorn's memory and memory hooks use.
    pub(super) phys: Phys,
    /// The running address space's table ([`Machine::mem`], at a fixed address for the
    /// machine's life): the unmapped-access hook maps a region Unicorn does not hold from it
    /// ([`Memory::fault_in`]), and the hooks read guest memory Unicorn does not hold from it.
    /// Used only from hooks, while the machine holds no reference to the table.
    pub(super) table: *mut Memory,
    /// Set when faults mapped so many regions in that the machine should stop at the next block
    /// to trim them: the `sweep_at` to put back (the stop is a sweep's, which nothing sees).
    pub(super) trim_due: Option<u64>,
}

/// Guest addresses and Unicorn's "physical" ones. A machine with one process runs in Unicorn's
/// default TLB mode, where the two are the same. Once a second process exists, Unicorn runs in its
/// virtual-TLB mode: every process's regions stay registered, each process at its own slot of the
/// physical space (`base` = slot << [`SLOT_SHIFT`]; the first process's slot is 0, so its addresses
/// do not change), a TLB-fill hook maps the running process's pages, and a switch is a TLB flush
/// (`spaces.rs`). Memory hooks then receive physical addresses: [`Phys::va`] turns them back.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Phys {
    /// Whether Unicorn runs in virtual-TLB mode.
    pub(super) virt: bool,
    /// The running process's slot base.
    pub(super) base: u64,
    /// While ferrite registers or unregisters memory or hooks: Unicorn then asks the TLB about
    /// physical addresses (to find translated code of a range it drops), which map to themselves.
    pub(super) raw: bool,
}

/// User addresses are below 1 << 47; a process's slot occupies `[base, base + (1 << 47))`.
pub(super) const SLOT_SHIFT: u32 = 47;
/// Slots that fit below 1 << 52 (x86-64's physical address width): processes alive at once.
pub(super) const SLOTS: u32 = 4096;
/// Where a non-canonical guest address in `[1 << 47, 1 << 52)` is sent, in virtual-TLB mode: it
/// would otherwise land in another process's slot. Nothing is ever mapped there.
const STRAY: u64 = 1 << 63;

impl Phys {
    /// The physical address of the running process's guest address `va`.
    #[inline]
    pub(super) fn pa(&self, va: u64) -> u64 {
        if !self.virt {
            va
        } else if va >> SLOT_SHIFT == 0 {
            va + self.base
        } else if va >> 52 == 0 {
            va | STRAY
        } else {
            va
        }
    }

    /// The guest address of physical address `pa`, which the running process reached.
    #[inline]
    pub(super) fn va(&self, pa: u64) -> u64 {
        if !self.virt {
            pa
        } else if pa.wrapping_sub(self.base) >> SLOT_SHIFT == 0 {
            pa - self.base
        } else if pa & !STRAY < 1 << 52 && pa & STRAY != 0 {
            pa & !STRAY
        } else {
            pa
        }
    }
}

/// The exact retired-instruction count, kept per translated block (never with Unicorn's
/// per-instruction count, which flushes translations): the count before the current block plus
/// the block's decoded boundaries.
/// [`BlockClock::slot`] before the first block.
pub(super) const NO_SLOT: u32 = u32::MAX;

pub(super) struct BlockClock {
    /// Instructions retired before the current block.
    pub(super) block_base: u64,
    /// The current block's address, size and instruction count.
    pub(super) block: (u64, u32, u64),
    /// The current block's slot in the decoder ([`NO_SLOT`] when it has not started), and the
    /// index its last access was found at: the memory hooks find the instruction they are in
    /// without a hash lookup or a search ([`HookState::count_at`]).
    pub(super) slot: u32,
    pub(super) cursor: std::cell::Cell<usize>,
    /// How the previous block ended (a call, a return, anything else), for the call stack.
    pub(super) prev_term: Term,
    /// The instruction (by retired count) last considered as a scheduling point, so that an
    /// instruction re-executed after a stop, or firing several hooks, is one point.
    pub(super) last_point: u64,
    /// The instruction budget (`--max-instructions`).
    pub(super) limit: u64,
    /// The PC where the instruction budget runs out, once hooked.
    pub(super) limit_pc: Option<u64>,
    /// The instruction count at which the specials' code hooks are next swept
    /// ([`super::hooks::sweep_special_hooks`]).
    pub(super) sweep_at: u64,
    /// The instruction count of the next periodic sweep; `sweep_at` is brought forward of it
    /// when atomics are to be unhooked ([`super::hooks::unhook_pm_atomics`]).
    pub(super) sweep_next: u64,
}

/// An atomic access's PC that found its object in PM this many times and in DRAM never is not
/// hooked again ([`CodeKnowledge::atomic_pm`]).
pub(super) const PM_ONLY_AFTER: u32 = 32;

/// What the hooks know of the guest's code.
pub(super) struct CodeKnowledge {
    /// Each translated block decoded once (capstone): instruction boundaries, accesses, specials.
    pub(super) decoder: Decoder,
    /// The PCs of the specials that have a code hook of their own (until the taint hook goes in,
    /// which then acts for all of them, [`Machine::hook_taint`]). A hook at a PC serves every
    /// process: it acts on what the running one has there, in `own`.
    pub(super) hooked: rustc_hash::FxHashSet<u64>,
    /// The running process's specials, by PC: what a special's code hook does at a PC (with
    /// processes, another program may have other code there). Swapped at a process switch.
    pub(super) own: super::hooks::Specials,
    /// The code hooks of the specials, by slot (a hook's closure counts its runs in
    /// `special_hits` at its slot): their PC and Unicorn's id. Removed when the taint hook goes
    /// in, and those that did not run for a while by [`super::hooks::sweep_special_hooks`].
    pub(super) special_hooks: Vec<Option<(u64, unicorn_engine::UcHookId)>>,
    /// How often each slot's hook ran since the last sweep.
    pub(super) special_hits: Vec<u32>,
    /// Slots of `special_hooks` free for the next hook.
    pub(super) free_hook_slots: Vec<usize>,
    /// Specials found in a block, to be hooked before it runs.
    pub(super) to_hook: Vec<(u64, Special)>,
    /// Atomic accesses' PCs ([`Special::AtomicAccess`]) by how often they found their object in
    /// PM, `u32::MAX` once one found it in DRAM: a PC that reached PM only, [`PM_ONLY_AFTER`]
    /// times, loses its hook (a C++ program on PM makes most of its atomic accesses there,
    /// where the PM hooks report them anyway, and each code hook costs every hooked
    /// instruction a walk of Unicorn's list).
    pub(super) atomic_pm: rustc_hash::FxHashMap<u64, u32>,
    /// PCs that just reached [`PM_ONLY_AFTER`], to be unhooked at the next sweep.
    pub(super) atomic_unhook: Vec<u64>,
    /// Recognised synchronisation functions by entry address.
    pub(super) sync_fns: rustc_hash::FxHashMap<u64, SyncKind>,
    /// The CPUID table the guest is shown.
    pub(super) cpuid: CpuidTable,
    /// Virtual TSC ticks per retired instruction.
    pub(super) tsc_per_insn: u64,
}

/// The PM device and the guest's windows onto it.
pub(super) struct PmState {
    /// The device: every line's persistence state.
    pub(super) device: PmDevice,
    /// PM mappings: (start, end, device address of start), sorted.
    pub(super) windows: Vec<(u64, u64, u64)>,
    /// Rolling hash of every PM store, flush and fence, folded into the trace hash.
    pub(super) hash: u64,
    /// A PM store about to fault half-way (address, the bytes it overwrites, how many).
    pub(super) torn: Option<(u64, [u8; 8], usize)>,
    /// A store that is a scheduling point, stopped in its write hook: Unicorn performs the store
    /// before it leaves the instruction, so the machine writes these bytes back (address, the
    /// bytes it overwrote, how many) and the instruction runs again, whole, when the thread next
    /// runs. Nothing else of the instruction has happened (QEMU writes registers back after the
    /// memory access, so that a faulting store can restart). Any store, PM or not.
    pub(super) undo: Option<(u64, [u8; 8], usize)>,
    /// What the program registered through Valgrind's client requests ([`crate::client`]).
    pub(super) client: ClientState,
}

/// The observer (the passes) and what it wants: events are built only for what it asked.
pub(super) struct Observing {
    /// The passes, as one observer.
    pub(super) observer: Option<Box<dyn Observer>>,
    /// What the observer wants.
    pub(super) interest: Interest,
    /// Taint tracking, when the observer wants [`Interest::TAINT`].
    pub(super) taint: Option<Box<Taint>>,
    /// DRAM lock words, when the observer wants [`Interest::LOCK_WORDS`].
    pub(super) words: LockWords,
    /// The program's code compiled from C++'s `std::atomic` (sorted `[start, end)` ranges), whose
    /// plain accesses are hooked when the observer wants [`Interest::ATOMICS`]
    /// ([`super::Machine::set_atomic_code`]).
    pub(super) atomic_code: Vec<(u64, u64)>,
    /// The program's static C11 `_Atomic` objects (sorted `[start, end)` ranges, from DWARF):
    /// instructions of its own code that address them are hooked like [`Self::atomic_code`]'s
    /// when the observer wants [`Interest::ATOMICS`] ([`super::Machine::set_atomic_objects`]).
    pub(super) atomic_objects: Vec<(u64, u64)>,
    /// The address ranges of the objects whose code is searched for accesses to
    /// [`Self::atomic_objects`] (sorted).
    pub(super) atomic_object_code: Vec<(u64, u64)>,
    /// Whether the taint engine's per-instruction and all-memory hooks are in the engine: from
    /// the first load the observer may name as a source ([`crate::events::Observer::may_taint`]).
    pub(super) taint_hooked: bool,
    /// The PM loads of the latest instruction reported before the taint hooks went in.
    pub(super) replay: TaintReplay,
    /// The PC of the instruction the taint engine began last in this run of the engine, and
    /// whether a code hook other than the taint hook began it (`hooks::taint_first`).
    pub(super) taint_began: Option<(u64, bool)>,
    /// The guest has a second thread and the observer has not yet said it wants all memory for
    /// good ([`crate::events::Observer::wants_memory`]): it is asked after each event that orders
    /// threads.
    pub(super) memory_asking: bool,
    /// Its latest answer.
    pub(super) memory_want: crate::events::MemoryWant,
    /// The answer changed: the hooks go in (before the next block runs, if wanted) or out (at the
    /// run's next start) ([`super::Machine::settle_memory_hooks`]).
    pub(super) memory_due: bool,
}

/// DRAM words the program's own atomics take and give back ([`Interest::LOCK_WORDS`]): what a
/// locked `cmpxchg`/`xchg` is about to change, and the words each thread holds. A word's return
/// to 0 is a plain store no hook sees, so the holder's words are read again before each of its
/// events and before another thread runs ([`super::hooks::settle_words`]): between two of its
/// events a thread does nothing any observer can tell apart from releasing at the later one.
#[derive(Clone, Debug, Default)]
pub(super) struct LockWords {
    /// The locked instruction the running thread is about to execute: (tid, pc, address,
    /// size, value before), decided at its next event.
    pub(super) pending: Option<(u32, u64, u64, u8, u64)>,
    /// Words taken and not yet seen back at 0: (tid, address, size, value when taken).
    pub(super) held: Vec<(u32, u64, u8, u64)>,
    /// Library code, whose atomics are not followed ([`super::Machine::set_library_code`]).
    pub(super) library: Vec<(u64, u64)>,
}

impl LockWords {
    /// Whether the running thread `tid` has anything to settle.
    #[inline]
    pub(super) fn active(&self, tid: u32) -> bool {
        self.pending.is_some() || self.held.iter().any(|h| h.0 == tid)
    }

    /// Whether the instruction at `pc` is library code.
    pub(super) fn in_library(&self, pc: u64) -> bool {
        within(&self.library, pc)
    }
}

/// Whether `pc` lies in one of `ranges` (sorted, disjoint `[start, end)`).
pub(super) fn within(ranges: &[(u64, u64)], pc: u64) -> bool {
    let i = ranges.partition_point(|r| r.0 <= pc);
    i > 0 && pc < ranges[i - 1].1
}

/// PM loads of one instruction (by retired-instruction count) already reported to the observer.
/// An instruction stopped at its first possible taint source runs again with the taint hooks
/// ([`crate::machine::Machine::hook_taint`]); its earlier loads (the first half of a 16-byte
/// load, a `cmps`'s first operand) are not reported twice. A `rep` string instruction's completed
/// iterations are not repeated at all, so their addresses never come again.
#[derive(Clone, Default)]
pub(super) struct TaintReplay {
    at: u64,
    addrs: [u64; 4],
    n: usize,
}

impl TaintReplay {
    /// The load of `addr` by the instruction at count `at` was reported.
    pub(super) fn reported(&mut self, at: u64, addr: u64) {
        if at != self.at {
            self.at = at;
            self.n = 0;
        }
        if self.n < self.addrs.len() {
            self.addrs[self.n] = addr;
            self.n += 1;
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Whether the load of `addr` by the instruction at count `at` was reported before it ran
    /// again. Forgets everything once another instruction loads.
    pub(super) fn replayed(&mut self, at: u64, addr: u64) -> bool {
        if at != self.at {
            self.n = 0;
            return false;
        }
        self.addrs[..self.n].contains(&addr)
    }
}

/// The scheduler, and the interleaving steering that must act from inside hooks.
pub(super) struct Steering {
    /// The seeded scheduler (asked at optional points from hooks; it picks threads for the
    /// kernel).
    pub(super) sched: Scheduler,
    /// Runnable threads other than the running one (kept by the caller through the machine).
    pub(super) runnable_others: usize,
    /// Retired-instruction count at which the running thread's quantum ends (`u64::MAX` until a
    /// second thread can run).
    pub(super) quantum_end: u64,
    /// Retired-instruction count past which the kernel wants a stop to fire its timers
    /// (`u64::MAX`: none armed).
    pub(super) timer_at: u64,
    /// PMRace's targeted interleaving for this run.
    pub(super) hold: Option<crate::sched::Hold>,
    /// The hold's store happened: nobody is held any more (until a publication hold re-arms).
    pub(super) hold_signalled: bool,
    /// Signals of the hold so far in this run.
    pub(super) hold_signals: u32,
    /// Retired-instruction count from which a signalled publication hold holds readers again
    /// (its writer's wait is over).
    pub(super) hold_rearm_at: u64,
    /// Threads released as privileged: never held again.
    pub(super) hold_bypass: Vec<u32>,
    /// Threads released to run their held load once.
    pub(super) hold_pass: Vec<u32>,
    /// Threads held now (a store with nobody waiting does not count as the signal).
    pub(super) held: u32,
    /// Delay injection (`--delay`).
    pub(super) delays: Option<crate::sched::Delays>,
    /// Threads with PM stores since their last fence (a delay is worth it only for them).
    pub(super) dirty: Vec<u32>,
    /// A delay was decided at a release call (its site): stop at the next block or locked
    /// instruction so that the caller holds the thread.
    pub(super) delay_pending: Option<u64>,
    /// The hold's store just happened: stop before the writer's next flush, fence or block so
    /// that the caller releases the readers.
    pub(super) release_pending: bool,
}

impl HookState {
    pub(super) fn access_kind(&self, pc: u64) -> AccessKind {
        self.running_block().map(|b| b.access_kind(pc)).unwrap_or_default()
    }

    /// The decoded block the engine is running, if the block hook saw it start.
    pub(super) fn running_block(&self) -> Option<&crate::decode::BlockInfo> {
        let (addr, _, _) = self.clock.block;
        self.code.decoder.at(self.clock.slot).filter(|b| b.insns.first() == Some(&addr))
    }

    pub(super) fn device_of(&self, va: u64) -> Option<u64> {
        let i = self.pm.windows.partition_point(|w| w.0 <= va);
        let &(start, end, dev) = self.pm.windows.get(i.checked_sub(1)?)?;
        (va < end).then(|| dev + (va - start))
    }

    /// A scheduling point at the instruction at `pc`: whether to stop for the scheduler.
    pub(super) fn point(&mut self, pc: u64) -> bool {
        if self.steer.runnable_others == 0 {
            return false;
        }
        let at = self.count_at(pc);
        if at == self.clock.last_point {
            return false;
        }
        self.clock.last_point = at;
        self.steer.sched.wants_switch(self.steer.runnable_others)
    }

    /// Tells the observer a crash point is here, before the device changes.
    pub(super) fn crash_point(&mut self, pc: u64) {
        let ev = self.emit(EventKind::CrashPoint, pc, 0, 0, 0, 0, 0);
        self.tell(&ev);
    }

    pub(super) fn mix(&mut self, words: [u64; 4]) {
        for w in words {
            self.pm.hash = (self.pm.hash ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
        }
    }

    /// Hands `ev` to the observer (the passes), if there is one.
    #[inline]
    pub(super) fn tell(&mut self, ev: &Event) {
        if let Some(o) = self.obs.observer.as_mut() {
            o.on_event(ev, &self.pm.device);
            if self.obs.memory_asking && ev.kind.orders_threads() {
                let want = o.wants_memory();
                if want != self.obs.memory_want {
                    self.obs.memory_want = want;
                    self.obs.memory_due = true;
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn emit(
        &mut self,
        kind: EventKind,
        pc: u64,
        addr: u64,
        dev: u64,
        size: u32,
        old: u64,
        new: u64,
    ) -> Event {
        Event {
            kind,
            tid: self.tid,
            pc,
            addr,
            dev,
            size,
            old,
            new,
            stack: self.callstack.id(&mut self.stacks),
            icount: self.count_at(pc),
            store: None,
            flush: None,
            fence: None,
        }
    }

    /// A thread enters the synchronisation function `kind` (called at `site`): with delay
    /// injection, a release by a thread with unfenced PM stores may be delayed.
    pub(super) fn consider_delay(&mut self, kind: SyncKind, site: u64) {
        if !kind.is_release() || self.steer.runnable_others == 0 || !self.steer.dirty.contains(&self.tid) {
            return;
        }
        if let Some(d) = self.steer.delays.as_mut() {
            if d.decide(site) {
                self.steer.delay_pending = Some(site);
            }
        }
    }

    /// Tells the observer of the tainted PM stores the taint engine just applied.
    pub(super) fn report_tainted(&mut self) {
        let HookState { obs, pm, tid, callstack, stacks, .. } = self;
        let Observing { taint, observer, .. } = obs;
        let PmState { device: pm, windows, .. } = pm;
        let (Some(t), Some(o)) = (taint.as_deref(), observer.as_mut()) else { return };
        for w in t.applied() {
            let i = windows.partition_point(|x| x.0 <= w.addr);
            let Some(&(start, end, dev)) = i.checked_sub(1).and_then(|i| windows.get(i)) else { continue };
            if w.addr >= end {
                continue;
            }
            let ev = Event {
                kind: EventKind::Store,
                tid: *tid,
                pc: w.pc,
                addr: w.addr,
                dev: dev + (w.addr - start),
                size: w.size,
                old: 0,
                new: 0,
                stack: callstack.id(stacks),
                icount: 0,
                store: None,
                flush: None,
                fence: None,
            };
            o.on_tainted_store(&ev, t.sets.members(w.content), t.sets.members(w.address), pm);
        }
    }

    /// Tells the observer `kind` for the guest range `[addr, addr + len)` with `new` = `txn`:
    /// one event per piece inside or outside a PM window (`dev` set inside, 0 outside), each
    /// at most `u32::MAX` bytes.
    pub(super) fn emit_range(&mut self, kind: EventKind, pc: u64, addr: u64, len: u64, txn: u64) {
        let end = addr.saturating_add(len);
        let mut a = addr;
        while a < end {
            let i = self.pm.windows.partition_point(|w| w.0 <= a);
            let (upto, dev) = match i.checked_sub(1).and_then(|j| self.pm.windows.get(j)) {
                Some(&(start, wend, dev)) if a < wend => (wend.min(end), dev + (a - start)),
                _ => (self.pm.windows.get(i).map_or(end, |w| w.0.min(end)), 0),
            };
            let upto = upto.min(a.saturating_add(u64::from(u32::MAX)));
            let ev = self.emit(kind, pc, a, dev, (upto - a) as u32, 0, txn);
            self.tell(&ev);
            a = upto;
        }
    }

    /// Instructions retired before the instruction at `pc` in the current block.
    pub(super) fn count_at(&self, pc: u64) -> u64 {
        let (addr, size, n) = self.clock.block;
        match self.running_block() {
            Some(b) if pc >= addr && pc <= addr + u64::from(size) => {
                let i = b.retired_before_from(pc, self.clock.cursor.get());
                self.clock.cursor.set(i);
                self.clock.block_base + i as u64
            }
            _ => self.clock.block_base + n,
        }
    }
}
