//! The Linux x86-64 system-call layer that ferrite's guests run on.
//!
//! One module per family, behind the dispatch table in [`Kernel::syscall`]: [`fd`] (descriptors,
//! read/write and friends, pipes), [`fs`] (paths: open, stat, directories), [`vfs`] (how a guest
//! path maps to the host, the sandbox, and the virtual files that hide the host), [`mem`]
//! (brk, mmap and friends), [`process`] (start-up of static and dynamic executables, identities,
//! limits), [`thread`] (clone, futexes, thread exit, scheduling decisions), [`signal`]
//! (dispositions, masks, delivery and `rt_sigreturn`), [`time`] (the virtual clock and
//! randomness). Each handler says which Linux semantics it follows and what it leaves out.
//!
//! Everything the guest can observe is a function of the run's inputs and seed: time advances with
//! retired instructions, randomness comes from the seed, identities and stat fields are fixed or
//! derived from paths, directory listings are sorted. Host files the guest reads are hashed into
//! [`Kernel::inputs`] so a replay can tell when they changed.
//!
//! An unknown system call returns `-ENOSYS`, as Linux does, and is recorded once (name, PC) in
//! [`Kernel::unsupported`] for the caller to report with a source line.

pub mod beneath;
pub mod fd;
pub mod fs;
pub mod landlock;
pub mod mem;
pub mod names;
pub mod process;
pub mod signal;
pub mod snapshot;
pub mod thread;
pub mod time;
mod trace;
pub mod vfs;

use std::collections::BTreeMap;
use std::path::PathBuf;

use emu::{Machine, Reg};

pub use process::{exec, ExecError, ProcessExit};
pub use signal::SigInfo;
pub use thread::Deadlock;

/// A Linux errno value (positive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

pub type SysResult = Result<u64, Errno>;

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
}

/// The outcome of one system call for the run loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    /// The calling thread blocked; its result is set when it is woken.
    Block,
    /// The calling thread yielded the CPU.
    Yield,
    /// The calling thread exited; others remain.
    ThreadExit,
    Exit(ProcessExit),
}

/// A system call the guest made that ferrite does not implement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    pub nr: u64,
    pub name: &'static str,
    pub pc: u64,
}

/// The guest's view of the kernel: descriptors, memory layout, identities, signal dispositions.
pub struct Kernel {
    pub cfg: KernelConfig,
    pub(crate) fds: fd::FdTable,
    pub(crate) mm: mem::MemLayout,
    pub(crate) proc: process::ProcState,
    pub(crate) rng: time::SeededRng,
    /// Host files the guest read, by guest path, with the BLAKE3 hash of their contents.
    pub inputs: BTreeMap<String, String>,
    /// Unknown system calls, each recorded once.
    pub unsupported: Vec<Unsupported>,
    pub(crate) threads: BTreeMap<u32, thread::KThread>,
    /// The running thread.
    pub current: u32,
    pub(crate) next_tid: u32,
    pub(crate) max_threads: usize,
    pub(crate) wait_counter: u64,
    /// Threads created by the last system call: (tid, handle), the handle being the TLS pointer
    /// (glibc's `pthread_t`). The caller drains it to report thread creation.
    pub created: Vec<(u32, u64)>,
    /// Signals raised by system calls, to deliver to their thread when the call returns.
    pub(crate) pending: Vec<(u32, signal::SigInfo)>,
    /// Which held reader to release when every thread is held (`emu::sched::Hold::privileged`).
    pub privileged: u32,
    /// Reads of a PM file's contents that bypass the device, so no pass sees them as loads:
    /// `read`/`pread`/`readv` of a PM file, and private mappings of one.
    pub pm_file_reads: u64,
    /// What a crash would leave of the files changed in the working directory
    /// (`KernelConfig::track_durable`).
    pub(crate) durable: fs::Durable,
    /// Reused by `schedule` for the runnable threads, so that scheduling does not allocate.
    pub(crate) runnable_buf: Vec<u32>,
    /// The writable roots and their descriptors, opened on the first change ([`vfs`]).
    pub(crate) roots: vfs::Roots,
}

impl Kernel {
    pub fn new(cfg: KernelConfig) -> Kernel {
        let rng = time::SeededRng::new(cfg.seed);
        Kernel {
            fds: fd::FdTable::with_stdio(cfg.max_open_files),
            mm: mem::MemLayout::default(),
            proc: process::ProcState::default(),
            rng,
            inputs: BTreeMap::new(),
            unsupported: Vec::new(),
            threads: BTreeMap::from([(process::PID, thread::KThread::new(process::PID))]),
            current: process::PID,
            next_tid: process::PID + 1,
            max_threads: cfg.max_threads,
            wait_counter: 0,
            created: Vec::new(),
            pending: Vec::new(),
            privileged: 0,
            pm_file_reads: 0,
            durable: fs::Durable::default(),
            runnable_buf: Vec::new(),
            roots: Default::default(),
            cfg,
        }
    }

    /// Handles the system call the machine stopped at (RIP already past the instruction).
    pub fn syscall(&mut self, m: &mut Machine) -> Outcome {
        let nr = m.reg(Reg::RAX);
        let a = [m.reg(Reg::RDI), m.reg(Reg::RSI), m.reg(Reg::RDX), m.reg(Reg::R10), m.reg(Reg::R8), m.reg(Reg::R9)];
        // The call as made, before it runs (a path argument may be freed by the call).
        let traced = self.cfg.trace_syscalls.then(|| trace::call(m, self.current, nr, a));
        let d = self.dispatch(m, nr, a);
        if let Some(call) = traced {
            trace::result(&call, nr, &d);
        }
        let res = match d {
            Dispatch::Ret(r) => r,
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
        Ret(match nr {
            // fd
            0 => self.read(m, i(a[0]), a[1], a[2]),
            1 => self.write(m, i(a[0]), a[1], a[2]),
            3 => self.close(i(a[0])),
            8 => self.lseek(i(a[0]), a[1] as i64, i(a[2])),
            16 => self.ioctl(m, i(a[0]), a[1], a[2]),
            17 => self.pread(m, i(a[0]), a[1], a[2], a[3]),
            18 => self.pwrite(m, i(a[0]), a[1], a[2], a[3]),
            19 => self.readv(m, i(a[0]), a[1], a[2]),
            20 => self.writev(m, i(a[0]), a[1], a[2]),
            22 => self.pipe2(m, a[0], 0),
            32 => self.dup(i(a[0])),
            33 => self.dup3(i(a[0]), i(a[1]), 0, true),
            72 => self.fcntl(m, i(a[0]), i(a[1]), a[2]),
            // getsockname, getpeername: no descriptor is a socket (bash asks about stdin).
            51 | 52 => self.fds.get(i(a[0])).and_then(|_| err(libc::ENOTSOCK)),
            // flock: one process, so every lock is granted (after checking the descriptor).
            73 => self.fds.get(i(a[0])).map(|_| 0),
            // fadvise64: advice changes nothing the guest can observe (ESPIPE on a pipe).
            221 => self.fds.get(i(a[0])).and_then(|f| match f.desc.borrow().kind {
                fd::Kind::PipeRead(_) | fd::Kind::PipeWrite(_) => err(libc::ESPIPE),
                _ => Ok(0),
            }),
            74 | 75 => self.fsync(m, i(a[0])),
            292 => self.dup3(i(a[0]), i(a[1]), i(a[2]), false),
            293 => self.pipe2(m, a[0], i(a[1])),
            436 => self.close_range(i(a[0]) as u32, i(a[1]) as u32, i(a[2]) as u32),
            // fs
            2 => self.openat(m, libc::AT_FDCWD, a[0], i(a[1]), a[2] as u32),
            85 => self.openat(m, libc::AT_FDCWD, a[0], libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, a[1] as u32),
            // utime, utimes, futimesat, utimensat: timestamps are virtual (every file shows the
            // epoch), so setting them checks the file and changes nothing.
            132 | 235 => self.utimensat(m, libc::AT_FDCWD, a[0], 0),
            261 => self.utimensat(m, i(a[0]), a[1], 0),
            280 => self.utimensat(m, i(a[0]), a[1], i(a[3])),
            // copy_file_range: EXDEV, as between file systems, so callers (coreutils' cp) copy
            // through read and write, which ferrite models.
            326 => self.fds.get(i(a[0])).and_then(|_| self.fds.get(i(a[2]))).and_then(|_| err(libc::EXDEV)),
            4 => self.fstatat(m, libc::AT_FDCWD, a[0], a[1], 0),
            5 => self.fstat(m, i(a[0]), a[1]),
            6 => self.fstatat(m, libc::AT_FDCWD, a[0], a[1], libc::AT_SYMLINK_NOFOLLOW),
            21 => self.faccessat(m, libc::AT_FDCWD, a[0], i(a[1])),
            76 => self.truncate(m, a[0], a[1]),
            77 => self.ftruncate(m, i(a[0]), a[1]),
            79 => self.getcwd(m, a[0], a[1]),
            80 => self.chdir(m, a[0]),
            81 => self.fchdir(i(a[0])),
            82 => self.renameat(m, libc::AT_FDCWD, a[0], libc::AT_FDCWD, a[1]),
            83 => self.mkdirat(m, libc::AT_FDCWD, a[0], a[1] as u32),
            84 => self.unlinkat(m, libc::AT_FDCWD, a[0], libc::AT_REMOVEDIR),
            87 => self.unlinkat(m, libc::AT_FDCWD, a[0], 0),
            89 => self.readlinkat(m, libc::AT_FDCWD, a[0], a[1], a[2]),
            86 => self.linkat(m, libc::AT_FDCWD, a[0], libc::AT_FDCWD, a[1], 0),
            88 => self.symlinkat(m, a[0], libc::AT_FDCWD, a[1]),
            265 => self.linkat(m, i(a[0]), a[1], i(a[2]), a[3], i(a[4])),
            266 => self.symlinkat(m, a[0], i(a[1]), a[2]),
            90 => self.fchmodat(m, libc::AT_FDCWD, a[0], a[1] as u32, 0),
            91 => self.fchmod(i(a[0]), a[1] as u32),
            268 => self.fchmodat(m, i(a[0]), a[1], a[2] as u32, 0),
            95 => self.umask(a[0] as u32),
            137 => self.statfs(m, a[0], a[1]),
            138 => self.fstatfs(m, i(a[0]), a[1]),
            217 => self.getdents64(m, i(a[0]), a[1], a[2]),
            257 => self.openat(m, i(a[0]), a[1], i(a[2]), a[3] as u32),
            258 => self.mkdirat(m, i(a[0]), a[1], a[2] as u32),
            262 => self.fstatat(m, i(a[0]), a[1], a[2], i(a[3])),
            263 => self.unlinkat(m, i(a[0]), a[1], i(a[2])),
            264 => self.renameat(m, i(a[0]), a[1], i(a[2]), a[3]),
            267 => self.readlinkat(m, i(a[0]), a[1], a[2], a[3]),
            269 | 439 => self.faccessat(m, i(a[0]), a[1], i(a[2])),
            285 => self.fallocate(i(a[0]), i(a[1]), a[2], a[3]),
            316 => self.renameat(m, i(a[0]), a[1], i(a[2]), a[3]),
            332 => self.statx(m, i(a[0]), a[1], i(a[2]), a[4]),
            // mem
            9 => self.mmap(m, a[0], a[1], a[2], a[3], i(a[4]), a[5]),
            10 => self.mprotect(m, a[0], a[1], a[2]),
            11 => self.munmap(m, a[0], a[1]),
            12 => self.brk(m, a[0]),
            25 => self.mremap(m, a[0], a[1], a[2], a[3], a[4]),
            26 => self.msync(m, a[0], a[1], i(a[2])),
            28 => self.madvise(m, a[0], a[1], i(a[2])),
            149 | 150 => Ok(0), // mlock, munlock: nothing is ever swapped
            // process
            39 => Ok(u64::from(process::PID)),
            186 => Ok(u64::from(self.current)),
            110 => Ok(1),                                   // getppid
            102 | 104 | 107 | 108 => Ok(process::UID),      // getuid, getgid, geteuid, getegid
            111 | 121 | 124 => Ok(u64::from(process::PID)), // getpgrp, getpgid, getsid
            118 | 120 => self.getresid(m, a),
            // getgroups: the guest's user has no supplementary groups.
            115 => Ok(0),
            13 => self.rt_sigaction(m, i(a[0]), a[1], a[2], a[3]),
            14 => self.rt_sigprocmask(m, i(a[0]), a[1], a[2], a[3]),
            131 => self.sigaltstack(m, a[0], a[1]),
            15 => {
                return match self.rt_sigreturn(m) {
                    Ok(()) => Dispatch::Restored,
                    Err(e) => Dispatch::Exit(e),
                }
            }
            62 | 200 | 234 => match self.kill(i(a[if nr == 234 { 2 } else { 1 }])) {
                Ok(Some(exit)) => return Dispatch::Exit(exit),
                Ok(None) => Ok(0),
                Err(e) => Err(e),
            },
            231 => return Dispatch::Exit(ProcessExit::Code((a[0] & 0xff) as i32)),
            60 => {
                return if self.exit_thread(m) {
                    Dispatch::Exit(ProcessExit::Code((a[0] & 0xff) as i32))
                } else {
                    Dispatch::ThreadExit
                }
            }
            56 => self.clone_thread(m, a[0], a[1], a[2], a[3], a[4]),
            435 => self.clone3(m, a[0], a[1]),
            202 => match self.futex(m, a[0], i(a[1]), a[2], a[3], a[4], a[5]) {
                Ok(Some(v)) => Ok(v),
                Ok(None) => return Dispatch::Block,
                Err(e) => Err(e),
            },
            24 => return Dispatch::Yield,
            63 => self.uname(m, a[0]),
            97 => self.prlimit(m, 0, a[0], 0, a[1]),
            160 => err(libc::EPERM), // setrlimit: limits are part of the run's definition
            302 => self.prlimit(m, a[0], a[1], a[2], a[3]),
            99 => self.sysinfo(m, a[0]),
            158 => self.arch_prctl(m, i(a[0]), a[1]),
            157 => self.prctl(i(a[0])),
            218 => self.set_tid_address(a[0]),
            273 => self.set_robust_list(a[0], a[1]),
            334 => err(libc::ENOSYS), // rseq: glibc falls back cleanly
            204 => self.sched_getaffinity(m, a[1], a[2]),
            203 => Ok(0), // sched_setaffinity
            309 => self.getcpu(m, a[0], a[1]),
            57 | 58 | 59 | 322 => {
                self.note_named(m, nr, "fork, vfork and execve (one process per run)");
                err(libc::ENOSYS)
            }
            // time and randomness
            201 => self.time(m, a[0]),
            228 => self.clock_gettime(m, i(a[0]), a[1]),
            229 => self.clock_getres(m, a[1]),
            96 => self.gettimeofday(m, a[0]),
            35 => match self.nanosleep(m, a[0], a[1]) {
                Ok(Some(v)) => Ok(v),
                Ok(None) => return Dispatch::Block,
                Err(e) => Err(e),
            },
            230 => match self.clock_nanosleep(m, i(a[0]), i(a[1]), a[2], a[3]) {
                Ok(Some(v)) => Ok(v),
                Ok(None) => return Dispatch::Block,
                Err(e) => Err(e),
            },
            318 => self.getrandom(m, a[0], a[1]),
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

    /// Records a refused feature by name (once), as for an unknown system call.
    pub(crate) fn note_named(&mut self, m: &Machine, nr: u64, name: &'static str) {
        if !self.unsupported.iter().any(|u| u.name == name) {
            self.unsupported.push(Unsupported { nr, name, pc: m.pc().wrapping_sub(2) });
        }
    }

    fn note_unsupported(&mut self, m: &Machine, nr: u64) {
        if !self.unsupported.iter().any(|u| u.nr == nr) {
            // RIP is past the two-byte `syscall`.
            self.unsupported.push(Unsupported { nr, name: names::name(nr), pc: m.pc().wrapping_sub(2) });
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
