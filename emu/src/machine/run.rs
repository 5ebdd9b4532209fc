//! The run loop: [`Machine::run`] and what it does at each stop (faults, emulated instructions,
//! the exact instruction budget).

use super::*;

impl Machine {
    /// Runs the guest from RIP until it needs the outside world.
    pub fn run(&mut self) -> Exit {
        loop {
            if let Some(at) = self.uc.get_data_mut().trim_due.take() {
                // The stop was for the trim below, not a sweep.
                self.uc.get_data_mut().clock.sweep_at = at;
            }
            if self.mem.over_bound() {
                // A safe point: the engine is stopped and no block is under way.
                let pc = self.pc();
                let raw = self.raw_begin();
                self.mem.trim(&mut self.uc, pc);
                self.raw_end(raw);
            }
            if self.icount >= self.uc.get_data().clock.sweep_at {
                if !self.processes {
                    hooks::unhook_pm_atomics(&mut self.uc);
                }
                let clock = &mut self.uc.get_data_mut().clock;
                let due = self.icount >= clock.sweep_next;
                if due {
                    // Soon after start-up (whose code runs once), then less often.
                    clock.sweep_next = self.icount + self.icount.clamp(hooks::SWEEP_FIRST, hooks::SWEEP_EVERY);
                }
                clock.sweep_at = clock.sweep_next;
                if due && !self.processes {
                    hooks::sweep_special_hooks(&mut self.uc);
                }
            }
            if self.uc.get_data().obs.memory_due {
                // The observer's want changed (in the engine, or at an event outside it).
                self.settle_memory_hooks();
            }
            let begin = self.pc();
            {
                let st = self.uc.get_data_mut();
                st.stop = None;
                st.invalid = None;
                st.clock.block_base = self.icount;
                st.clock.block = (begin, 0, 0);
                st.clock.prev_term = Term::Other;
            }
            // Never with a count: Unicorn then hooks every instruction, and going back to no
            // count flushes every translation.
            let res = self.uc.emu_start(begin, u64::MAX, 0, 0);
            let pc = self.pc();
            let st = self.uc.get_data_mut();
            let stop = st.stop.take();
            self.icount = st.count_at(pc);
            if let Some((a, old, n)) = st.pm.undo.take() {
                // The store of a scheduling point went through on Unicorn's way out: put the
                // bytes back, so that the instruction runs whole, later.
                let _ = self.mem.write(a, &old[..n], true);
            }
            let st = self.uc.get_data_mut();
            st.obs.taint_began = None;
            if let Some(t) = st.obs.taint.as_deref_mut() {
                // Whether the instruction under way when the engine stopped ran to its end.
                let completed = matches!(
                    stop,
                    Some(
                        Stop::Syscall
                            | Stop::Preempt
                            | Stop::Quantum
                            | Stop::Timer
                            | Stop::Sweep
                            | Stop::Memory
                            | Stop::ArmLimit(_)
                            | Stop::Interrupted
                    )
                );
                t.settle(completed);
                if !t.applied().is_empty() {
                    st.report_tainted();
                }
            }
            match (res, stop) {
                (_, Some(Stop::Syscall)) => return Exit::Syscall,
                (_, Some(Stop::Limit)) if self.icount < self.budget => return Exit::Debug(DebugStop::Reached),
                (_, Some(Stop::Limit)) => return Exit::Limit,
                (_, Some(Stop::Debug(d))) => return Exit::Debug(d),
                (_, Some(Stop::Preempt | Stop::PreemptBefore)) => return Exit::Preempt,
                (_, Some(Stop::Quantum)) => return Exit::Quantum,
                (_, Some(Stop::Interrupted)) => return Exit::Interrupted,
                (_, Some(Stop::Timer)) => return Exit::Timer,
                // Swept at the loop's top; the block runs next, as if nothing had stopped.
                // Hooked at the loop's top, likewise.
                (_, Some(Stop::Sweep | Stop::Memory)) => {}
                // The load that stopped runs again, now with the taint hooks.
                (_, Some(Stop::Taint)) => self.hook_taint(),
                (_, Some(Stop::Hold)) => {
                    self.uc.get_data_mut().steer.held += 1;
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
                    // A hook armed in a block another thread left before it fired is stale.
                    if let Some(id) = self.limit_hook.take() {
                        let _ = self.uc.remove_hook(id);
                    }
                    if let Some(old) = self.uc.get_data_mut().clock.limit_pc.take() {
                        self.code_changed(old, old + 1);
                    }
                    self.uc.get_data_mut().clock.limit_pc = Some(at);
                    let hooked = self.uc.add_code_hook(at, at, |uc, pc, _| {
                        taint_first(uc, pc);
                        let st = uc.get_data_mut();
                        if st.stop.is_none() && st.count_at(pc) == st.clock.limit {
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
                (_, Some(Stop::Interrupt(n))) => {
                    // As if delivered: the guest's next fault must not become a double fault.
                    crate::excp::forget_exception(&mut self.uc);
                    return Exit::Fault(self.interrupt_fault(n, pc));
                }
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
                    if let Some((a, old, n)) = self.uc.get_data_mut().pm.torn.take() {
                        let _ = self.mem.write(a, &old[..n], true);
                    }
                    return Exit::Fault(self.error_fault(e, pc));
                }
            }
        }
    }

    pub(super) fn interrupt_fault(&mut self, intno: u32, pc: u64) -> Fault {
        if let Some(f) = self.software_interrupt_fault(intno, pc) {
            return f;
        }
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

    /// Where the `int $intno` instruction (`CD intno`) that raised the interrupt Unicorn stopped
    /// at `pc` is, if one did and its vector is not one user mode may raise (3, 4, 0x80). Unicorn
    /// reports a software interrupt after its instruction (before it for some vectors), and an
    /// exception at the faulting instruction, which cannot be `CD intno`. The candidate must
    /// start an instruction of the block running: two bytes `CD intno` ending the instruction
    /// before an exception's (an immediate) are not an `int` (one that was would have raised
    /// first).
    /// The fault of an `int $intno` user mode may not execute (see
    /// [`Machine::software_interrupt`]), RIP moved back to the instruction.
    fn software_interrupt_fault(&mut self, intno: u32, pc: u64) -> Option<Fault> {
        let at = self.software_interrupt(intno, pc)?;
        // Linux's interrupt gates but 3, 4 and 0x80 are the kernel's alone (DPL 0): from user
        // mode the instruction is a general protection fault, which leaves RIP at it.
        self.set_reg(Reg::RIP, at);
        Some(Fault {
            signal: sig::SIGSEGV,
            code: 0x80,
            addr: 0,
            pc: at,
            what: format!("int {intno:#x} (a general protection fault in user mode)"),
        })
    }

    fn software_interrupt(&self, intno: u32, pc: u64) -> Option<u64> {
        if matches!(intno, 3 | 4 | 0x80) || intno > 0xff {
            return None;
        }
        let want = [0xcd, intno as u8];
        let starts = |at: u64| self.uc.get_data().running_block().is_none_or(|b| b.insns.contains(&at));
        let is_int = |at: u64| {
            let mut b = [0u8; 2];
            starts(at) && self.mem.read(at, &mut b).is_ok() && b == want
        };
        if is_int(pc) {
            Some(pc)
        } else {
            pc.checked_sub(2).filter(|&at| is_int(at))
        }
    }

    pub(super) fn error_fault(&mut self, e: uc_error, pc: u64) -> Fault {
        if e == uc_error::INSN_INVALID {
            // Unicorn stops an `int $6` as it stops an invalid opcode (#UD, vector 6).
            if let Some(f) = self.software_interrupt_fault(6, pc) {
                return f;
            }
        }
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
    pub(super) fn emulate_special(&mut self, pc: u64, s: Special) -> Option<Fault> {
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
            Special::Flush(..)
            | Special::Fence(_)
            | Special::LockedRmw { .. }
            | Special::ClientRequest
            | Special::AtomicAccess { .. }
            | Special::Pause => None,
        }
    }
}

/// `[66] [REX] 0F C7 /6 (rdrand) or /7 (rdseed)`, register form: (register, width, length).
pub(super) fn decode_rand(b: &[u8; 16]) -> Option<(Reg, u32, u64)> {
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
