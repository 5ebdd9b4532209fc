//! The machine: one Unicorn x86-64 engine, its hooks, and the loop that runs the guest until
//! something needs the outside world.
//!
//! [`Machine::run`] executes the current thread until one of: a `syscall` instruction, a fault or
//! trap the guest would receive as a signal, an instruction that must be emulated outside the
//! engine, or the instruction budget. It never switches threads, blocks or delivers signals itself:
//! those happen in the caller after `emu_start` has returned, because Unicorn adds 2 to RIP after a
//! SYSCALL hook and because stopping from inside a write hook would re-execute the store.
//!
//! Hooks (all of them record and stop; none may unwind a panic into C):
//! - a block hook on all code counts retired instructions per translated block (never
//!   `emu_start(count)`, which hooks every instruction and flushes translations) and keeps the
//!   shadow call stack; a stop in the middle of a block is corrected from the decoded block;
//! - raw `UC_HOOK_INSN` hooks answer CPUID from [`CpuidTable`] and RDTSC/RDTSCP from the virtual
//!   clock, skipping the instruction;
//! - code hooks at exactly the PCs of [`Special`] instructions, installed the first time a block
//!   containing one is entered: the block hook then re-translates the block by writing RIP, which
//!   leaves the translated block before its first instruction runs;
//! - an interrupt hook mapping CPU exceptions to signals, and an invalid-memory hook recording the
//!   faulting address.

mod snapshot;

use std::ffi::c_void;

use rustc_hash::FxHashSet;
use unicorn_engine::unicorn_const::{uc_error, Arch, HookType, MemType, Mode};
use unicorn_engine::{RegisterX86, Unicorn, X86Insn};
use unicorn_engine_sys as ffi;

use crate::callstack::{CallStack, StackId, StackTable};
use crate::client::{self, ClientState, Request};
use crate::cpuid::CpuidTable;
use crate::decode::{AccessKind, Decoder, FenceOp, FlushOp, MemRef, Special, Term};
use crate::events::{Event, EventKind, Interest, Observer};
use crate::memory::{Backing, MemError, Memory, Perm, Region};
use crate::pm::{device_addr, FenceKind, FlushKind, PmConfig, PmDevice, StoreKind};
use crate::sched::{Scheduler, Strategy};
use crate::sync::SyncKind;
use crate::taint::Taint;
pub use snapshot::MachineSnapshot;

pub use unicorn_engine::RegisterX86 as Reg;

/// Linux signal numbers used by the machine.
pub mod sig {
    pub const SIGILL: i32 = 4;
    pub const SIGTRAP: i32 = 5;
    pub const SIGABRT: i32 = 6;
    pub const SIGBUS: i32 = 7;
    pub const SIGFPE: i32 = 8;
    pub const SIGKILL: i32 = 9;
    pub const SIGSEGV: i32 = 11;

    pub fn name(sig: i32) -> &'static str {
        match sig {
            1 => "SIGHUP",
            2 => "SIGINT",
            3 => "SIGQUIT",
            4 => "SIGILL",
            5 => "SIGTRAP",
            6 => "SIGABRT",
            7 => "SIGBUS",
            8 => "SIGFPE",
            9 => "SIGKILL",
            10 => "SIGUSR1",
            11 => "SIGSEGV",
            12 => "SIGUSR2",
            13 => "SIGPIPE",
            14 => "SIGALRM",
            15 => "SIGTERM",
            _ => "signal",
        }
    }
}

/// A synchronous signal raised by an instruction, with what Linux puts in its siginfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub signal: i32,
    /// `si_code` (SEGV_MAPERR=1, SEGV_ACCERR=2, FPE_INTDIV=1, ILL_ILLOPN=2, SI_KERNEL=0x80, ...).
    pub code: i32,
    /// `si_addr`: the faulting data address for memory faults, the PC otherwise.
    pub addr: u64,
    /// The instruction that faulted.
    pub pc: u64,
    /// What happened, for a report.
    pub what: String,
}

/// Why [`Machine::run`] returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The guest executed `syscall`; RIP is past it, RAX holds the number.
    Syscall,
    /// An instruction raised a signal; RIP is at the instruction.
    Fault(Fault),
    /// The instruction budget ran out; RIP is at the next instruction to run.
    Limit,
    /// A scheduling point: the caller asks the scheduler which thread runs next. RIP is at the
    /// next instruction to run.
    Preempt,
    /// The running thread's quantum ended (at a block start): another thread must run, if one
    /// can. RIP is at the next instruction to run.
    Quantum,
    /// The running thread executed `pause`, the spin-wait hint, while another thread could run:
    /// a yield. RIP is past the `pause`.
    Yield,
    /// The running thread reached a sync-point load of the [`crate::sched::Hold`] and must wait
    /// for the matching store; RIP is at the load.
    Hold,
}

/// Settings fixed when the machine is built.
#[derive(Clone, Debug)]
pub struct MachineConfig {
    pub cpuid: CpuidTable,
    /// Retired-instruction budget for the whole run.
    pub max_instructions: u64,
    /// Virtual TSC ticks per retired instruction (the virtual CPU runs at 1 GHz, one instruction
    /// per nanosecond).
    pub tsc_per_insn: u64,
    /// Seed for RDRAND/RDSEED if a guest executes them despite CPUID.
    pub rand_seed: u64,
    pub pm: PmConfig,
    pub strategy: Strategy,
    /// Seed of the scheduler.
    pub sched_seed: u64,
    /// A machine that will be restored from snapshots many times (crash recovery): every memory
    /// access is translated to call the hooks from the start, so that mapping a PM window later
    /// does not throw away the translations a warm engine keeps (see `snapshot`).
    pub warm: bool,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            cpuid: CpuidTable::default(),
            max_instructions: u64::MAX,
            tsc_per_insn: 1,
            rand_seed: 0,
            pm: PmConfig::default(),
            strategy: Strategy::Random,
            sched_seed: 0,
            warm: false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Syscall,
    Interrupt(u32),
    Special(u64, Special),
    Limit,
    /// A scheduling point where the scheduler wants to consider another thread; RIP is at the
    /// next instruction to run.
    Preempt,
    /// The quantum ended at the start of the block about to run.
    Quantum,
    /// The budget runs out at the instruction at this PC, in the block about to run.
    ArmLimit(u64),
    /// An access to a mapping's pages past the end of its file (SIGBUS), at this address.
    Bus(u64),
    /// A hook failed; the message is in `HookState::error`.
    Error,
    /// A scheduling point taken before the instruction at RIP has had any effect: from its code
    /// hook, from its first read hook (Unicorn leaves before the load completes), or from its
    /// first write hook, whose store the machine undoes (`HookState::undo`).
    PreemptBefore,
    /// A sync-point load of the hold (it has not run).
    Hold,
}

/// State the hooks touch. Lives inside the engine (its user data), so hooks reach it without
/// locks; everything else reaches it through [`Machine`].
pub struct HookState {
    /// Instructions retired before the current block.
    block_base: u64,
    /// The current block's address, size and instruction count.
    block: (u64, u32, u64),
    prev_term: Term,
    decoder: Decoder,
    callstack: CallStack,
    /// PCs that already have a code hook for their [`Special`].
    hooked: FxHashSet<u64>,
    /// Specials found in a block, to be hooked before it runs.
    to_hook: Vec<(u64, Special)>,
    stop: Option<Stop>,
    limit: u64,
    invalid: Option<(MemType, u64)>,
    cpuid: CpuidTable,
    tsc_per_insn: u64,
    error: Option<String>,
    /// The running guest thread.
    tid: u32,
    stacks: StackTable,
    pm: PmDevice,
    /// PM mappings: (start, end, device address of start), sorted.
    windows: Vec<(u64, u64, u64)>,
    observer: Option<Box<dyn Observer>>,
    interest: Interest,
    /// Rolling hash of every PM store, flush and fence, folded into the trace hash.
    pm_hash: u64,
    pub(crate) sched: Scheduler,
    /// Runnable threads other than the running one (kept by the caller through the machine).
    runnable_others: usize,
    /// Retired-instruction count at which the running thread's quantum ends (`u64::MAX` until a
    /// second thread can run).
    quantum_end: u64,
    /// The instruction (by retired count) last considered as a scheduling point, so that an
    /// instruction re-executed after a stop, or firing several hooks, is one point.
    last_point: u64,
    /// The PC where the instruction budget runs out, once hooked.
    limit_pc: Option<u64>,
    /// Recognised synchronisation functions by entry address.
    sync_fns: rustc_hash::FxHashMap<u64, SyncKind>,
    /// A PM store about to fault half-way (address, the bytes it overwrites, how many).
    torn: Option<(u64, [u8; 8], usize)>,
    /// A store that is a scheduling point, stopped in its write hook: Unicorn performs the store
    /// before it leaves the instruction, so the machine writes these bytes back (address, the
    /// bytes it overwrote, how many) and the instruction runs again, whole, when the thread next
    /// runs. Nothing else of the instruction has happened (QEMU writes registers back after the
    /// memory access, so that a faulting store can restart).
    undo: Option<(u64, [u8; 8], usize)>,
    /// What the engine's translation cache did (for `--host-stats` and `ferrite bench`).
    pub(crate) tcg: TranslationStats,
    /// What the program registered through Valgrind's client requests ([`crate::client`]).
    client: ClientState,
    /// Taint tracking, when an observer wants [`Interest::TAINT`].
    taint: Option<Box<Taint>>,
    /// PMRace's targeted interleaving for this run.
    hold: Option<crate::sched::Hold>,
    /// The hold's store happened: nobody is held any more.
    hold_signalled: bool,
    /// Threads released as privileged: never held again.
    hold_bypass: Vec<u32>,
    /// Threads held now (a store with nobody waiting does not count as the signal).
    held: u32,
    /// Delay injection (`--delay`).
    delays: Option<crate::sched::Delays>,
    /// Threads with PM stores since their last fence (a delay is worth it only for them).
    dirty: Vec<u32>,
    /// A delay was decided at a release call (its site): stop at the next block or locked
    /// instruction so that the caller holds the thread.
    delay_pending: Option<u64>,
    /// The hold's store just happened: stop before the writer's next flush, fence or block so
    /// that the caller releases the readers.
    release_pending: bool,
}

impl HookState {
    fn access_kind(&self, pc: u64) -> AccessKind {
        let (addr, size, _) = self.block;
        self.decoder.get(addr, size).map(|b| b.access_kind(pc)).unwrap_or_default()
    }

    fn device_of(&self, va: u64) -> Option<u64> {
        let i = self.windows.partition_point(|w| w.0 <= va);
        let &(start, end, dev) = self.windows.get(i.checked_sub(1)?)?;
        (va < end).then(|| dev + (va - start))
    }

    /// A scheduling point at the instruction at `pc`: whether to stop for the scheduler.
    fn point(&mut self, pc: u64) -> bool {
        if self.runnable_others == 0 {
            return false;
        }
        let at = self.count_at(pc);
        if at == self.last_point {
            return false;
        }
        self.last_point = at;
        self.sched.wants_switch(self.runnable_others)
    }

    /// Tells the observer a crash point is here, before the device changes.
    fn crash_point(&mut self, pc: u64) {
        let ev = self.emit(EventKind::CrashPoint, pc, 0, 0, 0, 0, 0);
        if let Some(o) = self.observer.as_mut() {
            o.on_event(&ev, &self.pm);
        }
    }

    fn mix(&mut self, words: [u64; 4]) {
        for w in words {
            self.pm_hash = (self.pm_hash ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn emit(&mut self, kind: EventKind, pc: u64, addr: u64, dev: u64, size: u32, old: u64, new: u64) -> Event {
        Event {
            kind,
            tid: self.tid,
            pc,
            addr,
            dev,
            size,
            old,
            new,
            stack: self.callstack.id(),
            icount: self.count_at(pc),
            store: None,
            flush: None,
            fence: None,
        }
    }

    /// A thread enters the synchronisation function `kind` (called at `site`): with delay
    /// injection, a release by a thread with unfenced PM stores may be delayed.
    fn consider_delay(&mut self, kind: SyncKind, site: u64) {
        if !kind.is_release() || self.runnable_others == 0 || !self.dirty.contains(&self.tid) {
            return;
        }
        if let Some(d) = self.delays.as_mut() {
            if d.decide(site) {
                self.delay_pending = Some(site);
            }
        }
    }

    /// Tells the observer of the tainted PM stores the taint engine just applied.
    fn report_tainted(&mut self) {
        let HookState { taint, observer, pm, windows, .. } = self;
        let (Some(t), Some(o)) = (taint.as_deref(), observer.as_mut()) else { return };
        for w in t.applied() {
            let i = windows.partition_point(|x| x.0 <= w.addr);
            let Some(&(start, end, dev)) = i.checked_sub(1).and_then(|i| windows.get(i)) else { continue };
            if w.addr >= end {
                continue;
            }
            let ev = Event {
                kind: EventKind::Store,
                tid: self.tid,
                pc: w.pc,
                addr: w.addr,
                dev: dev + (w.addr - start),
                size: w.size,
                old: 0,
                new: 0,
                stack: self.callstack.id(),
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
    fn emit_range(&mut self, kind: EventKind, pc: u64, addr: u64, len: u64, txn: u64) {
        let end = addr.saturating_add(len);
        let mut a = addr;
        while a < end {
            let i = self.windows.partition_point(|w| w.0 <= a);
            let (upto, dev) = match i.checked_sub(1).and_then(|j| self.windows.get(j)) {
                Some(&(start, wend, dev)) if a < wend => (wend.min(end), dev + (a - start)),
                _ => (self.windows.get(i).map_or(end, |w| w.0.min(end)), 0),
            };
            let upto = upto.min(a.saturating_add(u64::from(u32::MAX)));
            let ev = self.emit(kind, pc, a, dev, (upto - a) as u32, 0, txn);
            if let Some(o) = self.observer.as_mut() {
                o.on_event(&ev, &self.pm);
            }
            a = upto;
        }
    }

    /// Instructions retired before the instruction at `pc` in the current block.
    fn count_at(&self, pc: u64) -> u64 {
        let (addr, size, n) = self.block;
        match self.decoder.get(addr, size) {
            Some(b) if pc >= addr && pc <= addr + u64::from(size) => self.block_base + b.retired_before(pc),
            _ => self.block_base + n,
        }
    }
}

/// What Unicorn's translation cache did during a run. A thread switch, a quantum end or a
/// scheduling point must translate nothing: translations depend only on code and on the hooks
/// installed, so a run's totals grow with the code it reaches, not with its switches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TranslationStats {
    /// Translated blocks generated (QEMU's `tb_gen_code`, seen through an edge-generation hook;
    /// the very first block of a run is not counted).
    pub blocks_translated: u64,
    /// Times the whole cache was thrown away (ferrite's own requests: a PM window or SIGBUS range
    /// added, `--preempt all`, taint or all-memory hooks installed).
    pub cache_flushes: u64,
    /// Ranges of cached code removed (code written by the host, a hook installed at a PC).
    pub ranges_removed: u64,
}

/// A thread that is not running: its registers and its shadow call stack.
struct Parked {
    ctx: unicorn_engine::Context,
    callstack: CallStack,
}

pub struct Machine {
    uc: Unicorn<'static, HookState>,
    pub mem: Memory,
    /// Hooks of each PM window, by window start.
    pm_hooks: Vec<(u64, Vec<unicorn_engine::UcHookId>)>,
    /// Guest threads that are not running, by tid; the running one lives in the engine. Keyed,
    /// so that a switch costs the same with four threads or a thousand.
    parked: rustc_hash::FxHashMap<u32, Parked>,
    /// The context of the thread switched to last, kept to park the next thread in.
    spare_context: Option<unicorn_engine::Context>,
    /// Pages of file mappings past the end of their file, with the hooks that raise SIGBUS.
    sigbus: Vec<(u64, u64, Vec<unicorn_engine::UcHookId>)>,
    /// The exact retired-instruction count at the last stop.
    icount: u64,
    rand_state: u64,
    /// See [`MachineConfig::warm`].
    warm: bool,
    /// The code hook that stops at the instruction budget, once armed.
    limit_hook: Option<unicorn_engine::UcHookId>,
}

#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    #[error("the emulator could not be set up: {0:?}")]
    Engine(uc_error),
    #[error("guest memory: {0:?}")]
    Memory(MemError),
    #[error("host memory: {0}")]
    Host(std::io::Error),
    #[error("no guest thread {0}")]
    NoThread(u32),
}

fn engine(e: uc_error) -> EmuError {
    EmuError::Engine(e)
}

extern "C" fn cpuid_hook(uc: *mut ffi::uc_engine, user: *mut c_void) -> i32 {
    // SAFETY: `user` is the engine's HookState, alive as long as the engine (see Machine::new).
    let st = unsafe { &*(user as *const HookState) };
    let mut eax = 0u64;
    let mut ecx = 0u64;
    // SAFETY: `uc` is the live engine calling us; register ids are valid for x86.
    unsafe {
        ffi::uc_reg_read(uc, RegisterX86::RAX as i32, (&raw mut eax).cast());
        ffi::uc_reg_read(uc, RegisterX86::RCX as i32, (&raw mut ecx).cast());
    }
    let r = st.cpuid.query(eax as u32, ecx as u32);
    for (reg, v) in [RegisterX86::RAX, RegisterX86::RBX, RegisterX86::RCX, RegisterX86::RDX].iter().zip(r) {
        let v = u64::from(v);
        // SAFETY: as above.
        unsafe { ffi::uc_reg_write(uc, *reg as i32, (&raw const v).cast()) };
    }
    1
}

fn tsc_now(uc: *mut ffi::uc_engine, st: &HookState) -> u64 {
    let mut rip = 0u64;
    // SAFETY: `uc` is the live engine calling us.
    unsafe { ffi::uc_reg_read(uc, RegisterX86::RIP as i32, (&raw mut rip).cast()) };
    st.count_at(rip).wrapping_mul(st.tsc_per_insn)
}

fn write_edx_eax(uc: *mut ffi::uc_engine, v: u64) {
    let (lo, hi) = (v & 0xffff_ffff, v >> 32);
    // SAFETY: `uc` is the live engine calling us.
    unsafe {
        ffi::uc_reg_write(uc, RegisterX86::RAX as i32, (&raw const lo).cast());
        ffi::uc_reg_write(uc, RegisterX86::RDX as i32, (&raw const hi).cast());
    }
}

extern "C" fn rdtsc_hook(uc: *mut ffi::uc_engine, user: *mut c_void) -> i32 {
    // SAFETY: see cpuid_hook.
    let st = unsafe { &*(user as *const HookState) };
    write_edx_eax(uc, tsc_now(uc, st));
    1
}

extern "C" fn rdtscp_hook(uc: *mut ffi::uc_engine, user: *mut c_void) -> i32 {
    // SAFETY: see cpuid_hook.
    let st = unsafe { &*(user as *const HookState) };
    write_edx_eax(uc, tsc_now(uc, st));
    let zero = 0u64; // IA32_TSC_AUX: CPU 0
                     // SAFETY: `uc` is the live engine calling us.
    unsafe { ffi::uc_reg_write(uc, RegisterX86::RCX as i32, (&raw const zero).cast()) };
    1
}

fn add_raw_insn_hook(
    uc: &mut Unicorn<'static, HookState>,
    insn: X86Insn,
    cb: extern "C" fn(*mut ffi::uc_engine, *mut c_void) -> i32,
) -> Result<(), EmuError> {
    let user = (uc.get_data() as *const HookState).cast_mut().cast::<c_void>();
    let mut hh: ffi::uc_hook = 0;
    // SAFETY: the callback has the signature Unicorn expects for CPUID/RDTSC hooks and `user`
    // points at the engine's own data, which outlives the hook.
    let err = unsafe {
        ffi::uc_hook_add(uc.get_handle(), &mut hh, HookType::INSN.0 as i32, cb as *mut c_void, user, 1, 0, insn as i32)
    };
    if err != uc_error::OK {
        return Err(engine(err));
    }
    Ok(())
}

fn on_block(uc: &mut Unicorn<'_, HookState>, addr: u64, size: u32) {
    let st = uc.get_data_mut();
    if st.stop.is_some() {
        return;
    }
    // Synchronisation functions are looked up only when someone listens: passes off cost nothing.
    let watch = st.interest.has(Interest::SYNC) || st.delays.is_some();
    match std::mem::replace(&mut st.prev_term, Term::Other) {
        Term::Call { pc, ret } => match if watch { st.sync_fns.get(&addr).copied() } else { None } {
            None => st.callstack.push(&mut st.stacks, pc, ret),
            Some(kind) => enter_sync(uc, kind, addr, Some((pc, ret))),
        },
        Term::Ret => {
            if let Some((kind, obj, aux)) = st.callstack.returned_to(addr) {
                let rax = uc.reg_read(Reg::RAX).unwrap_or(0);
                let result = kind.result(rax, aux, &mut |a, buf| uc.mem_read(a, buf).is_ok());
                let st = uc.get_data_mut();
                let ev = st.emit(EventKind::SyncReturn(kind), addr, obj, 0, 0, 0, result);
                if let Some(o) = st.observer.as_mut() {
                    o.on_event(&ev, &st.pm);
                }
            }
        }
        Term::Other => {
            // A jump (or fall-through) to a recognised function: a PLT stub's jump, ld.so's
            // lazy-binding resolver jumping to the function it just bound, a tail call. The
            // function runs in the innermost frame. A frame already in a synchronisation
            // function is left alone: that is this very entry seen again (the block hook fires
            // twice for a block the engine stopped before, or re-translated with its hooks) or
            // a function jumping to another inside its own implementation.
            if watch && st.callstack.depth() > 0 && st.callstack.top_sync().is_none() {
                if let Some(kind) = st.sync_fns.get(&addr).copied() {
                    enter_sync(uc, kind, addr, None);
                }
            }
        }
    }
    let st = uc.get_data_mut();
    let (n, term) = match st.decoder.get(addr, size) {
        Some(b) => (b.insns.len() as u64, b.term),
        None => {
            let mut bytes = vec![0u8; size as usize];
            if uc.mem_read(addr, &mut bytes).is_err() {
                bytes.clear();
            }
            let st = uc.get_data_mut();
            let b = st.decoder.insert(addr, size, &bytes);
            let (n, term) = (b.insns.len() as u64, b.term);
            let fresh: Vec<(u64, Special)> =
                b.specials.iter().copied().filter(|(pc, _)| !st.hooked.contains(pc)).collect();
            if !fresh.is_empty() {
                // Hook the specials, then leave this translation before it runs anything: writing
                // RIP from a hook exits the block, and it is translated again with the hooks.
                st.to_hook = fresh;
                st.prev_term = Term::Other;
                install_special_hooks(uc);
                uc.get_data_mut().tcg.ranges_removed += 1;
                let _ = uc.ctl_remove_cache(addr, addr + u64::from(size));
                let _ = uc.set_pc(addr);
                return;
            }
            (n, term)
        }
    };
    let st = uc.get_data_mut();
    let base = st.block_base + st.block.2;
    let stop = if base + n > st.limit && st.limit_pc.is_none() {
        // The budget ends inside (or at the start of) this block. At its start, stop here;
        // otherwise stop here, hook the first instruction past the budget, and run up to it.
        let k = st.limit - base;
        match st.decoder.get(addr, size).and_then(|b| b.insns.get(k as usize).copied()) {
            Some(pc) if k > 0 => Some(Stop::ArmLimit(pc)),
            _ => Some(Stop::Limit),
        }
    } else if st.release_pending || st.delay_pending.is_some() {
        // Stop before this block runs: the hold's writer or a delayed thread waits here.
        st.last_point = base;
        Some(Stop::Preempt)
    } else if st.runnable_others > 0 && base + n > st.quantum_end && base != st.last_point {
        // Stop before this block runs: the quantum ended. A check of a counter the hook keeps
        // anyway: arming or ending a quantum changes no translation.
        st.last_point = base;
        Some(Stop::Quantum)
    } else {
        None
    };
    if let Some(stop) = stop {
        st.block_base = base;
        st.block = (addr, size, 0);
        st.stop = Some(stop);
        let _ = uc.emu_stop();
        let _ = uc.set_pc(addr);
        return;
    }
    st.block_base = base;
    st.block = (addr, size, n);
    st.prev_term = term;
}

/// The recognised synchronisation function `kind` at `addr` is entered: called from `call =
/// (call site, return address)`, or reached by a jump and run in the innermost frame. Reports
/// its [`EventKind::SyncEnter`] and marks the frame, whose return reports the `SyncReturn`.
fn enter_sync(uc: &mut Unicorn<'_, HookState>, kind: SyncKind, addr: u64, call: Option<(u64, u64)>) {
    let args = [Reg::RDI, Reg::RSI, Reg::RDX, Reg::RCX, Reg::R8, Reg::R9].map(|r| uc.reg_read(r).unwrap_or(0));
    let e = kind.entry(args, &mut |a, buf| uc.mem_read(a, buf).is_ok());
    let st = uc.get_data_mut();
    st.consider_delay(kind, call.map_or(addr, |(pc, _)| pc));
    match call {
        Some((pc, ret)) => st.callstack.push_sync(&mut st.stacks, pc, ret, Some((kind, e.obj, e.aux))),
        None => st.callstack.set_top_sync(Some((kind, e.obj, e.aux))),
    }
    let ev = st.emit(EventKind::SyncEnter(kind), addr, e.obj, 0, 0, e.old, e.new);
    if let Some(o) = st.observer.as_mut() {
        o.on_event(&ev, &st.pm);
    }
}

fn install_special_hooks(uc: &mut Unicorn<'_, HookState>) {
    let list = std::mem::take(&mut uc.get_data_mut().to_hook);
    for (pc, special) in list {
        uc.get_data_mut().hooked.insert(pc);
        let res = uc.add_code_hook(pc, pc, move |uc, at, _| on_special(uc, at, special));
        if res.is_err() {
            let st = uc.get_data_mut();
            st.error = Some(format!("cannot hook the instruction at {pc:#x}"));
            st.stop = Some(Stop::Error);
            let _ = uc.emu_stop();
        }
    }
}

fn effective_address(uc: &Unicorn<'_, HookState>, m: &MemRef) -> u64 {
    let r = |x: Option<Reg>| x.map(|x| uc.reg_read(x).unwrap_or(0)).unwrap_or(0);
    let base = m.next_pc.unwrap_or_else(|| r(m.base));
    let seg = match m.segment {
        Some(Reg::FS) => uc.reg_read(Reg::FS_BASE).unwrap_or(0),
        Some(Reg::GS) => uc.reg_read(Reg::GS_BASE).unwrap_or(0),
        _ => 0,
    };
    base.wrapping_add(r(m.index).wrapping_mul(u64::from(m.scale))).wrapping_add(m.disp as u64).wrapping_add(seg)
}

fn on_special(uc: &mut Unicorn<'_, HookState>, pc: u64, special: Special) {
    let delay_here = matches!(special, Special::Fence(FenceOp::Locked)) && uc.get_data().delay_pending.is_some();
    if delay_here || matches!(special, Special::Flush(..) | Special::Fence(_)) && uc.get_data().release_pending {
        // The hold's writer reached a flush or fence: the readers go first.
        let st = uc.get_data_mut();
        if st.stop.is_none() {
            st.stop = Some(Stop::PreemptBefore);
            let _ = uc.emu_stop();
        }
        return;
    }
    match special {
        Special::Flush(op, mref) => {
            if uc.get_data().windows.is_empty() {
                return;
            }
            let ea = effective_address(uc, &mref);
            let st = uc.get_data_mut();
            let Some(dev) = st.device_of(ea) else { return };
            let kind = match op {
                FlushOp::Clflush => FlushKind::Clflush,
                FlushOp::Clflushopt => FlushKind::Clflushopt,
                FlushOp::Clwb => FlushKind::Clwb,
            };
            if st.interest.has(Interest::CRASH) && kind == FlushKind::Clflush {
                st.crash_point(pc);
            }
            let out = st.pm.flush(st.tid, dev, kind);
            st.mix([1, dev, op as u64, u64::from(st.tid)]);
            if st.interest.has(Interest::PERSIST) {
                let mut ev = st.emit(EventKind::Flush(op), pc, ea, dev, 64, 0, 0);
                ev.flush = Some(out);
                if let Some(o) = st.observer.as_mut() {
                    o.on_event(&ev, &st.pm);
                }
            }
        }
        Special::Fence(op) => {
            let st = uc.get_data_mut();
            if op == FenceOp::Locked && st.point(pc) {
                // Switch before the locked instruction runs; it is a point only once.
                st.stop = Some(Stop::PreemptBefore);
                let _ = uc.emu_stop();
                return;
            }
            if st.windows.is_empty() {
                return;
            }
            let kind = match op {
                FenceOp::Sfence => FenceKind::Sfence,
                FenceOp::Mfence => FenceKind::Mfence,
                FenceOp::Locked => FenceKind::Locked,
            };
            if st.interest.has(Interest::CRASH) && st.pm.threads_with_pending().contains(&st.tid) {
                st.crash_point(pc);
            }
            let out = st.pm.fence(st.tid, kind);
            st.mix([2, op as u64, u64::from(st.tid), 0]);
            let tid = st.tid;
            st.dirty.retain(|&t| t != tid);
            if st.interest.has(Interest::PERSIST) {
                let mut ev = st.emit(EventKind::Fence(op), pc, 0, 0, 0, 0, 0);
                ev.fence = Some(out);
                if let Some(o) = st.observer.as_mut() {
                    o.on_event(&ev, &st.pm);
                }
            }
        }
        Special::Privileged | Special::Rand { .. } => {
            let st = uc.get_data_mut();
            if st.stop.is_none() {
                st.stop = Some(Stop::Special(pc, special));
                let _ = uc.emu_stop();
            }
        }
        Special::ClientRequest => on_client_request(uc, pc),
        Special::Pause => {
            let st = uc.get_data_mut();
            if st.stop.is_none() && st.runnable_others > 0 {
                st.stop = Some(Stop::Special(pc, special));
                let _ = uc.emu_stop();
            }
        }
    }
}

/// The `xchg rbx, rbx` of a Valgrind client request ([`crate::client`]), before it executes
/// (it is a no-op): answers it in RDX and tells the observer what the program declared. The
/// answer never depends on the observer. Not a request unless the 16 bytes before `pc` are the
/// preamble and RAX points to readable memory.
fn on_client_request(uc: &mut Unicorn<'_, HookState>, pc: u64) {
    if uc.get_data().stop.is_some() {
        // The engine stops before this instruction; it is handled when it runs.
        return;
    }
    let mut pre = [0u8; 16];
    if pc < 16 || uc.mem_read(pc - 16, &mut pre).is_err() || !client::is_preamble(&pre) {
        return;
    }
    let mut raw = [0u8; 48];
    let rax = uc.reg_read(Reg::RAX).unwrap_or(0);
    if uc.mem_read(rax, &mut raw).is_err() {
        return;
    }
    let mut args = [0u64; 6];
    for (a, w) in args.iter_mut().zip(raw.chunks_exact(8)) {
        *a = u64::from_le_bytes(w.try_into().unwrap_or_default());
    }
    let req = Request::decode(&args);
    let st = uc.get_data_mut();
    let answer = st.client.answer(&req);
    let (sync, persist) = (st.interest.has(Interest::SYNC), st.interest.has(Interest::PERSIST));
    match req {
        Request::SetClean { addr, len } if persist => st.emit_range(EventKind::SetClean, pc, addr, len, 0),
        Request::RegisterPmemMapping { addr, len } if persist => st.emit_range(EventKind::PmRegister, pc, addr, len, 0),
        Request::RemovePmemMapping { addr, len } if persist => st.emit_range(EventKind::PmUnregister, pc, addr, len, 0),
        Request::StartTx { txn } | Request::EndTx { txn } if sync => {
            let kind = if matches!(req, Request::StartTx { .. }) { EventKind::TxBegin } else { EventKind::TxEnd };
            let ev = st.emit(kind, pc, 0, 0, 0, 0, txn.unwrap_or(0));
            if let Some(o) = st.observer.as_mut() {
                o.on_event(&ev, &st.pm);
            }
        }
        Request::AddToTx { txn, addr, len } if sync => st.emit_range(EventKind::TxAdd, pc, addr, len, txn.unwrap_or(0)),
        Request::RemoveFromTx { txn, addr, len } if sync => {
            st.emit_range(EventKind::TxRemove, pc, addr, len, txn.unwrap_or(0))
        }
        Request::AddToGlobalTxIgnore { addr, len } if sync => st.emit_range(EventKind::TxIgnore, pc, addr, len, 0),
        _ => {}
    }
    if let Some(v) = answer {
        if uc.reg_write(Reg::RDX, v).is_err() {
            let st = uc.get_data_mut();
            st.error = Some(format!("cannot answer the client request at {pc:#x}"));
            st.stop = Some(Stop::Error);
            let _ = uc.emu_stop();
        }
    }
}

/// A guest store into a PM window (`start` maps to device address `dev_base`), before Unicorn
/// performs it. Accesses wider than 8 bytes arrive split into 8-byte hooks.
fn on_pm_write(uc: &mut Unicorn<'_, HookState>, addr: u64, size: usize, value: i64, start: u64, dev_base: u64) {
    if size == 0 || size > 8 {
        return;
    }
    // A store running off the end of the window into unmapped memory faults after Unicorn has
    // written its first part; on Linux it would write nothing. Its events are discarded.
    let last = addr + size as u64 - 1;
    if uc.get_data().device_of(last).is_none() {
        let mut probe = [0u8; 1];
        if uc.mem_read(last, &mut probe).is_err() {
            // Keep the bytes it is about to overwrite, to put them back when it faults.
            let mapped = (((addr | 0xfff) + 1) - addr).min(size as u64) as usize;
            let mut old = [0u8; 8];
            let _ = uc.mem_read(addr, &mut old[..mapped]);
            uc.get_data_mut().torn = Some((addr, old, mapped));
            return;
        }
    }
    let mut old = [0u8; 8];
    let _ = uc.mem_read(addr, &mut old[..size]);
    // The lines the store touches, as memory holds them now, for lines the device does not
    // track yet.
    let first = addr & !63;
    let mut lines = [0u8; 128];
    let _ = uc.mem_read(first, &mut lines[..64]);
    if (addr + size as u64 - 1) & !63 != first {
        let _ = uc.mem_read(first + 64, &mut lines[64..]);
    }
    let pc = uc.pc_read().unwrap_or(0);
    let st = uc.get_data_mut();
    let access = st.access_kind(pc);
    let new = (value as u64).to_le_bytes();
    if access == AccessKind::LockedCmpxchg && old[..size] == new[..size] {
        // A failed `lock cmpxchg` writes its unchanged value back: no store for the model.
        return;
    }
    if st.stop.is_none() && st.point(pc) {
        // A switch before the store, never after it: Unicorn performs the store on its way out of
        // the instruction, and the machine writes the old bytes back, so the instruction runs
        // whole when the thread is scheduled again. Nothing of it reached the device.
        let mut keep = [0u8; 8];
        keep[..size].copy_from_slice(&old[..size]);
        st.undo = Some((addr, keep, size));
        st.stop = Some(Stop::PreemptBefore);
        let _ = uc.emu_stop();
        return;
    }
    let dev = dev_base + (addr - start);
    let kind = match access {
        AccessKind::NonTemporal => StoreKind::NonTemporal,
        AccessKind::RepString => StoreKind::RepString { seq: st.count_at(pc) },
        _ => StoreKind::Cached,
    };
    let first_dev = dev & !63;
    let id = st.pm.store(st.tid, dev, &old[..size], &new[..size], kind, |line| {
        let off = (line * 64).wrapping_sub(first_dev) as usize;
        let mut out = [0u8; 64];
        if off <= 64 {
            out.copy_from_slice(&lines[off..off + 64]);
        }
        out
    });
    let oldv = u64::from_le_bytes(old);
    let mut newb = [0u8; 8];
    newb[..size].copy_from_slice(&new[..size]);
    let newv = u64::from_le_bytes(newb);
    st.mix([3, dev, size as u64, newv]);
    if st.delays.is_some() && !st.dirty.contains(&st.tid) {
        st.dirty.push(st.tid);
    }
    if st.held > 0 && st.hold.as_ref().is_some_and(|h| h.covers(dev, size as u64)) && !st.hold_signalled {
        st.hold_signalled = true;
        st.release_pending = true;
    }
    if st.interest.has(Interest::STORES) {
        let ek = match access {
            AccessKind::NonTemporal => EventKind::NtStore,
            AccessKind::Locked | AccessKind::LockedCmpxchg => EventKind::RmwStore,
            _ => EventKind::Store,
        };
        let mut ev = st.emit(ek, pc, addr, dev, size as u32, oldv, newv);
        ev.store = Some(id);
        if let Some(o) = st.observer.as_mut() {
            o.on_event(&ev, &st.pm);
        }
    }
}

fn on_pm_read(uc: &mut Unicorn<'_, HookState>, addr: u64, size: usize, start: u64, dev_base: u64) {
    if size == 0 || size > 8 {
        return;
    }
    let st = uc.get_data();
    // Reading RIP inside a memory hook makes QEMU search for the translated block: skip it (and
    // the value) for a load that is no point, no hold, no delay site and no event, as every load of
    // a single-threaded recovery is.
    let wanted = st.hold.is_some() || st.runnable_others > 0 || st.delays.is_some() || st.interest.has(Interest::LOADS);
    if st.stop.is_some() || !wanted {
        return;
    }
    let pc = uc.pc_read().unwrap_or(0);
    let st = uc.get_data_mut();
    if let Some(h) = &st.hold {
        let dev = dev_base + (addr - start);
        if !st.hold_signalled
            && h.covers(dev, size as u64)
            && h.loads.binary_search(&pc).is_ok()
            && !st.hold_bypass.contains(&st.tid)
        {
            // Unicorn rewinds RIP to the load, which runs again when the thread is released.
            st.stop = Some(Stop::Hold);
            let _ = uc.emu_stop();
            return;
        }
    }
    if st.point(pc) {
        // Unicorn leaves the instruction before the loaded value reaches a register: the switch
        // falls before the load, which runs when the thread is scheduled again.
        st.stop = Some(Stop::PreemptBefore);
        let _ = uc.emu_stop();
        return;
    }
    if st.delays.is_some() {
        let dev = dev_base + (addr - start);
        if let Some(info) = st.pm.persist_info(dev).filter(|i| !i.durable_hw) {
            let at = st.count_at(pc);
            let tid = st.tid;
            if let Some(d) = st.delays.as_mut() {
                d.observe(tid, info.writer, at);
            }
        }
    }
    if !st.interest.has(Interest::LOADS) {
        return;
    }
    let mut v = [0u8; 8];
    let _ = uc.mem_read(addr, &mut v[..size]);
    let st = uc.get_data_mut();
    let dev = dev_base + (addr - start);
    let ev = st.emit(EventKind::Load, pc, addr, dev, size as u32, u64::from_le_bytes(v), 0);
    if let Some(o) = st.observer.as_mut() {
        o.on_event(&ev, &st.pm);
        if let Some(t) = st.taint.as_deref_mut() {
            let id = o.taint_source(&ev, &st.pm);
            if id != 0 {
                t.source(addr, size as u32, id);
                if !t.knows(pc) {
                    learn_insn(uc, pc, 16);
                }
            }
        }
    }
}

/// Decodes the instruction at `pc` for the taint engine.
fn learn_insn(uc: &mut Unicorn<'_, HookState>, pc: u64, size: usize) {
    let mut bytes = [0u8; 16];
    let n = size.clamp(1, 16);
    if uc.mem_read(pc, &mut bytes[..n]).is_err() && uc.mem_read(pc, &mut bytes[..1]).is_err() {
        return;
    }
    if let Some(t) = uc.get_data_mut().taint.as_deref_mut() {
        t.learn(pc, &bytes[..n]);
    }
}

/// Before every instruction, with taint tracking: the previous one is complete.
fn on_taint_insn(uc: &mut Unicorn<'_, HookState>, pc: u64, size: u32) {
    // With nothing tainted the instruction needs no decoding (unless it loads a source, see
    // `learn_insn`).
    let decode = uc.get_data().taint.as_deref().is_some_and(|t| !t.is_quiet() && !t.knows(pc));
    if decode {
        learn_insn(uc, pc, size as usize);
    }
    let st = uc.get_data_mut();
    if let Some(t) = st.taint.as_deref_mut() {
        t.begin(pc);
        if !t.applied().is_empty() {
            st.report_tainted();
        }
    }
}

/// Any access outside the PM windows, for observers that want all memory (PM accesses are
/// reported by the window hooks).
fn on_dram_access(uc: &mut Unicorn<'_, HookState>, addr: u64, size: usize, value: Option<i64>) {
    if size == 0 || size > 8 || uc.get_data().device_of(addr).is_some() {
        return;
    }
    let mut cur = [0u8; 8];
    let _ = uc.mem_read(addr, &mut cur[..size]);
    let pc = uc.pc_read().unwrap_or(0);
    let st = uc.get_data_mut();
    if st.stop.is_some() {
        return;
    }
    let cur = u64::from_le_bytes(cur);
    let ev = match value {
        Some(v) => {
            let kind = match st.access_kind(pc) {
                AccessKind::Locked | AccessKind::LockedCmpxchg => EventKind::RmwStore,
                _ => EventKind::Store,
            };
            let mask = if size == 8 { u64::MAX } else { (1u64 << (8 * size)) - 1 };
            st.emit(kind, pc, addr, 0, size as u32, cur, v as u64 & mask)
        }
        None => st.emit(EventKind::Load, pc, addr, 0, size as u32, cur, 0),
    };
    if let Some(o) = st.observer.as_mut() {
        o.on_event(&ev, &st.pm);
    }
}

fn on_interrupt(uc: &mut Unicorn<'_, HookState>, intno: u32) {
    let st = uc.get_data_mut();
    if st.stop.is_none() {
        st.stop = Some(Stop::Interrupt(intno));
    }
    let _ = uc.emu_stop();
}

fn on_syscall(uc: &mut Unicorn<'_, HookState>) {
    let st = uc.get_data_mut();
    if st.stop.is_none() {
        st.stop = Some(Stop::Syscall);
    }
    let _ = uc.emu_stop();
}

fn on_invalid(uc: &mut Unicorn<'_, HookState>, t: MemType, addr: u64, _size: usize, _v: i64) -> bool {
    uc.get_data_mut().invalid = Some((t, addr));
    false
}

impl Machine {
    pub fn new(config: MachineConfig) -> Result<Machine, EmuError> {
        let state = HookState {
            block_base: 0,
            block: (0, 0, 0),
            prev_term: Term::Other,
            decoder: Decoder::default(),
            callstack: CallStack::default(),
            hooked: FxHashSet::default(),
            to_hook: Vec::new(),
            stop: None,
            limit: config.max_instructions,
            invalid: None,
            cpuid: config.cpuid.clone(),
            tsc_per_insn: config.tsc_per_insn,
            error: None,
            tid: 1,
            stacks: StackTable::default(),
            pm: PmDevice::new(config.pm),
            windows: Vec::new(),
            observer: None,
            interest: Interest::NONE,
            pm_hash: 0,
            sched: Scheduler::new(config.strategy, config.sched_seed),
            runnable_others: 0,
            quantum_end: u64::MAX,
            last_point: u64::MAX,
            limit_pc: None,
            sync_fns: rustc_hash::FxHashMap::default(),
            client: ClientState::default(),
            taint: None,
            hold: None,
            hold_signalled: false,
            hold_bypass: Vec::new(),
            held: 0,
            delays: None,
            dirty: Vec::new(),
            delay_pending: None,
            release_pending: false,
            torn: None,
            undo: None,
            tcg: TranslationStats::default(),
        };
        let mut uc = Unicorn::new_with_data(Arch::X86, Mode::MODE_64, state).map_err(engine)?;
        // Skylake-Server: the translator accepts CLWB, CLFLUSHOPT, SSE4.2 and POPCNT only if the
        // selected model has them. What the guest is told comes from `cpuid` alone.
        uc.ctl_set_cpu_model(unicorn_engine::unicorn_const::X86CpuModel::SKYLAKE_SERVER as i32).map_err(engine)?;
        uc.add_block_hook(1, 0, on_block).map_err(engine)?;
        uc.add_intr_hook(on_interrupt).map_err(engine)?;
        uc.add_insn_sys_hook(X86Insn::SYSCALL, 1, 0, on_syscall).map_err(engine)?;
        uc.add_mem_hook(HookType::MEM_INVALID, 1, 0, on_invalid).map_err(engine)?;
        add_raw_insn_hook(&mut uc, X86Insn::CPUID, cpuid_hook)?;
        add_raw_insn_hook(&mut uc, X86Insn::RDTSC, rdtsc_hook)?;
        add_raw_insn_hook(&mut uc, X86Insn::RDTSCP, rdtscp_hook)?;
        // Called only when QEMU generates a translated block: the count of translations, free at
        // run time.
        uc.add_edge_gen_hook(1, 0, |uc, _cur, _prev| uc.get_data_mut().tcg.blocks_translated += 1).map_err(engine)?;
        if config.warm {
            // Any memory hook makes the translator route every access through the hooks (on a
            // non-canonical address nothing ever maps, this one never fires).
            const NOWHERE: u64 = 0xdead_0000_0000_0000;
            uc.add_mem_hook(HookType::MEM_READ | HookType::MEM_WRITE, NOWHERE, NOWHERE, |_, _, _, _, _| true)
                .map_err(engine)?;
        }
        Ok(Machine {
            uc,
            mem: Memory::default(),
            pm_hooks: Vec::new(),
            parked: rustc_hash::FxHashMap::default(),
            spare_context: None,
            sigbus: Vec::new(),
            icount: 0,
            warm: config.warm,
            limit_hook: None,
            rand_state: (config.rand_seed ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9) | 1,
        })
    }

    pub fn reg(&self, r: Reg) -> u64 {
        self.uc.reg_read(r).unwrap_or(0)
    }

    pub fn set_reg(&mut self, r: Reg, v: u64) {
        let _ = self.uc.reg_write(r, v);
    }

    /// A register wider than 64 bits (XMM, x87 ST) as little-endian bytes.
    pub fn reg_bytes(&self, r: Reg) -> Vec<u8> {
        self.uc.reg_read_long(r).map(|b| b.to_vec()).unwrap_or_default()
    }

    pub fn set_reg_bytes(&mut self, r: Reg, v: &[u8]) {
        let _ = self.uc.reg_write_long(r, v);
    }

    pub fn pc(&self) -> u64 {
        self.reg(Reg::RIP)
    }

    /// Retired instructions so far (exact at every stop).
    pub fn icount(&self) -> u64 {
        self.icount
    }

    /// Current PC followed by the call sites of the shadow stack, innermost first.
    pub fn backtrace(&self) -> Vec<u64> {
        let st = self.uc.get_data();
        std::iter::once(self.pc()).chain(st.callstack.call_sites()).collect()
    }

    /// Maps a region (see [`Memory::map`]). A PM region becomes a window of the device.
    pub fn map(&mut self, region: Region) -> Result<(), MemError> {
        let pm = match &region.backing {
            Backing::Pm { file_id, offset, .. } => Some((region.start, region.end, device_addr(*file_id, *offset))),
            _ => None,
        };
        self.mem.map(&mut self.uc, region)?;
        if let Some(w) = pm {
            self.add_window(w);
        }
        Ok(())
    }

    pub fn unmap(&mut self, start: u64, end: u64) -> Vec<Region> {
        let removed = self.mem.unmap(&mut self.uc, start, end);
        if removed.iter().any(|r| r.perm.exec()) {
            self.code_changed(start, end);
        }
        if removed.iter().any(|r| matches!(r.backing, Backing::Pm { .. })) {
            self.cut_windows(start, end);
        }
        let (gone, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.sigbus).into_iter().partition(|b| b.0 < end && b.1 > start);
        self.sigbus = kept;
        for (_, _, ids) in gone {
            for id in ids {
                let _ = self.uc.remove_hook(id);
            }
        }
        removed
    }

    /// Accesses to `[start, end)` raise SIGBUS (a mapping's pages past the end of its file).
    pub fn add_sigbus_range(&mut self, start: u64, end: u64) {
        let mut ids = Vec::new();
        for t in [HookType::MEM_READ, HookType::MEM_WRITE] {
            let h = self.uc.add_mem_hook(t, start, end - 1, |uc, _t, addr, _size, _v| {
                let st = uc.get_data_mut();
                if st.stop.is_none() {
                    st.stop = Some(Stop::Bus(addr));
                    let _ = uc.emu_stop();
                }
                true
            });
            ids.extend(h);
        }
        self.sigbus.push((start, end, ids));
        if !self.warm {
            self.flush_translations();
        }
    }

    /// Starts watching a PM window: stores always, loads if an observer wants them.
    fn add_window(&mut self, (start, end, dev): (u64, u64, u64)) {
        let mut ids = Vec::new();
        let w = self.uc.add_mem_hook(HookType::MEM_WRITE, start, end - 1, move |uc, _t, addr, size, value| {
            on_pm_write(uc, addr, size, value, start, dev);
            true
        });
        ids.extend(w);
        // Loads are scheduling points whatever the analyses, so they are always hooked.
        let r = self.uc.add_mem_hook(HookType::MEM_READ, start, end - 1, move |uc, _t, addr, size, _v| {
            on_pm_read(uc, addr, size, start, dev);
            true
        });
        ids.extend(r);
        self.pm_hooks.push((start, ids));
        let st = self.uc.get_data_mut();
        st.windows.push((start, end, dev));
        st.windows.sort_unstable();
        // Code translated before the hooks existed would not call them (a warm machine's code
        // calls every memory hook already).
        if !self.warm {
            self.flush_translations();
        }
    }

    /// Stops watching `[start, end)`; windows that straddle it keep their outer parts.
    fn cut_windows(&mut self, start: u64, end: u64) {
        let affected: Vec<(u64, u64, u64)> =
            self.uc.get_data().windows.iter().copied().filter(|w| w.0 < end && w.1 > start).collect();
        for w in &affected {
            if let Some(i) = self.pm_hooks.iter().position(|h| h.0 == w.0) {
                for id in self.pm_hooks.remove(i).1 {
                    let _ = self.uc.remove_hook(id);
                }
            }
            self.uc.get_data_mut().windows.retain(|x| x != w);
        }
        for (s, e, d) in affected {
            if s < start {
                self.add_window((s, start, d));
            }
            if e > end {
                self.add_window((end, e, d + (end - s)));
            }
        }
    }

    /// Creates a guest thread `tid` with the running thread's registers changed by `regs` (clone:
    /// every register inherited, RAX = 0, a new stack and TLS). It starts parked.
    pub fn spawn_thread(&mut self, tid: u32, regs: &[(Reg, u64)]) -> Result<(), EmuError> {
        let mut ctx = self.uc.context_init().map_err(engine)?;
        for (r, v) in regs {
            ctx.reg_write(*r, *v).map_err(engine)?;
        }
        self.parked.insert(tid, Parked { ctx, callstack: CallStack::default() });
        self.uc.get_data_mut().sched.thread_created(tid);
        Ok(())
    }

    /// Makes `tid` the running thread; the running one is parked (unless it `exited`, then it is
    /// dropped).
    pub fn switch_to(&mut self, tid: u32, exited: bool) -> Result<(), EmuError> {
        let cur = self.tid();
        if cur == tid {
            return Ok(());
        }
        let next = self.parked.remove(&tid).ok_or(EmuError::NoThread(tid))?;
        if !exited {
            // Into the context the last switch freed, if any: a switch allocates nothing.
            let ctx = match self.spare_context.take() {
                Some(mut ctx) => {
                    self.uc.context_save(&mut ctx).map_err(engine)?;
                    ctx
                }
                None => self.uc.context_init().map_err(engine)?,
            };
            let callstack = std::mem::take(&mut self.uc.get_data_mut().callstack);
            self.parked.insert(cur, Parked { ctx, callstack });
        }
        self.uc.context_restore(&next.ctx).map_err(engine)?;
        self.spare_context = Some(next.ctx);
        let st = self.uc.get_data_mut();
        st.callstack = next.callstack;
        st.tid = tid;
        if let Some(t) = st.taint.as_deref_mut() {
            if exited {
                t.forget_thread(cur);
            }
            t.switch_thread(tid);
        }
        st.prev_term = Term::Other;
        Ok(())
    }

    /// Drops a parked thread (it exited while another ran, or the process is going).
    pub fn forget_thread(&mut self, tid: u32) {
        self.parked.remove(&tid);
        if let Some(t) = self.uc.get_data_mut().taint.as_deref_mut() {
            t.forget_thread(tid);
        }
    }

    /// Sets a register of a parked thread (a blocked system call's result).
    pub fn set_parked_reg(&mut self, tid: u32, r: Reg, v: u64) {
        if tid == self.tid() {
            self.set_reg(r, v);
        } else if let Some(p) = self.parked.get_mut(&tid) {
            let _ = p.ctx.reg_write(r, v);
        }
    }

    /// PC and call sites of any thread, innermost first.
    pub fn thread_backtrace(&self, tid: u32) -> Vec<u64> {
        if tid == self.tid() {
            return self.backtrace();
        }
        match self.parked.get(&tid) {
            Some(p) => std::iter::once(p.ctx.reg_read(Reg::RIP).unwrap_or(0)).chain(p.callstack.call_sites()).collect(),
            None => Vec::new(),
        }
    }

    pub fn scheduler(&mut self) -> &mut Scheduler {
        &mut self.uc.get_data_mut().sched
    }

    /// Tells the hooks how many other threads could run now. The first time another thread
    /// can run (the first `clone`), the running thread's quantum starts: preemption is armed
    /// whenever two threads could run, whatever the strategy, and whether or not the running
    /// thread ever reaches another scheduling point.
    pub fn set_runnable_others(&mut self, n: usize) {
        let icount = self.icount;
        let st = self.uc.get_data_mut();
        st.runnable_others = n;
        if n > 0 && st.quantum_end == u64::MAX {
            st.quantum_end = icount.saturating_add(st.sched.first_quantum());
        }
    }

    /// Starts a new quantum for the running thread (after a scheduling decision).
    pub fn new_quantum(&mut self) {
        let icount = self.icount;
        let st = self.uc.get_data_mut();
        let q = st.sched.quantum();
        st.quantum_end = icount.saturating_add(q);
    }

    /// What Unicorn's translation cache has done so far in this machine.
    pub fn translation_stats(&self) -> TranslationStats {
        self.uc.get_data().tcg
    }

    /// Throws every translation away (code translated before a hook existed would not call it).
    fn flush_translations(&mut self) {
        self.uc.get_data_mut().tcg.cache_flushes += 1;
        let _ = self.uc.ctl_flush_tb();
    }

    /// Drops the translations of `[start, end)`.
    fn remove_translations(&mut self, start: u64, end: u64) {
        self.uc.get_data_mut().tcg.ranges_removed += 1;
        let _ = self.uc.ctl_remove_cache(start, end);
    }

    /// The synchronisation functions to report, by entry address.
    pub fn set_sync_functions(&mut self, fns: impl IntoIterator<Item = (u64, SyncKind)>) {
        self.uc.get_data_mut().sync_fns = fns.into_iter().collect();
    }

    /// A crash point at the current PC (program exit), if an observer wants crash points.
    pub fn crash_point_here(&mut self) {
        let pc = self.pc();
        let st = self.uc.get_data_mut();
        if st.interest.has(Interest::CRASH) {
            st.crash_point(pc);
        }
    }

    /// Reports a system call about to be made (number, first two arguments in `new` and `old`).
    pub fn emit_syscall_event(&mut self, nr: u64, arg0: u64, arg1: u64) {
        let pc = self.pc().wrapping_sub(2);
        let st = self.uc.get_data_mut();
        if !st.interest.has(Interest::SYNC) {
            return;
        }
        let ev = st.emit(EventKind::Syscall, pc, nr, 0, 0, arg1, arg0);
        if let Some(o) = st.observer.as_mut() {
            o.on_event(&ev, &st.pm);
        }
    }

    /// Reports an event the kernel sees (thread creation and exit) to the observer, as made by
    /// the running thread at its current PC.
    pub fn emit_thread_event(&mut self, kind: EventKind, handle: u64, other: u64) {
        let pc = self.pc();
        let st = self.uc.get_data_mut();
        if !st.interest.has(Interest::SYNC) {
            return;
        }
        let ev = st.emit(kind, pc, handle, 0, 0, 0, other);
        if let Some(o) = st.observer.as_mut() {
            o.on_event(&ev, &st.pm);
        }
    }

    /// `--preempt all`: every access to memory that is not the running thread's own stack is a
    /// scheduling point (loads before they run, stores at the next block start), so races on
    /// plain DRAM variables are explored too. "Own stack" is the 1 MiB below and 64 KiB above the
    /// stack pointer; a thread reading another's stack is still a point.
    pub fn preempt_all_accesses(&mut self) {
        let near_stack = |uc: &Unicorn<'_, HookState>, addr: u64| {
            let sp = uc.reg_read(Reg::RSP).unwrap_or(0);
            addr < sp.wrapping_add(64 << 10) && addr >= sp.wrapping_sub(1 << 20)
        };
        let _ = self.uc.add_mem_hook(HookType::MEM_READ, 1, 0, move |uc, _t, addr, _size, _v| {
            if uc.get_data().runnable_others == 0 || near_stack(uc, addr) {
                return true;
            }
            let pc = uc.pc_read().unwrap_or(0);
            let st = uc.get_data_mut();
            if st.stop.is_none() && st.point(pc) {
                st.stop = Some(Stop::PreemptBefore);
                let _ = uc.emu_stop();
            }
            true
        });
        let _ = self.uc.add_mem_hook(HookType::MEM_WRITE, 1, 0, move |uc, _t, addr, size, _v| {
            if uc.get_data().runnable_others == 0 || near_stack(uc, addr) || size == 0 || size > 8 {
                return true;
            }
            let pc = uc.pc_read().unwrap_or(0);
            let mut old = [0u8; 8];
            let _ = uc.mem_read(addr, &mut old[..size]);
            let st = uc.get_data_mut();
            if st.stop.is_none() && st.point(pc) {
                // Before the store, undone on the way out (see `HookState::undo`).
                st.undo = Some((addr, old, size));
                st.stop = Some(Stop::PreemptBefore);
                let _ = uc.emu_stop();
            }
            true
        });
        self.flush_translations();
    }

    /// Sets PMRace's targeted interleaving for this run (before it starts).
    pub fn set_hold(&mut self, hold: Option<crate::sched::Hold>) {
        let st = self.uc.get_data_mut();
        st.hold = hold.map(|mut h| {
            h.loads.sort_unstable();
            h
        });
    }

    /// Whether the hold's store just happened (once): the caller releases the held readers.
    pub fn take_release(&mut self) -> bool {
        let st = self.uc.get_data_mut();
        if st.release_pending {
            st.held = 0;
        }
        std::mem::take(&mut st.release_pending)
    }

    /// Turns on delay injection for this run (before it starts), seeded by `seed`.
    pub fn set_delays(&mut self, cfg: crate::sched::DelayInjection, seed: u64) {
        self.uc.get_data_mut().delays = Some(crate::sched::Delays::new(cfg, seed));
    }

    /// A delay was decided for the running thread: its length in instructions, once. The caller
    /// holds the thread for that long and reports it with [`Machine::delay_started`].
    pub fn take_delay(&mut self) -> Option<u64> {
        let st = self.uc.get_data_mut();
        let site = st.delay_pending.take()?;
        let length = st.delays.as_ref()?.cfg.length;
        let until = self.icount + length;
        let tid = st.tid;
        if let Some(d) = st.delays.as_mut() {
            d.started(site, tid, until);
        }
        Some(length)
    }

    /// Delays injected so far.
    pub fn delays_injected(&self) -> u64 {
        self.uc.get_data().delays.as_ref().map_or(0, |d| d.injected)
    }

    /// Thread `tid` is released as privileged: it is never held again in this run.
    pub fn bypass_hold(&mut self, tid: u32) {
        let st = self.uc.get_data_mut();
        st.hold_bypass.push(tid);
        st.held = st.held.saturating_sub(1);
    }

    /// Installs the analyses' observer. Call before the guest maps PM.
    pub fn set_observer(&mut self, obs: Box<dyn Observer>) {
        let st = self.uc.get_data_mut();
        st.interest = obs.interest();
        if st.interest.has(Interest::MEMORY) {
            // All memory includes PM.
            st.interest = st.interest.union(Interest::LOADS).union(Interest::STORES);
        }
        let taint = st.interest.has(Interest::TAINT);
        if taint {
            st.interest = st.interest.union(Interest::LOADS).union(Interest::STORES);
            st.taint = Some(Box::default());
        }
        st.observer = Some(obs);
        if taint {
            let _ = self.uc.add_code_hook(1, 0, on_taint_insn);
            let _ = self.uc.add_mem_hook(HookType::MEM_READ | HookType::MEM_WRITE, 1, 0, |uc, t, addr, size, _v| {
                if let Some(taint) = uc.get_data_mut().taint.as_deref_mut() {
                    taint.access(addr, size, t == MemType::WRITE);
                }
                true
            });
            self.flush_translations();
        }
        let st = self.uc.get_data_mut();
        if st.interest.has(Interest::MEMORY) {
            let _ = self.uc.add_mem_hook(HookType::MEM_WRITE, 1, 0, |uc, _t, addr, size, value| {
                on_dram_access(uc, addr, size, Some(value));
                true
            });
            let _ = self.uc.add_mem_hook(HookType::MEM_READ, 1, 0, |uc, _t, addr, size, _v| {
                on_dram_access(uc, addr, size, None);
                true
            });
            self.flush_translations();
        }
    }

    pub fn observer_mut(&mut self) -> Option<&mut dyn Observer> {
        self.uc.get_data_mut().observer.as_deref_mut()
    }

    pub fn take_observer(&mut self) -> Option<Box<dyn Observer>> {
        let st = self.uc.get_data_mut();
        st.interest = Interest::NONE;
        st.observer.take()
    }

    pub fn pm(&self) -> &PmDevice {
        &self.uc.get_data().pm
    }

    /// Union of the taint labels of guest memory `[addr, addr+len)`, as source ids (empty
    /// without taint tracking).
    pub fn taint_sources(&mut self, addr: u64, len: u64) -> Vec<u32> {
        match self.uc.get_data_mut().taint.as_deref_mut() {
            Some(t) => {
                let l = t.label_of(addr, len);
                t.sets.members(l).to_vec()
            }
            None => Vec::new(),
        }
    }

    pub fn pm_mut(&mut self) -> &mut PmDevice {
        &mut self.uc.get_data_mut().pm
    }

    /// The device address of a guest address in a PM window.
    pub fn pm_device_addr(&self, va: u64) -> Option<u64> {
        self.uc.get_data().device_of(va)
    }

    /// Hash of every PM store, flush and fence so far.
    pub fn pm_hash(&self) -> u64 {
        self.uc.get_data().pm_hash
    }

    pub fn stacks(&self) -> &StackTable {
        &self.uc.get_data().stacks
    }

    pub fn stack_id(&self) -> StackId {
        self.uc.get_data().callstack.id()
    }

    pub fn tid(&self) -> u32 {
        self.uc.get_data().tid
    }

    /// Names the first thread (before the guest runs).
    pub fn set_main_tid(&mut self, tid: u32) {
        let st = self.uc.get_data_mut();
        st.tid = tid;
        st.sched.thread_created(tid);
    }

    pub fn protect(&mut self, start: u64, end: u64, perm: Perm) -> Result<(), MemError> {
        self.mem.protect(&mut self.uc, start, end, perm)?;
        // Code may become executable, or stop being so: forget translations either way.
        self.code_changed(start, end);
        Ok(())
    }

    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemError> {
        self.mem.read(addr, buf)
    }

    /// Writes as the kernel would (requires write permission unless `force`).
    pub fn write(&mut self, addr: u64, data: &[u8], force: bool) -> Result<(), MemError> {
        let end = addr.saturating_add(data.len() as u64);
        let into_pm = self.uc.get_data().windows.iter().any(|w| w.0 < end && w.1 > addr);
        if into_pm {
            // The kernel storing into PM (read() into a PM buffer): unpersisted stores, made
            // by the calling thread at the system call, as the guest's own would be.
            let mut old = vec![0u8; data.len()];
            self.mem.read_unchecked(addr, &mut old);
            self.kernel_pm_stores(addr, &old, data);
        }
        if self.mem.write(addr, data, force)? {
            self.code_changed(addr, end);
        }
        if let Some(t) = self.uc.get_data_mut().taint.as_deref_mut() {
            t.clean(addr, data.len() as u64);
        }
        Ok(())
    }

    /// Feeds the device the parts of a kernel write `[addr, addr + new.len())` that land in PM
    /// windows, in 8-byte pieces like the guest's own stores.
    fn kernel_pm_stores(&mut self, addr: u64, old: &[u8], new: &[u8]) {
        let pc = self.pc().wrapping_sub(2);
        for (i, (o, n)) in old.chunks(8).zip(new.chunks(8)).enumerate() {
            let va = addr + 8 * i as u64;
            let Some(dev) = self.pm_device_addr(va) else { continue };
            let mut lines = [0u8; 128];
            self.mem.read_unchecked(va & !63, &mut lines);
            let first = dev & !63;
            let st = self.uc.get_data_mut();
            let id = st.pm.store(st.tid, dev, o, n, StoreKind::Cached, |line| {
                let off = (line * 64).wrapping_sub(first) as usize;
                let mut out = [0u8; 64];
                if off <= 64 {
                    out.copy_from_slice(&lines[off..off + 64]);
                }
                out
            });
            let mut nb = [0u8; 8];
            nb[..n.len()].copy_from_slice(n);
            let newv = u64::from_le_bytes(nb);
            st.mix([3, dev, n.len() as u64, newv]);
            if st.interest.has(Interest::STORES) {
                let mut ob = [0u8; 8];
                ob[..o.len()].copy_from_slice(o);
                let mut ev = st.emit(EventKind::Store, pc, va, dev, n.len() as u32, u64::from_le_bytes(ob), newv);
                ev.store = Some(id);
                if let Some(obs) = st.observer.as_mut() {
                    obs.on_event(&ev, &st.pm);
                }
            }
        }
    }

    /// The kernel reading PM on the guest's behalf (`write()` from a PM buffer): loads by the
    /// calling thread at the system call, for observers that want loads.
    pub fn kernel_pm_loads(&mut self, addr: u64, len: u64) {
        let end = addr.saturating_add(len);
        if !self.uc.get_data().interest.has(Interest::LOADS)
            || !self.uc.get_data().windows.iter().any(|w| w.0 < end && w.1 > addr)
        {
            return;
        }
        let pc = self.pc().wrapping_sub(2);
        let mut va = addr;
        while va < end {
            let n = (end - va).min(8);
            if let Some(dev) = self.pm_device_addr(va) {
                let mut b = [0u8; 8];
                self.mem.read_unchecked(va, &mut b[..n as usize]);
                let st = self.uc.get_data_mut();
                let ev = st.emit(EventKind::Load, pc, va, dev, n as u32, u64::from_le_bytes(b), 0);
                if let Some(o) = st.observer.as_mut() {
                    o.on_event(&ev, &st.pm);
                }
            }
            va += n;
        }
    }

    /// msync of `[start, end)`: every PM line mapped there becomes durable.
    pub fn pm_persist_mapped(&mut self, start: u64, end: u64) {
        let windows: Vec<(u64, u64, u64)> = self.uc.get_data().windows.clone();
        for (ws, we, dev) in windows {
            let (lo, hi) = (ws.max(start), we.min(end));
            if lo < hi {
                self.pm_persist_device(dev + (lo - ws), hi - lo);
            }
        }
    }

    /// The device forgets `[dev, dev + len)`: the file was truncated there or removed.
    pub fn pm_discard_device(&mut self, dev: u64, len: u64) {
        let st = self.uc.get_data_mut();
        st.pm.discard_range(dev, len);
        st.mix([5, dev, len, 0]);
    }

    /// fsync of a PM file, or the durable part of a `pwrite`: device range `[dev, dev + len)`.
    pub fn pm_persist_device(&mut self, dev: u64, len: u64) {
        let pc = self.pc().wrapping_sub(2);
        let st = self.uc.get_data_mut();
        if st.interest.has(Interest::CRASH) {
            st.crash_point(pc);
        }
        st.pm.persist_range(st.tid, dev, len);
        st.mix([4, dev, len, u64::from(st.tid)]);
    }

    /// A `pwrite` into a PM file changed `[dev, dev + new.len())` behind the guest's mappings:
    /// a store of those bytes, durable at once. Only lines of mapped files are tracked.
    pub fn pm_file_written(&mut self, dev: u64, old: &[u8], new: &[u8]) {
        let windows: Vec<(u64, u64, u64)> = self.uc.get_data().windows.clone();
        for (ws, we, wdev) in windows {
            let wlen = we - ws;
            let (lo, hi) = (wdev.max(dev), (wdev + wlen).min(dev + new.len() as u64));
            if lo >= hi {
                continue;
            }
            let (a, b) = ((lo - dev) as usize, (hi - dev) as usize);
            let va = ws + (lo - wdev);
            self.kernel_pm_stores(va, &old[a..b], &new[a..b]);
            self.pm_persist_device(lo, hi - lo);
        }
    }

    pub fn read_u64(&self, addr: u64) -> Result<u64, MemError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn write_u64(&mut self, addr: u64, v: u64) -> Result<(), MemError> {
        self.write(addr, &v.to_le_bytes(), false)
    }

    pub fn read_u32(&self, addr: u64) -> Result<u32, MemError> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// A NUL-terminated string of at most `max` bytes (without the NUL).
    pub fn read_cstr(&self, addr: u64, max: usize) -> Result<Vec<u8>, MemError> {
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < max {
            let chunk = (4096 - (at % 4096)) as usize;
            let mut buf = vec![0u8; chunk.min(max - out.len()).max(1)];
            self.read(at, &mut buf)?;
            if let Some(i) = buf.iter().position(|b| *b == 0) {
                out.extend_from_slice(&buf[..i]);
                return Ok(out);
            }
            out.extend_from_slice(&buf);
            at += buf.len() as u64;
        }
        Err(MemError::Protection(at))
    }

    /// Host-side writes to code (the loader, `read()` into code, MAP_FIXED) must drop stale
    /// translations: Unicorn does not notice them.
    pub fn code_changed(&mut self, start: u64, end: u64) {
        self.remove_translations(start, end.max(start + 1));
        let st = self.uc.get_data_mut();
        st.decoder.invalidate(start, end);
        if let Some(t) = st.taint.as_deref_mut() {
            t.forget_code(start, end);
        }
    }

    /// Runs the guest from RIP until it needs the outside world.
    pub fn run(&mut self) -> Exit {
        loop {
            let begin = self.pc();
            {
                let st = self.uc.get_data_mut();
                st.stop = None;
                st.invalid = None;
                st.block_base = self.icount;
                st.block = (begin, 0, 0);
                st.prev_term = Term::Other;
            }
            // Never with a count: Unicorn then hooks every instruction, and going back to no
            // count flushes every translation.
            let res = self.uc.emu_start(begin, u64::MAX, 0, 0);
            let pc = self.pc();
            let st = self.uc.get_data_mut();
            let stop = st.stop.take();
            self.icount = st.count_at(pc);
            if let Some((a, old, n)) = st.undo.take() {
                // The store of a scheduling point went through on Unicorn's way out: put the
                // bytes back, so that the instruction runs whole, later.
                let _ = self.mem.write(a, &old[..n], true);
            }
            let st = self.uc.get_data_mut();
            if let Some(t) = st.taint.as_deref_mut() {
                // Whether the instruction under way when the engine stopped ran to its end.
                let completed = matches!(stop, Some(Stop::Syscall | Stop::Preempt | Stop::Quantum | Stop::ArmLimit(_)));
                t.settle(completed);
                if !t.applied().is_empty() {
                    st.report_tainted();
                }
            }
            match (res, stop) {
                (_, Some(Stop::Syscall)) => return Exit::Syscall,
                (_, Some(Stop::Limit)) => return Exit::Limit,
                (_, Some(Stop::Preempt | Stop::PreemptBefore)) => return Exit::Preempt,
                (_, Some(Stop::Quantum)) => return Exit::Quantum,
                (_, Some(Stop::Hold)) => {
                    self.uc.get_data_mut().held += 1;
                    return Exit::Hold;
                }
                (_, Some(Stop::Bus(addr))) => {
                    return Exit::Fault(Fault {
                        signal: sig::SIGBUS,
                        code: 2, // BUS_ADRERR
                        addr,
                        pc,
                        what: format!("access past the end of a mapped file at {addr:#x}"),
                    });
                }
                (_, Some(Stop::ArmLimit(at))) => {
                    // Stop exactly at the budget: a code hook before the first instruction past
                    // it, and the block translated again so it calls the hook.
                    self.uc.get_data_mut().limit_pc = Some(at);
                    let hooked = self.uc.add_code_hook(at, at, |uc, _, _| {
                        let st = uc.get_data_mut();
                        if st.stop.is_none() {
                            st.stop = Some(Stop::Limit);
                            let _ = uc.emu_stop();
                        }
                    });
                    match hooked {
                        Ok(id) => self.limit_hook = Some(id),
                        Err(_) => return Exit::Limit,
                    }
                    self.code_changed(at, at + 1);
                }
                (_, Some(Stop::Interrupt(n))) => return Exit::Fault(self.interrupt_fault(n, pc)),
                (_, Some(Stop::Special(at, Special::Pause))) => {
                    // The spin-wait hint, with another thread runnable: a yield, after it.
                    self.set_reg(Reg::RIP, at + 2);
                    self.icount += 1;
                    return Exit::Yield;
                }
                (_, Some(Stop::Special(at, s))) => {
                    if let Some(f) = self.emulate_special(at, s) {
                        return Exit::Fault(f);
                    }
                }
                (_, Some(Stop::Error)) => {
                    let what = st.error.take().unwrap_or_default();
                    return Exit::Fault(Fault { signal: sig::SIGSEGV, code: 0x80, addr: 0, pc, what });
                }
                (Ok(()), None) => {
                    // emu_start returned by itself: only `hlt` does that (caught above as
                    // privileged) or reaching the `until` address, which is not canonical.
                    return Exit::Fault(Fault {
                        signal: sig::SIGSEGV,
                        code: 0x80,
                        addr: 0,
                        pc,
                        what: "execution stopped unexpectedly".into(),
                    });
                }
                (Err(e), None) => {
                    // x86 faults are precise: undo the part of a faulting store Unicorn wrote.
                    if let Some((a, old, n)) = self.uc.get_data_mut().torn.take() {
                        let _ = self.mem.write(a, &old[..n], true);
                    }
                    return Exit::Fault(self.error_fault(e, pc));
                }
            }
        }
    }

    fn interrupt_fault(&mut self, intno: u32, pc: u64) -> Fault {
        // Faults leave RIP at the instruction; traps (int3) leave it after, where Linux also
        // reports it.
        let (signal, code, what) = match intno {
            0 => (sig::SIGFPE, 1, "integer division by zero or overflow (#DE)".to_string()),
            1 => (sig::SIGTRAP, 2, "debug trap".to_string()),
            3 => (sig::SIGTRAP, 0x80, "breakpoint (int3)".to_string()),
            4 => (sig::SIGSEGV, 0x80, "overflow trap (into)".to_string()),
            5 => (sig::SIGSEGV, 0x80, "bound range exceeded".to_string()),
            6 => (sig::SIGILL, 2, "invalid opcode (#UD)".to_string()),
            7 => (sig::SIGFPE, 0x80, "FPU not available".to_string()),
            13 => (sig::SIGSEGV, 0x80, "general protection fault (#GP)".to_string()),
            16 => (sig::SIGFPE, 0x80, "x87 floating-point exception".to_string()),
            17 => (sig::SIGBUS, 2, "alignment check".to_string()),
            19 => (sig::SIGFPE, 0x80, "SIMD floating-point exception".to_string()),
            0x80 => (
                sig::SIGSEGV,
                0x80,
                "int 0x80 (the 32-bit system call gate) is not supported for 64-bit programs".to_string(),
            ),
            n => (sig::SIGSEGV, 0x80, format!("CPU exception {n}")),
        };
        let addr = if matches!(intno, 0 | 6 | 16 | 19) { pc } else { 0 };
        Fault { signal, code, addr, pc, what }
    }

    fn error_fault(&mut self, e: uc_error, pc: u64) -> Fault {
        let st = self.uc.get_data_mut();
        let addr = st.invalid.map(|x| x.1).unwrap_or(pc);
        let mapped = self.mem.find(addr).is_some();
        let (signal, code, what) = match e {
            uc_error::READ_UNMAPPED | uc_error::WRITE_UNMAPPED | uc_error::FETCH_UNMAPPED => {
                let kind = match e {
                    uc_error::READ_UNMAPPED => "read from",
                    uc_error::WRITE_UNMAPPED => "write to",
                    _ => "execution of",
                };
                if mapped {
                    // A `PROT_NONE` page: mapped for the guest, never given to Unicorn.
                    (sig::SIGSEGV, 2, format!("{kind} protected address {addr:#x}"))
                } else {
                    (sig::SIGSEGV, 1, format!("{kind} unmapped address {addr:#x}"))
                }
            }
            uc_error::READ_PROT | uc_error::WRITE_PROT | uc_error::FETCH_PROT => {
                let kind = match e {
                    uc_error::READ_PROT => "read from",
                    uc_error::WRITE_PROT => "write to",
                    _ => "execution of",
                };
                (sig::SIGSEGV, if mapped { 2 } else { 1 }, format!("{kind} protected address {addr:#x}"))
            }
            uc_error::INSN_INVALID => (sig::SIGILL, 2, "invalid instruction".to_string()),
            uc_error::EXCEPTION => (sig::SIGILL, 2, "unhandled CPU exception".to_string()),
            other => (sig::SIGSEGV, 0x80, format!("emulator error {other:?}")),
        };
        Fault { signal, code, addr, pc, what }
    }

    /// Instructions stopped before execution by their code hook. Returns a fault for privileged
    /// ones; emulates the rest and moves RIP past them.
    fn emulate_special(&mut self, pc: u64, s: Special) -> Option<Fault> {
        match s {
            Special::Privileged => Some(Fault {
                signal: sig::SIGSEGV,
                code: 0x80,
                addr: 0,
                pc,
                what: "privileged instruction in user mode".to_string(),
            }),
            Special::Rand { .. } => {
                // Decode the destination register and width, then answer from the seeded stream
                // with CF=1 (success), as the instruction would.
                let mut bytes = [0u8; 16];
                let _ = self.read(pc, &mut bytes);
                let Some((reg, width, len)) = decode_rand(&bytes) else {
                    return Some(Fault {
                        signal: sig::SIGILL,
                        code: 2,
                        addr: pc,
                        pc,
                        what: "undecodable RDRAND/RDSEED".to_string(),
                    });
                };
                self.rand_state ^= self.rand_state << 13;
                self.rand_state ^= self.rand_state >> 7;
                self.rand_state ^= self.rand_state << 17;
                let v = match width {
                    2 => self.rand_state & 0xffff,
                    4 => self.rand_state & 0xffff_ffff,
                    _ => self.rand_state,
                };
                self.set_reg(reg, v);
                let flags = self.reg(Reg::EFLAGS);
                self.set_reg(Reg::EFLAGS, (flags & !0x8d5) | 1);
                self.set_reg(Reg::RIP, pc + len);
                self.icount += 1;
                None
            }
            Special::Flush(..) | Special::Fence(_) | Special::ClientRequest | Special::Pause => None,
        }
    }
}

/// `[66] [REX] 0F C7 /6 (rdrand) or /7 (rdseed)`, register form: (register, width, length).
fn decode_rand(b: &[u8; 16]) -> Option<(Reg, u32, u64)> {
    let mut i = 0;
    let mut width = 4;
    let mut rex = 0u8;
    if b[i] == 0x66 {
        width = 2;
        i += 1;
    }
    if (0x40..=0x4f).contains(&b[i]) {
        rex = b[i];
        i += 1;
    }
    if rex & 8 != 0 {
        width = 8;
    }
    if b[i] != 0x0f || b[i + 1] != 0xc7 {
        return None;
    }
    let modrm = b[i + 2];
    if modrm >> 6 != 3 {
        return None;
    }
    let n = (modrm & 7) | if rex & 1 != 0 { 8 } else { 0 };
    const REGS: [Reg; 16] = [
        Reg::RAX,
        Reg::RCX,
        Reg::RDX,
        Reg::RBX,
        Reg::RSP,
        Reg::RBP,
        Reg::RSI,
        Reg::RDI,
        Reg::R8,
        Reg::R9,
        Reg::R10,
        Reg::R11,
        Reg::R12,
        Reg::R13,
        Reg::R14,
        Reg::R15,
    ];
    Some((REGS[n as usize], width, (i + 3) as u64))
}
