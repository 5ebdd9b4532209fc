//! Debugger stops: breakpoints, watchpoints and a stop at an exact retired-instruction count,
//! for the gdb server of `ferrite replay --gdb`.
//!
//! A debugger must see the run a replay would make, so a stop may change nothing of it: no
//! scheduling decision, no event, no byte of memory. Each stop is taken *before* its instruction
//! has any effect, the way the scheduler's own points are (see `Stop::PreemptBefore`):
//!
//! - a breakpoint is a code hook at its PC, which stops before the instruction runs;
//! - a watchpoint stops from the first memory hook of the access, before any other hook of that
//!   instruction acted: the PM window hooks and the all-memory hooks of the passes call
//!   [`debug_watch`] first, and a store Unicorn performs on its way out is written back
//!   (`PmState::undo`), exactly as for a scheduling point; the debugger then steps the
//!   instruction to report the hit after it, as x86's data breakpoints do;
//! - a stop at instruction N reuses the instruction budget's exact stop (`BlockClock::limit`),
//!   set to N for the time of one `run`.
//!
//! Resuming from a stop ignores hits of the instruction the thread stops at (`skip`), so that a
//! breakpoint does not fire again on the instruction it stopped before.
//!
//! What it cannot do: a vector access wider than 8 bytes arrives as 8-byte pieces; a watch is
//! matched on 16-byte granules so that an aligned 16-byte access stops on its first piece, but
//! an unaligned one that reaches the watched bytes only with its second piece has already fed
//! its first piece to the passes (the run's findings may then count that access twice; memory
//! and the schedule stay the same).

use super::*;

/// Why the machine stopped for the debugger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DebugStop {
    /// The instruction count set with [`Machine::stop_at`] was reached.
    Reached,
    /// A breakpoint's instruction is about to run.
    Breakpoint(u64),
    /// An instruction is about to access a watched range (it has not run): `addr` is the start
    /// of the watch, `write` whether the access is a store.
    Watch {
        /// The watch's first byte.
        addr: u64,
        /// Whether the access is a store.
        write: bool,
    },
}

/// Which accesses a watchpoint stops at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchKind {
    /// Loads only (gdb's `rwatch`).
    Read,
    /// Stores only (gdb's `watch`).
    Write,
    /// Loads and stores (gdb's `awatch`).
    Access,
}

impl WatchKind {
    fn matches(self, write: bool) -> bool {
        match self {
            WatchKind::Read => !write,
            WatchKind::Write => write,
            WatchKind::Access => true,
        }
    }
}

/// A watched range `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Watch {
    start: u64,
    end: u64,
    kind: WatchKind,
}

/// What the hooks need of the debugger's state: present only while a debugger is attached.
pub(super) struct DebugState {
    watches: Vec<Watch>,
    /// Breakpoint hits of the instruction at this retired count are ignored: the one the
    /// debugger resumes from (gdb steps over a breakpoint it stopped at).
    skip: u64,
    /// Watchpoint hits of the instruction at this retired count are ignored: the one the
    /// debugger completes after it stopped before its access.
    skip_watch: u64,
}

/// A debugger hook installed in the engine.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum DebugHook {
    Break(u64),
    Watch(u64, u64, WatchKind),
}

/// Checks a memory access of `size` bytes at `addr` against the watchpoints, first thing in
/// every memory hook that has effects. Returns whether the machine now stops (the caller then
/// does nothing more for this access).
pub(super) fn debug_watch(uc: &mut Unicorn<'_, HookState>, addr: u64, size: usize, write: bool) -> bool {
    let h = uc.get_handle();
    debug_watch_raw(h, uc.get_data_mut(), addr, size, write)
}

/// [`debug_watch`] for a hook that has the engine's handle and its state (the raw all-memory
/// hooks, [`hooks::add_raw_dram_hook`]).
pub(super) fn debug_watch_raw(
    uc: *mut ffi::uc_engine,
    st: &mut HookState,
    addr: u64,
    size: usize,
    write: bool,
) -> bool {
    let Some(d) = st.debug.as_deref() else { return false };
    if st.stop.is_some() {
        return false;
    }
    let lo = addr & !15;
    let hi = (addr + size.max(1) as u64 + 15) & !15;
    let Some(w) = d.watches.iter().find(|w| w.kind.matches(write) && w.start < hi && lo < w.end).copied() else {
        return false;
    };
    let pc = hooks::raw_rip(uc);
    if st.count_at(pc) == st.debug.as_deref().map_or(u64::MAX, |d| d.skip_watch) {
        return false;
    }
    let mut old = [0u8; 8];
    let n = size.min(8);
    if write {
        let _ = hooks::raw_read_guest(uc, st, addr, &mut old[..n]);
    }
    if write {
        st.pm.undo = Some((addr, old, n));
    }
    st.stop = Some(Stop::Debug(DebugStop::Watch { addr: w.start, write }));
    // SAFETY: `uc` is the live engine calling the hook.
    let _ = unsafe { ffi::uc_emu_stop(uc) };
    true
}

impl Machine {
    /// Attaches the debugger's state: from now on the hooks check watchpoints. Costs nothing
    /// until called.
    pub fn enable_debugging(&mut self) {
        let st = self.uc.get_data_mut();
        if st.debug.is_none() {
            st.debug = Some(Box::new(DebugState { watches: Vec::new(), skip: u64::MAX, skip_watch: u64::MAX }));
        }
    }

    /// Breakpoint hits of the instruction the running thread is about to run are ignored until
    /// the next call, and with `watches` its watchpoint hits too: the debugger resumes from
    /// this stop (and completes the instruction a watchpoint stopped before).
    pub fn debug_skip_current(&mut self, watches: bool) {
        let icount = self.icount;
        if let Some(d) = self.uc.get_data_mut().debug.as_deref_mut() {
            d.skip = icount;
            d.skip_watch = if watches { icount } else { u64::MAX };
        }
    }

    /// Hits of the instruction the running thread is about to run are not ignored: the debugger
    /// resumes from a stop it made itself (a snapshot's), not from one it reported.
    pub fn debug_skip_nothing(&mut self) {
        if let Some(d) = self.uc.get_data_mut().debug.as_deref_mut() {
            d.skip = u64::MAX;
            d.skip_watch = u64::MAX;
        }
    }

    /// Stops the next [`Machine::run`] when `target` instructions have retired (before the
    /// instruction with that number runs), with [`Exit::Debug`]`(`[`DebugStop::Reached`]`)`;
    /// `None` runs to the instruction budget. A target at or before the current count, or past
    /// the budget, stops nothing.
    pub fn stop_at(&mut self, target: Option<u64>) {
        if let Some(id) = self.limit_hook.take() {
            let _ = self.uc.remove_hook(id);
        }
        let budget = self.budget;
        let icount = self.icount;
        let st = self.uc.get_data_mut();
        if let Some(at) = st.clock.limit_pc.take() {
            self.code_changed(at, at + 1);
        }
        let st = self.uc.get_data_mut();
        st.clock.limit = match target {
            Some(t) if t > icount && t < budget => t,
            _ => budget,
        };
    }

    /// Sets a breakpoint at `pc`; false if the engine refused the hook.
    pub fn add_breakpoint(&mut self, pc: u64) -> bool {
        self.enable_debugging();
        if self.debug_hooks.iter().any(|(h, _)| *h == DebugHook::Break(pc)) {
            return true;
        }
        let hooked = self.uc.add_code_hook(pc, pc, |uc, at, _| {
            taint_first(uc, at);
            let st = uc.get_data_mut();
            if st.stop.is_some() {
                return;
            }
            let skip = st.debug.as_deref().map_or(u64::MAX, |d| d.skip);
            if st.count_at(at) != skip {
                st.stop = Some(Stop::Debug(DebugStop::Breakpoint(at)));
                let _ = uc.emu_stop();
            }
        });
        match hooked {
            Ok(id) => {
                self.debug_hooks.push((DebugHook::Break(pc), id));
                // The block holding `pc` is translated again, with the hook.
                self.code_changed(pc, pc + 1);
                true
            }
            Err(_) => false,
        }
    }

    /// Removes the breakpoint at `pc`; false if there was none.
    pub fn remove_breakpoint(&mut self, pc: u64) -> bool {
        let removed = self.remove_debug_hook(DebugHook::Break(pc));
        if removed {
            self.code_changed(pc, pc + 1);
        }
        removed
    }

    /// Watches `[addr, addr + len)` for `kind` accesses; false if the engine refused the hook.
    pub fn add_watchpoint(&mut self, addr: u64, len: u64, kind: WatchKind) -> bool {
        self.enable_debugging();
        let key = DebugHook::Watch(addr, len, kind);
        if self.debug_hooks.iter().any(|(h, _)| *h == key) {
            return true;
        }
        let types = match kind {
            WatchKind::Read => HookType::MEM_READ,
            WatchKind::Write => HookType::MEM_WRITE,
            WatchKind::Access => HookType::MEM_READ | HookType::MEM_WRITE,
        };
        // Unicorn matches a hook's range on an access's first byte: an access that starts
        // below the range and reaches into it starts at most 31 bytes before.
        let lo = addr.saturating_sub(31);
        let hi = addr.saturating_add(len.max(1)) - 1;
        let phys = self.uc.get_data().phys;
        let hooked = self.uc.add_mem_hook(types, phys.pa(lo), phys.pa(hi), |uc, t, a, size, _v| {
            let a = uc.get_data().phys.va(a);
            debug_watch(uc, a, size, t == MemType::WRITE);
            true
        });
        let Ok(id) = hooked else { return false };
        self.debug_hooks.push((key, id));
        if let Some(d) = self.uc.get_data_mut().debug.as_deref_mut() {
            d.watches.push(Watch { start: addr, end: addr.saturating_add(len.max(1)), kind });
        }
        // Translations made without memory hooks call none: they are made again.
        self.flush_translations();
        true
    }

    /// Removes a watchpoint set with the same arguments; false if there was none.
    pub fn remove_watchpoint(&mut self, addr: u64, len: u64, kind: WatchKind) -> bool {
        let removed = self.remove_debug_hook(DebugHook::Watch(addr, len, kind));
        if let Some(d) = self.uc.get_data_mut().debug.as_deref_mut() {
            let end = addr.saturating_add(len.max(1));
            if let Some(i) = d.watches.iter().position(|w| w.start == addr && w.end == end && w.kind == kind) {
                d.watches.remove(i);
            }
        }
        removed
    }

    fn remove_debug_hook(&mut self, key: DebugHook) -> bool {
        let Some(i) = self.debug_hooks.iter().position(|(h, _)| *h == key) else { return false };
        let (_, id) = self.debug_hooks.remove(i);
        let _ = self.uc.remove_hook(id);
        true
    }

    /// Every register of thread `tid` as the debugger shows it, the running one or a parked
    /// one; `None` for a thread that does not exist.
    pub fn thread_registers(&self, tid: u32) -> Option<ThreadRegisters> {
        if tid == self.tid() {
            return Some(self.read_registers());
        }
        let parked = &self.parked.get(&tid)?.ctx;
        // Unicorn reads the vector registers only from the engine: the parked thread's context is
        // loaded for the time of the read, and the running thread's put back.
        let own = self.uc.context_init().ok()?;
        self.uc.context_restore(parked).ok()?;
        let regs = self.read_registers();
        let _ = self.uc.context_restore(&own);
        Some(regs)
    }

    /// Writes the general registers, RIP and flags of thread `tid`.
    pub fn set_thread_registers(&mut self, tid: u32, regs: &ThreadRegisters) {
        for (r, v) in GP_ORDER.iter().zip(regs.gp) {
            self.set_parked_reg(tid, *r, v);
        }
        self.set_parked_reg(tid, Reg::RIP, regs.rip);
        self.set_parked_reg(tid, Reg::EFLAGS, regs.eflags);
    }

    fn read_registers(&self) -> ThreadRegisters {
        let mut r = ThreadRegisters::default();
        for (i, reg) in GP_ORDER.iter().enumerate() {
            r.gp[i] = self.reg(*reg);
        }
        r.rip = self.reg(Reg::RIP);
        r.eflags = self.reg(Reg::EFLAGS);
        for (i, reg) in [Reg::CS, Reg::SS, Reg::DS, Reg::ES, Reg::FS, Reg::GS].iter().enumerate() {
            r.segments[i] = self.reg(*reg) as u32;
        }
        r.fs_base = self.reg(Reg::FS_BASE);
        r.gs_base = self.reg(Reg::GS_BASE);
        for (i, reg) in XMM_REGS.iter().enumerate() {
            let b = self.reg_bytes(*reg);
            let mut v = [0u8; 16];
            let n = b.len().min(16);
            v[..n].copy_from_slice(&b[..n]);
            r.xmm[i] = u128::from_le_bytes(v);
        }
        for (i, reg) in ST_REGS.iter().enumerate() {
            let b = self.reg_bytes(*reg);
            let n = b.len().min(10);
            r.st[i][..n].copy_from_slice(&b[..n]);
        }
        r.fctrl = self.reg(Reg::FPCW) as u32;
        r.fstat = self.reg(Reg::FPSW) as u32;
        r.ftag = self.reg(Reg::FPTAG) as u32;
        r.mxcsr = self.reg(Reg::MXCSR) as u32;
        r
    }
}

/// The general registers in gdb's x86-64 order: RAX, RBX, RCX, RDX, RSI, RDI, RBP, RSP, R8–R15.
pub const GP_ORDER: [Reg; 16] = [
    Reg::RAX,
    Reg::RBX,
    Reg::RCX,
    Reg::RDX,
    Reg::RSI,
    Reg::RDI,
    Reg::RBP,
    Reg::RSP,
    Reg::R8,
    Reg::R9,
    Reg::R10,
    Reg::R11,
    Reg::R12,
    Reg::R13,
    Reg::R14,
    Reg::R15,
];

/// A thread's registers as a debugger shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadRegisters {
    /// In [`GP_ORDER`].
    pub gp: [u64; 16],
    /// The instruction pointer.
    pub rip: u64,
    /// RFLAGS (gdb's 32-bit `eflags`).
    pub eflags: u64,
    /// CS, SS, DS, ES, FS, GS.
    pub segments: [u32; 6],
    /// The FS segment base (TLS of the thread).
    pub fs_base: u64,
    /// The GS segment base.
    pub gs_base: u64,
    /// ST0–ST7, 80 bits each.
    pub st: [[u8; 10]; 8],
    /// The x87 control word.
    pub fctrl: u32,
    /// The x87 status word.
    pub fstat: u32,
    /// The x87 tag word.
    pub ftag: u32,
    /// XMM0–XMM15.
    pub xmm: [u128; 16],
    /// The SSE control and status register.
    pub mxcsr: u32,
}
