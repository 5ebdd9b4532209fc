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

mod debug;
mod guest_memory;
mod hooks;
mod pm_windows;
mod run;
mod snapshot;
mod spaces;
mod state;
mod threads;

use std::ffi::c_void;

use unicorn_engine::unicorn_const::{uc_error, Arch, HookType, MemType, Mode};
use unicorn_engine::{RegisterX86, Unicorn, X86Insn};
use unicorn_engine_sys as ffi;

use crate::callstack::{CallStack, StackId, StackTable};
use crate::client::{self, ClientState, Request};
use crate::cpuid::CpuidTable;
use crate::decode::{AccessKind, Decoder, FenceOp, FlushOp, MemRef, Special, Term};
use crate::events::{Event, EventKind, Interest, MemoryWant, Observer};
use crate::memory::{Backing, FixedMemory, MemError, Memory, Perm, Region};
use crate::pm::{device_addr, FenceKind, FlushKind, PmConfig, PmDevice, StoreKind};
use crate::sched::{Scheduler, Strategy};
use crate::sync::SyncKind;
use crate::taint::Taint;
pub use debug::{DebugStop, ThreadRegisters, WatchKind, GP_ORDER};
pub use snapshot::MachineSnapshot;
pub use spaces::AddressSpace;

use hooks::*;
pub(crate) use state::HookState;
use state::{BlockClock, CodeKnowledge, LockWords, Observing, PmState, Steering};
use threads::Parked;
pub use unicorn_engine::RegisterX86 as Reg;

/// Linux signal numbers used by the machine.
pub mod sig {
    /// Interrupt from the terminal (Ctrl-C).
    pub const SIGINT: i32 = 2;
    /// Illegal instruction.
    pub const SIGILL: i32 = 4;
    /// Breakpoint or trace trap (`int3`).
    pub const SIGTRAP: i32 = 5;
    /// Abort, as `abort()` raises it.
    pub const SIGABRT: i32 = 6;
    /// Bus error: an access to a file mapping's pages past the end of its file.
    pub const SIGBUS: i32 = 7;
    /// Arithmetic exception (division by zero or overflow).
    pub const SIGFPE: i32 = 8;
    /// Kill; cannot be caught.
    pub const SIGKILL: i32 = 9;
    /// Segmentation fault: an access to unmapped memory or against its protection.
    pub const SIGSEGV: i32 = 11;

    /// The signal's name (`SIGSEGV`), or `signal` for a number this table does not list.
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
    /// The signal number (see [`sig`]).
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

/// The SSE registers, XMM0–XMM15.
pub const XMM_REGS: [Reg; 16] = [
    Reg::XMM0,
    Reg::XMM1,
    Reg::XMM2,
    Reg::XMM3,
    Reg::XMM4,
    Reg::XMM5,
    Reg::XMM6,
    Reg::XMM7,
    Reg::XMM8,
    Reg::XMM9,
    Reg::XMM10,
    Reg::XMM11,
    Reg::XMM12,
    Reg::XMM13,
    Reg::XMM14,
    Reg::XMM15,
];
/// The x87 registers, ST0–ST7 (80 bits each).
pub const ST_REGS: [Reg; 8] = [Reg::ST0, Reg::ST1, Reg::ST2, Reg::ST3, Reg::ST4, Reg::ST5, Reg::ST6, Reg::ST7];

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
    /// The virtual clock reached the instant the kernel asked to be told of
    /// ([`Machine::set_timer_stop`]): a timer of the guest may expire (at a block start). RIP
    /// is at the next instruction to run.
    Timer,
    /// The running thread executed `pause`, the spin-wait hint, while another thread could run:
    /// a yield. RIP is past the `pause`.
    Yield,
    /// The running thread reached a sync-point load of the [`crate::sched::Hold`] and must wait
    /// for the matching store; RIP is at the load.
    Hold,
    /// A debugger's stop ([`Machine::stop_at`], a breakpoint or a watchpoint); RIP is at the next
    /// instruction to run, which has had no effect.
    Debug(DebugStop),
    /// ferrite was asked to stop the run ([`crate::interrupt`]); RIP is at the start of the next
    /// block to run, which has had no effect.
    Interrupted,
}

/// Settings fixed when the machine is built.
#[derive(Clone, Debug)]
pub struct MachineConfig {
    /// What `cpuid` answers.
    pub cpuid: CpuidTable,
    /// Retired-instruction budget for the whole run.
    pub max_instructions: u64,
    /// Virtual TSC ticks per retired instruction (the virtual CPU runs at 1 GHz, one instruction
    /// per nanosecond).
    pub tsc_per_insn: u64,
    /// Seed for RDRAND/RDSEED if a guest executes them despite CPUID.
    pub rand_seed: u64,
    /// The PM device's model: atomicity, flush model and persistency.
    pub pm: PmConfig,
    /// How the scheduler picks the next thread at a scheduling point.
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
    /// The kernel's timer instant passed at the start of the block about to run.
    Timer,
    /// The specials' code hooks are due for a sweep, at the start of the block about to run
    /// ([`hooks::sweep_special_hooks`]): the machine sweeps and goes on, nothing else sees it.
    Sweep,
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
    /// A debugger's breakpoint or watchpoint, before the instruction has had any effect.
    Debug(DebugStop),
    /// The first PM load that may be a taint source, before it has had any effect: the taint
    /// hooks go in and the instruction runs again ([`Machine::hook_taint`]).
    Taint,
    /// A stop requested from outside the run ([`crate::interrupt`]), at the start of the block
    /// about to run.
    Interrupted,
    /// The observer asked for the all-memory hooks at an event of this block's start
    /// ([`Machine::hook_all_memory`]), which has not run: they go in and the machine goes on,
    /// nothing else sees it.
    Memory,
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
    /// Code hooks of specials removed because they stopped running (hooked again if they run
    /// again: [`hooks::sweep_special_hooks`]).
    pub hooks_swept: u64,
    /// Accesses of C++ atomics hooked ([`Interest::ATOMICS`]) whose object was in DRAM.
    pub atomic_dram_pcs: u64,
    /// Accesses of C++ atomics unhooked after they found their object in PM only
    /// ([`hooks::unhook_pm_atomics`]).
    pub atomic_pm_pcs: u64,
    /// Most regions of the running address space Unicorn held at once (a bounded working set:
    /// [`crate::memory::uc_regions`]).
    pub regions_peak: u64,
    /// Regions mapped into Unicorn by the access that reached them ([`Memory::fault_in`]).
    pub regions_faulted_in: u64,
    /// Regions taken out of Unicorn above the bound ([`Memory::trim`]).
    pub regions_evicted: u64,
}

/// The emulated machine: the engine with its hooks, guest memory, the PM device, the threads and
/// the scheduler. The `syscalls` crate drives it: [`run`](Machine::run), handle the exit, repeat.
pub struct Machine {
    uc: Unicorn<'static, HookState>,
    /// The guest address-space table. Read it freely; change mappings through [`Machine::map`],
    /// [`Machine::unmap`] and [`Machine::protect`], which keep Unicorn, PM windows and translations
    /// in step. At a fixed address, which the hooks hold ([`HookState::table`]).
    pub mem: FixedMemory,
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
    /// The instruction budget (`BlockClock::limit` is lowered below it by [`Machine::stop_at`]).
    budget: u64,
    /// The debugger's breakpoints and watchpoints.
    debug_hooks: Vec<(debug::DebugHook, unicorn_engine::UcHookId)>,
    /// The all-memory hooks of an observer with [`Interest::MEMORY`] (write, read), while they are
    /// in the engine: from the guest's second thread, while the observer wants them (see
    /// [`Machine::hook_all_memory`]).
    dram_hooks: Option<[ffi::uc_hook; 2]>,
    /// Whether they stay in for the rest of the run (the observer wants them for good).
    dram_final: bool,
    /// Whether a `fork` ever made a second address space ([`Machine::fork_address_space`]).
    processes: bool,
    /// The physical slots other processes' address spaces hold (`spaces.rs`; the first
    /// process's slot 0 is never given out).
    slots: std::collections::BTreeSet<u32>,
    /// Address spaces registered with Unicorn now, the running one included (`spaces.rs`).
    registered: usize,
}

/// Why the machine could not be built or could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// Unicorn refused to create or set up the engine.
    #[error("the emulator could not be set up: {0:?}")]
    Engine(uc_error),
    /// A guest-memory operation failed.
    #[error("guest memory: {0:?}")]
    Memory(MemError),
    /// Host memory for the guest could not be mapped.
    #[error("host memory: {0}")]
    Host(std::io::Error),
    /// The thread id names no guest thread.
    #[error("no guest thread {0}")]
    NoThread(u32),
}

fn engine(e: uc_error) -> EmuError {
    EmuError::Engine(e)
}

/// Transparent huge pages off for the process while it lives (`prctl(PR_SET_THP_DISABLE)`),
/// unless they were off already; a fault in a region that has 4 KiB pages keeps them. Another
/// thread making an engine at the same time may find them off, or on again: either way it only
/// decides the page size of its buffer's first region.
struct SmallPages {
    turned_off: bool,
}

impl SmallPages {
    fn new() -> SmallPages {
        // SAFETY: PR_GET_THP_DISABLE and PR_SET_THP_DISABLE take no pointers; a kernel without
        // them fails the call, and huge pages stay as they are.
        let turned_off = unsafe {
            libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 0
                && libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0
        };
        SmallPages { turned_off }
    }
}

impl Drop for SmallPages {
    fn drop(&mut self) {
        if self.turned_off {
            // SAFETY: as in `new`.
            unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0) };
        }
    }
}

impl Machine {
    /// A machine configured by `config`, with no memory mapped and one thread, the running one (tid
    /// 1 until [`set_main_tid`](Self::set_main_tid) names it).
    pub fn new(config: MachineConfig) -> Result<Machine, EmuError> {
        let state = HookState {
            clock: BlockClock {
                block_base: 0,
                block: (0, 0, 0),
                slot: state::NO_SLOT,
                cursor: Default::default(),
                prev_term: Term::Other,
                last_point: u64::MAX,
                limit: config.max_instructions,
                limit_pc: None,
                sweep_at: hooks::SWEEP_FIRST,
                sweep_next: hooks::SWEEP_FIRST,
            },
            code: CodeKnowledge {
                decoder: Decoder::default(),
                hooked: Default::default(),
                own: hooks::Specials::default(),
                special_hooks: Vec::new(),
                special_hits: Vec::new(),
                free_hook_slots: Vec::new(),
                to_hook: Vec::new(),
                atomic_pm: Default::default(),
                atomic_unhook: Vec::new(),
                sync_fns: rustc_hash::FxHashMap::default(),
                cpuid: config.cpuid.clone(),
                tsc_per_insn: config.tsc_per_insn,
            },
            pm: PmState {
                device: PmDevice::new(config.pm),
                windows: Vec::new(),
                hash: 0,
                torn: None,
                undo: None,
                client: ClientState::default(),
            },
            obs: Observing {
                observer: None,
                interest: Interest::NONE,
                taint: None,
                taint_hooked: false,
                replay: state::TaintReplay::default(),
                taint_began: None,
                words: LockWords::default(),
                atomic_code: Vec::new(),
                atomic_objects: Vec::new(),
                atomic_object_code: Vec::new(),
                memory_asking: false,
                memory_want: MemoryWant::No,
                memory_due: false,
            },
            steer: Steering {
                sched: Scheduler::new(config.strategy, config.sched_seed),
                runnable_others: 0,
                quantum_end: u64::MAX,
                timer_at: u64::MAX,
                hold: None,
                hold_signalled: false,
                hold_signals: 0,
                hold_rearm_at: 0,
                hold_bypass: Vec::new(),
                hold_pass: Vec::new(),
                held: 0,
                delays: None,
                dirty: Vec::new(),
                delay_pending: None,
                release_pending: false,
            },
            stop: None,
            invalid: None,
            error: None,
            tid: 1,
            callstack: CallStack::default(),
            stacks: StackTable::default(),
            tcg: TranslationStats::default(),
            debug: None,
            phys: state::Phys::default(),
            table: std::ptr::null_mut(),
            trim_due: None,
        };
        let mem = FixedMemory::new(Memory::default());
        let mut state = state;
        state.table = mem.as_ptr();
        // The engine is made by the first hook added below; its first write, the prologue, faults
        // in the first page of the translation buffer, which QEMU asks to be a 2 MiB huge page:
        // zeroing it (and compacting memory for it) was a tenth of a short run's CPU, where the
        // run's code takes a few hundred KiB. Transparent huge pages are off for the process
        // while the engine is made, so that first region is made of 4 KiB pages; later regions,
        // of long runs, get huge pages as before.
        let _small_pages = SmallPages::new();
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
            mem,
            pm_hooks: Vec::new(),
            slots: std::collections::BTreeSet::new(),
            registered: 1,
            parked: rustc_hash::FxHashMap::default(),
            spare_context: None,
            sigbus: Vec::new(),
            icount: 0,
            warm: config.warm,
            limit_hook: None,
            budget: config.max_instructions,
            debug_hooks: Vec::new(),
            dram_hooks: None,
            dram_final: false,
            processes: false,
            rand_state: (config.rand_seed ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9) | 1,
        })
    }

    /// A 64-bit register of the running thread (0 if Unicorn cannot read it).
    pub fn reg(&self, r: Reg) -> u64 {
        self.uc.reg_read(r).unwrap_or(0)
    }

    /// Sets a 64-bit register of the running thread (ignored if Unicorn refuses it).
    pub fn set_reg(&mut self, r: Reg, v: u64) {
        let _ = self.uc.reg_write(r, v);
    }

    /// A register wider than 64 bits ([`XMM_REGS`], [`ST_REGS`]) as little-endian bytes.
    pub fn reg_bytes(&self, r: Reg) -> Vec<u8> {
        self.uc.reg_read_long(r).map(|b| b.to_vec()).unwrap_or_default()
    }

    /// Sets a register wider than 64 bits from little-endian bytes (see
    /// [`reg_bytes`](Self::reg_bytes)).
    pub fn set_reg_bytes(&mut self, r: Reg, v: &[u8]) {
        let _ = self.uc.reg_write_long(r, v);
    }

    /// The running thread's RIP.
    pub fn pc(&self) -> u64 {
        self.reg(Reg::RIP)
    }

    /// Retired instructions so far (exact at every stop).
    pub fn icount(&self) -> u64 {
        self.icount
    }

    /// Current PC followed by the call sites of the shadow stack, innermost first.
    pub fn backtrace(&self) -> Vec<u64> {
        let mut out = Vec::new();
        self.backtrace_into(&mut out);
        out
    }

    /// [`Machine::backtrace`] into `out`, which keeps its room (a thread blocks at every
    /// contended lock: its place is kept each time).
    pub fn backtrace_into(&self, out: &mut Vec<u64>) {
        let st = self.uc.get_data();
        out.clear();
        out.extend(std::iter::once(self.pc()).chain(st.callstack.call_sites()));
    }

    /// What Unicorn's translation cache has done so far in this machine.
    pub fn translation_stats(&self) -> TranslationStats {
        let r = self.mem.residency();
        TranslationStats {
            regions_peak: r.peak as u64,
            regions_faulted_in: r.faulted_in,
            regions_evicted: r.evicted,
            ..self.uc.get_data().tcg
        }
    }

    /// Throws every translation away (code translated before a hook existed would not call it).
    pub(super) fn flush_translations(&mut self) {
        self.uc.get_data_mut().tcg.cache_flushes += 1;
        let _ = self.uc.ctl_flush_tb();
    }

    /// Drops the translations of `[start, end)`.
    pub(super) fn remove_translations(&mut self, start: u64, end: u64) {
        self.uc.get_data_mut().tcg.ranges_removed += 1;
        let _ = self.uc.ctl_remove_cache(start, end);
    }

    /// Library code (sorted `[start, end)` ranges): its atomics take no DRAM lock word
    /// ([`Interest::LOCK_WORDS`]) — libc's own locks protect libc's data, and the named lock
    /// functions are followed by name.
    pub fn set_library_code(&mut self, ranges: Vec<(u64, u64)>) {
        self.uc.get_data_mut().obs.words.library = ranges;
    }

    /// The program's code compiled from C++'s `std::atomic` (sorted `[start, end)` ranges): its
    /// plain loads and stores of DRAM are reported as [`EventKind::AtomicAccess`] when the
    /// observer wants [`Interest::ATOMICS`]. Code already decoded in ranges that are new is
    /// decoded (and translated) again at its next execution, so that it gets its hooks.
    pub fn set_atomic_code(&mut self, ranges: Vec<(u64, u64)>) {
        let st = self.uc.get_data_mut();
        if !st.obs.interest.has(Interest::ATOMICS) || st.obs.atomic_code == ranges {
            return;
        }
        let new: Vec<(u64, u64)> = ranges.iter().copied().filter(|r| !st.obs.atomic_code.contains(r)).collect();
        st.obs.atomic_code = ranges;
        for (start, end) in new {
            let st = self.uc.get_data_mut();
            st.code.decoder.invalidate(start, end);
            self.remove_translations(start, end);
        }
    }

    /// The program's static C11 `_Atomic` objects (sorted, disjoint `[start, end)` ranges: its
    /// DWARF's atomic globals and statics, and atomic members and elements of global structures
    /// and arrays), and the address ranges of the objects (executable, shared objects) whose
    /// code is searched for accesses to them (sorted). The plain loads and stores there that
    /// address them (through `rip`, an absolute address, or a register the block loaded with
    /// one: [`crate::decode::Decoder::object_accesses`]) are reported as
    /// [`EventKind::AtomicAccess`] when the observer wants [`Interest::ATOMICS`], as are locked
    /// instructions on them; library functions (no source line) are left out. Nothing changes
    /// for a program without such objects. Code already decoded there is decoded (and
    /// translated) again at its next execution when either changes.
    pub fn set_atomic_objects(&mut self, objects: Vec<(u64, u64)>, code: Vec<(u64, u64)>) {
        let st = self.uc.get_data_mut();
        if !st.obs.interest.has(Interest::ATOMICS)
            || (st.obs.atomic_objects == objects && st.obs.atomic_object_code == code)
        {
            return;
        }
        let mut stale = std::mem::replace(&mut st.obs.atomic_object_code, code.clone());
        stale.extend(code);
        st.obs.atomic_objects = objects;
        for (start, end) in stale {
            let st = self.uc.get_data_mut();
            st.code.decoder.invalidate(start, end);
            self.remove_translations(start, end);
        }
    }

    /// The synchronisation functions to report, by entry address.
    pub fn set_sync_functions(&mut self, fns: impl IntoIterator<Item = (u64, SyncKind)>) {
        let st = self.uc.get_data_mut();
        st.code.sync_fns = fns.into_iter().collect();
        // Tasks are concurrent before the program's second thread ([`Machine::hook_all_memory`]).
        if st.code.sync_fns.values().any(|k| k.spawns_logical_threads()) {
            self.hook_all_memory();
        }
    }

    /// A crash point at the current PC (program exit), if an observer wants crash points.
    pub fn crash_point_here(&mut self) {
        let pc = self.pc();
        let st = self.uc.get_data_mut();
        if st.obs.interest.has(Interest::CRASH) {
            st.crash_point(pc);
        }
    }

    /// Reports a system call about to be made (number, first two arguments in `new` and `old`).
    pub fn emit_syscall_event(&mut self, nr: u64, arg0: u64, arg1: u64) {
        let pc = self.pc().wrapping_sub(2);
        let st = self.uc.get_data_mut();
        if !st.obs.interest.has(Interest::SYNC) {
            return;
        }
        let ev = st.emit(EventKind::Syscall, pc, nr, 0, 0, arg1, arg0);
        st.tell(&ev);
    }

    /// Reports an event the kernel sees (thread creation and exit) to the observer, as made by
    /// the running thread at its current PC.
    pub fn emit_thread_event(&mut self, kind: EventKind, handle: u64, other: u64) {
        let tid = self.tid();
        self.emit_sync_event(kind, tid, handle, other);
    }

    /// Reports that the running thread forked a process whose thread is `child`: the shared DRAM
    /// mappings the child inherits ([`EventKind::SharedMemory`], one event each, in address
    /// order), then the [`EventKind::ThreadCreate`] of `child` with `old` 1. Made while the
    /// machine still holds the parent's address space (the child's copy maps the same).
    pub fn emit_fork_event(&mut self, handle: u64, child: u32) {
        let pc = self.pc();
        hooks::settle_words(&mut self.uc, pc);
        if !self.uc.get_data().obs.interest.has(Interest::SYNC) {
            return;
        }
        // Rare (one per fork): collecting the ranges first keeps the memory table unborrowed
        // while the observer runs.
        let shared: Vec<(u64, u64)> = self.mem.shared_dram_ranges().collect();
        let st = self.uc.get_data_mut();
        for (start, len) in shared {
            let ev = st.emit(EventKind::SharedMemory, pc, start, 0, 0, len, 0);
            st.tell(&ev);
        }
        let ev = st.emit(EventKind::ThreadCreate, pc, handle, 0, 0, 1, u64::from(child));
        st.tell(&ev);
    }

    /// A [`Interest::SYNC`] event of thread `tid` at the running thread's PC.
    fn emit_sync_event(&mut self, kind: EventKind, tid: u32, addr: u64, new: u64) {
        let pc = self.pc();
        hooks::settle_words(&mut self.uc, pc);
        let st = self.uc.get_data_mut();
        if !st.obs.interest.has(Interest::SYNC) {
            return;
        }
        let mut ev = st.emit(kind, pc, addr, 0, 0, 0, new);
        ev.tid = tid;
        st.tell(&ev);
    }

    /// Reports that the running thread's system call woke thread `woken` from a futex wait on
    /// `addr`: a [`EventKind::FutexWake`] of the running thread, then a
    /// [`EventKind::FutexWoken`] of `woken`.
    pub fn emit_futex_wake(&mut self, woken: u32, addr: u64) {
        let waker = self.tid();
        self.emit_sync_event(EventKind::FutexWake, waker, addr, u64::from(woken));
        self.emit_sync_event(EventKind::FutexWoken, woken, addr, u64::from(waker));
    }

    /// Installs the analyses' observer. Call before the guest maps PM.
    pub fn set_observer(&mut self, obs: Box<dyn Observer>) {
        let st = self.uc.get_data_mut();
        st.obs.interest = obs.interest();
        if st.obs.interest.has(Interest::MEMORY) {
            // All memory includes PM.
            st.obs.interest = st.obs.interest.union(Interest::LOADS).union(Interest::STORES);
        }
        let taint = st.obs.interest.has(Interest::TAINT);
        if taint {
            st.obs.interest = st.obs.interest.union(Interest::LOADS).union(Interest::STORES);
            // An engine already there keeps its taint: the observer of a restored snapshot goes on
            // with the taint restored with it ([`Machine::restore`]).
            if st.obs.taint.is_none() {
                st.obs.taint = Some(Box::default());
            }
        }
        st.obs.observer = Some(obs);
        if !self.parked.is_empty() {
            self.hook_all_memory();
        }
    }

    /// Puts the all-memory hooks in the engine for an observer with [`Interest::MEMORY`], once the
    /// guest has a second thread.
    ///
    /// Why not from the start: every pass that watches all memory (hmtrace, oscs, DPOR's
    /// dependencies) asks how accesses of different threads are ordered, and whatever the only
    /// thread did before it created the second happens before everything any other thread will
    /// ever do (creation orders it, and every later thread descends from one created after it).
    /// Such accesses can never be one side of a race, an order-sensitive pair or a dependency, so
    /// a single-threaded program, or the single-threaded start of a parallel one, runs at the speed
    /// of plain emulation: an all-memory hook sends every access down Unicorn's slow path, with a
    /// search for the instruction's PC before each call (about 8× plain emulation on CPU-bound
    /// code). The exception is a runtime whose units of concurrency are not threads — OpenMP's
    /// tasks and sections, which hmtrace orders by their declared dependences even on one thread:
    /// a program with them is watched from the moment their entry points are known
    /// ([`Machine::set_sync_functions`]). What it costs: an atomic (`lock`-prefixed) access made before the first thread is
    /// created does not mark its bytes as a synchronisation location (hmtrace's documentation says
    /// so). Kept once in (when the observer wants them for good): a later return to one thread may
    /// still race with threads that exited unjoined.
    ///
    /// Nor while the observer does not want them ([`crate::events::Observer::wants_memory`]):
    /// oscs needs no access made while no thread is inside a critical section and no byte has a
    /// critical-section history, so on threads that take no lock it costs what plain emulation
    /// does. This marks the run as one with threads; the observer is asked now and after each
    /// event that orders threads (`HookState::tell`), and [`Machine::settle_memory_hooks`] acts
    /// on its answer.
    fn hook_all_memory(&mut self) {
        let st = self.uc.get_data_mut();
        if self.dram_final || !st.obs.interest.has(Interest::MEMORY) {
            return;
        }
        st.obs.memory_asking = true;
        st.obs.memory_want = st.obs.observer.as_ref().map_or(MemoryWant::Always, |o| o.wants_memory());
        self.settle_memory_hooks();
    }

    /// Puts the all-memory hooks in or takes them out as the observer's latest answer says
    /// ([`Machine::hook_all_memory`]), each change with one translation flush (translations made
    /// with the hooks send every access down Unicorn's slow path). Taken out lazily (an access
    /// the observer no longer wants changes nothing it reports), put in before the next block
    /// runs: an answer that turns from no is given at an event that orders threads, reported at a
    /// block's start (whose block then stops before it runs, `hooks::finish_block`) or outside
    /// the engine (a thread created), and this runs at [`Machine::run`]'s next start.
    pub(super) fn settle_memory_hooks(&mut self) {
        let st = self.uc.get_data_mut();
        st.obs.memory_due = false;
        if self.dram_final || !st.obs.memory_asking || !st.obs.interest.has(Interest::MEMORY) {
            return;
        }
        let want = st.obs.memory_want;
        if want == MemoryWant::Always {
            self.dram_final = true;
            st.obs.memory_asking = false;
        }
        self.set_dram_hooks(want != MemoryWant::No);
    }

    /// Puts the all-memory hooks in (`on`) or takes them out, with a translation flush, if they
    /// are not so already.
    pub(super) fn set_dram_hooks(&mut self, on: bool) {
        match (on, self.dram_hooks) {
            (false, Some(ids)) => {
                self.dram_hooks = None;
                let handle = self.uc.get_handle();
                for id in ids {
                    // SAFETY: `id` is a hook of this engine, added by `add_raw_dram_hook` and not
                    // deleted since; the engine is not running.
                    let _ = unsafe { ffi::uc_hook_del(handle, id) };
                }
                self.flush_translations();
            }
            (true, None) => {
                let (Ok(w), Ok(r)) = (
                    add_raw_dram_hook(&mut self.uc, HookType::MEM_WRITE),
                    add_raw_dram_hook(&mut self.uc, HookType::MEM_READ),
                ) else {
                    return;
                };
                self.dram_hooks = Some([w, r]);
                self.flush_translations();
            }
            _ => {}
        }
    }

    /// The installed observer, if any, to look at.
    pub fn observer(&self) -> Option<&dyn Observer> {
        self.uc.get_data().obs.observer.as_deref()
    }

    /// Whether a snapshot can hold the memory hooks' state: the observer watches no DRAM, or the
    /// guest has a second thread ([`Machine::hook_all_memory`]), from when the hooks follow the
    /// observer's answers ([`crate::events::Observer::wants_memory`]), which the snapshot keeps
    /// with the hooks' state and a restore puts back (the passes copied with it answer alike).
    /// Not before: the hooks go in at a thread's creation, not at an answer, and a snapshot of
    /// the single-threaded stretch restored into a run with the hooks in would show its observer
    /// the accesses a fresh run hides.
    pub fn memory_hooks_final(&self) -> bool {
        let obs = &self.uc.get_data().obs;
        self.dram_final || obs.memory_asking || !obs.interest.has(Interest::MEMORY)
    }

    /// Puts the taint engine's hooks in the engine: a code hook before every instruction and a
    /// hook on every memory access, which the engine needs to move labels.
    ///
    /// Why not from the start: taint starts only at a source, a PM load the observer names
    /// (PMRace's: a load of PM data not yet durable), and until one exists nothing is tainted,
    /// so every instruction and access before it could move nothing. Those hooks cost 3–12× plain
    /// emulation (Unicorn calls the code hook before each instruction and sends every access down
    /// its slow path), so a program that never loads such data, or the part of it before the
    /// first such load, runs at the speed of plain emulation. The PM load hook asks the observer
    /// ([`crate::events::Observer::may_taint`]) before each load while the hooks are out; the
    /// first yes stops the engine before that load's instruction, which runs again with the hooks
    /// (one translation flush; [`state::TaintReplay`] keeps its earlier loads from being
    /// reported twice). Kept once in: taint in memory can outlive its registers for the rest of
    /// the run.
    fn hook_taint(&mut self) {
        let st = self.uc.get_data_mut();
        if st.obs.taint_hooked || st.obs.taint.is_none() {
            return;
        }
        st.obs.taint_hooked = true;
        let _ = self.uc.add_code_hook(1, 0, on_taint_insn);
        // From now on the taint hook acts for the specials (see `on_taint_insn`).
        let code = &mut self.uc.get_data_mut().code;
        code.special_hits.clear();
        code.free_hook_slots.clear();
        for (_, id) in std::mem::take(&mut code.special_hooks).into_iter().flatten() {
            let _ = self.uc.remove_hook(id);
        }
        let _ = add_raw_mem_hook(&mut self.uc, HookType::MEM_READ | HookType::MEM_WRITE, taint_mem_hook);
        self.flush_translations();
    }

    /// The installed observer, if any.
    pub fn observer_mut(&mut self) -> Option<&mut dyn Observer> {
        self.uc.get_data_mut().obs.observer.as_deref_mut()
    }

    /// Removes the observer and returns it; the machine stops reporting events.
    pub fn take_observer(&mut self) -> Option<Box<dyn Observer>> {
        let st = self.uc.get_data_mut();
        st.obs.interest = Interest::NONE;
        st.obs.observer.take()
    }

    /// Union of the taint labels of guest memory `[addr, addr+len)`, as source ids (empty
    /// without taint tracking).
    pub fn taint_sources(&mut self, addr: u64, len: u64) -> Vec<u32> {
        match self.uc.get_data_mut().obs.taint.as_deref_mut() {
            Some(t) => {
                let l = t.label_of(addr, len);
                t.sets.members(l).to_vec()
            }
            None => Vec::new(),
        }
    }

    /// The table of interned call stacks that [`stack_id`](Self::stack_id)s index.
    pub fn stacks(&self) -> &StackTable {
        &self.uc.get_data().stacks
    }

    /// The running thread's current shadow call stack, interned.
    pub fn stack_id(&mut self) -> StackId {
        let st = self.uc.get_data_mut();
        st.callstack.id(&mut st.stacks)
    }
}
