//! The replayed run as a `gdbstub` target: threads, registers, memory, breakpoints,
//! watchpoints, forward and reverse execution, and `monitor` commands for PM state.

use std::num::NonZeroUsize;

use gdbstub::common::{Signal, Tid};
use gdbstub::target::ext::auxv::{Auxv, AuxvOps};
use gdbstub::target::ext::base::multithread::{
    MultiThreadBase, MultiThreadResume, MultiThreadResumeOps, MultiThreadSchedulerLocking,
    MultiThreadSchedulerLockingOps, MultiThreadSingleStep, MultiThreadSingleStepOps,
};
use gdbstub::target::ext::base::reverse_exec::{ReverseCont, ReverseContOps, ReverseStep, ReverseStepOps};
use gdbstub::target::ext::base::BaseOps;
use gdbstub::target::ext::breakpoints::{
    Breakpoints, BreakpointsOps, HwWatchpoint, HwWatchpointOps, SwBreakpoint, SwBreakpointOps, WatchKind as GdbWatch,
};
use gdbstub::target::ext::monitor_cmd::{ConsoleOutput, MonitorCmd, MonitorCmdOps};
use gdbstub::target::{Target, TargetError, TargetResult};
use gdbstub::{outputln, stub::MultiThreadStopReason};
use gdbstub_arch::x86::reg::{X86SegmentRegs, X87FpuInternalRegs};

use analyses::Finding;
use emu::{ThreadRegisters, WatchKind};

use super::arch::{LinuxRegs, X86_64Linux};
use super::timeline::{Halt, Timeline};

/// What gdb asked the run to do next, done in the event loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    Continue,
    Step(u32),
    ReverseStep(u32),
    ReverseContinue,
}

/// The run under the debugger.
pub struct Debuggee {
    pub timeline: Timeline,
    /// The original report's findings, for `monitor findings`.
    pub findings: Vec<Finding>,
    /// Set by the resume calls, taken by the event loop.
    pub resume: Option<Resume>,
    step_tid: Option<u32>,
    /// A crash finding's recovery is being debugged: what `monitor crash` says of it.
    crash: Option<String>,
    /// The program's auxiliary vector (`qXfer:auxv:read`), empty if unknown.
    pub(super) auxv: Vec<u8>,
}

impl Debuggee {
    pub fn new(timeline: Timeline, findings: Vec<Finding>, crash: Option<String>, auxv: Vec<u8>) -> Debuggee {
        Debuggee { timeline, findings, resume: None, step_tid: None, crash, auxv }
    }

    /// Does what gdb asked; `None` when `interrupted` cut a forward run short.
    pub fn run(&mut self, what: Resume, interrupted: impl FnMut() -> bool) -> anyhow::Result<Option<Halt>> {
        let t = &mut self.timeline;
        Ok(Some(match what {
            Resume::Continue => return t.cont(interrupted),
            Resume::Step(tid) => t.step_thread(tid)?.unwrap_or(Halt::Stepped(tid)),
            Resume::ReverseStep(tid) => {
                if t.reverse_step(tid)? {
                    Halt::Stepped(tid)
                } else {
                    Halt::Beginning
                }
            }
            Resume::ReverseContinue => t.reverse_cont()?,
        }))
    }

    /// gdb's name for a stop.
    pub fn stop_reason(&self, h: Halt) -> MultiThreadStopReason<u64> {
        let cur = tid(self.timeline.current_thread());
        match h {
            // With the thread named: gdb must not guess which one stepped.
            Halt::Stepped(t) => MultiThreadStopReason::SignalWithThread { tid: tid(t), signal: Signal::SIGTRAP },
            Halt::Breakpoint(t) => MultiThreadStopReason::SwBreak(tid(t)),
            Halt::Watch { tid: t, addr, write } => MultiThreadStopReason::Watch {
                tid: tid(t),
                kind: if write { GdbWatch::Write } else { GdbWatch::Read },
                addr,
            },
            Halt::Fault { tid: t, signal } => {
                MultiThreadStopReason::SignalWithThread { tid: tid(t), signal: Signal(signal as u8) }
            }
            Halt::Budget(t) => MultiThreadStopReason::SignalWithThread { tid: tid(t), signal: Signal::SIGXCPU },
            Halt::Beginning => MultiThreadStopReason::ReplayLog {
                tid: Some(cur),
                pos: gdbstub::target::ext::base::reverse_exec::ReplayLogPosition::Begin,
            },
            Halt::End(_) => MultiThreadStopReason::ReplayLog {
                tid: Some(cur),
                pos: gdbstub::target::ext::base::reverse_exec::ReplayLogPosition::End,
            },
        }
    }
}

fn tid(t: u32) -> Tid {
    NonZeroUsize::new(t as usize).unwrap_or(NonZeroUsize::MIN)
}

fn guest_tid(t: Tid) -> u32 {
    u32::try_from(t.get()).unwrap_or(u32::MAX)
}

impl Target for Debuggee {
    type Arch = X86_64Linux;
    type Error = String;

    fn base_ops(&mut self) -> BaseOps<'_, Self::Arch, Self::Error> {
        BaseOps::MultiThread(self)
    }

    fn support_breakpoints(&mut self) -> Option<BreakpointsOps<'_, Self>> {
        Some(self)
    }

    fn support_monitor_cmd(&mut self) -> Option<MonitorCmdOps<'_, Self>> {
        Some(self)
    }

    fn support_auxv(&mut self) -> Option<AuxvOps<'_, Self>> {
        (!self.auxv.is_empty()).then_some(self)
    }

    // The guest's `int3` is the guest's: gdb's breakpoints are hooks, not patched code.
    fn guard_rail_implicit_sw_breakpoints(&self) -> bool {
        true
    }
}

impl Auxv for Debuggee {
    fn get_auxv(&self, offset: u64, length: usize, buf: &mut [u8]) -> TargetResult<usize, Self> {
        let from = usize::try_from(offset).unwrap_or(usize::MAX).min(self.auxv.len());
        let n = length.min(buf.len()).min(self.auxv.len() - from);
        buf[..n].copy_from_slice(&self.auxv[from..from + n]);
        Ok(n)
    }
}

impl MultiThreadBase for Debuggee {
    fn read_registers(&mut self, all: &mut LinuxRegs, t: Tid) -> TargetResult<(), Self> {
        let r = self.timeline.session().machine().thread_registers(guest_tid(t)).ok_or(TargetError::NonFatal)?;
        // Never inside a system call at a stop gdb sees.
        (all.orig_rax, all.fs_base, all.gs_base) = (u64::MAX, r.fs_base, r.gs_base);
        let regs = &mut all.core;
        regs.regs = r.gp;
        regs.rip = r.rip;
        regs.eflags = r.eflags as u32;
        let [cs, ss, ds, es, fs, gs] = r.segments;
        regs.segments = X86SegmentRegs { cs, ss, ds, es, fs, gs };
        regs.st = r.st;
        regs.fpu = X87FpuInternalRegs { fctrl: r.fctrl, fstat: r.fstat, ftag: r.ftag, ..Default::default() };
        regs.xmm = r.xmm;
        regs.mxcsr = r.mxcsr;
        Ok(())
    }

    fn write_registers(&mut self, all: &LinuxRegs, t: Tid) -> TargetResult<(), Self> {
        let regs = &all.core;
        let m = self.timeline.session_mut().machine_mut();
        let mut r: ThreadRegisters = m.thread_registers(guest_tid(t)).ok_or(TargetError::NonFatal)?;
        r.gp = regs.regs;
        r.rip = regs.rip;
        r.eflags = u64::from(regs.eflags);
        m.set_thread_registers(guest_tid(t), &r);
        Ok(())
    }

    fn read_addrs(&mut self, start: u64, data: &mut [u8], _t: Tid) -> TargetResult<usize, Self> {
        let mem = &self.timeline.session().machine().mem;
        // Page by page: the readable prefix of the range.
        let mut done = 0usize;
        while done < data.len() {
            let a = start.wrapping_add(done as u64);
            let n = ((4096 - (a & 4095)) as usize).min(data.len() - done);
            if mem.read(a, &mut data[done..done + n]).is_err() {
                break;
            }
            done += n;
        }
        if done == 0 && !data.is_empty() {
            return Err(TargetError::Errno(14)); // EFAULT
        }
        Ok(done)
    }

    fn write_addrs(&mut self, start: u64, data: &[u8], _t: Tid) -> TargetResult<(), Self> {
        let m = self.timeline.session_mut().machine_mut();
        match m.mem.write(start, data, true) {
            Ok(_) => {
                m.code_changed(start, start + data.len() as u64);
                Ok(())
            }
            Err(_) => Err(TargetError::Errno(14)),
        }
    }

    fn list_active_threads(&mut self, thread_is_active: &mut dyn FnMut(Tid)) -> Result<(), Self::Error> {
        // The thread stopped in first: gdb takes the first one for a stop that names none.
        let cur = self.timeline.current_thread();
        thread_is_active(tid(cur));
        for t in self.timeline.session().kernel().thread_ids() {
            if t != cur {
                thread_is_active(tid(t));
            }
        }
        Ok(())
    }

    fn support_resume(&mut self) -> Option<MultiThreadResumeOps<'_, Self>> {
        Some(self)
    }
}

impl MultiThreadResume for Debuggee {
    fn resume(&mut self) -> Result<(), Self::Error> {
        self.resume = Some(match self.step_tid.take() {
            Some(t) => Resume::Step(t),
            None => Resume::Continue,
        });
        Ok(())
    }

    fn clear_resume_actions(&mut self) -> Result<(), Self::Error> {
        self.step_tid = None;
        Ok(())
    }

    // Signals gdb would pass are not delivered: the replay would no longer be the run.
    fn set_resume_action_continue(&mut self, _tid: Tid, _signal: Option<Signal>) -> Result<(), Self::Error> {
        Ok(())
    }

    fn support_single_step(&mut self) -> Option<MultiThreadSingleStepOps<'_, Self>> {
        Some(self)
    }

    fn support_reverse_step(&mut self) -> Option<ReverseStepOps<'_, Tid, Self>> {
        Some(self)
    }

    fn support_reverse_cont(&mut self) -> Option<ReverseContOps<'_, Tid, Self>> {
        Some(self)
    }

    fn support_scheduler_locking(&mut self) -> Option<MultiThreadSchedulerLockingOps<'_, Self>> {
        Some(self)
    }
}

/// gdb asks for it when it steps one thread over a breakpoint while others exist (`vCont;s:N`
/// with nothing for the rest). The replay cannot hold the others without leaving the run: they
/// run first if its schedule says so, as with any `stepi`, and the step still ends after an
/// instruction of the stepped thread.
impl MultiThreadSchedulerLocking for Debuggee {
    fn set_resume_action_scheduler_lock(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl MultiThreadSingleStep for Debuggee {
    fn set_resume_action_step(&mut self, t: Tid, _signal: Option<Signal>) -> Result<(), Self::Error> {
        self.step_tid = Some(guest_tid(t));
        Ok(())
    }
}

impl ReverseStep<Tid> for Debuggee {
    fn reverse_step(&mut self, t: Tid) -> Result<(), Self::Error> {
        self.resume = Some(Resume::ReverseStep(guest_tid(t)));
        Ok(())
    }
}

impl ReverseCont<Tid> for Debuggee {
    fn reverse_cont(&mut self) -> Result<(), Self::Error> {
        self.resume = Some(Resume::ReverseContinue);
        Ok(())
    }
}

impl Breakpoints for Debuggee {
    fn support_sw_breakpoint(&mut self) -> Option<SwBreakpointOps<'_, Self>> {
        Some(self)
    }

    fn support_hw_watchpoint(&mut self) -> Option<HwWatchpointOps<'_, Self>> {
        Some(self)
    }
}

impl SwBreakpoint for Debuggee {
    fn add_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        Ok(self.timeline.add_breakpoint(addr))
    }

    fn remove_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        Ok(self.timeline.remove_breakpoint(addr))
    }
}

fn watch_kind(k: GdbWatch) -> WatchKind {
    match k {
        GdbWatch::Write => WatchKind::Write,
        GdbWatch::Read => WatchKind::Read,
        GdbWatch::ReadWrite => WatchKind::Access,
    }
}

impl HwWatchpoint for Debuggee {
    fn add_hw_watchpoint(&mut self, addr: u64, len: u64, kind: GdbWatch) -> TargetResult<bool, Self> {
        Ok(self.timeline.add_watchpoint(addr, len, watch_kind(kind)))
    }

    fn remove_hw_watchpoint(&mut self, addr: u64, len: u64, kind: GdbWatch) -> TargetResult<bool, Self> {
        Ok(self.timeline.remove_watchpoint(addr, len, watch_kind(kind)))
    }
}

impl MonitorCmd for Debuggee {
    fn handle_monitor_cmd(&mut self, cmd: &[u8], mut out: ConsoleOutput<'_>) -> Result<(), Self::Error> {
        let cmd = String::from_utf8_lossy(cmd);
        let mut words = cmd.split_whitespace();
        match words.next() {
            Some("when") => {
                let t = &self.timeline;
                let ended = match t.ended() {
                    Some(e) => format!(" (the run has ended: {e:?})"),
                    None => String::new(),
                };
                let last = match t.last_rewind {
                    Some(at) => format!(" (the last at instruction {at})"),
                    None => String::new(),
                };
                outputln!(
                    out,
                    "instruction {} in thread {}; run from its start {} times, back to a snapshot {} times{last}{ended}",
                    t.now(),
                    t.current_thread(),
                    t.incarnations,
                    t.rewinds
                );
            }
            Some("findings") => {
                if self.findings.is_empty() {
                    outputln!(out, "the report has no findings");
                }
                for f in &self.findings {
                    let at = f
                        .locations
                        .first()
                        .map(|l| match (&l.file, l.line) {
                            (Some(file), Some(line)) => format!(" at {file}:{line} (thread {})", l.thread),
                            _ => format!(" at {:#x} (thread {})", l.pc, l.thread),
                        })
                        .unwrap_or_default();
                    outputln!(out, "{}: {}/{}{at}: {}", f.id, f.analysis, f.kind, f.message);
                }
            }
            Some("pm") => match words.next().and_then(parse_addr) {
                Some(a) => self.describe_pm(a, &mut out),
                None => {
                    outputln!(out, "usage: monitor pm ADDRESS (a guest address in a PM mapping, e.g. 0x7f0000001000)")
                }
            },
            Some("crash") => match &self.crash {
                Some(c) => outputln!(out, "{c}"),
                None => outputln!(out, "the replay is the report's run, not a crash finding's"),
            },
            _ => {
                outputln!(out, "ferrite monitor commands:");
                outputln!(out, "  monitor when          the instruction count and thread the replay is at");
                outputln!(out, "  monitor findings      the report's findings");
                outputln!(out, "  monitor pm ADDRESS    the persistence state of the PM line holding ADDRESS");
                outputln!(out, "  monitor crash         the crash point and image a recovery being debugged runs on");
            }
        }
        Ok(())
    }
}

fn parse_addr(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

impl Debuggee {
    /// `monitor pm ADDRESS`: the line's bytes that hold a store not durable yet, by store.
    fn describe_pm(&self, addr: u64, out: &mut ConsoleOutput<'_>) {
        let m = self.timeline.session().machine();
        let line = addr & !63;
        let Some(dev) = m.pm_device_addr(line) else {
            outputln!(out, "{addr:#x} is not in a PM mapping");
            return;
        };
        let pm = m.pm();
        let mut open: Vec<(u64, u32, bool, bool, bool, u64, u64)> = Vec::new();
        for b in 0..64u64 {
            if let Some(p) = pm.persist_info(dev + b) {
                match open.last_mut() {
                    Some(last) if last.0 == p.store.0 && last.6 == b => last.6 = b + 1,
                    _ => open.push((p.store.0, p.writer, p.nt, p.durable_hw, p.durable_own, b, b + 1)),
                }
            }
        }
        outputln!(out, "PM line {line:#x} (device address {:#x}):", dev);
        if open.is_empty() {
            outputln!(out, "  durable: every store to it is flushed and fenced (or it was never stored to)");
        }
        for (store, writer, nt, hw, own, from, to) in open {
            let state = match (hw, own) {
                (true, true) => "durable",
                (true, false) => "durable by the hardware rule, not by its writer's own flush and fence",
                _ if nt => "a non-temporal store not fenced yet",
                _ => "stored, not durable (not flushed and fenced)",
            };
            outputln!(out, "  bytes {from}..{to}: store #{store} by thread {writer}: {state}");
        }
    }
}
