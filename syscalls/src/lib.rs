//! The Linux x86-64 system-call layer that ferrite's guests run on.
//!
//! One module per family, behind the dispatch table in [`Kernel::syscall`]: [`fd`] (descriptors,
//! read/write and friends, pipes), [`fs`] (paths: open, stat, directories), [`vfs`] (how a guest
//! path maps to the host, the sandbox, and the virtual files that hide the host), [`mem`]
//! (brk, mmap and friends), [`process`] (start-up of static and dynamic executables, identities,
//! limits), [`thread`] (clone, futexes, thread exit, scheduling decisions), [`signal`]
//! (dispositions, masks, delivery and `rt_sigreturn`), [`time`] (the virtual clock and
//! randomness), [`timers`] (`alarm`, `setitimer`, POSIX timers), [`inotify`] (events of the
//! guest's own file changes). Each handler says which Linux semantics it follows and what it leaves out.
//!
//! Everything the guest can observe is a function of the run's inputs and seed: time advances with
//! retired instructions, randomness comes from the seed, identities and stat fields are fixed or
//! derived from paths, directory listings are sorted. Host files the guest reads are hashed into
//! [`Kernel::inputs`] so a replay can tell when they changed.
//!
//! An unknown system call returns `-ENOSYS`, as Linux does, and is recorded once (name, PC) in
//! [`Kernel::unsupported`] for the caller to report with a source line.

#![deny(missing_docs)]

pub mod beneath;
pub mod execve;
pub mod fd;
pub mod fifo;
pub mod fs;
pub mod inotify;
pub mod jobctl;
pub mod landlock;
pub mod listen;
pub mod locks;
pub mod mem;
pub mod mqueue;
pub mod names;
pub mod net;
pub mod openat2;
pub mod pifutex;
pub mod poll;
pub mod process;
pub mod procs;
pub mod signal;
pub mod signalfd;
pub mod snapshot;
pub mod splice;
pub mod sysvipc;
pub mod thread;
pub mod time;
pub mod timers;
mod trace;
pub mod vfs;

use std::collections::BTreeMap;
use std::path::PathBuf;

use emu::{Machine, Reg};

pub use execve::Execed;
pub use process::{exec, ExecError, ProcessExit};
pub use signal::SigInfo;
pub use thread::Deadlock;

/// A Linux errno value (positive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

/// A system call's result: the value for RAX, or an errno.
pub type SysResult = Result<u64, Errno>;

/// What a call on descriptors returns inside the kernel when it must wait (Linux's
/// ERESTARTSYS, never seen by the guest): it named what it waits on in `Kernel::block_keys`,
/// and [`Kernel::syscall`] blocks the thread so that it makes the call again when woken.
pub(crate) const RESTART: i32 = 512;

/// What `clone`/`vfork` return inside the kernel when the parent of a vfork blocked until its
/// child ends (never seen by the guest: its result, the child's pid, is already set).
pub(crate) const VFORKED: i32 = 513;

pub(crate) fn err<T>(e: i32) -> Result<T, Errno> {
    Err(Errno(e))
}

impl From<emu::MemError> for Errno {
    fn from(_: emu::MemError) -> Errno {
        Errno(libc::EFAULT)
    }
}

impl From<std::io::Error> for Errno {
    fn from(e: std::io::Error) -> Errno {
        Errno(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

/// What the user allowed and chose for this run.
#[derive(Clone, Debug)]
pub struct KernelConfig {
    /// Seed of everything the guest could observe as nondeterminism (time offsets, randomness).
    pub seed: u64,
    /// Where PM appears in the guest's namespace (`/mnt/pmem0`).
    pub pm_mount: String,
    /// The host directory behind the PM mount.
    pub pm_dir: PathBuf,
    /// The guest's working directory, a host directory it may write under.
    pub cwd: PathBuf,
    /// Bytes of guest memory the guest may map in total.
    pub max_memory: u64,
    /// The program as the guest names it (`/proc/self/exe`, `AT_EXECFN`).
    pub exe: String,
    /// Number of CPUs the guest is told it has.
    pub cpus: u32,
    /// Most threads alive at once (`--max-threads`); clone fails with EAGAIN beyond.
    pub max_threads: usize,
    /// Drop what the guest writes to its standard output and error.
    pub discard_output: bool,
    /// `RLIMIT_NOFILE`: descriptors beyond it fail with EMFILE.
    pub max_open_files: i32,
    /// Map PM files away from where they would go (`ferrite crash --remap`): shared PM mappings
    /// without `MAP_FIXED` ignore their hint and are placed [`mem::REMAP_GAP`] lower, so
    /// absolute pointers a previous run stored in PM no longer point into the pool.
    pub remap_pm: bool,
    /// The working directory is private (`ferrite crash`): the guest sees it at the same path, but
    /// what it writes there goes to a directory inside the PM directory, on top of the host
    /// working directory, which it only reads ([`vfs`]). A crash image's non-PM files are placed
    /// there for recovery.
    pub private_cwd: bool,
    /// Print every system call, its arguments and its result to standard error, as strace
    /// does (`ferrite run --trace-syscalls`).
    pub trace_syscalls: bool,
    /// Keep what a crash would leave of the files the guest changes in its working directory
    /// ([`fs::Durable`]; `ferrite crash`'s workload run), and make each change of it a crash point.
    pub track_durable: bool,
    /// Hash every host file the guest opens as an input of the run ([`Kernel::take_inputs`]).
    /// Recoveries of crash images do not: their PM files are the image, and hashing a 1 GiB pool
    /// at every recovery would read it whole.
    pub hash_inputs: bool,
}

/// The outcome of one system call for the run loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The calling thread goes on.
    Continue,
    /// The calling thread blocked; its result is set when it is woken.
    Block,
    /// The calling thread yielded the CPU.
    Yield,
    /// The calling thread exited; others remain.
    ThreadExit,
    /// The process ended.
    Exit(ProcessExit),
}

/// A system call the guest made that ferrite does not implement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// Its number.
    pub nr: u64,
    /// Its name.
    pub name: &'static str,
    /// The `syscall` instruction.
    pub pc: u64,
    /// What the guest got instead: `ENOSYS` for a call ferrite lacks; an error of its own
    /// for a case of a known call it refuses.
    pub returned: &'static str,
}

/// The guest's view of the kernel: descriptors, memory layout, identities, signal dispositions.
pub struct Kernel {
    /// How the kernel was configured (the PM directory is changed for a restored run).
    pub cfg: KernelConfig,
    pub(crate) fds: fd::FdTable,
    pub(crate) mm: mem::MemLayout,
    pub(crate) proc: process::ProcState,
    pub(crate) rng: time::SeededRng,
    /// Host files the guest read, by guest path, with the BLAKE3 hash of their contents.
    pub inputs: BTreeMap<String, String>,
    /// The files the guest changed, by guest path, with the virtual wall-clock time (ns since
    /// the Unix epoch) of the last change: what `stat` shows of them ([`Kernel::file_time`]).
    pub(crate) times: BTreeMap<String, i64>,
    /// The inode number of each host file `stat` or `getdents64` has shown, by its host
    /// identity ([`Kernel::inode`](fs)): the first guest path's number, for every name of it.
    pub(crate) inodes: std::cell::RefCell<BTreeMap<(u64, u64, i128), u64>>,
    /// The pipe of each host FIFO the guest has opened, by the host file's device and inode
    /// ([`fifo`]).
    pub(crate) fifos: BTreeMap<(u64, u64), fifo::Fifo>,
    /// Unknown system calls, each recorded once.
    pub unsupported: Vec<Unsupported>,
    pub(crate) threads: BTreeMap<u32, thread::KThread>,
    /// The running thread.
    pub current: u32,
    pub(crate) next_tid: u32,
    pub(crate) max_threads: usize,
    pub(crate) wait_counter: u64,
    /// Threads created by the last system call: (tid, handle, forked), the handle being the TLS
    /// pointer (glibc's `pthread_t`), `forked` whether the thread is a new process's in an
    /// address space of its own (a `fork`: its private memory is a copy, not the parent's). The
    /// caller drains it to report thread creation.
    pub created: Vec<(u32, u64, bool)>,
    /// Threads the last system call woke from a futex wait: (tid, futex address), in the order
    /// woken. The caller drains it to report the hand-off as an ordering edge.
    pub woken: Vec<(u32, u64)>,
    /// Hand-offs between processes the last system call made, as `(key, post)`: a process's end
    /// posts its key, the `wait4`/`waitid` that reaps it waits on it. The caller drains it and
    /// reports each as one side of a futex hand-off on `key` (an address no futex can have), so
    /// what a child did happens before what its parent does after reaping it.
    pub handoffs: Vec<(u64, bool)>,
    /// The threads whose process's end the last system call (a `wait4`/`waitid` reporting an
    /// exit) told its caller: for each, the thread that ended the process. The caller drains it
    /// and reports each as a join of that thread ([`emu::events::EventKind::ProcessReaped`]).
    pub reaped: Vec<u32>,
    /// Each process's signals pending for it as a whole (Linux's `shared_pending`), by pid;
    /// a process with none has no entry. Signals sent to one thread are that thread's
    /// ([`thread::KThread::sigpending`]).
    pub(crate) shared_pending: BTreeMap<u32, Vec<signal::Shared>>,
    /// Which held reader to release when every thread is held (`emu::sched::Hold::privileged`).
    pub privileged: u32,
    /// Reads of a PM file's contents that bypass the device, so no pass sees them as loads:
    /// `read`/`pread`/`readv` of a PM file, and private mappings of one.
    pub pm_file_reads: u64,
    /// What a crash would leave of the files changed in the working directory
    /// (`KernelConfig::track_durable`).
    pub(crate) durable: fs::Durable,
    /// Who is runnable and who waits for what, kept up to date at every change, so that a
    /// scheduling decision never scans every thread.
    pub(crate) waits: thread::WaitIndex,
    /// The writable roots and their descriptors, opened on the first change ([`vfs`]).
    pub(crate) roots: vfs::Roots,
    /// The upper layers of the guest's temporary directories ([`vfs::GUEST_TMP_DIRS`]).
    pub(crate) tmp: vfs::GuestTmp,
    /// The readiness keys the running call waits on if it returns [`RESTART`].
    pub(crate) block_keys: Vec<u64>,
    /// When the running call, if it blocks, must be woken at the latest: a timerfd it waits
    /// for expires then.
    pub(crate) block_wake: Option<u64>,
    /// Sockets, their names and ports, eventfds and epoll sets ([`net`], [`poll`]).
    pub(crate) net: net::Net,
    /// Every process alive or not yet waited for, by pid ([`procs`]).
    pub(crate) procs: procs::Procs,
    /// Programs started by `execve` in the last system call, for the caller to learn their
    /// symbols ([`execve`]); it drains the list.
    pub execs: Vec<execve::Execed>,
    /// Every process's interval and POSIX timers ([`timers`]).
    pub(crate) timers: timers::Timers,
    /// The running process: whose descriptors, memory layout and signal actions the kernel
    /// holds now.
    pub(crate) pid: u32,
    /// The process whose address space the machine holds: the running process's own, or the
    /// one it shares since a `clone(CLONE_VM)` ([`procs::Proc::space`]).
    pub(crate) space_pid: u32,
    /// `--listen`'s bridge to host clients ([`listen`]), if the run has one.
    pub(crate) listen: Option<Box<listen::Bridge>>,
    /// The signals `--listen`'s bridge sent the guest for interrupts of ferrite (bit N-1 for
    /// signal N): a first SIGINT and a second's SIGKILL are both the user's.
    pub(crate) host_signals: u64,
    /// Changes of descriptors' readiness so far (every [`Kernel::io_ready`]): the edge stamp of
    /// what has no count of its own (a signalfd, an epoll set inside a set).
    pub(crate) io_epoch: u64,
    /// The inotify instances and move cookies ([`inotify`]).
    pub(crate) inotify: inotify::Registry,
    /// The first process's end when another process's signal brought it (a child's
    /// `kill(getppid(), SIGTERM)`, `kill(-1, SIGKILL)`): the run's end, taken by
    /// [`Kernel::syscall`] before it returns, so it never outlives the call that sent it.
    pub(crate) first_killed: Option<ProcessExit>,
    /// Advisory file locks between the processes ([`locks`]).
    pub(crate) locks: locks::Locks,
    /// The machine's System V IPC namespace ([`sysvipc`]).
    pub(crate) ipc: sysvipc::Ipc,
    /// The machine's POSIX message queues by name ([`mqueue`]).
    pub(crate) mqueues: BTreeMap<Vec<u8>, std::rc::Rc<std::cell::RefCell<mqueue::MQueue>>>,
}

impl Kernel {
    /// A kernel with one thread, the main one, and nothing open but the standard streams.
    pub fn new(cfg: KernelConfig) -> Kernel {
        let rng = time::SeededRng::new(cfg.seed);
        Kernel {
            fds: fd::FdTable::with_stdio(cfg.max_open_files),
            mm: mem::MemLayout::default(),
            proc: process::ProcState::default(),
            rng,
            inputs: BTreeMap::new(),
            times: BTreeMap::new(),
            inodes: Default::default(),
            fifos: BTreeMap::new(),
            unsupported: Vec::new(),
            threads: BTreeMap::from([(process::PID, thread::KThread::new(process::PID))]),
            current: process::PID,
            next_tid: process::PID + 1,
            max_threads: cfg.max_threads,
            wait_counter: 0,
            created: Vec::new(),
            woken: Vec::new(),
            handoffs: Vec::new(),
            reaped: Vec::new(),
            shared_pending: BTreeMap::new(),
            privileged: 0,
            pm_file_reads: 0,
            durable: fs::Durable::default(),
            waits: thread::WaitIndex::new(process::PID),
            roots: Default::default(),
            tmp: Default::default(),
            block_keys: Vec::new(),
            block_wake: None,
            net: net::Net::default(),
            procs: BTreeMap::from([(process::PID, procs::Proc::first())]),
            pid: process::PID,
            space_pid: process::PID,
            execs: Vec::new(),
            timers: timers::Timers::default(),
            listen: None,
            host_signals: 0,
            io_epoch: 0,
            inotify: Default::default(),
            first_killed: None,
            locks: Default::default(),
            ipc: Default::default(),
            mqueues: BTreeMap::new(),
            cfg,
        }
    }

    /// Handles the system call the machine stopped at (RIP already past the instruction).
    pub fn syscall(&mut self, m: &mut Machine) -> Outcome {
        let nr = m.reg(Reg::RAX);
        let a = [m.reg(Reg::RDI), m.reg(Reg::RSI), m.reg(Reg::RDX), m.reg(Reg::R10), m.reg(Reg::R8), m.reg(Reg::R9)];
        // The call as made, before it runs (a path argument may be freed by the call).
        let traced = self.cfg.trace_syscalls.then(|| trace::call(m, self.current, nr, a));
        // Host clients' events due now enter before the call ([`listen`]).
        if self.listen.is_some() {
            self.listen_point(None);
        }
        // Timers whose instant passed since the last block start expire before the call.
        self.fire_timers(m);
        if nr != libc::SYS_rt_sigreturn as u64 {
            // Any other call may change what a repeated fault meets ([`Kernel::fault_repeats`]).
            self.proc.fault_loop.1 = 0;
        }
        let d = self.dispatch(m, nr, a);
        self.arm_timer_stop(m);
        if let Some(call) = traced {
            trace::result(&call, nr, &d);
        }
        // The run ends with the first process, whichever process's call ended it.
        if let Some(e) = self.first_killed.take() {
            return Outcome::Exit(e);
        }
        let res = match d {
            Dispatch::Ret(Err(Errno(RESTART))) => {
                self.block_io(m, nr);
                return Outcome::Block;
            }
            Dispatch::Ret(Err(Errno(VFORKED))) => return Outcome::Block,
            Dispatch::Ret(r) => {
                self.block_keys.clear();
                self.block_wake = None;
                self.io_done();
                r
            }
            Dispatch::Exit(e) => return Outcome::Exit(e),
            Dispatch::Block => return Outcome::Block,
            Dispatch::Yield => {
                m.set_reg(Reg::RAX, 0);
                return Outcome::Yield;
            }
            Dispatch::ThreadExit => return Outcome::ThreadExit,
            // The registers came back from the signal frame, RAX included.
            Dispatch::Restored => return Outcome::Continue,
        };
        let v = match res {
            Ok(v) => v,
            Err(Errno(e)) => (-(e as i64)) as u64,
        };
        m.set_reg(Reg::RAX, v);
        Outcome::Continue
    }

    fn dispatch(&mut self, m: &mut Machine, nr: u64, a: [u64; 6]) -> Dispatch {
        use Dispatch::Ret;
        let i = |x: u64| x as i32;
        Ret(match nr as i64 {
            // fd
            libc::SYS_read => self.read(m, i(a[0]), a[1], a[2]),
            libc::SYS_write => self.write(m, i(a[0]), a[1], a[2]),
            libc::SYS_close => self.close(i(a[0])),
            libc::SYS_lseek => self.lseek(i(a[0]), a[1] as i64, i(a[2])),
            libc::SYS_ioctl => self.ioctl(m, i(a[0]), a[1], a[2]),
            libc::SYS_sendfile => self.sendfile(m, i(a[0]), i(a[1]), a[2], a[3]),
            libc::SYS_pread64 => self.pread(m, i(a[0]), a[1], a[2], a[3]),
            libc::SYS_pwrite64 => self.pwrite(m, i(a[0]), a[1], a[2], a[3]),
            libc::SYS_readv => self.readv(m, i(a[0]), a[1], a[2]),
            libc::SYS_writev => self.writev(m, i(a[0]), a[1], a[2]),
            // The offset is one register on x86-64 (`pos_from_hilo` with 64-bit halves).
            libc::SYS_preadv => self.preadv(m, i(a[0]), a[1], a[2], a[3] as i64, None),
            libc::SYS_pwritev => self.pwritev(m, i(a[0]), a[1], a[2], a[3] as i64, None),
            libc::SYS_preadv2 => self.preadv(m, i(a[0]), a[1], a[2], a[3] as i64, Some(a[5])),
            libc::SYS_pwritev2 => self.pwritev(m, i(a[0]), a[1], a[2], a[3] as i64, Some(a[5])),
            libc::SYS_pipe => self.pipe2(m, a[0], 0),
            libc::SYS_dup => self.dup(i(a[0])),
            libc::SYS_dup2 => self.dup3(i(a[0]), i(a[1]), 0, true),
            libc::SYS_fcntl => self.fcntl(m, i(a[0]), i(a[1]), a[2]),
            libc::SYS_getsockname => self.sockname(m, i(a[0]), a[1], a[2], false),
            libc::SYS_getpeername => self.sockname(m, i(a[0]), a[1], a[2], true),
            libc::SYS_socketpair => self.socketpair(m, i(a[0]), i(a[1]), i(a[2]), a[3]),
            libc::SYS_bind => self.bind(m, i(a[0]), a[1], a[2] as u32),
            libc::SYS_listen => self.listen(i(a[0]), i(a[1])),
            libc::SYS_accept => self.accept4(m, i(a[0]), a[1], a[2], 0),
            libc::SYS_accept4 => self.accept4(m, i(a[0]), a[1], a[2], i(a[3])),
            libc::SYS_sendto => self.sendto(m, i(a[0]), a[1], a[2], i(a[3]), a[4], a[5] as u32),
            libc::SYS_recvfrom => self.recvfrom(m, i(a[0]), a[1], a[2], i(a[3]), a[4], a[5]),
            libc::SYS_sendmsg => self.sendmsg(m, i(a[0]), a[1], i(a[2])),
            libc::SYS_recvmsg => self.recvmsg(m, i(a[0]), a[1], i(a[2])),
            libc::SYS_shutdown => self.shutdown(i(a[0]), i(a[1])),
            libc::SYS_setsockopt => self.setsockopt(m, i(a[0]), i(a[1]), i(a[2]), a[3], a[4] as u32),
            libc::SYS_getsockopt => self.getsockopt(m, i(a[0]), i(a[1]), i(a[2]), a[3], a[4]),
            // poll
            libc::SYS_poll => self.poll(m, a[0], a[1], Self::ms_timeout(i(a[2]))),
            libc::SYS_ppoll => {
                let r = Self::timespec_timeout(m, a[2])
                    .and_then(|t| self.call_mask(m, a[3], a[4]).map(|()| t))
                    .and_then(|t| self.poll(m, a[0], a[1], t));
                self.call_mask_done(&r);
                r
            }
            libc::SYS_select => Self::timeval_ns(m, a[4]).and_then(|t| self.select(m, i(a[0]), [a[1], a[2], a[3]], t)),
            libc::SYS_pselect6 => {
                // The sixth argument points at { const sigset_t *ss; size_t ss_len }.
                let mask = |m: &Machine| -> Result<(u64, u64), Errno> {
                    if a[5] == 0 {
                        return Ok((0, 0));
                    }
                    Ok((m.read_u64(a[5])?, m.read_u64(a[5] + 8)?))
                };
                let r = Self::timespec_timeout(m, a[4])
                    .and_then(|t| mask(m).map(|s| (t, s)))
                    .and_then(|(t, (set, size))| self.call_mask(m, set, size).map(|()| t))
                    .and_then(|t| self.select(m, i(a[0]), [a[1], a[2], a[3]], t));
                self.call_mask_done(&r);
                r
            }
            libc::SYS_epoll_create => {
                if (a[0] as i32) <= 0 {
                    err(libc::EINVAL)
                } else {
                    self.epoll_create1(0)
                }
            }
            libc::SYS_epoll_create1 => self.epoll_create1(i(a[0])),
            libc::SYS_epoll_ctl => self.epoll_ctl(m, i(a[0]), i(a[1]), i(a[2]), a[3]),
            libc::SYS_epoll_wait => self.epoll_wait(m, i(a[0]), a[1], i(a[2]), Self::ms_timeout(i(a[3]))),
            libc::SYS_epoll_pwait => {
                let r = self
                    .call_mask(m, a[4], a[5])
                    .and_then(|()| self.epoll_wait(m, i(a[0]), a[1], i(a[2]), Self::ms_timeout(i(a[3]))));
                self.call_mask_done(&r);
                r
            }
            libc::SYS_epoll_pwait2 => {
                let r = Self::timespec_timeout(m, a[3])
                    .and_then(|t| self.call_mask(m, a[4], a[5]).map(|()| t))
                    .and_then(|t| self.epoll_wait(m, i(a[0]), a[1], i(a[2]), t));
                self.call_mask_done(&r);
                r
            }
            libc::SYS_inotify_init => self.inotify_init1(0),
            libc::SYS_inotify_init1 => self.inotify_init1(i(a[0])),
            libc::SYS_inotify_add_watch => self.inotify_add_watch(m, i(a[0]), a[1], a[2] as u32),
            libc::SYS_inotify_rm_watch => self.inotify_rm_watch(i(a[0]), i(a[1])),
            libc::SYS_signalfd => self.signalfd4(m, i(a[0]), a[1], a[2], 0),
            libc::SYS_signalfd4 => self.signalfd4(m, i(a[0]), a[1], a[2], i(a[3])),
            libc::SYS_eventfd => self.eventfd2(a[0] as u32, 0),
            libc::SYS_eventfd2 => self.eventfd2(a[0] as u32, i(a[1])),
            libc::SYS_timerfd_create => self.timerfd_create(i(a[0]), i(a[1])),
            libc::SYS_timerfd_settime => self.timerfd_settime(m, i(a[0]), i(a[1]), a[2], a[3]),
            libc::SYS_timerfd_gettime => self.timerfd_gettime(m, i(a[0]), a[1]),
            libc::SYS_flock => self.flock(i(a[0]), i(a[1])),
            // fadvise64: advice changes nothing the guest can observe (ESPIPE on a pipe; as
            // `generic_fadvise`, a negative length or advice Linux does not know EINVAL).
            libc::SYS_fadvise64 => self.fds.get(i(a[0])).and_then(|f| match f.desc.borrow().kind {
                fd::Kind::PipeRead(_) | fd::Kind::PipeWrite(_) | fd::Kind::PipeRdWr(_) => err(libc::ESPIPE),
                _ if (a[2] as i64) < 0 || a[3] > 5 => err(libc::EINVAL),
                _ => Ok(0),
            }),
            libc::SYS_fsync | libc::SYS_fdatasync => self.fsync(m, i(a[0])),
            libc::SYS_dup3 => self.dup3(i(a[0]), i(a[1]), i(a[2]), false),
            libc::SYS_pipe2 => self.pipe2(m, a[0], i(a[1])),
            libc::SYS_socket => self.socket(i(a[0]), i(a[1]), i(a[2])),
            libc::SYS_getxattr => self.xattr(m, Some(a[0]), -1, true, err(libc::ENODATA)),
            libc::SYS_lgetxattr => self.xattr(m, Some(a[0]), -1, false, err(libc::ENODATA)),
            libc::SYS_fgetxattr => self.xattr(m, None, i(a[0]), true, err(libc::ENODATA)),
            libc::SYS_listxattr => self.xattr(m, Some(a[0]), -1, true, Ok(0)),
            libc::SYS_llistxattr => self.xattr(m, Some(a[0]), -1, false, Ok(0)),
            libc::SYS_flistxattr => self.xattr(m, None, i(a[0]), true, Ok(0)),
            libc::SYS_setxattr | libc::SYS_removexattr => self.xattr(m, Some(a[0]), -1, true, err(libc::EOPNOTSUPP)),
            libc::SYS_lsetxattr | libc::SYS_lremovexattr => self.xattr(m, Some(a[0]), -1, false, err(libc::EOPNOTSUPP)),
            libc::SYS_fsetxattr | libc::SYS_fremovexattr => self.xattr(m, None, i(a[0]), true, err(libc::EOPNOTSUPP)),
            libc::SYS_connect => self.connect(m, i(a[0]), a[1], a[2] as u32),
            libc::SYS_close_range => self.close_range(i(a[0]) as u32, i(a[1]) as u32, i(a[2]) as u32),
            // fs
            libc::SYS_open => self.openat(m, libc::AT_FDCWD, a[0], i(a[1]), a[2] as u32),
            libc::SYS_creat => {
                self.openat(m, libc::AT_FDCWD, a[0], libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, a[1] as u32)
            }
            // utime, utimes, futimesat, utimensat: the new modification time is the guest's.
            libc::SYS_utime => self.utimensat(m, libc::AT_FDCWD, a[0], fs::NewTimes::Buf(a[1]), 0),
            libc::SYS_utimes => self.utimensat(m, libc::AT_FDCWD, a[0], fs::NewTimes::Val(a[1]), 0),
            libc::SYS_futimesat => self.utimensat(m, i(a[0]), a[1], fs::NewTimes::Val(a[2]), 0),
            libc::SYS_utimensat => self.utimensat(m, i(a[0]), a[1], fs::NewTimes::Spec(a[2]), i(a[3])),
            libc::SYS_copy_file_range => self.copy_file_range(m, i(a[0]), a[1], i(a[2]), a[3], a[4], a[5]),
            libc::SYS_memfd_create => self.memfd_create(m, a[0], a[1] as u32),
            libc::SYS_openat2 => self.openat2(m, i(a[0]), a[1], a[2], a[3]),
            libc::SYS_splice => self.splice(m, i(a[0]), a[1], i(a[2]), a[3], a[4], a[5] as u32),
            libc::SYS_tee => self.tee(i(a[0]), i(a[1]), a[2], a[3] as u32),
            libc::SYS_vmsplice => self.vmsplice(m, i(a[0]), a[1], a[2], a[3] as u32),
            libc::SYS_stat => self.fstatat(m, libc::AT_FDCWD, a[0], a[1], 0),
            libc::SYS_fstat => self.fstat(m, i(a[0]), a[1]),
            libc::SYS_lstat => self.fstatat(m, libc::AT_FDCWD, a[0], a[1], libc::AT_SYMLINK_NOFOLLOW),
            libc::SYS_access => self.faccessat(m, libc::AT_FDCWD, a[0], i(a[1])),
            libc::SYS_truncate => self.truncate(m, a[0], a[1]),
            libc::SYS_ftruncate => self.ftruncate(m, i(a[0]), a[1]),
            libc::SYS_getcwd => self.getcwd(m, a[0], a[1]),
            libc::SYS_chdir => self.chdir(m, a[0]),
            libc::SYS_fchdir => self.fchdir(i(a[0])),
            libc::SYS_rename => self.renameat(m, libc::AT_FDCWD, a[0], libc::AT_FDCWD, a[1]),
            libc::SYS_mkdir => self.mkdirat(m, libc::AT_FDCWD, a[0], a[1] as u32),
            libc::SYS_rmdir => self.unlinkat(m, libc::AT_FDCWD, a[0], libc::AT_REMOVEDIR),
            libc::SYS_unlink => self.unlinkat(m, libc::AT_FDCWD, a[0], 0),
            libc::SYS_readlink => self.readlinkat(m, libc::AT_FDCWD, a[0], a[1], a[2]),
            libc::SYS_link => self.linkat(m, libc::AT_FDCWD, a[0], libc::AT_FDCWD, a[1], 0),
            libc::SYS_symlink => self.symlinkat(m, a[0], libc::AT_FDCWD, a[1]),
            libc::SYS_linkat => self.linkat(m, i(a[0]), a[1], i(a[2]), a[3], i(a[4])),
            libc::SYS_symlinkat => self.symlinkat(m, a[0], i(a[1]), a[2]),
            libc::SYS_chmod => self.fchmodat(m, libc::AT_FDCWD, a[0], a[1] as u32, 0),
            libc::SYS_fchmod => self.fchmod(i(a[0]), a[1] as u32),
            libc::SYS_fchmodat => self.fchmodat(m, i(a[0]), a[1], a[2] as u32, 0),
            libc::SYS_umask => self.umask(a[0] as u32),
            libc::SYS_mknod => self.mknodat(m, libc::AT_FDCWD, a[0], a[1] as u32),
            libc::SYS_mknodat => self.mknodat(m, i(a[0]), a[1], a[2] as u32),
            libc::SYS_chown => self.fchownat(m, libc::AT_FDCWD, a[0], [a[1], a[2]], 0),
            libc::SYS_lchown => self.fchownat(m, libc::AT_FDCWD, a[0], [a[1], a[2]], libc::AT_SYMLINK_NOFOLLOW),
            libc::SYS_fchown => self.fchown(i(a[0]), [a[1], a[2]]),
            libc::SYS_fchownat => self.fchownat(m, i(a[0]), a[1], [a[2], a[3]], i(a[4])),
            libc::SYS_statfs => self.statfs(m, a[0], a[1]),
            libc::SYS_fstatfs => self.fstatfs(m, i(a[0]), a[1]),
            libc::SYS_getdents64 => self.getdents64(m, i(a[0]), a[1], a[2]),
            libc::SYS_openat => self.openat(m, i(a[0]), a[1], i(a[2]), a[3] as u32),
            libc::SYS_mkdirat => self.mkdirat(m, i(a[0]), a[1], a[2] as u32),
            libc::SYS_newfstatat => self.fstatat(m, i(a[0]), a[1], a[2], i(a[3])),
            libc::SYS_unlinkat => self.unlinkat(m, i(a[0]), a[1], i(a[2])),
            libc::SYS_renameat => self.renameat(m, i(a[0]), a[1], i(a[2]), a[3]),
            libc::SYS_readlinkat => self.readlinkat(m, i(a[0]), a[1], a[2], a[3]),
            libc::SYS_faccessat | libc::SYS_faccessat2 => self.faccessat(m, i(a[0]), a[1], i(a[2])),
            libc::SYS_fallocate => self.fallocate(m, i(a[0]), i(a[1]), a[2], a[3]),
            libc::SYS_renameat2 => self.renameat(m, i(a[0]), a[1], i(a[2]), a[3]),
            libc::SYS_statx => self.statx(m, i(a[0]), a[1], i(a[2]), a[4]),
            // mem
            libc::SYS_mmap => self.mmap(m, a[0], a[1], a[2], a[3], i(a[4]), a[5]),
            libc::SYS_mprotect => self.mprotect(m, a[0], a[1], a[2]),
            libc::SYS_munmap => self.munmap(m, a[0], a[1]),
            libc::SYS_brk => self.brk(m, a[0]),
            libc::SYS_mremap => self.mremap(m, a[0], a[1], a[2], a[3], a[4]),
            libc::SYS_msync => self.msync(m, a[0], a[1], i(a[2])),
            libc::SYS_madvise => self.madvise(m, a[0], a[1], i(a[2])),
            // mlock, munlock and their kin: nothing is ever swapped out.
            libc::SYS_mlock | libc::SYS_munlock | libc::SYS_munlockall => Ok(0),
            libc::SYS_mlock2 => {
                if a[2] & !1 != 0 {
                    err(libc::EINVAL)
                } else {
                    Ok(0)
                }
            }
            // mlockall: MCL_CURRENT, MCL_FUTURE, MCL_ONFAULT (only with one of the others).
            libc::SYS_mlockall => {
                if a[0] == 0 || a[0] & !7 != 0 || a[0] == 4 {
                    err(libc::EINVAL)
                } else {
                    Ok(0)
                }
            }
            libc::SYS_mincore => self.mincore(m, a[0], a[1], a[2]),
            libc::SYS_membarrier => self.membarrier(i(a[0]), a[1] as u32),
            // process
            libc::SYS_getpid => Ok(u64::from(self.pid)),
            libc::SYS_gettid => Ok(u64::from(self.current)),
            libc::SYS_getppid => self.getppid(),
            libc::SYS_getuid | libc::SYS_getgid | libc::SYS_geteuid | libc::SYS_getegid => Ok(process::UID), // getuid, getgid, geteuid, getegid
            libc::SYS_getpgrp => self.getpgid(0, false),
            libc::SYS_getpgid => self.getpgid(a[0], false),
            libc::SYS_getsid => self.getpgid(a[0], true),
            libc::SYS_getresuid | libc::SYS_getresgid => self.getresid(m, a),
            // -1 means "keep" only for the set{re,res}*id calls: here it is an invalid id.
            libc::SYS_setuid | libc::SYS_setgid if a[0] as u32 == u32::MAX => err(libc::EINVAL),
            libc::SYS_setuid | libc::SYS_setgid => process::setid(&a[..1]),
            libc::SYS_setreuid | libc::SYS_setregid => process::setid(&a[..2]),
            libc::SYS_setresuid | libc::SYS_setresgid => process::setid(&a[..3]),
            // setfsuid/setfsgid return the previous id, which never changes.
            libc::SYS_setfsuid | libc::SYS_setfsgid => Ok(process::UID),
            // Setting supplementary groups needs CAP_SETGID.
            libc::SYS_setgroups => err(libc::EPERM),
            // getgroups: the guest's user has no supplementary groups.
            libc::SYS_getgroups => Ok(0),
            libc::SYS_rt_sigaction => self.rt_sigaction(m, i(a[0]), a[1], a[2], a[3]),
            libc::SYS_rt_sigprocmask => self.rt_sigprocmask(m, i(a[0]), a[1], a[2], a[3]),
            libc::SYS_sigaltstack => self.sigaltstack(m, a[0], a[1]),
            libc::SYS_rt_sigsuspend => self.rt_sigsuspend(m, a[0], a[1]),
            libc::SYS_rt_sigtimedwait => self.rt_sigtimedwait(m, a[0], a[1], a[2], a[3]),
            libc::SYS_rt_sigpending => self.rt_sigpending(m, a[0], a[1]),
            libc::SYS_pause => self.pause(),
            libc::SYS_rt_sigreturn => {
                return match self.rt_sigreturn(m) {
                    Ok(()) => Dispatch::Restored,
                    Err(e) => Dispatch::Exit(e),
                }
            }
            libc::SYS_rt_sigqueueinfo | libc::SYS_rt_tgsigqueueinfo => {
                let queued = if nr == libc::SYS_rt_sigqueueinfo as u64 {
                    self.sigqueueinfo(m, a[0] as u32, None, i(a[1]), a[2])
                } else {
                    self.sigqueueinfo(m, a[0] as u32, Some(a[1] as u32), i(a[2]), a[3])
                };
                match queued {
                    Ok(Some(exit)) => return self.process_ends(m, exit),
                    Ok(None) => Ok(0),
                    Err(e) => Err(e),
                }
            }
            libc::SYS_kill | libc::SYS_tkill | libc::SYS_tgkill => {
                let killed = if nr == libc::SYS_tgkill as u64 {
                    self.tkill(m, Some(a[0] as u32), a[1] as u32, i(a[2]))
                } else if nr == libc::SYS_tkill as u64 {
                    self.tkill(m, None, a[0] as u32, i(a[1]))
                } else if a[0] as i32 != self.pid as i32 {
                    self.kill_pid(m, i64::from(a[0] as i32), i(a[1]))
                } else {
                    self.kill(i(a[1]), 0)
                };
                match killed {
                    Ok(Some(exit)) => return self.process_ends(m, exit),
                    Ok(None) => Ok(0),
                    Err(e) => Err(e),
                }
            }
            libc::SYS_exit_group => return self.process_ends(m, ProcessExit::Code((a[0] & 0xff) as i32)),
            libc::SYS_exit => {
                return if self.exit_thread(m) {
                    self.process_ends(m, ProcessExit::Code((a[0] & 0xff) as i32))
                } else {
                    Dispatch::ThreadExit
                }
            }
            libc::SYS_wait4 => self.wait4(m, i64::from(a[0] as i32), a[1], a[2], a[3]),
            libc::SYS_waitid => self.waitid(m, a[0], a[1], a[2], a[3]),
            libc::SYS_fork => self.fork(m, 17, 0, 0, 0, 0).and_then(|r| r.ok_or(Errno(VFORKED))),
            // CLONE_VM | CLONE_VFORK | SIGCHLD: the child runs on the parent's memory.
            libc::SYS_vfork => self.fork(m, 0x100 | 0x4000 | 17, 0, 0, 0, 0).and_then(|r| r.ok_or(Errno(VFORKED))),
            libc::SYS_setpgid => self.setpgid(a[0], a[1]),
            libc::SYS_setsid => self.setsid(),
            // clone(2) takes the low 32 bits of its flags (the higher ones are clone3's).
            libc::SYS_clone => self.clone_thread(m, a[0] & 0xffff_ffff, a[1], a[2], a[3], a[4]),
            libc::SYS_clone3 => self.clone3(m, a[0], a[1]),
            libc::SYS_futex => match self.futex(m, a[0], i(a[1]), a[2], a[3], a[4], a[5]) {
                Ok(Some(v)) => Ok(v),
                Ok(None) => return Dispatch::Block,
                Err(e) => Err(e),
            },
            libc::SYS_futex_waitv => match self.futex_waitv(m, a[0], a[1] as u32, a[2] as u32, a[3], i(a[4])) {
                Ok(Some(v)) => Ok(v),
                Ok(None) => return Dispatch::Block,
                Err(e) => Err(e),
            },
            // futex2: futex_wake, futex_wait, futex_requeue (Linux 6.7).
            454 => self.futex2_wake(m, a[0], a[1], i(a[2]), a[3] as u32),
            455 => match self.futex2_wait(m, a[0], a[1], a[2], a[3] as u32, a[4], i(a[5])) {
                Ok(Some(v)) => Ok(v),
                Ok(None) => return Dispatch::Block,
                Err(e) => Err(e),
            },
            456 => self.futex2_requeue(m, a[0], a[1] as u32, i(a[2]), i(a[3])),
            // System V IPC
            libc::SYS_shmget => self.shmget(m, i(a[0]), a[1], i(a[2])),
            libc::SYS_shmat => self.shmat(m, i(a[0]), a[1], i(a[2])),
            libc::SYS_shmdt => self.shmdt(m, a[0]),
            libc::SYS_shmctl => self.shmctl(m, i(a[0]), i(a[1]), a[2]),
            libc::SYS_semget => self.semget(m, i(a[0]), i(a[1]), i(a[2])),
            libc::SYS_semop => self.semtimedop(m, i(a[0]), a[1], a[2], 0),
            libc::SYS_semtimedop => self.semtimedop(m, i(a[0]), a[1], a[2], a[3]),
            libc::SYS_semctl => self.semctl(m, i(a[0]), i(a[1]), i(a[2]), a[3]),
            libc::SYS_msgget => self.msgget(m, i(a[0]), i(a[1])),
            libc::SYS_msgsnd => self.msgsnd(m, i(a[0]), a[1], a[2], i(a[3])),
            libc::SYS_msgrcv => self.msgrcv(m, i(a[0]), a[1], a[2], a[3] as i64, i(a[4])),
            libc::SYS_msgctl => self.msgctl(m, i(a[0]), i(a[1]), a[2]),
            // POSIX message queues
            libc::SYS_mq_open => self.mq_open(m, a[0], i(a[1]), a[2] as u32, a[3]),
            libc::SYS_mq_unlink => self.mq_unlink(m, a[0]),
            libc::SYS_mq_timedsend => self.mq_timedsend(m, i(a[0]), a[1], a[2], a[3], a[4]),
            libc::SYS_mq_timedreceive => self.mq_timedreceive(m, i(a[0]), a[1], a[2], a[3], a[4]),
            libc::SYS_mq_notify => self.mq_notify(m, i(a[0]), a[1]),
            libc::SYS_mq_getsetattr => self.mq_getsetattr(m, i(a[0]), a[1], a[2]),
            libc::SYS_sched_yield => return Dispatch::Yield,
            libc::SYS_uname => self.uname(m, a[0]),
            libc::SYS_getrlimit => self.prlimit(m, 0, a[0], 0, a[1]),
            // setrlimit is prlimit64 on the caller without the old value (Linux's do_prlimit).
            libc::SYS_setrlimit => self.prlimit(m, 0, a[0], a[1], 0),
            libc::SYS_prlimit64 => self.prlimit(m, a[0], a[1], a[2], a[3]),
            libc::SYS_sysinfo => self.sysinfo(m, a[0]),
            libc::SYS_getrusage => self.getrusage(m, i(a[0]), a[1]),
            libc::SYS_capget => self.capget(m, a[0], a[1]),
            libc::SYS_capset => self.capset(m, a[0], a[1]),
            // Protection keys: the CPU ferrite presents has no PKU (emu's CPUID table), so as
            // Linux without it, no key can be allocated (ENOSPC after checking the arguments);
            // only key 0, the default every page has, exists: pkey_mprotect with it or -1 is
            // mprotect, pkey_free frees it (0), and any other key is EINVAL.
            libc::SYS_pkey_alloc if a[0] != 0 || a[1] & !3 != 0 => err(libc::EINVAL),
            libc::SYS_pkey_alloc => err(libc::ENOSPC),
            libc::SYS_pkey_free => {
                if i(a[0]) == 0 {
                    Ok(0)
                } else {
                    err(libc::EINVAL)
                }
            }
            libc::SYS_pkey_mprotect if matches!(i(a[3]), -1 | 0) => self.mprotect(m, a[0], a[1], a[2]),
            libc::SYS_pkey_mprotect => err(libc::EINVAL),
            libc::SYS_times => self.times(m, a[0]),
            libc::SYS_arch_prctl => self.arch_prctl(m, i(a[0]), a[1]),
            libc::SYS_prctl => self.prctl(m, i(a[0]), a[1], [a[2], a[3], a[4]]),
            libc::SYS_personality => self.personality(a[0]),
            libc::SYS_set_tid_address => self.set_tid_address(a[0]),
            libc::SYS_set_robust_list => self.set_robust_list(a[0], a[1]),
            libc::SYS_rseq => err(libc::ENOSYS), // rseq: glibc falls back cleanly
            // NUMA memory policies: the machine has one node and no NUMA (getcpu's node 0); these
            // are the calls a Linux built without CONFIG_NUMA lacks (kernel/sys_ni.c), and ENOSYS
            // is what libnuma's `numa_available` and procps's `ps` take for "no NUMA": not named.
            libc::SYS_get_mempolicy
            | libc::SYS_set_mempolicy
            | libc::SYS_mbind
            | libc::SYS_migrate_pages
            | libc::SYS_move_pages
            | 450 => err(libc::ENOSYS), // 450: set_mempolicy_home_node
            libc::SYS_sched_getaffinity => self.sched_getaffinity(m, a[0], a[1], a[2]),
            libc::SYS_sched_setaffinity => self.sched_setaffinity(m, a[0], a[1], a[2]),
            libc::SYS_getcpu => self.getcpu(m, a[0], a[1]),
            libc::SYS_execve | libc::SYS_execveat => {
                let (dirfd, p, flags) = if nr == libc::SYS_execve as u64 {
                    (libc::AT_FDCWD, [a[0], a[1], a[2]], 0)
                } else {
                    (i(a[0]), [a[1], a[2], a[3]], i(a[4]))
                };
                match self.execve(m, dirfd, p[0], p[1], p[2], flags) {
                    Ok(Some(exit)) => return self.process_ends(m, exit),
                    Ok(None) => Ok(0),
                    Err(e) => Err(e),
                }
            }
            // time and randomness
            libc::SYS_time => self.time(m, a[0]),
            libc::SYS_clock_gettime => self.clock_gettime(m, i(a[0]), a[1]),
            libc::SYS_clock_getres => self.clock_getres(m, i(a[0]), a[1]),
            libc::SYS_gettimeofday => self.gettimeofday(m, a[0]),
            libc::SYS_nanosleep => match self.nanosleep(m, a[0], a[1]) {
                Ok(Some(v)) => Ok(v),
                Ok(None) => return Dispatch::Block,
                Err(e) => Err(e),
            },
            libc::SYS_clock_nanosleep => match self.clock_nanosleep(m, i(a[0]), i(a[1]), a[2], a[3]) {
                Ok(Some(v)) => Ok(v),
                Ok(None) => return Dispatch::Block,
                Err(e) => Err(e),
            },
            libc::SYS_getrandom => self.getrandom(m, a[0], a[1]),
            libc::SYS_alarm => self.alarm(m, a[0] as u32),
            libc::SYS_setitimer => self.setitimer(m, i(a[0]), a[1], a[2]),
            libc::SYS_getitimer => self.getitimer(m, i(a[0]), a[1]),
            libc::SYS_timer_create => self.timer_create(m, i(a[0]), a[1], a[2]),
            libc::SYS_timer_settime => self.timer_settime(m, i(a[0]), i(a[1]), a[2], a[3]),
            libc::SYS_timer_gettime => self.timer_gettime(m, i(a[0]), a[1]),
            libc::SYS_timer_getoverrun => self.timer_getoverrun(i(a[0])),
            libc::SYS_timer_delete => self.timer_delete(i(a[0])),
            _ => {
                self.note_unsupported(m, nr);
                err(libc::ENOSYS)
            }
        })
    }

    /// The run's inputs: every host file read, and standard input if the guest read it (as
    /// `<stdin>`), each with the BLAKE3 of its contents.
    pub fn take_inputs(&mut self) -> BTreeMap<String, String> {
        let mut inputs = std::mem::take(&mut self.inputs);
        if self.proc.stdin_read {
            inputs.insert("<stdin>".into(), self.proc.stdin_hash.finalize().to_hex().to_string());
        }
        inputs
    }

    /// What a crash now would leave of each regular file the guest has changed in its working
    /// directory, by path relative to it: its content as of its last `fsync` (`None`: absent).
    /// Empty unless `KernelConfig::track_durable`; the rules are [`fs::Durable`]'s.
    pub fn durable_files(&self) -> &BTreeMap<PathBuf, Option<Vec<u8>>> {
        &self.durable.now
    }

    /// The same files' contents when the run started (`None`: absent): what a crash before the
    /// guest first changed one leaves of it.
    pub fn initial_files(&self) -> &BTreeMap<PathBuf, Option<Vec<u8>>> {
        &self.durable.initial
    }

    /// Changes whenever [`Kernel::durable_files`] does.
    pub fn durable_generation(&self) -> u64 {
        self.durable.generation
    }

    /// The PM files the guest mapped: host path → device file id.
    pub fn pm_files(&self) -> &BTreeMap<String, u32> {
        &self.proc.pm_files
    }

    /// The running process ends with `how`: the run, if it is the first process; otherwise the
    /// running thread goes with it and another is scheduled.
    fn process_ends(&mut self, m: &mut Machine, how: ProcessExit) -> Dispatch {
        match self.exit_process(m, how) {
            Some(e) => Dispatch::Exit(e),
            None => Dispatch::ThreadExit,
        }
    }

    /// Records a refused feature by name (once), as for an unknown system call.
    pub(crate) fn note_named(&mut self, m: &Machine, nr: u64, name: &'static str) {
        self.note_refused(m, nr, name, "ENOSYS");
    }

    /// Records a refused case of a call by name (once), and the error the guest got for it.
    pub(crate) fn note_refused(&mut self, m: &Machine, nr: u64, name: &'static str, returned: &'static str) {
        if !self.unsupported.iter().any(|u| u.name == name) {
            self.unsupported.push(Unsupported { nr, name, pc: m.pc().wrapping_sub(2), returned });
        }
    }

    fn note_unsupported(&mut self, m: &Machine, nr: u64) {
        if !self.unsupported.iter().any(|u| u.nr == nr) {
            // RIP is past the two-byte `syscall`.
            self.unsupported.push(Unsupported {
                nr,
                name: names::name(nr),
                pc: m.pc().wrapping_sub(2),
                returned: "ENOSYS",
            });
        }
    }
}

enum Dispatch {
    Ret(SysResult),
    Exit(ProcessExit),
    Block,
    Yield,
    ThreadExit,
    Restored,
}
