//! The kernel's half of a machine snapshot (`emu::MachineSnapshot`): a copy of its state, and where
//! a recovery's snapshot must be taken at the latest.
//!
//! A recovery run is the same for every crash image up to its first system call that depends on
//! the PM files or changes a host file: everything before reads only the program, its libraries
//! and the virtual machine's own state. [`Kernel::snapshot_boundary`] names that call, and
//! [`Kernel::fork_copy`] copies the state restored runs start from. Open host files, directories
//! and pipes are not copied (a copy would share the host's file offset); a kernel that holds one
//! gives no copy, and its runs are not restored from snapshots. [`Kernel::checkpoint_copy`] is
//! the copy for snapshots of one run at any instruction (the debugger's timeline), which opens
//! host files again and copies pipes.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use emu::{Machine, Reg};

use crate::fd::{Description, Fd, FdTable, Kind, Pipe};
use crate::vfs::Target;
use crate::Kernel;

impl Kernel {
    /// A copy of the kernel's state for a recovery restored on another crash image, or `None`
    /// if it holds open host files, directories or pipes.
    pub fn fork_copy(&self) -> Option<Kernel> {
        self.copy(false)
    }

    /// A copy of the whole kernel's state for a snapshot of the same run ([`emu::Machine::checkpoint`]):
    /// open host files are opened again (a description of their own, at the same offset, so the
    /// run restored from the copy moves no other's offset), directories and pipes copied with
    /// what they hold. `None` if a file cannot be opened again. The files' contents are the
    /// caller's to keep.
    pub fn checkpoint_copy(&self) -> Option<Kernel> {
        self.copy(true)
    }

    fn copy(&self, files: bool) -> Option<Kernel> {
        // Other processes' address spaces live in the machine's tables, which are not copied.
        // Nor is a bridge to host clients ([`crate::listen`]): its sockets are the host's.
        if self.procs.len() > 1 || self.listen.is_some() {
            return None;
        }
        let mut fds = BTreeMap::new();
        // Descriptors sharing one description (dup) share its copy, and the two ends of a pipe
        // one pipe.
        let mut copies: Vec<(*const RefCell<Description>, Rc<RefCell<Description>>)> = Vec::new();
        let mut pipes: Vec<(*const RefCell<Pipe>, Rc<RefCell<Pipe>>)> = Vec::new();
        let mut pipe_copy = |p: &Rc<RefCell<Pipe>>| {
            let key = Rc::as_ptr(p);
            if let Some((_, c)) = pipes.iter().find(|(k, _)| *k == key) {
                return c.clone();
            }
            let o = p.borrow();
            let c = Rc::new(RefCell::new(o.clone()));
            pipes.push((key, c.clone()));
            c
        };
        for (n, fd) in &self.fds.fds {
            let key = Rc::as_ptr(&fd.desc);
            let desc = match copies.iter().find(|(k, _)| *k == key) {
                Some((_, c)) => c.clone(),
                None => {
                    let d = fd.desc.borrow();
                    let kind = match &d.kind {
                        Kind::Stdin => Kind::Stdin,
                        Kind::Stdout => Kind::Stdout,
                        Kind::Stderr => Kind::Stderr,
                        Kind::Null => Kind::Null,
                        Kind::Zero => Kind::Zero,
                        Kind::Urandom => Kind::Urandom,
                        Kind::Virtual { data, pos } => Kind::Virtual { data: data.clone(), pos: *pos },
                        Kind::File { file, host, pm } if files => {
                            Kind::File { file: reopen(file)?, host: host.clone(), pm: *pm }
                        }
                        Kind::Dir { host, entries, pos } if files => {
                            Kind::Dir { host: host.clone(), entries: entries.clone(), pos: *pos }
                        }
                        Kind::PipeRead(p) if files => Kind::PipeRead(pipe_copy(p)),
                        Kind::PipeWrite(p) if files => Kind::PipeWrite(pipe_copy(p)),
                        // Sockets, eventfds and epoll sets share state with their peers and
                        // the machine's names (net::Net): no copy is given, and such runs
                        // are not restored from snapshots.
                        Kind::File { .. }
                        | Kind::Dir { .. }
                        | Kind::PipeRead(_)
                        | Kind::PipeWrite(_)
                        | Kind::Socket(_)
                        | Kind::EventFd(_)
                        | Kind::Epoll(_)
                        | Kind::TimerFd(_)
                        | Kind::SignalFd(_) => return None,
                    };
                    let c =
                        Rc::new(RefCell::new(Description { kind, guest_path: d.guest_path.clone(), flags: d.flags }));
                    copies.push((key, c.clone()));
                    c
                }
            };
            fds.insert(*n, Fd { desc, cloexec: fd.cloexec });
        }
        Some(Kernel {
            cfg: self.cfg.clone(),
            fds: FdTable { fds, limit: self.fds.limit },
            mm: self.mm.clone(),
            proc: self.proc.clone(),
            rng: self.rng.clone(),
            inputs: self.inputs.clone(),
            unsupported: self.unsupported.clone(),
            threads: self.threads.clone(),
            current: self.current,
            next_tid: self.next_tid,
            max_threads: self.max_threads,
            wait_counter: self.wait_counter,
            created: self.created.clone(),
            woken: self.woken.clone(),
            handoffs: self.handoffs.clone(),
            pending: self.pending.clone(),
            privileged: self.privileged,
            pm_file_reads: self.pm_file_reads,
            durable: self.durable.clone(),
            waits: self.waits.clone(),
            // The copy may be given other directories: its roots are opened afresh.
            roots: Default::default(),
            // A snapshot of this run shares its temporary directories, as it shares the working
            // directory; a recovery restored on another crash image starts with empty ones.
            tmp: if files { self.tmp.clone() } else { Default::default() },
            block_keys: Vec::new(),
            block_wake: None,
            net: self.net.copy_keys(),
            procs: self.procs.iter().map(|(pid, p)| (*pid, p.copy_running())).collect(),
            pid: self.pid,
            space_pid: self.space_pid,
            execs: Vec::new(),
            timers: self.timers.clone(),
            listen: None,
            host_signals: self.host_signals,
        })
    }

    /// Whether the system call the machine stopped at names a path in the PM mount or may change
    /// a host file: a recovery's runs for different crash images may differ from here on.
    pub fn snapshot_boundary(&self, m: &Machine) -> bool {
        let nr = m.reg(Reg::RAX);
        let a = [m.reg(Reg::RDI), m.reg(Reg::RSI), m.reg(Reg::RDX), m.reg(Reg::R10)];
        let cwd = libc::AT_FDCWD as u64;
        let write_flags = (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u64;
        // (dirfd, path) arguments, and whether the call changes the file system.
        let (paths, changes): (&[(u64, u64)], bool) = match nr {
            2 => (&[(cwd, a[0])], a[1] & write_flags != 0),
            257 => (&[(a[0], a[1])], a[2] & write_flags != 0),
            4 | 6 | 21 | 80 | 89 | 137 => (&[(cwd, a[0])], false),
            262 | 267 | 269 | 332 | 439 => (&[(a[0], a[1])], false),
            76 | 83 | 84 | 87 => (&[(cwd, a[0])], true),
            82 | 86 => (&[(cwd, a[0]), (cwd, a[1])], true),
            88 => (&[(cwd, a[1])], true),
            258 | 263 => (&[(a[0], a[1])], true),
            264 | 265 | 316 => (&[(a[0], a[1]), (a[2], a[3])], true),
            266 => (&[(a[1], a[2])], true),
            _ => (&[], false),
        };
        changes
            || paths.iter().any(|&(dirfd, addr)| {
                // A private working directory holds each crash image's own files too.
                self.path_arg(m, dirfd as i32, addr, false).is_ok_and(|g| {
                    self.private_rel(&g).is_some() || matches!(self.resolve(&g), Ok(Target::Host { pm: true, .. }))
                })
            })
    }
}

/// A description of its own of the host file `file` is open on, with the same access, flags
/// and offset (through `/proc/self/fd`, which reaches a file even after it was unlinked).
fn reopen(file: &std::fs::File) -> Option<std::fs::File> {
    use std::io::Seek;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let fd = file.as_raw_fd();
    // SAFETY: F_GETFL on a descriptor this process owns; no memory is passed.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if fl < 0 {
        return None;
    }
    let acc = fl & libc::O_ACCMODE;
    let mut copy = std::fs::OpenOptions::new()
        .read(acc != libc::O_WRONLY)
        .write(acc != libc::O_RDONLY)
        .custom_flags(fl & (libc::O_APPEND | libc::O_NONBLOCK))
        .open(format!("/proc/self/fd/{fd}"))
        .ok()?;
    let mut at = file;
    let pos = at.stream_position().ok()?;
    copy.seek(std::io::SeekFrom::Start(pos)).ok()?;
    Some(copy)
}
