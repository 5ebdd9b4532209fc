//! Processes: `fork`, `vfork` and `clone` without `CLONE_THREAD`, `exit_group` of one process,
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
//! actions, mask and alternate stack, RAX = 0; no pending signal. A `CLONE_VFORK` parent waits
//! until the child exits or execs ([`crate::execve`]) in [`Wait::Vfork`], which nothing else
//! ends; `vfork(2)` is `clone(CLONE_VM|CLONE_VFORK|SIGCHLD)`, its child on the parent's stack.
//!
//! A child of `clone(CLONE_VM)` (glibc's `posix_spawn`, `system`, `popen`: with `CLONE_VFORK`)
//! is a process that runs in its parent's address space instead of a copy ([`Proc::space`]
//! names the process owning the space it runs in; [`Kernel::space_pid`] the one whose space the
//! machine holds). A switch between processes of one space leaves the machine's address space
//! alone; the space of processes that are not running stays with its owner's [`Saved`]. At
//! `execve` such a child gets an empty space of its own and leaves the shared one to the others
//! ([`Kernel::leave_shared_space`]); a process that owns a space and ends or execs while others
//! still run in it hands it to the lowest of them, so nothing tears down memory in use; the
//! space's id ([`Proc::space_id`]), which keys its private futexes, stays. The run ends when
//! the first process ends, whatever its
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
pub(crate) const CHILD_KEY: u64 = 1 << 62;

const CLONE_VM: u64 = 0x100;
const CLONE_VFORK: u64 = 0x4000;
const CLONE_SETTLS: u64 = 0x80000;
/// clone3's "caught signals back to their default action in the child".
pub(crate) const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;
const CLONE_PARENT_SETTID: u64 = 0x10_0000;
const CLONE_CHILD_CLEARTID: u64 = 0x20_0000;
const CLONE_CHILD_SETTID: u64 = 0x100_0000;
/// What a fork may ask for besides the exit signal in the low byte.
const FORK_FLAGS: u64 =
    CLONE_VM | CLONE_VFORK | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID | CLONE_CHILD_SETTID;

const WNOHANG: u64 = 1;
/// `WUNTRACED` for wait4, `WSTOPPED` for waitid: the same bit.
const WSTOPPED: u64 = 2;
const WEXITED: u64 = 4;
const WCONTINUED: u64 = 8;
/// `__WNOTHREAD`, `__WALL`, `__WCLONE`: accepted (one kind of child).
const WAIT_THREAD_FLAGS: u64 = 0x2000_0000 | 0x4000_0000 | 0x8000_0000;
const WNOWAIT: u64 = 0x0100_0000;
const SIGCHLD: i32 = 17;

/// The state of a process that is not running, exchanged with the kernel's and the machine's at
/// a switch.
pub(crate) struct Saved {
    /// Its address space and memory layout, if it owns them ([`Proc::space`]) and none of the
    /// processes sharing them runs: `None` while the machine holds them, and in a process that
    /// shares another's.
    pub(crate) space: Option<(AddressSpace, MemLayout)>,
    /// In a snapshot's copy of the kernel: the memory layout of the space the process held, until
    /// the machine's restore gives the space back ([`Kernel::give_address_spaces`]).
    pub(crate) layout: Option<MemLayout>,
    pub(crate) fds: FdTable,
    cwd: Option<String>,
    umask: u32,
    pub(crate) sigactions: [[u64; 4]; 65],
    fs_base: u64,
    exe: Option<String>,
    /// Its `RLIMIT_SIGPENDING` (soft, hard).
    pub(crate) sigpending_limit: (u64, u64),
    /// The other limits it set ([`crate::process::ProcState::rlimits`]).
    pub(crate) rlimits: [Option<(u64, u64)>; crate::process::RLIMITS],
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
    /// The thread whose `exit_group` (or last `exit`, or fatal signal) ended it, which posted
    /// its end's hand-off; 0 while it runs, or when another process killed it.
    pub(crate) end_tid: u32,
    /// Its state while another process runs.
    pub(crate) saved: Option<Saved>,
    /// The process whose address space it runs in: itself, or, for a child of `clone(CLONE_VM)`
    /// that has not exec'ed yet, the process that owns the space it shares. The owner's
    /// [`Saved`] keeps the space while none of the processes sharing it runs.
    pub(crate) space: u32,
    /// Its address space's id, which, unlike its owner ([`Proc::space`]), never changes while
    /// the space lives: private futexes are keyed by it ([`Kernel::futex_key`]), so waiters in a
    /// space whose owner ends are still found by the processes left in it.
    pub(crate) space_id: u32,
    /// `PR_GET_DUMPABLE`: 1 (`SUID_DUMP_USER`) for an ordinary process, as Linux sets it at
    /// `execve`; `PR_SET_DUMPABLE` may make it 0. A child inherits it.
    pub(crate) dumpable: u8,
    /// Stopped or continued, and what its parent's waits have not reported of it yet
    /// ([`crate::jobctl`]).
    pub(crate) job: crate::jobctl::JobState,
    /// Its CPU time: the instructions retired while its threads ran (one a nanosecond), charged
    /// at every scheduling decision ([`Kernel::charge_cpu`]).
    pub(crate) cpu_ns: u64,
    /// The CPU time of the children it has reaped, theirs included (Linux's `cutime`).
    pub(crate) children_cpu_ns: u64,
    /// Where its program's argument and environment strings are in its memory: `arg_start`,
    /// `arg_end`, `env_start`, `env_end` (Linux's `mm` fields), which `/proc/PID/cmdline` reads
    /// ([`Kernel::cmdline_of`]).
    pub(crate) args: [u64; 4],
    /// When it was made, on the boot clock (ns): `/proc/PID/stat`'s `starttime`.
    pub(crate) start_ns: u64,
    /// Its name when it ended (its threads are gone): what a zombie's `/proc/PID/stat` shows.
    pub(crate) end_comm: [u8; 16],
    /// What `prctl` and `personality` set ([`Ctl`]).
    pub(crate) ctl: Ctl,
}

/// A process's settings made by `prctl` and `personality`, each kept as Linux keeps it (Linux
/// keeps some per thread; ferrite per process, which only a program setting them differently in
/// two of its threads could tell).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ctl {
    /// `PR_SET_PDEATHSIG`: the signal it is sent when its parent ends; a child starts with none.
    pub(crate) pdeathsig: i32,
    /// `PR_SET_CHILD_SUBREAPER`: its orphaned descendants become its children, not init's.
    /// Not inherited.
    pub(crate) subreaper: bool,
    /// `PR_SET_NO_NEW_PRIVS`: once set, kept across fork and exec.
    pub(crate) no_new_privs: bool,
    /// `PR_SET_TIMERSLACK`, in ns (Linux's default is 50,000); no timer here is late by it.
    pub(crate) timerslack_ns: u64,
    /// `PR_SET_THP_DISABLE`: kept across fork and exec.
    pub(crate) thp_disable: bool,
    /// `PR_SET_KEEPCAPS`: cleared at exec.
    pub(crate) keepcaps: bool,
    /// `personality(2)`'s persona (`PER_LINUX`, 0, with flags such as `ADDR_NO_RANDOMIZE`):
    /// inherited, kept across exec. No flag changes what ferrite does (its layout is fixed).
    pub(crate) personality: u32,
    /// The `membarrier` registrations made (`MEMBARRIER_CMD_REGISTER_*` bits): the private
    /// expedited commands are EPERM before theirs. Kept across fork (the `mm` is copied),
    /// cleared at exec.
    pub(crate) membarrier: u8,
}

impl Default for Ctl {
    fn default() -> Ctl {
        Ctl {
            pdeathsig: 0,
            subreaper: false,
            no_new_privs: false,
            timerslack_ns: 50_000,
            thp_disable: false,
            keepcaps: false,
            personality: 0,
            membarrier: 0,
        }
    }
}

impl Ctl {
    /// A child's settings (`copy_process`): no parent-death signal, not a subreaper.
    pub(crate) fn forked(self) -> Ctl {
        Ctl { pdeathsig: 0, subreaper: false, ..self }
    }
}

impl Proc {
    /// The first process: its own group and session leader, parent 1.
    pub(crate) fn first() -> Proc {
        Proc {
            ppid: 1,
            pgid: PID,
            sid: PID,
            ended: None,
            end_tid: 0,
            saved: None,
            space: PID,
            space_id: 1,
            dumpable: 1,
            job: Default::default(),
            cpu_ns: 0,
            children_cpu_ns: 0,
            args: [0; 4],
            start_ns: crate::time::BOOT_UPTIME_S * 1_000_000_000,
            end_comm: [0; 16],
            ctl: Ctl::default(),
        }
    }

    /// A copy of a process without its saved state (a snapshot's copy fills it in).
    pub(crate) fn copy_running(&self) -> Proc {
        Proc {
            ppid: self.ppid,
            pgid: self.pgid,
            sid: self.sid,
            ended: self.ended,
            end_tid: self.end_tid,
            saved: None,
            space: self.space,
            space_id: self.space_id,
            dumpable: self.dumpable,
            job: self.job,
            cpu_ns: self.cpu_ns,
            children_cpu_ns: self.children_cpu_ns,
            args: self.args,
            start_ns: self.start_ns,
            end_comm: self.end_comm,
            ctl: self.ctl,
        }
    }
}

impl Saved {
    /// A copy for a snapshot of the kernel, with the descriptor table `fds` (copied by the
    /// caller over the other processes' copies) and no address space yet: the layout of the one
    /// it holds waits for it.
    pub(crate) fn copy(&self, fds: FdTable) -> Saved {
        Saved {
            space: None,
            // A copy of a copy (a snapshot restored) keeps the layout still waiting for its space.
            layout: self.space.as_ref().map(|(_, mm)| mm.clone()).or_else(|| self.layout.clone()),
            fds,
            cwd: self.cwd.clone(),
            umask: self.umask,
            sigactions: self.sigactions,
            fs_base: self.fs_base,
            exe: self.exe.clone(),
            sigpending_limit: self.sigpending_limit,
            rlimits: self.rlimits,
        }
    }
}

/// What a wait found of a child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waited {
    /// It ended so.
    Exited(ProcessExit),
    /// It stopped with this signal.
    Stopped(i32),
    /// It was continued.
    Continued,
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
        if flags & !(FORK_FLAGS | CLONE_CLEAR_SIGHAND | 0xff) != 0 {
            self.note_named(m, 56, "clone with flags a fork does not take (CLONE_FILES, CLONE_FS, CLONE_SIGHAND ...)");
            return err(libc::EINVAL);
        }
        // CLONE_VM: the child runs in the running process's address space until it execs or
        // ends; otherwise it gets a copy of it.
        let shares = flags & CLONE_VM != 0;
        let child = self.new_tid()?;
        let mut space = if shares {
            None
        } else {
            // Every slot of the machine's physical space taken: as Linux at its process limit.
            Some(m.fork_address_space().map_err(|_| Errno(libc::ENOMEM))?.ok_or(Errno(libc::EAGAIN))?)
        };
        let mut started = || -> Result<(), Errno> {
            if flags & CLONE_PARENT_SETTID != 0 {
                m.write(ptid, &child.to_le_bytes(), false)?;
            }
            if flags & CLONE_CHILD_SETTID != 0 {
                // Into the child's memory: its address space is the machine's for a moment.
                match space.as_mut() {
                    Some(space) => {
                        m.swap_address_space(space);
                        let wrote = m.write(ctid, &child.to_le_bytes(), false);
                        m.swap_address_space(space);
                        wrote?;
                    }
                    None => m.write(ctid, &child.to_le_bytes(), false)?,
                }
            }
            crate::thread::spawn_child(m, child, flags, stack, tls)
        };
        if let Err(e) = started() {
            if let Some(space) = space {
                m.release_address_space(space);
            }
            return Err(e);
        }
        let parent = self.threads.get(&self.current).cloned().unwrap_or_else(|| KThread::new(self.current));
        let mut t = KThread::new(child);
        t.pid = child;
        t.sigmask = parent.sigmask;
        t.altstack = parent.altstack;
        t.comm = parent.comm;
        t.affinity = parent.affinity.clone();
        if flags & CLONE_CHILD_CLEARTID != 0 {
            t.clear_child_tid = ctid;
        }
        self.threads.insert(child, t);
        self.waits.add(child, None, 0);
        let (pgid, sid) = self.procs.get(&self.pid).map_or((self.pid, self.pid), |p| (p.pgid, p.sid));
        let mut sigactions = self.proc.sigactions;
        if flags & CLONE_CLEAR_SIGHAND != 0 {
            // Caught signals back to their default action; ignored ones stay ignored.
            for a in sigactions.iter_mut().skip(1).filter(|a| a[0] != 1) {
                *a = [0; 4];
            }
        }
        let saved = Saved {
            space: space.map(|s| (s, self.mm.clone())),
            layout: None,
            fds: FdTable { fds: self.fds.fds.clone(), limit: self.fds.limit, hard: self.fds.hard },
            cwd: self.proc.cwd.clone(),
            umask: self.proc.umask,
            sigactions,
            fs_base: self.proc.fs_base,
            exe: self.proc.exe.clone(),
            sigpending_limit: self.proc.sigpending_limit,
            rlimits: self.proc.rlimits,
        };
        let in_space = if shares { self.space_pid } else { child };
        let space_id = if shares { self.space_id() } else { self.new_space_id() };
        let (dumpable, args, ctl) =
            self.procs.get(&self.pid).map_or((1, [0; 4], Ctl::default()), |p| (p.dumpable, p.args, p.ctl.forked()));
        let start_ns = self.now_ns(m);
        self.procs.insert(
            child,
            Proc {
                ppid: self.pid,
                pgid,
                sid,
                ended: None,
                end_tid: 0,
                saved: Some(saved),
                space: in_space,
                space_id,
                dumpable,
                job: Default::default(),
                cpu_ns: 0,
                children_cpu_ns: 0,
                args,
                start_ns,
                end_comm: [0; 16],
                ctl,
            },
        );
        if !shares {
            // Its copy of the address space holds its parent's System V segments attached.
            self.shm_fork(self.space_id(), space_id);
        }
        // The fork orders everything the parent did before it before everything the child does.
        self.created.push((child, 0, !shares));
        if flags & CLONE_VFORK != 0 {
            // The parent waits until the child ends, with the child's pid as its result.
            m.set_reg(Reg::RAX, u64::from(child));
            self.block(m, Wait::Vfork { child });
            return Ok(None);
        }
        Ok(Some(u64::from(child)))
    }

    /// Makes process `to` the running one: its descriptors, working directory, umask and signal
    /// actions go into the kernel, and the running process's into its [`Saved`] (or away, if it
    /// has ended). Unless both run in one address space (a `clone(CLONE_VM)` child and its
    /// parent), the address space and memory layout `to` runs in go into the machine and the
    /// kernel, and the ones that ran back to their owner's [`Saved`] (or away, if no process
    /// alive runs in them).
    pub(crate) fn switch_process(&mut self, m: &mut Machine, to: u32) {
        let from = self.pid;
        let Some(p) = self.procs.get_mut(&to) else { return };
        let to_space = p.space;
        let Some(mut s) = p.saved.take() else { return };
        std::mem::swap(&mut self.fds, &mut s.fds);
        std::mem::swap(&mut self.proc.cwd, &mut s.cwd);
        std::mem::swap(&mut self.proc.umask, &mut s.umask);
        std::mem::swap(&mut self.proc.sigactions, &mut s.sigactions);
        std::mem::swap(&mut self.proc.fs_base, &mut s.fs_base);
        std::mem::swap(&mut self.proc.exe, &mut s.exe);
        std::mem::swap(&mut self.proc.sigpending_limit, &mut s.sigpending_limit);
        std::mem::swap(&mut self.proc.rlimits, &mut s.rlimits);
        self.pid = to;
        if to_space != self.space_pid {
            // The space `to` runs in is kept by its owner (`s` itself, if `to` owns it).
            let held = if to_space == to {
                s.space.take()
            } else {
                self.procs.get_mut(&to_space).and_then(|o| o.saved.as_mut()).and_then(|o| o.space.take())
            };
            // Always there: the space of a process that is not running is kept by its owner,
            // and an owner that ends hands it to a process still running in it.
            debug_assert!(held.is_some(), "the address space of process {to} is nowhere");
            if let Some((mut space, mut mm)) = held {
                m.swap_address_space(&mut space);
                std::mem::swap(&mut self.mm, &mut mm);
                let old = std::mem::replace(&mut self.space_pid, to_space);
                if old == from {
                    s.space = Some((space, mm));
                } else {
                    match self.procs.get_mut(&old).filter(|o| o.ended.is_none()).and_then(|o| o.saved.as_mut()) {
                        Some(o) => o.space = Some((space, mm)),
                        None => m.release_address_space(space),
                    }
                }
            }
        }
        match self.procs.get_mut(&from) {
            Some(p) if p.ended.is_none() => p.saved = Some(s),
            // An ended process's memory goes with its last switch away.
            _ => {
                if let Some((space, _)) = s.space {
                    m.release_address_space(space);
                }
            }
        }
    }

    /// Whether another process alive runs in the running process's address space (a
    /// `clone(CLONE_VM)` child that has not exec'ed, or its parent).
    pub(crate) fn space_shared(&self) -> bool {
        let (me, space) = (self.pid, self.space_pid);
        self.procs.iter().any(|(&q, p)| q != me && p.ended.is_none() && p.space == space)
    }

    /// Process `pid` stops running in its address space (it ends or execs): if it owns the
    /// space and other processes alive run in it, the lowest of them becomes the owner and
    /// keeps it (the machine keeps it if it is the running one's).
    fn hand_space_over(&mut self, pid: u32) {
        let Some(owner) = self.procs.get(&pid).map(|p| p.space) else { return };
        if owner != pid {
            return;
        }
        let sharers: Vec<u32> = self
            .procs
            .iter()
            .filter(|(&q, p)| q != pid && p.ended.is_none() && p.space == owner)
            .map(|(&q, _)| q)
            .collect();
        let Some(&heir) = sharers.first() else { return };
        for q in &sharers {
            if let Some(p) = self.procs.get_mut(q) {
                p.space = heir;
            }
        }
        if self.space_pid == pid {
            self.space_pid = heir;
        } else {
            let kept = self.procs.get_mut(&pid).and_then(|p| p.saved.as_mut()).and_then(|s| s.space.take());
            if let Some(h) = self.procs.get_mut(&heir).and_then(|p| p.saved.as_mut()) {
                h.space = kept;
            }
        }
    }

    /// `execve` of a process whose address space others run in: the running process gets
    /// `fresh` (empty) for its new program, and the space it leaves stays with the others
    /// (a vfork parent gets its memory back as it was).
    pub(crate) fn leave_shared_space(&mut self, m: &mut Machine, mut fresh: AddressSpace) {
        let pid = self.pid;
        self.hand_space_over(pid);
        let owner = self.space_pid;
        m.swap_address_space(&mut fresh);
        let mm = std::mem::take(&mut self.mm);
        match self.procs.get_mut(&owner).and_then(|p| p.saved.as_mut()) {
            Some(o) => o.space = Some((fresh, mm)),
            None => m.release_address_space(fresh),
        }
        let id = self.new_space_id();
        if let Some(p) = self.procs.get_mut(&pid) {
            p.space = pid;
            p.space_id = id;
        }
        self.space_pid = pid;
    }

    /// The running process's address space's id ([`Proc::space_id`]).
    pub(crate) fn space_id(&self) -> u32 {
        self.procs.get(&self.pid).map_or(0, |p| p.space_id)
    }

    /// An id no address space in use has: the lowest no live process's space has (an id of a
    /// space no process runs in any more comes back, as no one waits on its futexes), so ids
    /// stay small and keep clear of the tag bits of shared futexes' keys.
    fn new_space_id(&self) -> u32 {
        let used: std::collections::BTreeSet<u32> =
            self.procs.values().filter(|p| p.ended.is_none()).map(|p| p.space_id).collect();
        (1..).find(|id| !used.contains(id)).unwrap_or(0)
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
        if let Some(p) = self.procs.get_mut(&pid) {
            p.end_tid = self.current;
        }
        self.end_process(m, pid, how);
        None
    }

    /// Process `pid` ends: its threads go (the running one, if it is one of them, is left for
    /// the scheduler to drop), its descriptors close, its parent's waits look again.
    pub(crate) fn end_process(&mut self, m: &mut Machine, pid: u32, how: ProcessExit) {
        let comm = self.comm(self.main_thread(pid));
        // A continue its parent was not told of yet is told first (the thread that wakes to
        // die tells it in `get_signal`).
        self.tell_continued(pid);
        let tids: Vec<u32> = self.threads.values().filter(|t| t.pid == pid).map(|t| t.tid).collect();
        // Each thread's futexes, as each runs Linux's `futex_exit_release` in `do_exit`: its
        // robust list walked (its locks marked FUTEX_OWNER_DIED, a waiter woken) where its
        // memory is the machine's (the running process's own end: exit_group, a fatal signal
        // it takes), and the PI futexes it owns handed to their first waiters
        // (`exit_pi_state_list`), so waiters in other processes sharing them go on.
        let in_machine = self.procs.get(&pid).is_some_and(|p| p.space == self.space_pid);
        // None of them waits any more, so no lock or wake goes to one of them.
        for &tid in &tids {
            self.set_wait(tid, None, None);
        }
        self.waits.pi_grants.retain(|(w, _)| !tids.contains(w));
        // A process killed by another (`kill(pid, SIGKILL)`) is not running: its memory is
        // made the machine's for the walk, as on Linux each of its threads walks its own list
        // in `do_exit`, so a waiter in another process on a robust mutex in a shared mapping
        // gets EOWNERDEAD.
        let back = self.pid;
        let elsewhere = !in_machine && self.procs.get(&pid).is_some_and(|p| p.ended.is_none() && p.saved.is_some());
        if elsewhere {
            self.switch_process(m, pid);
            for &tid in &tids {
                let head = self.threads.get(&tid).map_or(0, |t| t.robust_list);
                self.walk_robust_list(m, tid, head);
            }
            self.switch_process(m, back);
        }
        for &tid in &tids {
            let head = self.threads.get(&tid).map_or(0, |t| t.robust_list);
            if in_machine {
                self.walk_robust_list(m, tid, head);
            }
            self.pi_exit(m, tid);
        }
        // Its SEM_UNDO adjustments are applied; its System V segments are detached if no
        // process is left in its address space.
        self.ipc_exit(pid);
        self.mq_exit(pid);
        if let Some(space) = self.procs.get(&pid).map(|p| p.space_id) {
            if !self.procs.iter().any(|(&q, p)| q != pid && p.ended.is_none() && p.space_id == space) {
                self.shm_detach_all(m, space);
            }
        }
        // Its memory stays with the processes still running in it.
        self.hand_space_over(pid);
        for tid in tids {
            self.drop_thread(tid);
            if tid != self.current {
                m.forget_thread(tid);
            }
        }
        self.timers.drop_process(pid);
        // Its record locks go (its descriptions' go with their last descriptors).
        self.locks.release_process(pid, None);
        self.shared_pending.remove(&pid);
        let Some(p) = self.procs.get_mut(&pid) else { return };
        p.ended = Some(how);
        p.end_comm = comm;
        let ppid = p.ppid;
        if pid == self.pid {
            // Closing them is what tells a reader of a pipe it held that no one writes any more.
            self.fds.fds.clear();
        } else if let Some((space, _)) = p.saved.take().and_then(|s| s.space) {
            m.release_address_space(space);
        }
        // Its children go to the nearest living ancestor that is a subreaper, else to init
        // (Linux's `find_new_reaper`); each that asked for a parent-death signal gets it.
        let mut reaper = ppid;
        while reaper != 1 && !self.procs.get(&reaper).is_some_and(|r| r.ended.is_none() && r.ctl.subreaper) {
            reaper = self.procs.get(&reaper).map_or(1, |r| r.ppid);
        }
        let children: Vec<(u32, i32, Option<ProcessExit>)> =
            self.procs.iter().filter(|(_, c)| c.ppid == pid).map(|(&c, p)| (c, p.ctl.pdeathsig, p.ended)).collect();
        for &(child, _, _) in &children {
            if let Some(c) = self.procs.get_mut(&child) {
                c.ppid = reaper;
            }
        }
        for (child, deathsig, ended) in children {
            match ended {
                // A zombie's new parent is told of it, or reaps it at once if it reaps its
                // children itself (Linux's `reparent_leader`); init reaps it.
                Some(_) if reaper == 1 || self.reaps_children(reaper) => {
                    self.procs.remove(&child);
                }
                Some(e) => {
                    self.signal_process(m, reaper, crate::signal::SigInfo::child(child, e));
                    self.io_ready(CHILD_KEY | u64::from(reaper));
                }
                None if deathsig > 0 => {
                    self.signal_process(m, child, crate::signal::SigInfo::user(deathsig, pid));
                }
                None => {}
            }
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
        self.vfork_done(pid);
    }

    /// Process `pid` execs or ends: a parent waiting for it since `vfork` goes on.
    pub(crate) fn vfork_done(&mut self, pid: u32) {
        let parents: Vec<u32> =
            self.threads.values().filter(|t| t.wait == Some(Wait::Vfork { child: pid })).map(|t| t.tid).collect();
        for tid in parents {
            self.set_wait(tid, None, None);
        }
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

    /// The first child `sel` names with something to report under `options` (Linux's
    /// `wait_consider_task`, child by child: its end if `WEXITED`, else an unreported stop if
    /// `WUNTRACED`/`WSTOPPED`, else an unreported continue if `WCONTINUED`), and whether `sel`
    /// names any child at all.
    fn find_waitable(&self, sel: i64, options: u64) -> (Option<(u32, Waited)>, bool) {
        let me = self.pid;
        let mut any = false;
        for (&pid, p) in &self.procs {
            if !self.selected(sel, me, pid) {
                continue;
            }
            any = true;
            if let Some(e) = p.ended {
                if options & WEXITED != 0 {
                    return (Some((pid, Waited::Exited(e))), true);
                }
                continue;
            }
            if let Some(sig) = p.job.stop_report.filter(|_| options & WSTOPPED != 0 && p.job.stopped) {
                return (Some((pid, Waited::Stopped(sig))), true);
            }
            if p.job.continued && options & WCONTINUED != 0 {
                return (Some((pid, Waited::Continued)), true);
            }
        }
        (None, any)
    }

    /// Charges the instructions retired since the last scheduling decision to the running
    /// process's CPU time: deterministic, as decisions fall at retired-instruction counts.
    pub(crate) fn charge_cpu(&mut self, m: &Machine) {
        let now = m.icount();
        let d = now.saturating_sub(self.proc.cpu_mark);
        self.proc.cpu_mark = now;
        if let Some(p) = self.procs.get_mut(&self.pid) {
            p.cpu_ns += d;
        }
        // And to the running thread's (gone already if it has just exited: nobody can ask).
        if let Some(t) = self.threads.get_mut(&self.current) {
            t.cpu_ns += d;
        }
    }

    /// Process `pid`'s CPU time so far, in ns (Linux's `CLOCK_PROCESS_CPUTIME_ID` of it): what
    /// it was charged, and for the running process what has retired since the last charge.
    /// `None` for a pid no process (or zombie) has.
    pub(crate) fn process_cpu_ns(&self, m: &Machine, pid: u32) -> Option<u64> {
        let charged = self.procs.get(&pid)?.cpu_ns;
        let running = if pid == self.pid { m.icount().saturating_sub(self.proc.cpu_mark) } else { 0 };
        Some(charged + running)
    }

    /// Thread `tid`'s CPU time so far, in ns (`CLOCK_THREAD_CPUTIME_ID`), as
    /// [`Kernel::process_cpu_ns`]; `None` for a tid no live thread has.
    pub(crate) fn thread_cpu_ns(&self, m: &Machine, tid: u32) -> Option<u64> {
        let charged = self.threads.get(&tid)?.cpu_ns;
        let running = if tid == self.current { m.icount().saturating_sub(self.proc.cpu_mark) } else { 0 };
        Some(charged + running)
    }

    /// Child `pid`'s CPU time and its reaped children's (Linux's `RUSAGE_BOTH`), in ns.
    fn child_cpu_ns(&self, pid: u32) -> u64 {
        self.procs.get(&pid).map_or(0, |p| p.cpu_ns.saturating_add(p.children_cpu_ns))
    }

    /// The `struct rusage` `wait4` gives of child `pid`: its CPU time and its reaped children's
    /// as user time; the system time and every other field 0.
    fn child_rusage(&self, pid: u32) -> [u8; 144] {
        crate::process::rusage_bytes(self.child_cpu_ns(pid), 0)
    }

    /// `si_utime`, `si_stime` of child `pid` in clock ticks (`USER_HZ`, 100 a second).
    fn child_times(&self, pid: u32) -> [u64; 2] {
        [self.child_cpu_ns(pid) / 10_000_000, 0]
    }

    /// A wait told its caller that child `pid` exited: the thread that ended it is joined, as
    /// `pthread_join` joins a thread (a child a signal from elsewhere killed posted nothing).
    fn reaped_end(&mut self, pid: u32) {
        if let Some(t) = self.procs.get(&pid).map(|p| p.end_tid).filter(|&t| t != 0) {
            self.reaped.push(t);
        }
    }

    /// The running process reaps its ended child `pid`: the child's CPU time and its children's
    /// are added to the running process's children's (Linux's `wait_task_zombie`; a child
    /// reaped by nobody, as when `SIGCHLD` is ignored, adds nothing).
    fn reap(&mut self, pid: u32) {
        let t = self.child_cpu_ns(pid);
        self.procs.remove(&pid);
        if let Some(p) = self.procs.get_mut(&self.pid) {
            p.children_cpu_ns = p.children_cpu_ns.saturating_add(t);
        }
    }

    /// The CPU time of the running process's reaped children, in ns (`RUSAGE_CHILDREN`).
    pub(crate) fn children_cpu_ns(&self) -> u64 {
        self.procs.get(&self.pid).map_or(0, |p| p.children_cpu_ns)
    }

    /// A stop or continue of child `pid` reported to a wait: reported once, unless `WNOWAIT`.
    fn reported(&mut self, pid: u32, w: Waited, options: u64) {
        if options & WNOWAIT != 0 {
            return;
        }
        if let Some(p) = self.procs.get_mut(&pid) {
            match w {
                Waited::Stopped(_) => p.job.stop_report = None,
                Waited::Continued => p.job.continued = false,
                Waited::Exited(_) => {}
            }
        }
    }

    /// wait4(2) (and waitpid): `pid, status, options, rusage`. Blocks, unless `WNOHANG`, until a
    /// child it names has ended (or, with `WUNTRACED`, stopped; with `WCONTINUED`, continued);
    /// reaps an ended one. The status word as Linux's `wait_task_*` write it: `code << 8` or the
    /// signal for an end, `0x7f | sig << 8` for a stop, `0xffff` for a continue.
    pub(crate) fn wait4(&mut self, m: &mut Machine, sel: i64, status: u64, options: u64, rusage: u64) -> SysResult {
        if options & !(WNOHANG | WSTOPPED | WCONTINUED | WAIT_THREAD_FLAGS) != 0 {
            return err(libc::EINVAL);
        }
        match self.find_waitable(sel, options | WEXITED) {
            (Some((pid, w)), _) => {
                let word = match w {
                    Waited::Exited(e) => status_word(e),
                    Waited::Stopped(sig) => 0x7f | (sig as u32) << 8,
                    Waited::Continued => 0xffff,
                };
                if status != 0 {
                    m.write(status, &word.to_le_bytes(), false)?;
                }
                if rusage != 0 {
                    m.write(rusage, &self.child_rusage(pid), false)?;
                }
                match w {
                    Waited::Exited(_) => {
                        self.handoffs.push((exit_handoff(pid), false));
                        self.reaped_end(pid);
                        self.reap(pid);
                    }
                    _ => self.reported(pid, w, options),
                }
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

    /// waitid(2): `idtype, id, infop, options` (P_ALL, P_PID, P_PGID; WEXITED, WSTOPPED,
    /// WCONTINUED, WNOHANG, WNOWAIT). Fills a `siginfo_t` with `CLD_EXITED`, `CLD_KILLED`,
    /// `CLD_STOPPED` (the stop signal) or `CLD_CONTINUED` (`SIGCONT`).
    pub(crate) fn waitid(&mut self, m: &mut Machine, idtype: u64, id: u64, infop: u64, options: u64) -> SysResult {
        if options & (WEXITED | WSTOPPED | WCONTINUED) == 0
            || options & !(WNOHANG | WEXITED | WSTOPPED | WCONTINUED | WNOWAIT | WAIT_THREAD_FLAGS) != 0
        {
            return err(libc::EINVAL);
        }
        let sel = match idtype {
            0 => -1,
            1 if id > 0 => id as i64,
            2 => -(id as i64).max(0),
            _ => return err(libc::EINVAL),
        };
        let sel = if sel == 0 { 0 } else { sel };
        match self.find_waitable(sel, options) {
            (Some((pid, w)), _) => {
                if infop != 0 {
                    let mut b = [0u8; 128];
                    let (code, st) = match w {
                        Waited::Exited(ProcessExit::Code(c)) => (1i32, c & 0xff),
                        Waited::Exited(ProcessExit::Signal(s)) => (2i32, s),
                        Waited::Stopped(sig) => (crate::jobctl::CLD_STOPPED, sig),
                        Waited::Continued => (crate::jobctl::CLD_CONTINUED, crate::jobctl::SIGCONT),
                    };
                    b[0..4].copy_from_slice(&SIGCHLD.to_le_bytes());
                    b[8..12].copy_from_slice(&code.to_le_bytes());
                    b[16..20].copy_from_slice(&pid.to_le_bytes());
                    b[20..24].copy_from_slice(&(crate::process::UID as u32).to_le_bytes());
                    b[24..28].copy_from_slice(&st.to_le_bytes());
                    let [utime, stime] = self.child_times(pid);
                    b[32..40].copy_from_slice(&utime.to_le_bytes());
                    b[40..48].copy_from_slice(&stime.to_le_bytes());
                    m.write(infop, &b, false)?;
                }
                match w {
                    Waited::Exited(_) => {
                        self.handoffs.push((exit_handoff(pid), false));
                        self.reaped_end(pid);
                        if options & WNOWAIT == 0 {
                            self.reap(pid);
                        }
                    }
                    _ => self.reported(pid, w, options),
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
    /// caller's group, -1 every process but the caller (Linux's `kill_something_info` skips
    /// the sender's own thread group: ESRCH when no other process is left), < -1 the group
    /// -pid. Returns the running process's own end if the signal ends it.
    pub(crate) fn kill_pid(&mut self, m: &mut Machine, pid: i64, sig: i32) -> Result<Option<ProcessExit>, Errno> {
        if !(0..=64).contains(&sig) {
            return err(libc::EINVAL);
        }
        let my_group = self.procs.get(&self.pid).map_or(0, |p| p.pgid);
        let targets: Vec<u32> = self
            .procs
            .iter()
            .filter(|(&p, q)| match pid {
                -1 => p != self.pid,
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
                own = self.kill(sig, 0)?;
                continue;
            }
            if sig != 0 {
                self.signal_process(m, target, crate::signal::SigInfo::user(sig, self.pid));
            }
        }
        Ok(own)
    }

    /// The program process `pid` runs (its `/proc/PID/exe`): the first program's path, or the
    /// one it last exec'ed.
    pub(crate) fn exe_of(&self, pid: u32) -> &str {
        if pid == self.pid {
            return self.exe();
        }
        let saved = self.procs.get(&pid).and_then(|p| p.saved.as_ref());
        saved.and_then(|s| s.exe.as_deref()).unwrap_or(&self.cfg.exe)
    }

    /// What `/proc/PID/stat` and `/proc/PID/status` show of process `pid`, alive or a zombie;
    /// `None` for a pid no process has.
    pub(crate) fn proc_view(&self, m: &Machine, pid: u32) -> Option<crate::process::ProcView> {
        let p = self.procs.get(&pid)?;
        let mine = || self.threads.values().filter(move |t| t.pid == pid);
        let state = if p.ended.is_some() {
            'Z'
        } else if p.job.stopped {
            'T'
        } else if mine().any(|t| t.tid == self.current || (self.waits.is_runnable(t.tid) && !t.in_call)) {
            // A thread parked at a blocking call it makes again when it runs (woken to look
            // again, perhaps only because some descriptor closed) still counts as sleeping.
            'R'
        } else {
            'S'
        };
        let bytes = if p.ended.is_some() {
            0
        } else if p.space == self.space_pid {
            m.mem.mapped_bytes()
        } else {
            let owner = self.procs.get(&p.space).and_then(|o| o.saved.as_ref());
            owner.and_then(|s| s.space.as_ref()).map_or(0, |(space, _)| space.mapped_bytes())
        };
        let comm = if p.ended.is_some() { p.end_comm } else { self.comm(self.main_thread(pid)) };
        let name = String::from_utf8_lossy(&comm[..comm.iter().position(|&b| b == 0).unwrap_or(16)]).into_owned();
        let ids =
            crate::process::ProcIds { pid, ppid: p.ppid, pgid: p.pgid, sid: p.sid, threads: mine().count().max(1) };
        let cpu_ns = self.process_cpu_ns(m, pid).unwrap_or(0);
        Some(crate::process::ProcView { ids, name, state, cpu_ns, bytes, start_ns: p.start_ns })
    }

    /// `/proc/PID/cmdline` of process `pid`, read from its memory as Linux's `get_mm_cmdline`
    /// does (fs/proc/base.c), so a program that rewrites its arguments in place
    /// (`setproctitle`, a server naming its workers) shows what it wrote: the bytes from
    /// `arg_start` to `arg_end`; but when the last of them is no longer a NUL, the program has
    /// overwritten it and the title may run on into the environment: the string at
    /// `arg_start` up to its NUL (included), at most a page and at most up to `env_end`
    /// (`get_mm_proctitle`). Empty for a zombie, as Linux's (no memory to read).
    pub(crate) fn cmdline_of(&self, m: &Machine, pid: u32) -> Vec<u8> {
        const PAGE: u64 = 4096;
        let Some(p) = self.procs.get(&pid).filter(|p| p.ended.is_none()) else { return Vec::new() };
        let [arg_start, arg_end, mut env_start, mut env_end] = p.args;
        if arg_start >= arg_end {
            return Vec::new();
        }
        // The environment counts only where it follows the arguments, as Linux checks.
        if env_start != arg_end || env_end < env_start {
            (env_start, env_end) = (arg_end, arg_end);
        }
        let _ = env_start;
        // The memory of the space the process runs in: the machine's, or the one saved for it.
        let saved = if p.space == self.space_pid {
            None
        } else {
            match self.procs.get(&p.space).and_then(|o| o.saved.as_ref()).and_then(|s| s.space.as_ref()) {
                Some((space, _)) => Some(space),
                None => return Vec::new(),
            }
        };
        let read = |addr: u64, buf: &mut [u8]| match saved {
            None => m.mem.read(addr, buf).is_ok(),
            Some(space) => space.read(addr, buf).is_ok(),
        };
        let mut last = [0u8];
        if read(arg_end - 1, &mut last) && last[0] != 0 {
            // Up to a page from `arg_start`, as far as it can be read (page by page).
            let want = PAGE.min(env_end - arg_start);
            let mut page = vec![0u8; want as usize];
            let mut got = 0u64;
            while got < want {
                let n = (PAGE - (arg_start + got) % PAGE).min(want - got);
                if !read(arg_start + got, &mut page[got as usize..(got + n) as usize]) {
                    break;
                }
                got += n;
            }
            page.truncate(got as usize);
            // Up to its NUL, which is included when found.
            if let Some(nul) = page.iter().position(|&b| b == 0) {
                page.truncate(nul + 1);
            }
            return page;
        }
        let mut out = vec![0u8; (arg_end - arg_start) as usize];
        if read(arg_start, &mut out) {
            out
        } else {
            Vec::new()
        }
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
            if let Some((ino, off)) = m.mem.shared_file_offset(addr) {
                // By the file (21 bits of its inode number, which is a hash) and the offset in
                // it: bit 61 keeps these apart from host addresses, which are below 2^47.
                return 1 << 63 | 1 << 61 | (ino & 0x1f_ffff) << 40 | (off & 0xff_ffff_ffff);
            }
            if let Some(host) = m.mem.shared_host_addr(addr) {
                return 1 << 63 | host;
            }
        }
        // By the address space: a `clone(CLONE_VM)` child and its parent meet, whoever owns it.
        u64::from(self.space_id()) << 48 | addr
    }
}

/// Each process's state by pid, the running one's in the kernel itself.
pub(crate) type Procs = BTreeMap<u32, Proc>;

/// The hand-off key of process `pid`'s end: a non-canonical address, which no futex has.
fn exit_handoff(pid: u32) -> u64 {
    1 << 62 | u64::from(pid)
}
