//! Processes: `fork`, `vfork` and `clone` without `CLONE_VM`, `exit_group` of one process,
//! `wait4`/`waitid`, `kill` between processes, process groups and sessions as far as shells
//! need them.
//!
//! Every process runs in the one machine under the one seeded scheduler: its threads are
//! threads like any other, and a switch between processes is a scheduling decision like any
//! other. The running process's state lives where a single process keeps it (the kernel's
//! descriptor table, memory layout, working directory, umask and signal actions; the machine's
//! address space); every other process keeps it in a [`Saved`], exchanged at a switch
//! ([`Kernel::switch_process`]). Pids and tids share one number space, in creation order: the
//! first process is 1000, a child of a fork gets the next number.
//!
//! What a child gets, as on Linux: a copy of the address space (private memory copied, shared
//! and PM mappings shared, so the PM device sees one line state for both), the descriptor table
//! duplicated over the same open file descriptions (offsets, pipes and sockets shared), signal
//! actions, mask and alternate stack, RAX = 0. `vfork` is a fork whose parent waits until the
//! child exits or execs ([`crate::execve`]). The run ends when the first process ends, whatever its
//! children do (a command's end, as a shell sees it); a child that ends becomes a zombie until
//! its parent waits for it. A blocking wait is a call on descriptors waiting on its children's
//! key ([`crate::thread::Wait::Io`], restarted when a child ends), so a wait no child can end is
//! part of a deadlock like any other block. A child's end sends its parent `SIGCHLD` (a parent
//! that ignores it does not keep the child to reap); a signal sent to another process takes its
//! default action, is ignored, or is made pending for its handler ([`crate::signal`]).

use std::collections::BTreeMap;

use emu::{AddressSpace, Machine, Reg};

use crate::fd::FdTable;
use crate::mem::MemLayout;
use crate::process::{ProcessExit, PID};
use crate::thread::{KThread, Wait};
use crate::{err, Errno, Kernel, SysResult};

/// Readiness key of "a child of this process ended" (the pid in the low bits): waits block on
/// it. Far above the keys of pipes and sockets, which count up from 1.
const CHILD_KEY: u64 = 1 << 62;
/// Readiness key of "this vfork child ended": its parent waits on it.
pub(crate) const VFORK_KEY: u64 = 1 << 61;

const CLONE_VFORK: u64 = 0x4000;
const CLONE_SETTLS: u64 = 0x80000;
const CLONE_PARENT_SETTID: u64 = 0x10_0000;
const CLONE_CHILD_CLEARTID: u64 = 0x20_0000;
const CLONE_CHILD_SETTID: u64 = 0x100_0000;
/// What a fork may ask for besides the exit signal in the low byte.
const FORK_FLAGS: u64 = CLONE_VFORK | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID | CLONE_CHILD_SETTID;

const WNOHANG: u64 = 1;
const WEXITED: u64 = 4;
const WNOWAIT: u64 = 0x0100_0000;
const SIGCHLD: i32 = 17;

/// The state of a process that is not running, exchanged with the kernel's and the machine's at
/// a switch.
pub(crate) struct Saved {
    /// `None` only in a snapshot's copy of the kernel, until the machine's restore gives it
    /// ([`Kernel::give_address_spaces`]).
    pub(crate) space: Option<AddressSpace>,
    pub(crate) fds: FdTable,
    mm: MemLayout,
    cwd: Option<String>,
    umask: u32,
    pub(crate) sigactions: [[u64; 4]; 65],
    fs_base: u64,
    exe: Option<String>,
}

/// A process.
pub(crate) struct Proc {
    /// Its parent (1, outside the machine, for the first process and for orphans).
    pub(crate) ppid: u32,
    /// Its process group.
    pub(crate) pgid: u32,
    /// Its session.
    pub(crate) sid: u32,
    /// How it ended: a zombie until its parent waits for it.
    pub(crate) ended: Option<ProcessExit>,
    /// Its state while another process runs.
    pub(crate) saved: Option<Saved>,
}

impl Proc {
    /// The first process: its own group and session leader, parent 1.
    pub(crate) fn first() -> Proc {
        Proc { ppid: 1, pgid: PID, sid: PID, ended: None, saved: None }
    }

    /// A copy of a process without its saved state (a snapshot's copy fills it in).
    pub(crate) fn copy_running(&self) -> Proc {
        Proc { ppid: self.ppid, pgid: self.pgid, sid: self.sid, ended: self.ended, saved: None }
    }
}

impl Saved {
    /// A copy for a snapshot of the kernel, with the descriptor table `fds` (copied by the
    /// caller over the other processes' copies) and no address space yet.
    pub(crate) fn copy(&self, fds: FdTable) -> Saved {
        Saved {
            space: None,
            fds,
            mm: self.mm.clone(),
            cwd: self.cwd.clone(),
            umask: self.umask,
            sigactions: self.sigactions,
            fs_base: self.fs_base,
            exe: self.exe.clone(),
        }
    }
}

/// The status word `wait4` reports, as Linux encodes it.
fn status_word(e: ProcessExit) -> u32 {
    match e {
        ProcessExit::Code(c) => ((c as u32) & 0xff) << 8,
        ProcessExit::Signal(s) => (s as u32) & 0x7f,
    }
}

impl Kernel {
    /// The running process's id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The process thread `tid` belongs to.
    pub fn pid_of(&self, tid: u32) -> u32 {
        self.threads.get(&tid).map_or(self.pid, |t| t.pid)
    }

    /// Processes alive or not yet waited for.
    pub fn process_count(&self) -> usize {
        self.procs.len()
    }

    /// fork(2), vfork(2) and clone(2) without `CLONE_VM`: `flags, stack, parent_tid, child_tid,
    /// tls` as clone takes them. Returns the child's pid; the child returns 0.
    /// `Ok(None)`: the parent of a vfork blocked (its result, the child's pid, is set).
    pub(crate) fn fork(
        &mut self,
        m: &mut Machine,
        flags: u64,
        stack: u64,
        ptid: u64,
        ctid: u64,
        tls: u64,
    ) -> Result<Option<u64>, Errno> {
        if flags & !(FORK_FLAGS | 0xff) != 0 {
            self.note_named(m, 56, "clone with flags a fork does not take (CLONE_FILES, CLONE_FS, CLONE_SIGHAND ...)");
            return err(libc::EINVAL);
        }
        let child = self.new_tid()?;
        // Every slot of the machine's physical space taken: as Linux at its process limit.
        let mut space = m.fork_address_space().map_err(|_| Errno(libc::ENOMEM))?.ok_or(Errno(libc::EAGAIN))?;
        let mut started = || -> Result<(), Errno> {
            if flags & CLONE_PARENT_SETTID != 0 {
                m.write(ptid, &child.to_le_bytes(), false)?;
            }
            if flags & CLONE_CHILD_SETTID != 0 {
                // Into the child's memory: its address space is the machine's for a moment.
                m.swap_address_space(&mut space);
                let wrote = m.write(ctid, &child.to_le_bytes(), false);
                m.swap_address_space(&mut space);
                wrote?;
            }
            crate::thread::spawn_child(m, child, flags, stack, tls)
        };
        if let Err(e) = started() {
            m.release_address_space(space);
            return Err(e);
        }
        let parent = self.threads.get(&self.current).cloned().unwrap_or_else(|| KThread::new(self.current));
        let mut t = KThread::new(child);
        t.pid = child;
        t.sigmask = parent.sigmask;
        t.altstack = parent.altstack;
        if flags & CLONE_CHILD_CLEARTID != 0 {
            t.clear_child_tid = ctid;
        }
        self.threads.insert(child, t);
        self.waits.add(child, None, 0);
        let (pgid, sid) = self.procs.get(&self.pid).map_or((self.pid, self.pid), |p| (p.pgid, p.sid));
        let saved = Saved {
            space: Some(space),
            fds: FdTable { fds: self.fds.fds.clone(), limit: self.fds.limit },
            mm: self.mm.clone(),
            cwd: self.proc.cwd.clone(),
            umask: self.proc.umask,
            sigactions: self.proc.sigactions,
            fs_base: self.proc.fs_base,
            exe: self.proc.exe.clone(),
        };
        self.procs.insert(child, Proc { ppid: self.pid, pgid, sid, ended: None, saved: Some(saved) });
        // The fork orders everything the parent did before it before everything the child does.
        self.created.push((child, 0));
        if flags & CLONE_VFORK != 0 {
            // The parent waits until the child ends, with the child's pid as its result.
            m.set_reg(Reg::RAX, u64::from(child));
            let cur = self.current;
            self.thread_mut(cur).io_keys = vec![VFORK_KEY | u64::from(child)];
            self.block(m, Wait::Io { deadline: None });
            return Ok(None);
        }
        Ok(Some(u64::from(child)))
    }

    /// Makes process `to` the running one: its address space goes into the machine, its
    /// descriptors, memory layout, working directory, umask and signal actions into the kernel,
    /// and the running process's go into its [`Saved`] (or away, if it has ended).
    pub(crate) fn switch_process(&mut self, m: &mut Machine, to: u32) {
        let from = self.pid;
        // Every live kernel's saved processes hold their address spaces.
        let Some(mut s) = self.procs.get_mut(&to).and_then(|p| p.saved.take_if(|s| s.space.is_some())) else { return };
        let Some(space) = s.space.as_mut() else { return };
        m.swap_address_space(space);
        std::mem::swap(&mut self.fds, &mut s.fds);
        std::mem::swap(&mut self.mm, &mut s.mm);
        std::mem::swap(&mut self.proc.cwd, &mut s.cwd);
        std::mem::swap(&mut self.proc.umask, &mut s.umask);
        std::mem::swap(&mut self.proc.sigactions, &mut s.sigactions);
        std::mem::swap(&mut self.proc.fs_base, &mut s.fs_base);
        std::mem::swap(&mut self.proc.exe, &mut s.exe);
        self.pid = to;
        match self.procs.get_mut(&from) {
            Some(p) if p.ended.is_none() => p.saved = Some(s),
            // An ended process's memory goes with its last switch away.
            _ => {
                if let Some(space) = s.space {
                    m.release_address_space(space);
                }
            }
        }
    }

    /// exit_group(2), or the last thread's exit(2), of the running process. The first
    /// process's end is the run's; another's makes it a zombie and its threads go.
    /// How a signal that could not be delivered ends the running process: the run's end if it
    /// is the first process, otherwise `None` (its threads go; the caller schedules another).
    pub fn signal_death(&mut self, m: &mut Machine, how: ProcessExit) -> Option<ProcessExit> {
        self.exit_process(m, how)
    }

    pub(crate) fn exit_process(&mut self, m: &mut Machine, how: ProcessExit) -> Option<ProcessExit> {
        if self.pid == PID {
            return Some(how);
        }
        let pid = self.pid;
        self.handoffs.push((exit_handoff(pid), true));
        self.end_process(m, pid, how);
        None
    }

    /// Process `pid` ends: its threads go (the running one, if it is one of them, is left for
    /// the scheduler to drop), its descriptors close, its parent's waits look again.
    pub(crate) fn end_process(&mut self, m: &mut Machine, pid: u32, how: ProcessExit) {
        let tids: Vec<u32> = self.threads.values().filter(|t| t.pid == pid).map(|t| t.tid).collect();
        for tid in tids {
            self.drop_thread(tid);
            if tid != self.current {
                m.forget_thread(tid);
            }
        }
        self.timers.drop_process(pid);
        let Some(p) = self.procs.get_mut(&pid) else { return };
        p.ended = Some(how);
        let ppid = p.ppid;
        if pid == self.pid {
            // Closing them is what tells a reader of a pipe it held that no one writes any more.
            self.fds.fds.clear();
        } else if let Some(space) = p.saved.take().and_then(|s| s.space) {
            m.release_address_space(space);
        }
        for child in self.procs.values_mut().filter(|c| c.ppid == pid) {
            child.ppid = 1;
        }
        // An orphan is reaped at once: no one waits for it; so is the child of a parent that
        // ignores SIGCHLD. Any other parent is sent SIGCHLD.
        if ppid == 1 || self.reaps_children(ppid) {
            self.procs.remove(&pid);
        } else {
            self.signal_process(m, ppid, crate::signal::SigInfo::child(pid, how));
        }
        self.io_ready_all();
        self.io_ready(CHILD_KEY | u64::from(ppid));
        self.io_ready(VFORK_KEY | u64::from(pid));
    }

    /// Whether process `pid` is one `wait4`'s `pid` argument `sel` names, as a child of `parent`.
    fn selected(&self, sel: i64, parent: u32, pid: u32) -> bool {
        let Some(p) = self.procs.get(&pid) else { return false };
        if p.ppid != parent {
            return false;
        }
        match sel {
            -1 => true,
            0 => p.pgid == self.procs.get(&parent).map_or(0, |q| q.pgid),
            s if s < -1 => i64::from(p.pgid) == -s,
            s => i64::from(pid) == s,
        }
    }

    /// The first ended child `sel` names, and whether it names any child at all.
    fn find_zombie(&self, sel: i64) -> (Option<(u32, ProcessExit)>, bool) {
        let me = self.pid;
        let mut any = false;
        for (&pid, p) in &self.procs {
            if !self.selected(sel, me, pid) {
                continue;
            }
            any = true;
            if let Some(e) = p.ended {
                return (Some((pid, e)), true);
            }
        }
        (None, any)
    }

    /// wait4(2) (and waitpid): `pid, status, options, rusage`. Blocks, unless `WNOHANG`, until a
    /// child it names has ended; reaps it.
    pub(crate) fn wait4(&mut self, m: &mut Machine, sel: i64, status: u64, options: u64, rusage: u64) -> SysResult {
        if options & !(WNOHANG | 2 | 8 | 0x4000_0000 | 0x8000_0000 | 0x2000_0000) != 0 {
            return err(libc::EINVAL);
        }
        match self.find_zombie(sel) {
            (Some((pid, e)), _) => {
                if status != 0 {
                    m.write(status, &status_word(e).to_le_bytes(), false)?;
                }
                if rusage != 0 {
                    m.write(rusage, &[0u8; 144], false)?;
                }
                self.handoffs.push((exit_handoff(pid), false));
                self.procs.remove(&pid);
                Ok(u64::from(pid))
            }
            (None, false) => err(libc::ECHILD),
            (None, true) if options & WNOHANG != 0 => Ok(0),
            (None, true) => {
                self.block_keys.push(CHILD_KEY | u64::from(self.pid));
                err(crate::RESTART)
            }
        }
    }

    /// waitid(2): `idtype, id, infop, options` (P_ALL, P_PID, P_PGID; WEXITED, WNOHANG,
    /// WNOWAIT). Fills a `siginfo_t` with `CLD_EXITED` or `CLD_KILLED`.
    pub(crate) fn waitid(&mut self, m: &mut Machine, idtype: u64, id: u64, infop: u64, options: u64) -> SysResult {
        if options & WEXITED == 0 || options & !(WNOHANG | WEXITED | WNOWAIT | 2 | 8) != 0 {
            return err(libc::EINVAL);
        }
        let sel = match idtype {
            0 => -1,
            1 if id > 0 => id as i64,
            2 => -(id as i64).max(0),
            _ => return err(libc::EINVAL),
        };
        let sel = if sel == 0 { 0 } else { sel };
        match self.find_zombie(sel) {
            (Some((pid, e)), _) => {
                if infop != 0 {
                    let mut b = [0u8; 128];
                    let (code, st) = match e {
                        ProcessExit::Code(c) => (1i32, c & 0xff),
                        ProcessExit::Signal(s) => (2i32, s),
                    };
                    b[0..4].copy_from_slice(&SIGCHLD.to_le_bytes());
                    b[8..12].copy_from_slice(&code.to_le_bytes());
                    b[16..20].copy_from_slice(&pid.to_le_bytes());
                    b[20..24].copy_from_slice(&(crate::process::UID as u32).to_le_bytes());
                    b[24..28].copy_from_slice(&st.to_le_bytes());
                    m.write(infop, &b, false)?;
                }
                self.handoffs.push((exit_handoff(pid), false));
                if options & WNOWAIT == 0 {
                    self.procs.remove(&pid);
                }
                Ok(0)
            }
            (None, false) => err(libc::ECHILD),
            (None, true) if options & WNOHANG != 0 => {
                if infop != 0 {
                    m.write(infop, &[0u8; 128], false)?;
                }
                Ok(0)
            }
            (None, true) => {
                self.block_keys.push(CHILD_KEY | u64::from(self.pid));
                err(crate::RESTART)
            }
        }
    }

    /// kill(2) with a target other than the running process alone: `pid` > 0 one process, 0 the
    /// caller's group, -1 every process but the first's parent, < -1 the group -pid. Returns the
    /// running process's own end if the signal ends it.
    pub(crate) fn kill_pid(&mut self, m: &mut Machine, pid: i64, sig: i32) -> Result<Option<ProcessExit>, Errno> {
        if !(0..=64).contains(&sig) {
            return err(libc::EINVAL);
        }
        let my_group = self.procs.get(&self.pid).map_or(0, |p| p.pgid);
        let targets: Vec<u32> = self
            .procs
            .iter()
            .filter(|(&p, q)| match pid {
                -1 => true,
                0 => q.pgid == my_group,
                g if g < -1 => i64::from(q.pgid) == -g,
                one => i64::from(p) == one,
            })
            .map(|(&p, _)| p)
            .collect();
        if targets.is_empty() {
            return err(libc::ESRCH);
        }
        let mut own = None;
        for target in targets {
            if target == self.pid {
                own = self.kill(sig)?;
                continue;
            }
            if sig != 0 {
                self.signal_process(m, target, crate::signal::SigInfo::user(sig, self.pid));
            }
        }
        Ok(own)
    }

    /// getppid(2).
    pub(crate) fn getppid(&self) -> SysResult {
        Ok(u64::from(self.procs.get(&self.pid).map_or(1, |p| p.ppid)))
    }

    /// getpgid(2) (0: the caller) and getsid(2) (`session`).
    pub(crate) fn getpgid(&self, pid: u64, session: bool) -> SysResult {
        let pid = if pid == 0 { self.pid } else { u32::try_from(pid).map_err(|_| Errno(libc::ESRCH))? };
        let p = self.procs.get(&pid).ok_or(Errno(libc::ESRCH))?;
        Ok(u64::from(if session { p.sid } else { p.pgid }))
    }

    /// setpgid(2): the caller or one of its children into group `pgid` (0: its own pid).
    pub(crate) fn setpgid(&mut self, pid: u64, pgid: u64) -> SysResult {
        let pid = if pid == 0 { self.pid } else { u32::try_from(pid).map_err(|_| Errno(libc::ESRCH))? };
        let pgid = if pgid == 0 { pid } else { u32::try_from(pgid).map_err(|_| Errno(libc::EINVAL))? };
        let me = self.pid;
        let my_sid = self.procs.get(&me).map_or(0, |p| p.sid);
        let p = self.procs.get(&pid).ok_or(Errno(libc::ESRCH))?;
        if pid != me && p.ppid != me {
            return err(libc::ESRCH);
        }
        if p.sid != my_sid || p.sid == pid {
            return err(libc::EPERM);
        }
        if pgid != pid && !self.procs.values().any(|q| q.pgid == pgid && q.sid == my_sid) {
            return err(libc::EPERM);
        }
        self.procs.get_mut(&pid).expect("looked up above").pgid = pgid;
        Ok(0)
    }

    /// setsid(2): a new session and group led by the caller (EPERM for a group leader).
    pub(crate) fn setsid(&mut self) -> SysResult {
        let me = self.pid;
        if self.procs.values().any(|p| p.pgid == me) {
            return err(libc::EPERM);
        }
        let p = self.procs.get_mut(&me).ok_or(Errno(libc::ESRCH))?;
        p.pgid = me;
        p.sid = me;
        Ok(u64::from(me))
    }

    /// The futex key of `addr`: shared futexes (no `FUTEX_PRIVATE_FLAG`) on shared memory by what
    /// they map (a PM line's device address, a shared page's host memory), so that processes
    /// mapping it meet; every other one by (process, address).
    pub(crate) fn futex_key(&self, m: &Machine, addr: u64, private: bool) -> u64 {
        if !private {
            if let Some(dev) = m.pm_device_addr(addr) {
                return 3 << 62 | dev;
            }
            if let Some(host) = m.mem.shared_host_addr(addr) {
                return 1 << 63 | host;
            }
        }
        u64::from(self.pid) << 48 | addr
    }
}

/// Each process's state by pid, the running one's in the kernel itself.
pub(crate) type Procs = BTreeMap<u32, Proc>;

/// The hand-off key of process `pid`'s end: a non-canonical address, which no futex has.
fn exit_handoff(pid: u32) -> u64 {
    1 << 62 | u64::from(pid)
}
