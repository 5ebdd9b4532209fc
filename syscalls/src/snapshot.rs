//! The kernel's half of a machine snapshot (`emu::MachineSnapshot`): a copy of its state, and where
//! a recovery's snapshot must be taken at the latest.
//!
//! A recovery run is the same for every crash image up to its first system call that depends on
//! the PM files or changes a host file: everything before reads only the program, its libraries
//! and the virtual machine's own state. [`Kernel::snapshot_boundary`] names that call, and
//! [`Kernel::fork_copy`] copies the state restored runs start from. Open host files, directories
//! and pipes are not copied (a copy would share the host's file offset); a kernel that holds one
//! gives no copy, and its runs are not restored from snapshots. [`Kernel::checkpoint_copy`] is
//! the copy for snapshots of one run at any instruction (the debugger's timeline, explorations),
//! which opens host files again and copies pipes, sockets, epoll sets, eventfds and timerfds,
//! over every process's descriptor table; the processes' address spaces are the machine's to
//! snapshot and restore ([`Kernel::address_spaces`], [`Kernel::give_address_spaces`]). Both
//! copy System V IPC (`crate::sysvipc::Ipc::snapshot_copy`: the bytes of a segment nobody has
//! attached go with the copy, an attached one's with the attachers' memory) and POSIX message
//! queues (one copy per queue, shared by its name and descriptions). Only `--listen`'s bridge
//! to host sockets is never copied.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};

use emu::{Machine, Reg};

use crate::fd::{Description, Fd, FdTable, Kind, Pipe};
use crate::mqueue::MQueue;
use crate::net::Sock;
use crate::poll::{Epoll, Interest};
use crate::vfs::Target;
use crate::Kernel;

impl Kernel {
    /// A copy of the kernel's state for a recovery restored on another crash image, or `None`
    /// if it holds open host files, directories or pipes, or more than one process.
    pub fn fork_copy(&self) -> Option<Kernel> {
        if self.procs.len() > 1 {
            return None;
        }
        self.copy(false).ok()
    }

    /// A copy of the whole kernel's state for a snapshot of the same run ([`emu::Machine::checkpoint`]):
    /// open host files are opened again (a description of their own, at the same offset, so the
    /// run restored from the copy moves no other's offset), directories and pipes copied with
    /// what they hold. `None` if a file cannot be opened again. The files' contents are the
    /// caller's to keep.
    pub fn checkpoint_copy(&self) -> Option<Kernel> {
        self.checkpoint_copy_or_why().ok()
    }

    /// [`Kernel::checkpoint_copy`], or why there is none. With several processes, every
    /// process's descriptor table is copied over one set of description copies (a description
    /// a fork shares stays shared), and the copy's processes hold no address space: the caller
    /// gives it those the machine restores ([`Kernel::give_address_spaces`]).
    pub fn checkpoint_copy_or_why(&self) -> Result<Kernel, &'static str> {
        self.copy(true)
    }

    /// The address spaces of the processes that are not running, by pid: what
    /// [`emu::Machine::checkpoint_spaces`] captures with the running one.
    pub fn address_spaces(&self) -> Vec<&emu::AddressSpace> {
        self.procs.values().filter_map(|p| p.saved.as_ref()?.space.as_ref().map(|(s, _)| s)).collect()
    }

    /// Takes the address spaces of the processes that are not running away, by pid (for
    /// [`emu::Machine::restore_spaces`], which keeps those it can reuse).
    pub fn take_address_spaces(&mut self) -> Vec<emu::AddressSpace> {
        self.procs.values_mut().filter_map(|p| p.saved.as_mut()?.space.take().map(|(s, _)| s)).collect()
    }

    /// Gives a copy ([`Kernel::checkpoint_copy`]) the address spaces of its processes that are
    /// not running, by pid, as [`Kernel::address_spaces`] listed them when the copy was made.
    /// False if their number is not its processes'.
    pub fn give_address_spaces(&mut self, spaces: Vec<emu::AddressSpace>) -> bool {
        // The processes that held a space when the copy was made (owners of a space no running
        // process runs in) kept its memory layout for it.
        let holders: Vec<&mut crate::procs::Saved> =
            self.procs.values_mut().filter_map(|p| p.saved.as_mut()).filter(|s| s.layout.is_some()).collect();
        if holders.len() != spaces.len() {
            return false;
        }
        for (h, s) in holders.into_iter().zip(spaces) {
            h.space = h.layout.take().map(|mm| (s, mm));
        }
        true
    }

    fn copy(&self, files: bool) -> Result<Kernel, &'static str> {
        // A bridge to host clients ([`crate::listen`]): its sockets are the host's.
        if self.listen.is_some() {
            return Err("--listen's connections are host sockets");
        }
        let mut c = Copier { files, ..Copier::default() };
        let fds = c.table(&self.fds)?;
        let mut procs = BTreeMap::new();
        for (&pid, p) in &self.procs {
            let saved = match &p.saved {
                Some(s) => Some(s.copy(c.table(&s.fds)?)),
                None => None,
            };
            procs.insert(pid, crate::procs::Proc { saved, ..p.copy_running() });
        }
        // A FIFO's pipe is the one its open descriptions (copied above) share; one nobody has
        // open starts afresh at its next open, and a copy without pipes has none.
        // A queue is shared by its name and its descriptions: both get the one copy.
        let mqueues = self.mqueues.iter().map(|(name, q)| (name.clone(), c.mqueue(q))).collect();
        let fifos = if files {
            self.fifos.iter().map(|(&k, f)| (k, f.with_pipe(c.pipe(&f.pipe)))).collect()
        } else {
            BTreeMap::new()
        };
        if c.in_flight {
            return Err("descriptors are in flight over a unix socket (SCM_RIGHTS)");
        }
        c.fix_epolls();
        // Locks of descriptions go to the descriptions' copies.
        let locks = self.locks.copy_with(&|d| c.copies.iter().find(|(k, _)| *k == d).map(|(_, c)| c.clone()));
        let net = self.net.copy_with(&|s| c.socks.iter().find(|(k, _)| *k == Rc::as_ptr(s)).map(|(_, c)| c.clone()));
        Ok(Kernel {
            cfg: self.cfg.clone(),
            fds,
            mm: self.mm.clone(),
            proc: self.proc.clone(),
            rng: self.rng.clone(),
            inputs: self.inputs.clone(),
            times: self.times.clone(),
            inodes: self.inodes.clone(),
            fifos,
            unsupported: self.unsupported.clone(),
            threads: self.threads.clone(),
            current: self.current,
            next_tid: self.next_tid,
            max_threads: self.max_threads,
            wait_counter: self.wait_counter,
            created: self.created.clone(),
            woken: self.woken.clone(),
            handoffs: self.handoffs.clone(),
            reaped: self.reaped.clone(),
            shared_pending: self.shared_pending.clone(),
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
            net,
            procs,
            pid: self.pid,
            space_pid: self.space_pid,
            execs: Vec::new(),
            timers: self.timers.clone(),
            listen: None,
            host_signals: self.host_signals,
            io_epoch: self.io_epoch,
            inotify: crate::inotify::Registry { instances: Vec::new(), cookie: self.inotify.cookie },
            first_killed: None,
            locks,
            ipc: self.ipc.snapshot_copy(),
            mqueues,
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
                    self.in_overlay(&g).is_some() || matches!(self.resolve(&g), Ok(Target::Host { pm: true, .. }))
                })
            })
    }
}

type EpollRef = Rc<RefCell<Epoll>>;

/// Copies descriptor tables, each description once however many descriptors (of however many
/// processes) share it, the two ends of a pipe over one pipe, and the in-machine objects behind
/// descriptors as a graph: a socket's connection (two pipes its peer's copy shares), the
/// connections queued on a listener, a datagram socket's peer, an epoll set's entries (the
/// copies of the descriptions they watch), eventfds and timerfds.
#[derive(Default)]
struct Copier {
    /// Whether host files, directories, pipes and the in-machine objects are copied (host files
    /// opened again) or refused.
    files: bool,
    copies: Vec<(*const RefCell<Description>, Rc<RefCell<Description>>)>,
    pipes: Vec<(*const RefCell<Pipe>, Rc<RefCell<Pipe>>)>,
    socks: Vec<(*const RefCell<Sock>, Rc<RefCell<Sock>>)>,
    mqueues: Vec<(*const RefCell<MQueue>, Rc<RefCell<MQueue>>)>,
    /// Epoll sets and their copies, whose entries are filled in once every description is copied.
    epolls: Vec<(EpollRef, EpollRef)>,
    /// A socket holds descriptions passed with `SCM_RIGHTS` and not yet received: the copy
    /// would share them with the original, so none is made.
    in_flight: bool,
}

impl Copier {
    fn sock(&mut self, s: &Rc<RefCell<Sock>>) -> Rc<RefCell<Sock>> {
        let key = Rc::as_ptr(s);
        if let Some((_, c)) = self.socks.iter().find(|(k, _)| *k == key) {
            return c.clone();
        }
        let o = s.borrow();
        self.in_flight |= o.inbox.iter().any(|(_, _, a)| a.as_ref().is_some_and(|a| !a.files.is_empty()));
        // Registered before its peers are copied: a pair of datagram sockets names each other.
        let c = Rc::new(RefCell::new(Sock {
            domain: o.domain,
            ty: o.ty,
            id: o.id,
            local: o.local.clone(),
            peer: o.peer.clone(),
            conn: None,
            queue: None,
            inbox: o.inbox.clone(),
            dgram_peer: None,
            shut_rd: o.shut_rd,
            shut_wr: o.shut_wr,
            opts: o.opts.clone(),
            arrivals: o.arrivals,
            timeouts: o.timeouts,
        }));
        self.socks.push((key, c.clone()));
        let conn = o.conn.as_ref().map(|(rx, tx)| (self.pipe(rx), self.pipe(tx)));
        let queue = o.queue.as_ref().map(|q| q.iter().map(|x| self.sock(x)).collect());
        let dgram_peer = o.dgram_peer.as_ref().map(|w| match w.upgrade() {
            Some(p) => Rc::downgrade(&self.sock(&p)),
            None => Weak::new(),
        });
        let mut m = c.borrow_mut();
        m.conn = conn;
        m.queue = queue;
        m.dgram_peer = dgram_peer;
        drop(m);
        c
    }

    /// Each epoll set's entries, watching the copies of what the original's watch.
    fn fix_epolls(&mut self) {
        for (orig, copy) in &self.epolls {
            let interest = orig
                .borrow()
                .interest
                .iter()
                .map(|(&fd, i)| {
                    let desc = i
                        .desc
                        .upgrade()
                        .and_then(|d| self.copies.iter().find(|(k, _)| *k == Rc::as_ptr(&d)))
                        .map_or_else(Weak::new, |(_, c)| Rc::downgrade(c));
                    (fd, Interest { events: i.events, et: i.et, seen: i.seen, data: i.data, desc })
                })
                .collect();
            copy.borrow_mut().interest = interest;
        }
    }

    /// The copy of a POSIX message queue, one however many descriptions and names share it.
    fn mqueue(&mut self, q: &Rc<RefCell<MQueue>>) -> Rc<RefCell<MQueue>> {
        let key = Rc::as_ptr(q);
        if let Some((_, c)) = self.mqueues.iter().find(|(k, _)| *k == key) {
            return c.clone();
        }
        let c = Rc::new(RefCell::new(q.borrow().clone()));
        self.mqueues.push((key, c.clone()));
        c
    }

    fn pipe(&mut self, p: &Rc<RefCell<Pipe>>) -> Rc<RefCell<Pipe>> {
        let key = Rc::as_ptr(p);
        if let Some((_, c)) = self.pipes.iter().find(|(k, _)| *k == key) {
            return c.clone();
        }
        self.in_flight |= p.borrow().anc.iter().any(|a| !a.files.is_empty());
        let c = Rc::new(RefCell::new(p.borrow().clone()));
        self.pipes.push((key, c.clone()));
        c
    }

    fn table(&mut self, t: &FdTable) -> Result<FdTable, &'static str> {
        let files = self.files;
        let mut fds = BTreeMap::new();
        for (n, fd) in &t.fds {
            let key = Rc::as_ptr(&fd.desc);
            let desc = match self.copies.iter().find(|(k, _)| *k == key) {
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
                        Kind::Comm { tid, pos } => Kind::Comm { tid: *tid, pos: *pos },
                        // A memfd reopened is the same memory: what a run wrote after the
                        // snapshot would be seen by every run restored from it.
                        Kind::File { .. } if crate::splice::is_memfd(&d.guest_path) => {
                            return Err("the guest holds a memfd open (its contents are not captured)")
                        }
                        Kind::File { file, host, pm } if files => Kind::File {
                            file: reopen(file).ok_or("a host file the guest holds open cannot be opened again")?,
                            host: host.clone(),
                            pm: *pm,
                        },
                        Kind::Dir { host, entries, pos } if files => {
                            Kind::Dir { host: host.clone(), entries: entries.clone(), pos: *pos }
                        }
                        Kind::PipeRead(p) if files => Kind::PipeRead(self.pipe(p)),
                        Kind::PipeWrite(p) if files => Kind::PipeWrite(self.pipe(p)),
                        Kind::PipeRdWr(p) if files => Kind::PipeRdWr(self.pipe(p)),
                        Kind::Socket(s) if files => Kind::Socket(self.sock(s)),
                        Kind::EventFd(e) if files => Kind::EventFd(Rc::new(RefCell::new(e.borrow().clone()))),
                        Kind::TimerFd(t) if files => Kind::TimerFd(Rc::new(RefCell::new(t.borrow().clone()))),
                        Kind::Epoll(e) if files => {
                            let copy = Rc::new(RefCell::new(Epoll { interest: BTreeMap::new(), id: e.borrow().id }));
                            self.epolls.push((e.clone(), copy.clone()));
                            Kind::Epoll(copy)
                        }
                        Kind::SignalFd(f) if files => Kind::SignalFd(Rc::new(RefCell::new(f.borrow().clone()))),
                        Kind::File { .. }
                        | Kind::Dir { .. }
                        | Kind::PipeRead(_)
                        | Kind::PipeWrite(_)
                        | Kind::PipeRdWr(_) => return Err("the guest holds a host file, directory or pipe open"),
                        // Plain kernel data, as pipes are, but of no host file: copied for
                        // a recovery's snapshot too.
                        Kind::MQueue(q) => Kind::MQueue(self.mqueue(q)),
                        // A recovery's copy: restored on other crash images' files, it keeps
                        // to the plain descriptors.
                        Kind::Socket(_)
                        | Kind::EventFd(_)
                        | Kind::Epoll(_)
                        | Kind::TimerFd(_)
                        | Kind::SignalFd(_)
                        | Kind::Inotify(_) => return Err(
                            "the guest holds a socket, eventfd, epoll set, timerfd, signalfd or inotify instance open",
                        ),
                    };
                    let c =
                        Rc::new(RefCell::new(Description { kind, guest_path: d.guest_path.clone(), flags: d.flags }));
                    self.copies.push((key, c.clone()));
                    c
                }
            };
            fds.insert(*n, Fd { desc, cloexec: fd.cloexec });
        }
        Ok(FdTable { fds, limit: t.limit, hard: t.hard })
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
