//! Signals: dispositions, masks, the alternate stack, delivery with a Linux-exact frame, and
//! `rt_sigreturn`.
//!
//! Follows Linux x86-64 (`arch/x86/kernel/signal.c`): a handler runs on the thread's stack below
//! the 128-byte red zone, or at the top of the alternate stack (SA_ONSTACK, when one is set and
//! the thread is not already on it). The frame is `struct rt_sigframe`: the return address
//! (`sa_restorer`, required as on Linux x86-64), the kernel's `struct ucontext` (flags, link,
//! the alternate stack, `struct sigcontext` with every general register, RIP, RFLAGS, the
//! segment selectors, error code, trap number, old mask, CR2 and a pointer to the FP state, then
//! the signal mask) and the 128-byte `siginfo`; the FXSAVE-format FP state (x87, MXCSR, XMM0-15)
//! lies above it, 64-byte aligned. The handler gets RDI = signal, RSI = &siginfo, RDX = &ucontext,
//! RAX = 0, and the stack aligned as after a call. SA_NODEFER, SA_RESETHAND and the handler's
//! `sa_mask` apply; `rt_sigreturn` restores the registers, FP state and mask from the frame, so a
//! handler may change them (siglongjmp needs nothing special).
//!
//! Synchronous faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) go to a handler if one is
//! installed and the signal is not blocked; otherwise, as Linux's `force_sig`, they kill the
//! process.
//!
//! Every other signal goes through [`Kernel::post`] (Linux's `send_signal`) into one of two
//! pending sets, as on Linux: a thread's own (`tkill`/`tgkill`, `raise`, SIGPIPE, a timer with a
//! thread id), taken by that thread alone; or its process's shared set (`kill`, `sigqueue`,
//! `SIGCHLD`, a timer of the process), kept in [`Kernel::shared_pending`] with the thread
//! chosen to take it for a handler ([`Kernel::signal_target`], Linux's `complete_signal`). A
//! signal its target does not block and ignores is dropped; a blocked one is kept whatever its
//! action; a standard signal pending already is dropped, real-time ones queue (up to
//! `RLIMIT_SIGPENDING` for `sigqueue`). A default action that kills ends the whole process as
//! soon as the thread it goes to does not block it. Setting an action that ignores a signal
//! discards it from every set of the process (Linux's `do_sigaction`).
//!
//! A signal is delivered when its thread makes a system call or is scheduled
//! ([`Kernel::deliver_pending`]): asynchronous signals arrive only at such recorded points, so
//! runs replay. Its own set first, then the shared one; a synchronous fault's signal first, then
//! the lowest number (Linux's `next_signal`); ignored ones are dropped on the way, and every
//! deliverable signal gets a frame, as Linux's exit to user mode builds them. A thread blocked in
//! a call that is made again when woken (calls on descriptors, `wait4`, `rt_sigsuspend`) is
//! woken for it, and the call returns EINTR or, under `SA_RESTART`, is made again after the
//! handler, as Linux does, except a socket call with `SO_RCVTIMEO`/`SO_SNDTIMEO` (EINTR). A futex
//! wait or a sleep is interrupted too (EINTR, or under `SA_RESTART` a futex wait made again
//! unless it is the classic call with a timeout; a relative sleep writes the time left to
//! `rem`). `pause`, `rt_sigtimedwait` and `rt_sigpending` see both sets; `ppoll`, `pselect6` and
//! `epoll_pwait` install their masks for the call ([`Kernel::call_mask`]).
//!
//! Stop signals and `SIGCONT` are job control ([`crate::jobctl`]): a default stop stops the
//! whole process when sent to a thread that does not block it, or when taken.
//!
//! Left out: Linux chooses the thread for a process's signal round-robin from the last one
//! chosen (ferrite: the main thread, else the lowest-numbered); the
//! XSAVE frame format (the CPU model has no XSAVE, so the FXSAVE format with no FP_XSTATE magic is
//! what Linux would build too).

use emu::machine::{ST_REGS, XMM_REGS};
use emu::{Fault, Machine, Reg};

use crate::thread::{Interrupted, Wait};
use crate::{err, Errno, Kernel, ProcessExit, SysResult};

const SA_SIGINFO: u64 = 0x4;
const SA_ONSTACK: u64 = 0x0800_0000;
const SA_RESTORER: u64 = 0x0400_0000;
const SA_NODEFER: u64 = 0x4000_0000;
const SA_RESETHAND: u64 = 0x8000_0000;
const SS_ONSTACK: u64 = 1;
const SS_DISABLE: u64 = 2;
const SIG_DFL: u64 = 0;
const SIG_IGN: u64 = 1;
const SA_RESTART: u64 = 0x1000_0000;
const SA_NOCLDWAIT: u64 = 2;
const SIGCHLD: i32 = 17;
/// futex2's `futex_wait` (not in the libc crate's table).
const SYS_FUTEX_WAIT: u64 = 455;

/// The first real-time signal (the kernel's; glibc keeps 32 and 33 for itself).
pub(crate) const SIGRTMIN: i32 = 32;
/// `si_code` of a signal sent with tkill/tgkill.
pub(crate) const SI_TKILL: i32 = -6;
/// The signals of synchronous faults, which Linux's `next_signal` takes first: SIGILL, SIGTRAP,
/// SIGBUS, SIGFPE, SIGSEGV, SIGSYS.
const SYNCHRONOUS: u64 = 1 << 3 | 1 << 4 | 1 << 6 | 1 << 7 | 1 << 10 | 1 << 30;

/// Whether the default action of `sig` is to ignore it (Linux's `sig_kernel_ignore`: SIGCHLD,
/// SIGCONT, SIGURG, SIGWINCH).
pub(crate) fn ignored_by_default(sig: i32) -> bool {
    matches!(sig, 17 | 18 | 23 | 28)
}

/// Signal `sig`'s bit in a mask (1 to 64).
fn bit(sig: i32) -> u64 {
    1u64 << (sig - 1)
}

/// Whether `action` ignores `sig`: `SIG_IGN`, or `SIG_DFL` for a signal whose default action is
/// to ignore it (Linux's `sig_handler_ignored`).
fn ignores(action: &[u64; 4], sig: i32) -> bool {
    action[0] == SIG_IGN || (action[0] == SIG_DFL && ignored_by_default(sig))
}

/// Linux's `next_signal` over a queue of signal numbers (0: not to be taken): the index of the
/// first of `allowed` to take, a synchronous fault's signal first, then the lowest number, the
/// instances of one number in the order queued.
fn next_signal(queue: impl Iterator<Item = i32>, allowed: u64) -> Option<usize> {
    queue
        .enumerate()
        .filter(|&(_, s)| s > 0 && allowed & bit(s) != 0)
        .min_by_key(|&(i, s)| (SYNCHRONOUS & bit(s) == 0, s, i))
        .map(|(i, _)| i)
}

/// A signal pending for a process as a whole (Linux's `signal->shared_pending`): sent with
/// kill(2), `sigqueue`, by a child's end or a timer of the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shared {
    /// The signal.
    pub(crate) info: SigInfo,
    /// The thread chosen to take it for a handler when it was sent ([`Kernel::signal_target`]):
    /// `None` if every thread blocked it.
    pub(crate) target: Option<u32>,
}

/// What [`Kernel::post`] did with a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Posted {
    /// Ignored, or a standard signal pending already: nothing queued.
    Dropped,
    /// Queued, for its thread or its process.
    Queued,
    /// Queued, and its default action kills the process: a thread that does not block it takes
    /// it.
    Fatal,
    /// A stop signal whose default action was taken at once: the process stopped, or the
    /// signal was discarded (an orphaned process group) ([`crate::jobctl`]).
    Stopped,
}

/// Calls a handler never restarts (Linux's ERESTARTNOHAND): they return EINTR even under
/// `SA_RESTART` (System V IPC's waits among them: `do_semtimedop`, `do_msgsnd`, `do_msgrcv`).
const NEVER_RESTARTED: [i64; 14] = [
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_rt_sigsuspend,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_pause,
    libc::SYS_poll,
    libc::SYS_ppoll,
    libc::SYS_select,
    libc::SYS_pselect6,
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
];

/// What `siginfo` says beyond the signal number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SigInfo {
    /// The signal number.
    pub signo: i32,
    /// `si_code`: the fault's for a fault, `SI_TKILL` (-6) for a signal the guest sends itself,
    /// `SI_USER` (0) for one a system call raises (`SIGPIPE`).
    pub code: i32,
    /// `si_addr` for faults; for kill/tgkill, the sender's pid in the low half; `si_value` for
    /// a POSIX timer's signal (`SI_TIMER`).
    pub addr: u64,
    /// Sent by the process rather than raised by a fault: the siginfo then names the sender's pid
    /// and uid.
    pub from_kill: bool,
    /// The sender's pid (0: the first process), or the child's for `SIGCHLD`; the timer's id
    /// for `SI_TIMER`.
    pub sender: u32,
    /// `si_status` of a `SIGCHLD`: the exit code or the signal that killed the child;
    /// `si_overrun` for `SI_TIMER`.
    pub status: i32,
}

impl SigInfo {
    /// The siginfo of a fault: its signal, code and address.
    pub fn from_fault(f: &Fault) -> SigInfo {
        SigInfo { signo: f.signal, code: f.code, addr: f.addr, from_kill: false, sender: 0, status: 0 }
    }

    /// A signal process `sender` sent with kill(2) (`SI_USER`).
    pub(crate) fn user(signo: i32, sender: u32) -> SigInfo {
        SigInfo { signo, code: 0, addr: 0, from_kill: true, sender, status: 0 }
    }

    /// `SIGCHLD` for child `pid` that ended `how` (`CLD_EXITED` or `CLD_KILLED`).
    pub(crate) fn child(pid: u32, how: ProcessExit) -> SigInfo {
        let (code, status) = match how {
            ProcessExit::Code(c) => (1, c & 0xff),
            ProcessExit::Signal(s) => (2, s),
        };
        SigInfo { signo: SIGCHLD, code, addr: 0, from_kill: true, sender: pid, status }
    }

    /// Sent with `rt_sigqueueinfo`/`rt_tgsigqueueinfo` and a code of the sender's (`SI_QUEUE`
    /// ...): its `addr` is the `si_value` given.
    pub(crate) fn queued(&self) -> bool {
        self.from_kill && self.code < 0 && self.code != SI_TKILL
    }

    pub(crate) fn bytes(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        b[0..4].copy_from_slice(&self.signo.to_le_bytes());
        b[8..12].copy_from_slice(&self.code.to_le_bytes());
        if self.code == crate::timers::SI_TIMER {
            // _timer: the timer's id, its overrun count, sigev_value.
            b[16..20].copy_from_slice(&self.sender.to_le_bytes());
            b[20..24].copy_from_slice(&self.status.to_le_bytes());
            b[24..32].copy_from_slice(&self.addr.to_le_bytes());
        } else if self.from_kill {
            let sender = if self.sender == 0 { crate::process::PID } else { self.sender };
            b[16..20].copy_from_slice(&sender.to_le_bytes());
            b[20..24].copy_from_slice(&(crate::process::UID as u32).to_le_bytes());
            if self.queued() {
                // _rt: sigqueue's value.
                b[24..32].copy_from_slice(&self.addr.to_le_bytes());
            } else {
                b[24..28].copy_from_slice(&self.status.to_le_bytes());
            }
        } else {
            b[16..24].copy_from_slice(&self.addr.to_le_bytes());
        }
        b
    }
}

/// The general registers in `struct sigcontext` order (r8..r15, rdi, rsi, rbp, rbx, rdx, rax,
/// rcx, rsp, rip, eflags).
const SIGCONTEXT_REGS: [Reg; 18] = [
    Reg::R8,
    Reg::R9,
    Reg::R10,
    Reg::R11,
    Reg::R12,
    Reg::R13,
    Reg::R14,
    Reg::R15,
    Reg::RDI,
    Reg::RSI,
    Reg::RBP,
    Reg::RBX,
    Reg::RDX,
    Reg::RAX,
    Reg::RCX,
    Reg::RSP,
    Reg::RIP,
    Reg::EFLAGS,
];

/// Offsets in the frame (from its start, where the return address is).
const UC: u64 = 8;
const UC_STACK: u64 = UC + 16;
const UC_MCONTEXT: u64 = UC + 40;
const UC_SIGMASK: u64 = UC_MCONTEXT + 256;
const SIGINFO: u64 = UC_SIGMASK + 8 + 120; // the kernel's ucontext is padded to its full sigset area
const FRAME_SIZE: u64 = SIGINFO + 128;
const FPSTATE_SIZE: u64 = 512;

fn fxsave(m: &Machine) -> [u8; 512] {
    let mut b = [0u8; 512];
    b[0..2].copy_from_slice(&(m.reg(Reg::FPCW) as u16).to_le_bytes());
    b[2..4].copy_from_slice(&(m.reg(Reg::FPSW) as u16).to_le_bytes());
    // The abridged tag word: one bit per register, set when not empty.
    let full_tag = m.reg(Reg::FPTAG) as u16;
    let mut abridged = 0u8;
    for i in 0..8 {
        if (full_tag >> (2 * i)) & 3 != 3 {
            abridged |= 1 << i;
        }
    }
    b[4] = abridged;
    b[24..28].copy_from_slice(&(m.reg(Reg::MXCSR) as u32).to_le_bytes());
    b[28..32].copy_from_slice(&0xffffu32.to_le_bytes()); // MXCSR_MASK
    for (i, r) in ST_REGS.iter().enumerate() {
        let v = m.reg_bytes(*r);
        let n = v.len().min(10);
        b[32 + 16 * i..32 + 16 * i + n].copy_from_slice(&v[..n]);
    }
    for (i, r) in XMM_REGS.iter().enumerate() {
        let v = m.reg_bytes(*r);
        let n = v.len().min(16);
        b[160 + 16 * i..160 + 16 * i + n].copy_from_slice(&v[..n]);
    }
    b
}

fn fxrstor(m: &mut Machine, b: &[u8; 512]) {
    m.set_reg(Reg::FPCW, u64::from(u16::from_le_bytes([b[0], b[1]])));
    m.set_reg(Reg::FPSW, u64::from(u16::from_le_bytes([b[2], b[3]])));
    m.set_reg(Reg::MXCSR, u64::from(u32::from_le_bytes([b[24], b[25], b[26], b[27]])));
    for (i, r) in ST_REGS.iter().enumerate() {
        m.set_reg_bytes(*r, &b[32 + 16 * i..32 + 16 * i + 10]);
    }
    for (i, r) in XMM_REGS.iter().enumerate() {
        m.set_reg_bytes(*r, &b[160 + 16 * i..160 + 16 * i + 16]);
    }
}

impl Kernel {
    fn sigmask(&self) -> u64 {
        self.threads.get(&self.current).map(|t| t.sigmask).unwrap_or(0)
    }

    fn set_sigmask(&mut self, mask: u64) {
        // SIGKILL and SIGSTOP cannot be blocked.
        let mask = mask & !((1 << 8) | (1 << 18));
        let Some(t) = self.threads.get_mut(&self.current) else { return };
        let blocks_more = mask & !t.sigmask != 0;
        t.sigmask = mask;
        if blocks_more {
            self.retarget_shared(self.pid);
        }
    }

    /// The process's shared signals whose chosen thread no longer takes them (it blocked them
    /// since, or ended) go to another that does, woken for them (Linux's
    /// `retarget_shared_pending`).
    pub(crate) fn retarget_shared(&mut self, pid: u32) {
        let Some(q) = self.shared_pending.get(&pid) else { return };
        let stale: Vec<(usize, i32)> = q
            .iter()
            .enumerate()
            .filter(|(_, s)| s.target.is_some_and(|t| !self.accepts(t, pid, s.info.signo)))
            .map(|(i, s)| (i, s.info.signo))
            .collect();
        for (i, sig) in stale {
            let target = self.signal_target(pid, sig);
            if let Some(s) = self.shared_pending.get_mut(&pid).and_then(|q| q.get_mut(i)) {
                s.target = target;
            }
            if let Some(t) = target {
                self.wake_for_signal(t, sig);
            }
        }
    }

    pub(crate) fn rt_sigaction(&mut self, m: &mut Machine, sig: i32, act: u64, old: u64, size: u64) -> SysResult {
        if !(1..=64).contains(&sig) || size != 8 {
            return err(libc::EINVAL);
        }
        let s = sig as usize;
        let mut new = None;
        if act != 0 {
            if sig == 9 || sig == 19 {
                return err(libc::EINVAL);
            }
            let mut v = [0u64; 4];
            for (i, x) in v.iter_mut().enumerate() {
                *x = m.read_u64(act + 8 * i as u64)?;
            }
            new = Some(v);
        }
        if old != 0 {
            let mut b = [0u8; 32];
            for (i, v) in self.proc.sigactions[s].iter().enumerate() {
                b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
            }
            m.write(old, &b, false)?;
        }
        if let Some(v) = new {
            self.proc.sigactions[s] = v;
            if ignores(&v, sig) {
                // Linux's `do_sigaction`: a signal now ignored goes from every pending set of
                // the process, blocked or not.
                self.flush_signal(self.pid, sig);
            }
        }
        Ok(0)
    }

    pub(crate) fn rt_sigprocmask(&mut self, m: &mut Machine, how: i32, set: u64, old: u64, size: u64) -> SysResult {
        if size != 8 {
            return err(libc::EINVAL);
        }
        let prev = self.sigmask();
        if set != 0 {
            let s = m.read_u64(set)?;
            let mask = match how {
                0 => prev | s,
                1 => prev & !s,
                2 => s,
                _ => return err(libc::EINVAL),
            };
            self.set_sigmask(mask);
        }
        if old != 0 {
            m.write_u64(old, prev)?;
        }
        Ok(0)
    }

    fn on_altstack(&self, sp: u64) -> bool {
        let [ss_sp, ss_flags, ss_size] = self.altstack();
        ss_flags & SS_DISABLE == 0 && sp > ss_sp && sp <= ss_sp.wrapping_add(ss_size)
    }

    fn altstack(&self) -> [u64; 3] {
        self.threads.get(&self.current).map(|t| t.altstack).unwrap_or([0, SS_DISABLE, 0])
    }

    pub(crate) fn sigaltstack(&mut self, m: &mut Machine, ss: u64, old: u64) -> SysResult {
        let sp = m.reg(Reg::RSP);
        let on = self.on_altstack(sp);
        if old != 0 {
            let [ss_sp, ss_flags, ss_size] = self.altstack();
            let flags = if on { SS_ONSTACK } else { ss_flags & SS_DISABLE };
            let mut b = [0u8; 24];
            b[0..8].copy_from_slice(&ss_sp.to_le_bytes());
            b[8..12].copy_from_slice(&(flags as u32).to_le_bytes());
            b[16..24].copy_from_slice(&ss_size.to_le_bytes());
            m.write(old, &b, false)?;
        }
        if ss != 0 {
            if on {
                return err(libc::EPERM);
            }
            let ss_sp = m.read_u64(ss)?;
            let flags = u64::from(m.read_u32(ss + 8)?);
            let ss_size = m.read_u64(ss + 16)?;
            if flags & !(SS_DISABLE | (1 << 31)) != 0 {
                return err(libc::EINVAL);
            }
            if flags & SS_DISABLE == 0 && ss_size < 2048 {
                return err(libc::ENOMEM);
            }
            let cur = self.current;
            if let Some(t) = self.threads.get_mut(&cur) {
                t.altstack = if flags & SS_DISABLE != 0 { [0, SS_DISABLE, 0] } else { [ss_sp, 0, ss_size] };
            }
        }
        Ok(0)
    }

    /// kill(2) of the running process by itself (`code`: `SI_USER`): a signal to the process as
    /// a whole, pending in its shared set ([`Kernel::post`]). Returns the exit it causes, if
    /// any; a handled signal is delivered when the system call returns.
    pub(crate) fn kill(&mut self, sig: i32, code: i32) -> Result<Option<ProcessExit>, Errno> {
        self.kill_info(SigInfo { code, ..SigInfo::user(sig, self.pid) })
    }

    /// [`Kernel::kill`] with the whole siginfo given (`rt_sigqueueinfo`'s).
    pub(crate) fn kill_info(&mut self, info: SigInfo) -> Result<Option<ProcessExit>, Errno> {
        let sig = info.signo;
        if !(0..=64).contains(&sig) {
            return err(libc::EINVAL);
        }
        if sig == 0 {
            return Ok(None);
        }
        let posted = self.post(self.pid, None, info)?;
        Ok((posted == Posted::Fatal).then_some(ProcessExit::Signal(sig)))
    }

    /// tkill(2) and tgkill(2) to thread `tid` (`tgid`: the process the caller names, checked,
    /// if given).
    pub(crate) fn tkill(
        &mut self,
        m: &mut Machine,
        tgid: Option<u32>,
        tid: u32,
        sig: i32,
    ) -> Result<Option<ProcessExit>, Errno> {
        self.tkill_info(m, tgid, tid, SigInfo { code: SI_TKILL, ..SigInfo::user(sig, self.pid) })
    }

    /// [`Kernel::tkill`] with the whole siginfo given (`rt_tgsigqueueinfo`'s): a signal to that
    /// thread alone, pending for it until it unblocks it (Linux's `PIDTYPE_PID`), whichever
    /// process it belongs to.
    pub(crate) fn tkill_info(
        &mut self,
        m: &mut Machine,
        tgid: Option<u32>,
        tid: u32,
        info: SigInfo,
    ) -> Result<Option<ProcessExit>, Errno> {
        let sig = info.signo;
        if !(0..=64).contains(&sig) {
            return err(libc::EINVAL);
        }
        let Some(t) = self.threads.get(&tid) else { return err(libc::ESRCH) };
        let pid = t.pid;
        if tgid.is_some_and(|g| g != pid) {
            return err(libc::ESRCH);
        }
        if sig == 0 {
            return Ok(None);
        }
        let posted = self.post(pid, Some(tid), info)?;
        Ok(self.posted_end(m, pid, posted, sig))
    }

    /// The end a signal posted to process `pid` brings ([`Posted::Fatal`]): the running
    /// process's is returned to the caller; another process ends at once.
    fn posted_end(&mut self, m: &mut Machine, pid: u32, posted: Posted, sig: i32) -> Option<ProcessExit> {
        if posted != Posted::Fatal {
            return None;
        }
        if pid == self.pid {
            return Some(ProcessExit::Signal(sig));
        }
        if pid == crate::process::PID {
            // The first process's end is the run's (README: 128+N), not a zombie left behind
            // while the others run on into a false deadlock.
            self.first_killed = Some(ProcessExit::Signal(sig));
            return None;
        }
        self.end_process(m, pid, ProcessExit::Signal(sig));
        None
    }

    /// rt_sigqueueinfo(2) (`tid` None: `tgid, sig, uinfo`) and rt_tgsigqueueinfo(2): `sig` with
    /// the sender's `siginfo_t` (its code, pid and `si_value`) to process `tgid`, or to its
    /// thread `tid`. EPERM for a code the kernel keeps for itself (`>= 0`, or `SI_TKILL`) sent to
    /// another process, as Linux; ESRCH without such a process or thread; EAGAIN for a real-time
    /// signal beyond `RLIMIT_SIGPENDING`.
    pub(crate) fn sigqueueinfo(
        &mut self,
        m: &mut Machine,
        tgid: u32,
        tid: Option<u32>,
        sig: i32,
        uinfo: u64,
    ) -> Result<Option<ProcessExit>, Errno> {
        let mut b = [0u8; 128];
        m.read(uinfo, &mut b).map_err(|_| Errno(libc::EFAULT))?;
        let code = i32::from_le_bytes(b[8..12].try_into().unwrap_or_default());
        if (code >= 0 || code == SI_TKILL) && tgid != self.pid {
            return err(libc::EPERM);
        }
        if !(0..=64).contains(&sig) {
            return err(libc::EINVAL);
        }
        let info = SigInfo {
            signo: sig,
            code,
            addr: u64::from_le_bytes(b[24..32].try_into().unwrap_or_default()),
            from_kill: true,
            sender: u32::from_le_bytes(b[16..20].try_into().unwrap_or_default()),
            status: 0,
        };
        if let Some(tid) = tid {
            return self.tkill_info(m, Some(tgid), tid, info);
        }
        if tgid == self.pid {
            return self.kill_info(info);
        }
        if self.procs.get(&tgid).is_none_or(|p| p.ended.is_some()) {
            return err(libc::ESRCH);
        }
        if sig != 0 {
            let posted = self.post(tgid, None, info)?;
            self.posted_end(m, tgid, posted, sig);
        }
        Ok(None)
    }

    /// A signal a system call raises for the running thread (SIGPIPE for a write to a pipe no
    /// one reads; Linux's `send_sig`, to the thread): taken when the call returns
    /// ([`Kernel::deliver_pending`], which also carries out a default action that kills),
    /// unless ignored; a blocked one stays pending.
    pub(crate) fn raise(&mut self, sig: i32) {
        let (pid, tid) = (self.pid, self.current);
        let _ = self.post(pid, Some(tid), SigInfo::user(sig, pid));
    }

    /// The disposition of `sig` in process `pid` (`None`: no such process alive).
    pub(crate) fn action_of(&self, pid: u32, sig: i32) -> Option<[u64; 4]> {
        if pid == self.pid {
            return Some(self.proc.sigactions[sig as usize]);
        }
        let p = self.procs.get(&pid).filter(|p| p.ended.is_none())?;
        p.saved.as_ref().map(|s| s.sigactions[sig as usize])
    }

    /// Whether process `pid` reaps its children itself: `SIGCHLD` ignored, or `SA_NOCLDWAIT`.
    pub(crate) fn reaps_children(&self, pid: u32) -> bool {
        self.action_of(pid, SIGCHLD).is_some_and(|a| a[0] == SIG_IGN || a[1] & SA_NOCLDWAIT != 0)
    }

    /// Sends `info` to process `pid` as a whole (kill(2) from another process, `SIGCHLD`),
    /// running or not ([`Kernel::post`]). Returns the running process's end if the signal ends
    /// it; another process it ends ends at once.
    pub(crate) fn signal_process(&mut self, m: &mut Machine, pid: u32, info: SigInfo) -> Option<ProcessExit> {
        let sig = info.signo;
        let posted = self.post(pid, None, info).unwrap_or(Posted::Dropped);
        self.posted_end(m, pid, posted, sig)
    }

    /// Linux's `send_signal_locked` and `complete_signal`: `info` to thread `tid` of process
    /// `pid`, or (`None`) to the process as a whole.
    ///
    /// Dropped if the target does not block it and its action ignores it (`sig_ignored`: a
    /// blocked signal is kept whatever its action, which may change before it is unblocked; a
    /// process's target is its main thread), or if a standard signal of that number is pending
    /// there already (`legacy_queue`); a real-time one beyond `RLIMIT_SIGPENDING` is EAGAIN
    /// when sent by `sigqueue` (`SI_QUEUE` and other negative codes). Otherwise it is queued
    /// for the thread, or in the process's shared set with the thread chosen to take it
    /// ([`Kernel::signal_target`]), and that thread is woken if it waits in a call the signal
    /// interrupts. A thread-directed signal is never taken by another thread. If the chosen
    /// thread does not block it and its action is the default that kills, the process dies
    /// ([`Posted::Fatal`]: the caller ends it, or the thread taking it does).
    pub(crate) fn post(&mut self, pid: u32, tid: Option<u32>, info: SigInfo) -> Result<Posted, Errno> {
        let sig = info.signo;
        if !(1..=64).contains(&sig) {
            return Ok(Posted::Dropped);
        }
        let Some(action) = self.action_of(pid, sig) else { return Ok(Posted::Dropped) };
        if crate::jobctl::is_stop(sig) || sig == crate::jobctl::SIGCONT {
            self.prepare_job_signal(pid, sig);
        }
        let b = bit(sig);
        let target = tid.unwrap_or_else(|| self.main_thread(pid));
        let blocked = self.threads.get(&target).is_some_and(|t| t.sigmask & b != 0);
        if sig != libc::SIGKILL && !blocked && ignores(&action, sig) {
            return Ok(Posted::Dropped);
        }
        if tid.is_some_and(|t| !self.threads.contains_key(&t)) {
            return Ok(Posted::Dropped);
        }
        if sig < SIGRTMIN {
            let pending = match tid {
                Some(t) => self.threads.get(&t).is_some_and(|t| t.sigpending.iter().any(|s| s.signo == sig)),
                None => self.shared_pending.get(&pid).is_some_and(|q| q.iter().any(|s| s.info.signo == sig)),
            };
            if pending {
                return Ok(Posted::Dropped);
            }
        }
        if sig >= SIGRTMIN && info.from_kill && info.code < 0 && self.queued_signals() >= self.sigpending_limit(pid) {
            // Linux's `__sigqueue_alloc` over the limit: an RT signal from sigqueue fails, others
            // (kill's SI_USER, the kernel's) are still sent, without their siginfo (not modelled:
            // they keep it).
            return err(libc::EAGAIN);
        }
        let chosen = match tid {
            Some(t) => self.accepts(t, pid, sig).then_some(t),
            None => self.signal_target(pid, sig),
        };
        let stops = chosen.and_then(|t| self.threads.get(&t)).is_some_and(|t| t.sigmask & b == 0);
        if crate::jobctl::is_stop(sig) && action[0] == SIG_DFL && stops {
            // Its default action, taken as the thread chosen would take it (a stop signal
            // stops the whole process, whichever thread it was sent to).
            self.stop_process(pid, sig);
            return Ok(Posted::Stopped);
        }
        match tid {
            Some(t) => self.thread_mut(t).sigpending.push(info),
            None => self.shared_pending.entry(pid).or_default().push(Shared { info, target: chosen }),
        }
        // A signalfd of the process may read it now.
        self.io_ready(crate::signalfd::key(pid));
        let Some(t) = chosen else { return Ok(Posted::Queued) };
        self.wake_for_signal(t, sig);
        let real_blocked = self.threads.get(&t).is_some_and(|t| t.sigmask & b != 0);
        if sig == libc::SIGKILL || (!real_blocked && action[0] == SIG_DFL && !ignored_by_default(sig)) {
            return Ok(Posted::Fatal);
        }
        Ok(Posted::Queued)
    }

    /// Signals queued with a siginfo, all processes together (Linux counts them per user, and
    /// every guest process is the one user's).
    fn queued_signals(&self) -> u64 {
        let threads: usize = self.threads.values().map(|t| t.sigpending.len()).sum();
        let shared: usize = self.shared_pending.values().map(Vec::len).sum();
        (threads + shared) as u64
    }

    /// Process `pid`'s `RLIMIT_SIGPENDING` soft limit (Linux checks the receiver's).
    fn sigpending_limit(&self, pid: u32) -> u64 {
        if pid == self.pid {
            return self.proc.sigpending_limit.0;
        }
        let saved = self.procs.get(&pid).and_then(|p| p.saved.as_ref());
        saved.map_or(crate::process::SIGPENDING_LIMIT, |s| s.sigpending_limit.0)
    }

    /// The main thread of process `pid` (its pid), or its lowest-numbered thread if the main
    /// one has ended (or a thread other than the main one exec'ed).
    pub(crate) fn main_thread(&self, pid: u32) -> u32 {
        if self.threads.get(&pid).is_some_and(|t| t.pid == pid) {
            return pid;
        }
        self.threads.values().find(|t| t.pid == pid).map_or(pid, |t| t.tid)
    }

    /// Whether thread `tid` of process `pid` would take `sig` now: it does not block it, or
    /// waits for it in `sigtimedwait` (which unblocks what it waits for, as Linux does).
    fn accepts(&self, tid: u32, pid: u32, sig: i32) -> bool {
        self.threads.get(&tid).is_some_and(|t| {
            t.pid == pid
                && (sig == libc::SIGKILL || (t.sigmask & !if t.in_call { t.sigwait } else { 0 }) & bit(sig) == 0)
        })
    }

    /// The thread of process `pid` that takes a signal sent to the process (Linux's
    /// `complete_signal`): the main thread if it takes it, else the lowest-numbered one that
    /// does (Linux goes round from the thread it chose last); `None` if every thread blocks it
    /// (then the first to unblock it, or a `sigwait` or signalfd, takes it).
    fn signal_target(&self, pid: u32, sig: i32) -> Option<u32> {
        let main = self.main_thread(pid);
        if self.accepts(main, pid, sig) {
            return Some(main);
        }
        self.threads.values().filter(|t| t.pid == pid).map(|t| t.tid).find(|&t| self.accepts(t, pid, sig))
    }

    /// Whether thread `tid` of process `pid` may take the shared signal `s` for its handler:
    /// it was chosen for it, or no thread was (every one blocked it then), or the one chosen no
    /// longer takes it (it blocked it since or ended: Linux's `retarget_shared_pending`).
    fn may_take(&self, tid: u32, pid: u32, s: &Shared) -> bool {
        s.target.is_none_or(|t| t == tid || !self.accepts(t, pid, s.info.signo))
    }

    /// The signals pending for thread `tid` (bit N-1 for signal N): its own and its process's
    /// (`for_handler`: only the shared ones it may take for a handler, [`Kernel::may_take`]).
    pub(crate) fn pending_bits(&self, tid: u32, for_handler: bool) -> u64 {
        let Some(t) = self.threads.get(&tid) else { return 0 };
        let own = t.sigpending.iter().fold(0, |a, s| a | bit(s.signo));
        let shared = self.shared_pending.get(&t.pid).map_or(0, |q| {
            q.iter().filter(|s| !for_handler || self.may_take(tid, t.pid, s)).fold(0, |a, s| a | bit(s.info.signo))
        });
        own | shared
    }

    /// Linux's `dequeue_signal` for thread `tid`: the first of the signals of `allowed`
    /// pending for the thread itself, else of its process's shared ones (`for_handler`: only
    /// those it may take for a handler); the first in Linux's `next_signal` order (a
    /// synchronous fault's signal first, then the lowest number; a real-time signal's
    /// instances in the order sent).
    pub(crate) fn dequeue_signal(&mut self, tid: u32, allowed: u64, for_handler: bool) -> Option<SigInfo> {
        let t = self.threads.get_mut(&tid)?;
        if let Some(i) = next_signal(t.sigpending.iter().map(|s| s.signo), allowed) {
            return Some(t.sigpending.remove(i));
        }
        let pid = t.pid;
        let q = self.shared_pending.get(&pid)?;
        let i = next_signal(
            q.iter().map(|s| {
                let take = allowed & bit(s.info.signo) != 0 && (!for_handler || self.may_take(tid, pid, s));
                if take {
                    s.info.signo
                } else {
                    0
                }
            }),
            allowed,
        )?;
        let q = self.shared_pending.get_mut(&pid)?;
        let s = q.remove(i);
        if q.is_empty() {
            self.shared_pending.remove(&pid);
        }
        Some(s.info)
    }

    /// Drops every pending instance of `sig` of process `pid`, its threads' and its shared
    /// ones (Linux's `flush_sigqueue_mask`).
    pub(crate) fn flush_signal(&mut self, pid: u32, sig: i32) {
        let mut gone = Vec::new();
        for t in self.threads.values_mut().filter(|t| t.pid == pid) {
            gone.extend(t.sigpending.iter().filter(|s| s.signo == sig).copied());
            t.sigpending.retain(|s| s.signo != sig);
        }
        if let Some(q) = self.shared_pending.get_mut(&pid) {
            gone.extend(q.iter().filter(|s| s.info.signo == sig).map(|s| s.info));
            q.retain(|s| s.info.signo != sig);
            if q.is_empty() {
                self.shared_pending.remove(&pid);
            }
        }
        // A POSIX timer's signal that goes may be queued again.
        if pid == self.pid {
            for mut info in gone {
                self.timer_signal_taken(&mut info);
            }
        }
    }

    /// Whether `sig` is a stop signal whose action in the running process is the default.
    fn default_stop(&self, sig: i32) -> bool {
        crate::jobctl::is_stop(sig) && self.proc.sigactions[sig as usize][0] == SIG_DFL
    }

    /// Whether the running process ignores `sig` (`SIG_IGN`, or a default action of ignoring).
    fn ignored(&self, sig: i32) -> bool {
        ignores(&self.proc.sigactions[sig as usize], sig)
    }

    /// Whether a signal the running thread's mask lets through is pending for its handler.
    /// Ignored ones among them are dropped first: Linux takes and drops them, and a call that
    /// waited for a signal (`rt_sigsuspend`, `pause`, `ppoll` ...) is made again.
    fn signal_deliverable(&mut self) -> bool {
        let cur = self.current;
        let mask = self.sigmask();
        loop {
            let ready = self.pending_bits(cur, true) & !mask;
            let Some(s) = (1..=64).find(|&s| ready & bit(s) != 0 && self.ignored(s)) else { return ready != 0 };
            // The running thread takes them (its own, then its process's) and drops them.
            while let Some(mut info) = self.dequeue_signal(cur, bit(s), true) {
                self.timer_signal_taken(&mut info);
            }
        }
    }

    /// Wakes thread `tid` for `sig` if it waits in a call the signal interrupts and does not
    /// block it (or waits for it in `sigtimedwait`): a call on descriptors, `wait4`, `pause`,
    /// `rt_sigsuspend` or `rt_sigtimedwait`, a futex wait or a sleep.
    fn wake_for_signal(&mut self, tid: u32, sig: i32) {
        let b = bit(sig);
        let Some(t) = self.threads.get_mut(&tid) else { return };
        if t.sigmask & b != 0 && !(t.in_call && t.sigwait & b != 0) {
            return;
        }
        match t.wait {
            Some(Wait::Io { .. }) if t.in_call => {}
            // A PI wait is made again after the handler (Linux's -ERESTARTNOINTR), unless it was
            // moved to its PI futex by FUTEX_CMP_REQUEUE_PI (then EAGAIN).
            Some(Wait::Futex { bitset: crate::pifutex::PI, .. }) => {
                t.interrupted = Some(Interrupted::FutexPi { requeued: t.pi_wait == crate::pifutex::PiWait::Requeued })
            }
            Some(Wait::Futex { deadline, .. }) => {
                t.interrupted = Some(Interrupted::Futex { timed: deadline.is_some(), deadline })
            }
            // futex_waitv's deadline is absolute: made again under SA_RESTART (-ERESTARTSYS),
            // as an untimed wait is.
            Some(Wait::FutexV { .. }) => t.interrupted = Some(Interrupted::Futex { timed: false, deadline: None }),
            Some(Wait::Sleep { deadline }) => t.interrupted = Some(Interrupted::Sleep { deadline }),
            Some(Wait::CpuSleep) => match self.timers.sleep_of(tid) {
                Some(s) => t.interrupted = Some(Interrupted::CpuSleep { clock: s.clock, until: s.until }),
                None => return,
            },
            _ => return,
        }
        self.set_wait(tid, None, None);
    }

    /// A signal a timer (or `--listen`'s bridge) sends to process `pid`, or to its thread
    /// `tid` ([`Kernel::post`]); a default action that kills is carried out by the thread that
    /// takes it. Returns whether it was made pending.
    pub(crate) fn send_signal(&mut self, pid: u32, tid: Option<u32>, info: SigInfo) -> bool {
        let tid = tid.filter(|t| self.threads.get(t).is_some_and(|t| t.pid == pid));
        matches!(self.post(pid, tid, info), Ok(Posted::Queued | Posted::Fatal))
    }

    /// Delivers to the running thread the signals pending for it that it does not block
    /// (another process's, or one that arrived while blocked), when it has just been scheduled or
    /// has just made a system call. Ignored ones are dropped on the way, as Linux's `get_signal`
    /// does. If it was blocked in a call, the call returns EINTR, or is made again after the
    /// handler under `SA_RESTART` (not the calls Linux never restarts). Like Linux, a frame is
    /// built for each signal still deliverable under the mask the previous handler runs with
    /// (the last one's handler runs first). Returns how the process ends if a handler cannot be
    /// run.
    pub fn deliver_pending(&mut self, m: &mut Machine) -> Result<(), ProcessExit> {
        let cur = self.current;
        let Some(t) = self.threads.get_mut(&cur) else { return Ok(()) };
        let in_call = std::mem::take(&mut t.in_call);
        let interrupted = t.interrupted.take();
        if t.sigpending.is_empty() && interrupted.is_none() && !self.shared_pending.contains_key(&t.pid) {
            return Ok(());
        }
        // What `sigtimedwait` waits for is taken by its call, not by a handler.
        let mask = t.sigmask | if in_call { t.sigwait } else { 0 };
        // A call parked at its `syscall` (in_call) is made again whatever happens here: if it
        // blocks again it is marked again; if it completes, nothing must take it for parked.
        let mut dropped = false;
        let found = loop {
            match self.dequeue_signal(cur, !mask, true) {
                Some(mut info) if self.ignored(info.signo) => {
                    // Its handler went since it was sent (or it was blocked): dropped.
                    self.timer_signal_taken(&mut info);
                    dropped = true;
                }
                Some(info) if self.default_stop(info.signo) => {
                    // A stop signal taken for its default action: the process stops (its
                    // call, if it was in one, is made again when it is continued) or, in an
                    // orphaned process group, the signal is dropped.
                    dropped = true;
                    if self.stop_process(self.pid, info.signo) {
                        break None;
                    }
                }
                found => break found,
            }
        };
        let Some(info) = found else {
            if dropped {
                if let Some(old) = self.threads.get_mut(&cur).and_then(|t| t.saved_mask.take()) {
                    self.set_sigmask(old);
                }
            }
            if interrupted.is_some() {
                // Nothing to deliver after all: the wait is made again, a sleep or a timed
                // futex wait for the time it had left (Linux's -ERESTART_RESTARTBLOCK without a
                // handler: `hrtimer_nanosleep_restart`, `futex_wait_restart`).
                let left = match interrupted {
                    Some(Interrupted::Sleep { deadline }) => Some(deadline),
                    Some(Interrupted::Futex { deadline, .. }) => deadline,
                    _ => None,
                };
                if let Some(t) = self.threads.get_mut(&cur) {
                    t.restart_deadline = left;
                }
                Self::restart_call(m);
            }
            return Ok(());
        };
        // A handler runs: a call parked for its restart block starts afresh after it.
        if let Some(t) = self.threads.get_mut(&cur) {
            t.restart_deadline = None;
        }
        let flags = self.proc.sigactions[info.signo as usize][1];
        let restart = flags & SA_RESTART != 0;
        if in_call {
            let nr = m.reg(Reg::RAX) as i64;
            // A call on descriptors with a timeout of its own is never restarted: on Linux only
            // sockets with `SO_RCVTIMEO`/`SO_SNDTIMEO` have one outside the calls listed
            // (`sock_intr_errno` gives -EINTR for a finite timeout, -ERESTARTSYS otherwise).
            // (A message queue's timeout is absolute: Linux's -ERESTARTSYS makes it again.)
            let absolute = matches!(nr, libc::SYS_mq_timedsend | libc::SYS_mq_timedreceive);
            let timed = !absolute && self.threads.get(&cur).is_some_and(|t| t.io_deadline.is_some());
            if !restart || timed || NEVER_RESTARTED.contains(&nr) {
                // A `semop` completed for the thread while it waited returns that instead.
                let done = self.sem_interrupted(cur);
                m.set_reg(Reg::RAX, done.unwrap_or((-(libc::EINTR as i64)) as u64));
                m.set_reg(Reg::RIP, m.pc() + 2);
                if let Some(t) = self.threads.get_mut(&cur) {
                    t.io_deadline = None;
                    t.sigwait = 0;
                }
            }
        }
        match interrupted {
            Some(Interrupted::FutexPi { requeued: false }) => Self::restart_call(m),
            Some(Interrupted::FutexPi { requeued: true }) => m.set_reg(Reg::RAX, (-(libc::EAGAIN as i64)) as u64),
            // Linux's classic futex wait with a timeout saves a restart block
            // (-ERESTART_RESTARTBLOCK: EINTR when a handler runs, whatever SA_RESTART says);
            // futex2's `futex_wait` returns -ERESTARTSYS with or without one, its timeout being
            // absolute (kernel/futex/syscalls.c calls `__futex_wait` directly).
            Some(Interrupted::Futex { timed, .. }) if restart && (!timed || m.reg(Reg::RAX) == SYS_FUTEX_WAIT) => {
                Self::restart_call(m)
            }
            Some(Interrupted::Futex { .. }) => m.set_reg(Reg::RAX, (-(libc::EINTR as i64)) as u64),
            Some(Interrupted::Sleep { deadline }) => {
                let nr = m.reg(Reg::RAX) as i64;
                let rem = match nr {
                    libc::SYS_nanosleep => m.reg(Reg::RSI),
                    libc::SYS_clock_nanosleep if m.reg(Reg::RSI) & 1 == 0 => m.reg(Reg::R10),
                    _ => 0,
                };
                let left = deadline.saturating_sub(self.now_ns(m));
                // Linux returns EFAULT if `rem` cannot be written; the handler runs all the same.
                let r =
                    if rem != 0 && Self::write_timespec(m, rem, left).is_err() { libc::EFAULT } else { libc::EINTR };
                m.set_reg(Reg::RAX, (-(r as i64)) as u64);
            }
            Some(Interrupted::CpuSleep { clock, until }) => {
                let now = match clock {
                    crate::time::CpuClock::Process(pid) => self.process_cpu_ns(m, pid),
                    crate::time::CpuClock::Thread(tid) => self.thread_cpu_ns(m, tid),
                };
                // `do_cpu_nanosleep`: a clock that got there (or is gone) means it fired: 0.
                // Otherwise EINTR, and for a relative sleep the CPU time left in `rem`
                // (an absolute one returns -ERESTARTNOHAND, which writes nothing).
                let r = match now {
                    Some(now) if now < until => {
                        let rem = if m.reg(Reg::RSI) & 1 == 0 { m.reg(Reg::R10) } else { 0 };
                        if rem != 0 && Self::write_timespec(m, rem, until - now).is_err() {
                            libc::EFAULT
                        } else {
                            libc::EINTR
                        }
                    }
                    _ => 0,
                };
                m.set_reg(Reg::RAX, (-(r as i64)) as u64);
            }
            None => {}
        }
        self.deliver(m, info, false)?;
        // Linux's exit to user mode goes round while a signal is pending and unblocked.
        loop {
            let mask = self.sigmask();
            let Some(mut info) = self.dequeue_signal(cur, !mask, true) else { return Ok(()) };
            if self.ignored(info.signo) {
                self.timer_signal_taken(&mut info);
                continue;
            }
            if self.default_stop(info.signo) {
                if self.stop_process(self.pid, info.signo) {
                    return Ok(());
                }
                continue;
            }
            self.deliver(m, info, false)?;
        }
    }

    /// The running thread's wait, parked past its `syscall` with RAX its number, is made again.
    fn restart_call(m: &mut Machine) {
        m.set_reg(Reg::RIP, m.pc().wrapping_sub(2));
    }

    /// rt_sigsuspend(2): waits with the mask `set` until a signal it lets through is delivered;
    /// returns EINTR, the mask from before the call restored when the handler returns.
    pub(crate) fn rt_sigsuspend(&mut self, m: &mut Machine, set: u64, size: u64) -> SysResult {
        if size != 8 {
            return err(libc::EINVAL);
        }
        let new = m.read_u64(set)?;
        let prev = self.sigmask();
        let cur = self.current;
        let t = self.thread_mut(cur);
        // Made again after a wake that brought no signal: the first call's mask is the one kept.
        t.saved_mask.get_or_insert(prev);
        self.set_sigmask(new);
        if self.signal_deliverable() {
            return err(libc::EINTR);
        }
        err(crate::RESTART)
    }

    /// pause(2): waits until a signal is delivered; returns EINTR (never restarted).
    pub(crate) fn pause(&mut self) -> SysResult {
        if self.signal_deliverable() {
            return err(libc::EINTR);
        }
        err(crate::RESTART)
    }

    /// rt_sigpending(2): the signals pending for the running thread or its process that it
    /// blocks (Linux's `do_sigpending`).
    pub(crate) fn rt_sigpending(&mut self, m: &mut Machine, set: u64, size: u64) -> SysResult {
        if size > 8 {
            return err(libc::EINVAL);
        }
        let bits = self.pending_bits(self.current, false) & self.sigmask();
        m.write(set, &bits.to_le_bytes()[..size as usize], false)?;
        Ok(0)
    }

    /// rt_sigtimedwait(2) (sigwaitinfo, sigtimedwait, sigwait): takes a signal of `set` pending
    /// for the running thread or its process, blocked or not, and returns its number with its
    /// siginfo; waits for one until `timeout` (a `struct timespec`, 0: forever), then EAGAIN.
    /// Another signal interrupts the wait with EINTR (never restarted).
    pub(crate) fn rt_sigtimedwait(
        &mut self,
        m: &mut Machine,
        set: u64,
        info: u64,
        timeout: u64,
        size: u64,
    ) -> SysResult {
        if size != 8 {
            return err(libc::EINVAL);
        }
        let want = m.read_u64(set)? & !((1 << 8) | (1 << 18));
        let cur = self.current;
        if let Some(mut si) = self.dequeue_signal(cur, want, false) {
            self.thread_mut(cur).sigwait = 0;
            self.timer_signal_taken(&mut si);
            if info != 0 {
                m.write(info, &si.bytes(), false)?;
            }
            return Ok(si.signo as u64);
        }
        let ns = if timeout == 0 { None } else { Some(Self::read_timespec(m, timeout)?) };
        if self.io_deadline(m, ns) {
            self.thread_mut(cur).sigwait = 0;
            return err(libc::EAGAIN);
        }
        self.thread_mut(cur).sigwait = want;
        err(crate::RESTART)
    }

    /// Installs `ppoll`'s, `pselect6`'s or `epoll_pwait`'s signal mask (the 8-byte set at
    /// `set`, 0: none) for the call's duration, as Linux does atomically with the wait: the
    /// old one is kept for the frame of a signal that interrupts the call, or restored when it
    /// returns ([`Kernel::call_mask_done`]). EINTR at once if a pending signal gets through.
    pub(crate) fn call_mask(&mut self, m: &Machine, set: u64, size: u64) -> Result<(), Errno> {
        if set == 0 {
            return Ok(());
        }
        if size != 8 {
            return err(libc::EINVAL);
        }
        let new = m.read_u64(set)?;
        let prev = self.sigmask();
        let cur = self.current;
        // Made again after a wake: the first call's mask is the one kept.
        self.thread_mut(cur).saved_mask.get_or_insert(prev);
        self.set_sigmask(new);
        if self.signal_deliverable() {
            return err(libc::EINTR);
        }
        Ok(())
    }

    /// The call that installed a mask ([`Kernel::call_mask`]) returned `res`: unless a signal
    /// interrupts it (EINTR, its handler's frame restores the mask), the old mask comes back.
    pub(crate) fn call_mask_done(&mut self, res: &SysResult) {
        if matches!(res, Err(Errno(e)) if *e == libc::EINTR || *e == crate::RESTART) {
            return;
        }
        let cur = self.current;
        if let Some(old) = self.threads.get_mut(&cur).and_then(|t| t.saved_mask.take()) {
            self.set_sigmask(old);
        }
    }

    /// How many times in a row (this one included) the same thread has taken fault `f` at the
    /// same instruction with the same registers, with no system call but `rt_sigreturn` in
    /// between: a handler that returns to the faulting instruction without changing anything
    /// makes the machine loop through faults forever, each costing much host time but few guest
    /// instructions, so `--max-instructions` would take hours to end
    /// it. The caller decides when that is a hang.
    pub fn fault_repeats(&mut self, m: &Machine, f: &Fault) -> u32 {
        let mut key = [0u64; 21];
        key[0] = u64::from(self.current);
        key[1] = f.signal as u64;
        key[2] = f.addr;
        for (k, r) in key[3..].iter_mut().zip(SIGCONTEXT_REGS) {
            *k = m.reg(r);
        }
        let (last, n) = &mut self.proc.fault_loop;
        *n = if *last == key { n.saturating_add(1) } else { 1 };
        *last = key;
        *n
    }

    /// Delivers `info` to the running thread: runs its handler, or returns how the process ends
    /// (default action, or a blocked or ignored synchronous fault, which Linux forces).
    pub fn deliver(&mut self, m: &mut Machine, mut info: SigInfo, synchronous: bool) -> Result<(), ProcessExit> {
        self.timer_signal_taken(&mut info);
        let sig = info.signo;
        let [handler, flags, restorer, mask] = self.proc.sigactions[sig as usize];
        let blocked = self.sigmask() & (1 << (sig - 1)) != 0;
        if handler == SIG_DFL || (synchronous && (handler == SIG_IGN || blocked)) {
            return Err(ProcessExit::Signal(sig));
        }
        if handler == SIG_IGN {
            return Ok(());
        }
        if flags & SA_RESTORER == 0 {
            // x86-64 Linux has no vDSO return trampoline for signals: without a restorer the
            // handler cannot return. glibc always sets one.
            return Err(ProcessExit::Signal(sig));
        }
        let sp = m.reg(Reg::RSP);
        let [ss_sp, ss_flags, ss_size] = self.altstack();
        let use_alt = flags & SA_ONSTACK != 0 && ss_flags & SS_DISABLE == 0 && !self.on_altstack(sp);
        let top = if use_alt { ss_sp.wrapping_add(ss_size) } else { sp.wrapping_sub(128) };
        let fp = (top.wrapping_sub(FPSTATE_SIZE)) & !63;
        let frame = ((fp.wrapping_sub(FRAME_SIZE)) & !15).wrapping_sub(8);
        let cur_mask = self.sigmask();
        // After sigsuspend, the frame holds the mask from before its call, restored on return.
        let cur = self.current;
        let old_mask = self.threads.get_mut(&cur).and_then(|t| t.saved_mask.take()).unwrap_or(cur_mask);
        let mut b = vec![0u8; (FRAME_SIZE) as usize];
        let put =
            |b: &mut Vec<u8>, off: u64, v: u64| b[off as usize..off as usize + 8].copy_from_slice(&v.to_le_bytes());
        put(&mut b, 0, restorer);
        put(&mut b, UC_STACK, ss_sp);
        b[(UC_STACK + 8) as usize..(UC_STACK + 12) as usize].copy_from_slice(
            &((if self.on_altstack(sp) { SS_ONSTACK } else { ss_flags & SS_DISABLE }) as u32).to_le_bytes(),
        );
        put(&mut b, UC_STACK + 16, ss_size);
        for (i, r) in SIGCONTEXT_REGS.iter().enumerate() {
            put(&mut b, UC_MCONTEXT + 8 * i as u64, m.reg(*r));
        }
        // cs, gs, fs, ss selectors as a user-mode x86-64 process has them.
        b[(UC_MCONTEXT + 144) as usize..(UC_MCONTEXT + 146) as usize].copy_from_slice(&0x33u16.to_le_bytes());
        b[(UC_MCONTEXT + 150) as usize..(UC_MCONTEXT + 152) as usize].copy_from_slice(&0x2bu16.to_le_bytes());
        let trapno: u64 = match sig {
            11 | 7 => 14,
            8 => 0,
            4 => 6,
            5 => 3,
            _ => 0,
        };
        put(&mut b, UC_MCONTEXT + 160, if synchronous { trapno } else { 0 });
        put(&mut b, UC_MCONTEXT + 168, old_mask);
        put(&mut b, UC_MCONTEXT + 176, if sig == 11 || sig == 7 { info.addr } else { 0 });
        put(&mut b, UC_MCONTEXT + 184, fp);
        put(&mut b, UC_SIGMASK, old_mask);
        b[SIGINFO as usize..(SIGINFO + 128) as usize].copy_from_slice(&info.bytes());
        let fpstate = fxsave(m);
        if m.write(fp, &fpstate, false).is_err() || m.write(frame, &b, false).is_err() {
            // The frame cannot be written (stack overflow without an alternate stack): Linux
            // kills the process with SIGSEGV.
            return Err(ProcessExit::Signal(11));
        }
        let mut new_mask = cur_mask | mask;
        if flags & SA_NODEFER == 0 {
            new_mask |= 1 << (sig - 1);
        }
        self.set_sigmask(new_mask);
        if flags & SA_RESETHAND != 0 {
            self.proc.sigactions[sig as usize] = [SIG_DFL, 0, 0, 0];
        }
        m.set_reg(Reg::RSP, frame);
        m.set_reg(Reg::RIP, handler);
        m.set_reg(Reg::RDI, sig as u64);
        m.set_reg(Reg::RSI, frame + SIGINFO);
        m.set_reg(Reg::RDX, frame + UC);
        m.set_reg(Reg::RAX, 0);
        // The direction flag is clear on handler entry (ABI).
        let fl = m.reg(Reg::EFLAGS) & !(1 << 10);
        m.set_reg(Reg::EFLAGS, fl);
        let _ = flags & SA_SIGINFO;
        Ok(())
    }

    /// rt_sigreturn: RSP points just past the popped return address, at the ucontext.
    pub(crate) fn rt_sigreturn(&mut self, m: &mut Machine) -> Result<(), ProcessExit> {
        let frame = m.reg(Reg::RSP).wrapping_sub(8);
        let mut b = vec![0u8; FRAME_SIZE as usize];
        if m.read(frame, &mut b).is_err() {
            return Err(ProcessExit::Signal(11));
        }
        let get = |off: u64| u64::from_le_bytes(b[off as usize..off as usize + 8].try_into().expect("8 bytes"));
        let fp = get(UC_MCONTEXT + 184);
        if fp != 0 {
            let mut f = [0u8; 512];
            if m.read(fp, &mut f).is_ok() {
                fxrstor(m, &f);
            }
        }
        for (i, r) in SIGCONTEXT_REGS.iter().enumerate() {
            let v = get(UC_MCONTEXT + 8 * i as u64);
            // Only the arithmetic, direction, trap-free flags may be changed by the handler.
            let v = if *r == Reg::EFLAGS { (m.reg(Reg::EFLAGS) & !0x4_0dd5) | (v & 0x4_0dd5) } else { v };
            m.set_reg(*r, v);
        }
        self.set_sigmask(get(UC_SIGMASK));
        Ok(())
    }
}
