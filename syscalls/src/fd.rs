//! File descriptors: the table, open file descriptions, and the calls that move bytes.
//!
//! Follows Linux: descriptors are the lowest free numbers; `dup` shares the open file description
//! (offset and status flags) while `FD_CLOEXEC` belongs to the descriptor; reads and writes on
//! regular files go to the host file (so offsets, `O_APPEND` and short reads behave as the host's
//! file system does); standard output and error pass straight through to ferrite's own. Standard
//! input is read from ferrite's standard input and hashed into the run record.
//!
//! Pipes block as Linux's do: reading an empty pipe whose write end is open, or writing a full
//! one (64 KiB) whose read end is open, blocks the thread ([`crate::thread::Wait::Io`]) until
//! the other end changes it, unless the description is `O_NONBLOCK` (`EAGAIN`). A thread that
//! reads its own empty pipe with nobody else to write it is therefore a deadlock, reported
//! where it blocked, as Linux would hang there. Sockets are [`crate::net`]'s, eventfds and epoll
//! sets [`crate::poll`]'s.
//!
//! Left out: a blocking write larger than the room left writes what fits and returns the short
//! count (Linux writes it all, blocking in between; writes of up to `PIPE_BUF` are atomic in
//! both).

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::rc::Rc;

use emu::Machine;

use crate::{err, Errno, Kernel, SysResult};

/// Bytes a pipe holds before a write blocks (Linux's default pipe size).
pub const PIPE_CAPACITY: usize = 65536;
/// Writes up to this size go into a pipe whole or not at all.
const PIPE_BUF: usize = 4096;

/// Bytes in a pipe (or one direction of a connected socket); the ends count their open
/// descriptions so readers see EOF and writers EPIPE.
#[derive(Debug, Clone)]
pub struct Pipe {
    /// Written and not yet read, oldest first.
    pub buf: VecDeque<u8>,
    /// Open descriptions of the write end: at 0 an empty pipe reads as EOF.
    pub writers: usize,
    /// Open descriptions of the read end.
    pub readers: usize,
    /// Its readiness key: threads blocked on either end wait on it.
    pub id: u64,
    /// Bytes it holds before a write blocks.
    pub capacity: usize,
    /// The lengths of the messages in `buf`, for a channel that keeps message boundaries
    /// (`SOCK_SEQPACKET`); `None` for a byte stream.
    pub msgs: Option<VecDeque<usize>>,
    /// Bytes taken from the front since the pipe was made: the stream position of `buf[0]`.
    pub taken: u64,
    /// What the sends of an `AF_UNIX` socket attached to their bytes, oldest first, covering
    /// every byte in `buf` (one per message of a message channel); empty for a pipe or a TCP
    /// stream ([`crate::net`]).
    pub anc: VecDeque<Anc>,
    /// Writes into it so far (and messages, for a message channel): an edge-triggered epoll
    /// entry on its reading side is due again when this moves ([`crate::poll`]).
    pub puts: u64,
    /// Reads that took bytes from it so far: the writing side's edges for a socket (Linux's
    /// `unix_write_space` wakes the writer at every read that frees room).
    pub takes: u64,
    /// Reads that took bytes from it while it was full: the writing side's edges for a pipe
    /// (Linux's `pipe_read` wakes writers only when the pipe was full).
    pub full_takes: u64,
}

/// What one send on an `AF_UNIX` socket attached to its bytes (Linux's `UNIXCB(skb)`): the
/// sender's credentials and the descriptors `SCM_RIGHTS` passed. Consecutive sends of one
/// sender without descriptors share one (Linux glues their bytes on reading anyway).
#[derive(Debug, Clone)]
pub struct Anc {
    /// The stream position just past its last byte.
    pub end: u64,
    /// The sender's process id, user and group (`SCM_CREDENTIALS`).
    pub cred: (u32, u32, u32),
    /// The open file descriptions in flight: held here (so they stay open) until a receive
    /// installs them as descriptors or the receiving socket closes.
    pub files: Vec<Rc<RefCell<Description>>>,
}

/// What a receive on an `AF_UNIX` socket got besides bytes: the first sender's credentials and
/// the descriptions passed with them.
pub type Ancillary = (Option<(u32, u32, u32)>, Vec<Rc<RefCell<Description>>>);

impl Default for Pipe {
    fn default() -> Pipe {
        Pipe {
            buf: VecDeque::new(),
            writers: 0,
            readers: 0,
            id: 0,
            capacity: PIPE_CAPACITY,
            msgs: None,
            taken: 0,
            anc: VecDeque::new(),
            puts: 0,
            takes: 0,
            full_takes: 0,
        }
    }
}

impl Pipe {
    /// Whether nothing waits to be read: no bytes, and for a message channel no message (an
    /// empty `SOCK_SEQPACKET` message is something to read).
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.msgs.as_ref().is_none_or(|m| m.is_empty())
    }

    /// Bytes that can be written before it is full.
    pub fn room(&self) -> usize {
        self.capacity.saturating_sub(self.buf.len())
    }

    /// Appends what fits of `data` (a whole message, for a message channel). Returns how much.
    pub fn put(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.room());
        self.buf.extend(&data[..n]);
        if let Some(m) = self.msgs.as_mut() {
            m.push_back(n);
        }
        self.puts += 1;
        n
    }

    /// Takes (or with `peek` copies) up to `len` bytes from the front: of the first message
    /// only, for a message channel, whose rest is then dropped as Linux truncates it.
    pub fn take(&mut self, len: usize, peek: bool) -> Vec<u8> {
        let (n, whole) = match self.msgs.as_ref().and_then(|m| m.front()) {
            Some(&msg) => (len.min(msg), msg),
            None => (len.min(self.buf.len()), len.min(self.buf.len())),
        };
        let out: Vec<u8> = self.buf.iter().take(n).copied().collect();
        if !peek {
            self.full_takes += u64::from(self.room() == 0 && whole > 0);
            self.buf.drain(..whole);
            self.taken += whole as u64;
            self.takes += 1;
            if let Some(m) = self.msgs.as_mut() {
                m.pop_front();
            }
        }
        out
    }

    /// Records that the last `put` came from a sender with `cred` passing `files`: a new
    /// [`Anc`] unless it extends the last one (same sender, neither passing descriptors, a
    /// byte stream).
    pub fn attach(&mut self, cred: (u32, u32, u32), files: Vec<Rc<RefCell<Description>>>) {
        let end = self.taken + self.buf.len() as u64;
        match self.anc.back_mut() {
            Some(a) if self.msgs.is_none() && a.files.is_empty() && files.is_empty() && a.cred == cred => a.end = end,
            _ => self.anc.push_back(Anc { end, cred, files }),
        }
    }

    /// [`Pipe::take`] for an `AF_UNIX` socket, as Linux's `unix_stream_read_generic` reads its
    /// queue: bytes of several sends are read together, but not past the send that passed
    /// descriptors (the read takes them and stops after that send's bytes, or at `len`) nor,
    /// with `passcred` (`SO_PASSCRED`), into another sender's bytes. A message channel takes
    /// one message and what came with it. With `peek` the descriptions are shared, not taken
    /// (Linux's `unix_peek_fds`).
    pub fn take_anc(&mut self, len: usize, peek: bool, passcred: bool) -> (Vec<u8>, Ancillary) {
        if self.anc.is_empty() {
            return (self.take(len, peek), (None, Vec::new()));
        }
        if self.msgs.is_some() {
            let data = self.take(len, peek);
            let a = if peek { self.anc.front().cloned() } else { self.anc.pop_front() };
            let a = a.map(|a| (Some(a.cred), a.files)).unwrap_or_default();
            return (data, a);
        }
        let (mut n, mut cred, mut files) = (0usize, None, Vec::new());
        let avail = len.min(self.buf.len());
        for a in self.anc.iter_mut() {
            let pos = self.taken + n as u64;
            if n >= avail {
                break;
            }
            if a.end <= pos {
                continue;
            }
            if passcred {
                match cred {
                    Some(c) if c != a.cred => break,
                    _ => cred = Some(a.cred),
                }
            }
            n += (avail - n).min((a.end - pos) as usize);
            if !a.files.is_empty() {
                files = if peek { a.files.clone() } else { std::mem::take(&mut a.files) };
                break;
            }
        }
        let data = self.take(n, peek);
        if !peek {
            while self.anc.front().is_some_and(|a| a.end <= self.taken && a.files.is_empty()) {
                self.anc.pop_front();
            }
        }
        (data, (cred, files))
    }
}

/// What an open file description refers to, and the state its reads and writes need.
#[derive(Debug)]
pub enum Kind {
    /// Descriptor 0 as opened at start: ferrite's own standard input, hashed into the run record.
    Stdin,
    /// Descriptor 1 as opened at start: ferrite's own standard output.
    Stdout,
    /// Descriptor 2 as opened at start: ferrite's own standard error.
    Stderr,
    /// A host file (regular file, or a PM file, which is also a regular file on the host).
    File {
        /// The open host file; reads and writes go to it, at its own offset.
        file: std::fs::File,
        /// The host path (what the sandbox resolved the guest path to).
        host: PathBuf,
        /// Whether the file is on the PM mount: writes to it become device stores when it is
        /// mapped.
        pm: bool,
    },
    /// A directory opened for listing; `entries` is filled (sorted) on the first getdents.
    Dir {
        /// The host path of the directory.
        host: PathBuf,
        /// The directory's entries, sorted, read on the first getdents.
        entries: Option<Vec<crate::fs::DirEntry>>,
        /// Index in `entries` of the next entry to return.
        pos: usize,
    },
    /// Contents generated by ferrite (/proc, /sys files), read-only.
    Virtual {
        /// The whole contents, generated when the file was opened.
        data: Vec<u8>,
        /// Offset of the next read.
        pos: usize,
    },
    /// A thread's name in `/proc` ([`crate::vfs::VirtualFile::Comm`]): a read gives the name
    /// and a newline as it is at the read (from `pos`); a write of up to 15 bytes (more are cut)
    /// names the thread, if it still runs (Linux's `comm_write`; a thread gone: ESRCH).
    Comm {
        /// The thread.
        tid: u32,
        /// Offset of the next read.
        pos: usize,
    },
    /// `/dev/null`: reads end at once, writes are swallowed.
    Null,
    /// `/dev/zero`: reads give zeros, writes are swallowed.
    Zero,
    /// `/dev/urandom` (and `/dev/random`): bytes from the run's seeded generator, never the host's.
    Urandom,
    /// The read end of a pipe.
    PipeRead(Rc<RefCell<Pipe>>),
    /// The write end of a pipe.
    PipeWrite(Rc<RefCell<Pipe>>),
    /// Both ends of a FIFO opened `O_RDWR` ([`crate::fifo`]): a reader and a writer at once.
    PipeRdWr(Rc<RefCell<Pipe>>),
    /// A socket ([`crate::net`]).
    Socket(Rc<RefCell<crate::net::Sock>>),
    /// An eventfd ([`crate::poll`]).
    EventFd(Rc<RefCell<crate::poll::EventFd>>),
    /// An epoll set ([`crate::poll`]).
    Epoll(Rc<RefCell<crate::poll::Epoll>>),
    /// A timerfd on the virtual clock ([`crate::poll`]).
    TimerFd(Rc<RefCell<crate::poll::TimerFd>>),
    /// A signalfd ([`crate::signalfd`]).
    SignalFd(Rc<RefCell<crate::signalfd::SignalFd>>),
    /// An inotify instance ([`crate::inotify`]).
    Inotify(Rc<RefCell<crate::inotify::Inotify>>),
    /// A POSIX message queue ([`crate::mqueue`]).
    MQueue(Rc<RefCell<crate::mqueue::MQueue>>),
}

/// An open file description: what `dup` shares.
#[derive(Debug)]
pub struct Description {
    /// What is open and where its state lives.
    pub kind: Kind,
    /// The guest path it was opened by, for `/proc/self/fd` and `*at` calls.
    pub guest_path: String,
    /// `O_ACCMODE | O_APPEND | O_NONBLOCK ...` as the guest gave them.
    pub flags: i32,
}

impl Drop for Description {
    fn drop(&mut self) {
        match &self.kind {
            Kind::PipeRead(p) => p.borrow_mut().readers -= 1,
            Kind::PipeWrite(p) => p.borrow_mut().writers -= 1,
            Kind::PipeRdWr(p) => {
                let mut p = p.borrow_mut();
                p.readers -= 1;
                p.writers -= 1;
            }
            _ => {}
        }
    }
}

/// A descriptor: a shared open file description and the flag that belongs to the descriptor alone.
#[derive(Clone, Debug)]
pub struct Fd {
    /// The open file description; `dup` clones the `Rc`, so offsets and status flags are shared.
    pub desc: Rc<RefCell<Description>>,
    /// `FD_CLOEXEC` as the guest set it: `execve` closes the descriptor.
    pub cloexec: bool,
}

/// The process's descriptors.
#[derive(Debug, Default)]
pub struct FdTable {
    /// Open descriptors by number (sorted, so the lowest free one is quick to find).
    pub fds: BTreeMap<i32, Fd>,
    /// `RLIMIT_NOFILE`'s soft limit: descriptors at or beyond it fail with EMFILE.
    pub limit: i32,
    /// `RLIMIT_NOFILE`'s hard limit: the soft limit may be raised up to it, and it may only be
    /// lowered ([`NOFILE_HARD`] at start).
    pub hard: i32,
}

/// `RLIMIT_NOFILE`'s hard limit at start: 524,288, what systemd gives a Debian user session
/// and its services (`DefaultLimitNOFILE=1024:524288`), so a server that raises its soft limit
/// (Redis asks for 10,032) gets it, as on such a machine. The table is a map: a high limit costs
/// nothing until descriptors are open.
pub const NOFILE_HARD: i32 = 524_288;

impl FdTable {
    /// A table with 0, 1 and 2 open on ferrite's standard streams, holding at most `limit`
    /// descriptors (at least 3).
    pub fn with_stdio(limit: i32) -> FdTable {
        let mut t = FdTable { fds: BTreeMap::new(), limit: limit.max(3), hard: NOFILE_HARD.max(limit) };
        for (n, kind, path) in
            [(0, Kind::Stdin, "/dev/stdin"), (1, Kind::Stdout, "/dev/stdout"), (2, Kind::Stderr, "/dev/stderr")]
        {
            let flags = if n == 0 { libc::O_RDONLY } else { libc::O_WRONLY };
            t.fds.insert(n, Fd::new(Description { kind, guest_path: path.into(), flags }, false));
        }
        t
    }

    /// The descriptor `fd`, or `EBADF`.
    pub fn get(&self, fd: i32) -> Result<&Fd, Errno> {
        self.fds.get(&fd).ok_or(Errno(libc::EBADF))
    }

    /// The lowest free descriptor at or above `min`.
    pub fn insert_from(&mut self, min: i32, fd: Fd) -> Result<i32, Errno> {
        let mut n = min.max(0);
        for k in self.fds.range(n..).map(|(k, _)| *k) {
            if k != n {
                break;
            }
            n += 1;
        }
        if n >= self.limit {
            return err(libc::EMFILE);
        }
        self.fds.insert(n, fd);
        Ok(n)
    }

    /// Installs `desc` at the lowest free descriptor (`EMFILE` at the limit).
    pub fn insert(&mut self, desc: Description, cloexec: bool) -> Result<i32, Errno> {
        self.insert_from(0, Fd::new(desc, cloexec))
    }
}

impl Fd {
    /// A descriptor of its own open file description `desc`.
    pub fn new(desc: Description, cloexec: bool) -> Fd {
        Fd { desc: Rc::new(RefCell::new(desc)), cloexec }
    }
}

/// Largest single transfer, as Linux's MAX_RW_COUNT.
pub(crate) const MAX_RW: u64 = 0x7fff_f000;

impl Kernel {
    pub(crate) fn desc(&self, fd: i32) -> Result<Rc<RefCell<Description>>, Errno> {
        Ok(self.fds.get(fd)?.desc.clone())
    }

    /// Reads up to `len` bytes from `fd` at the description's offset (or at `at`).
    pub(crate) fn read_bytes(
        &mut self,
        m: &mut Machine,
        fd: i32,
        len: usize,
        at: Option<u64>,
    ) -> Result<Vec<u8>, Errno> {
        let d = self.desc(fd)?;
        let mut d = d.borrow_mut();
        if d.flags & libc::O_ACCMODE == libc::O_WRONLY {
            return err(libc::EBADF);
        }
        let nonblock = d.flags & libc::O_NONBLOCK != 0;
        match &d.kind {
            Kind::Socket(s) => {
                let s = s.clone();
                drop(d);
                return Ok(self.sock_recv(m, &s, len, 0, nonblock)?.0);
            }
            Kind::EventFd(e) => {
                let e = e.clone();
                drop(d);
                return self.eventfd_read(&e, len, nonblock);
            }
            Kind::TimerFd(t) => {
                let t = t.clone();
                drop(d);
                return self.timerfd_read(m, &t, len, nonblock);
            }
            Kind::SignalFd(s) => {
                let s = s.clone();
                drop(d);
                return self.signalfd_read(&s, len, nonblock);
            }
            Kind::Inotify(i) => {
                let i = i.clone();
                drop(d);
                return self.inotify_read(&i, len, nonblock);
            }
            Kind::PipeRead(p) | Kind::PipeRdWr(p) => {
                let p = p.clone();
                drop(d);
                return self.pipe_read(&p, len, nonblock);
            }
            _ => {}
        }
        let mut buf = vec![0u8; len];
        let n = match &mut d.kind {
            Kind::Stdin => {
                if at.is_some() {
                    return err(libc::ESPIPE);
                }
                let n = std::io::stdin().read(&mut buf)?;
                self.proc.stdin_hash.update(&buf[..n]);
                self.proc.stdin_read = true;
                n
            }
            Kind::File { file, pm, host } => {
                self.pm_file_reads += u64::from(*pm);
                let from = if *pm { at.or_else(|| file.stream_position().ok()) } else { None };
                let n = match at {
                    Some(off) => file.read_at(&mut buf, off)?,
                    None => file.read(&mut buf)?,
                };
                // The kernel copied the bytes out of PM: loads, if the guest maps the file.
                if let (Some(from), Some(&id)) = (from, self.proc.pm_files.get(&*host.to_string_lossy())) {
                    m.kernel_pm_file_loads(emu::pm::device_addr(id, from), n as u64);
                }
                n
            }
            Kind::Virtual { data, pos } => {
                let start = at.map(|o| o as usize).unwrap_or(*pos).min(data.len());
                let n = len.min(data.len() - start);
                buf[..n].copy_from_slice(&data[start..start + n]);
                if at.is_none() {
                    *pos = start + n;
                }
                n
            }
            Kind::Comm { tid, pos } => {
                if !self.threads.contains_key(tid) {
                    return err(libc::ESRCH);
                }
                let comm = self.comm(*tid);
                let mut data: Vec<u8> = comm.iter().copied().take_while(|&c| c != 0).collect();
                data.push(b'\n');
                let start = at.map(|o| o as usize).unwrap_or(*pos).min(data.len());
                let n = len.min(data.len() - start);
                buf[..n].copy_from_slice(&data[start..start + n]);
                if at.is_none() {
                    *pos = start + n;
                }
                n
            }
            Kind::Null => 0,
            Kind::Zero => len,
            Kind::Urandom => {
                self.rng.fill(&mut buf);
                len
            }
            Kind::Dir { .. } => return err(libc::EISDIR),
            Kind::Stdout | Kind::Stderr | Kind::PipeWrite(_) => return err(libc::EBADF),
            Kind::Epoll(_) => return err(libc::EINVAL),
            // Taken above.
            Kind::PipeRead(_)
            | Kind::PipeRdWr(_)
            | Kind::Socket(_)
            | Kind::EventFd(_)
            | Kind::TimerFd(_)
            | Kind::SignalFd(_)
            | Kind::Inotify(_) => return err(libc::EBADF),
            // Linux's read gives a `QSIZE:` line; not modelled.
            Kind::MQueue(_) => return err(libc::EINVAL),
        };
        buf.truncate(n);
        Ok(buf)
    }

    fn pipe_read(&mut self, p: &Rc<RefCell<Pipe>>, len: usize, nonblock: bool) -> Result<Vec<u8>, Errno> {
        let mut b = p.borrow_mut();
        if b.buf.is_empty() {
            if b.writers == 0 || len == 0 {
                return Ok(Vec::new());
            }
            if nonblock {
                return err(libc::EAGAIN);
            }
            let id = b.id;
            drop(b);
            return self.would_block(&[id]);
        }
        let out = b.take(len, false);
        let id = b.id;
        drop(b);
        self.io_ready(id);
        Ok(out)
    }

    fn pipe_write(&mut self, p: &Rc<RefCell<Pipe>>, data: &[u8], nonblock: bool) -> SysResult {
        let mut b = p.borrow_mut();
        if b.readers == 0 {
            // Linux also sends the writer SIGPIPE (SI_USER): its default action ends the
            // process; handled or ignored, the write fails with EPIPE.
            drop(b);
            self.raise(libc::SIGPIPE);
            return err(libc::EPIPE);
        }
        let room = b.room();
        if data.is_empty() {
            return Ok(0);
        }
        if room == 0 || (data.len() <= PIPE_BUF && room < data.len()) {
            if nonblock {
                return err(libc::EAGAIN);
            }
            let id = b.id;
            drop(b);
            return self.would_block(&[id]);
        }
        let n = b.put(data);
        let id = b.id;
        drop(b);
        self.io_ready(id);
        Ok(n as u64)
    }

    fn write_bytes(&mut self, m: &Machine, fd: i32, data: &[u8], at: Option<u64>) -> SysResult {
        let d = self.desc(fd)?;
        let mut d = d.borrow_mut();
        if d.flags & libc::O_ACCMODE == libc::O_RDONLY && !matches!(d.kind, Kind::Stdout | Kind::Stderr) {
            return err(libc::EBADF);
        }
        let nonblock = d.flags & libc::O_NONBLOCK != 0;
        match &d.kind {
            Kind::Socket(s) => {
                let s = s.clone();
                drop(d);
                return self.sock_send(m, &s, data, None, 0, nonblock, Ancillary::default());
            }
            Kind::EventFd(e) => {
                let e = e.clone();
                drop(d);
                return self.eventfd_write(&e, data, nonblock);
            }
            Kind::PipeWrite(p) | Kind::PipeRdWr(p) => {
                let p = p.clone();
                drop(d);
                return self.pipe_write(&p, data, nonblock);
            }
            _ => {}
        }
        let n = match &mut d.kind {
            Kind::Stdout | Kind::Stderr if self.cfg.discard_output => data.len(),
            Kind::Stdout => {
                let mut o = std::io::stdout().lock();
                o.write_all(data).and_then(|_| o.flush())?;
                data.len()
            }
            Kind::Stderr => {
                let mut o = std::io::stderr().lock();
                o.write_all(data).and_then(|_| o.flush())?;
                data.len()
            }
            Kind::File { file, .. } => match at {
                Some(off) => file.write_at(data, off)?,
                None => file.write(data)?,
            },
            Kind::Null | Kind::Zero | Kind::Urandom => data.len(),
            Kind::Comm { tid, .. } => {
                let tid = *tid;
                let Some(t) = self.threads.get(&tid) else { return err(libc::ESRCH) };
                // Only a thread of the writer's own process (Linux's `comm_write`).
                if t.pid != self.pid {
                    return err(libc::EINVAL);
                }
                // Linux's comm_write: the first min(count, 15) bytes, NUL-padded, as they are
                // (a newline included).
                let mut comm = [0u8; 16];
                let n = data.len().min(15);
                comm[..n].copy_from_slice(&data[..n]);
                self.thread_mut(tid).comm = Some(comm);
                data.len()
            }
            Kind::Virtual { .. } | Kind::Stdin | Kind::PipeRead(_) => return err(libc::EBADF),
            Kind::Dir { .. } => return err(libc::EISDIR),
            Kind::Epoll(_) | Kind::TimerFd(_) | Kind::SignalFd(_) | Kind::Inotify(_) | Kind::MQueue(_) => {
                return err(libc::EINVAL)
            }
            // Taken above.
            Kind::PipeWrite(_) | Kind::PipeRdWr(_) | Kind::Socket(_) | Kind::EventFd(_) => return err(libc::EBADF),
        };
        Ok(n as u64)
    }

    pub(crate) fn read(&mut self, m: &mut Machine, fd: i32, buf: u64, len: u64) -> SysResult {
        let data = self.read_bytes(m, fd, len.min(MAX_RW) as usize, None)?;
        m.write(buf, &data, false)?;
        if !data.is_empty() && self.inotify_watching() {
            self.fsnotify_fd(fd, crate::inotify::IN_ACCESS);
        }
        Ok(data.len() as u64)
    }

    pub(crate) fn pread(&mut self, m: &mut Machine, fd: i32, buf: u64, len: u64, off: u64) -> SysResult {
        if (off as i64) < 0 {
            return err(libc::EINVAL);
        }
        self.check_seekable(fd)?;
        let data = self.read_bytes(m, fd, len.min(MAX_RW) as usize, Some(off))?;
        m.write(buf, &data, false)?;
        if !data.is_empty() && self.inotify_watching() {
            self.fsnotify_fd(fd, crate::inotify::IN_ACCESS);
        }
        Ok(data.len() as u64)
    }

    pub(crate) fn write(&mut self, m: &mut Machine, fd: i32, buf: u64, len: u64) -> SysResult {
        let mut data = vec![0u8; len.min(MAX_RW) as usize];
        m.read(buf, &mut data)?;
        m.kernel_pm_loads(buf, data.len() as u64);
        self.write_tracked(m, fd, &data, None)
    }

    /// A write that, on a mapped PM file, also tells the device: the written bytes are durable
    /// (write(2) to a DAX file goes straight to the media), as are the lines they cover.
    pub(crate) fn write_tracked(&mut self, m: &mut Machine, fd: i32, data: &[u8], at: Option<u64>) -> SysResult {
        let target = self.pm_target(fd, at);
        let old = target.as_ref().map(|(_, off, file)| {
            let mut old = vec![0u8; data.len()];
            let n = file.read_at(&mut old, *off).unwrap_or(0);
            old[n..].fill(0);
            old
        });
        let n = self.write_bytes(m, fd, data, at)?;
        if n > 0 {
            let file = self.desc(fd).ok().and_then(|d| {
                let d = d.borrow();
                matches!(d.kind, Kind::File { .. }).then(|| d.guest_path.clone())
            });
            if let Some(guest) = file {
                self.changed(m, &guest);
                if self.inotify_watching() {
                    self.fsnotify_fd(fd, crate::inotify::IN_MODIFY);
                }
                // A write past the end grows the file under mappings that reach past it.
                if self.maps_past_end() {
                    let grown = match &self.desc(fd)?.borrow().kind {
                        Kind::File { file, host, .. } => file.metadata().ok().map(|md| (host.clone(), md.len())),
                        _ => None,
                    };
                    if let Some((host, len)) = grown {
                        self.file_grown(m, &host, len);
                    }
                }
            }
        }
        if let (Some((id, off, _)), Some(old)) = (target, old) {
            let n = n as usize;
            m.pm_file_written(emu::pm::device_addr(id, off), &old[..n], &data[..n]);
        }
        // A write through an O_SYNC/O_DSYNC descriptor is durable when it returns.
        if let Some(guest) = self.synced_write(fd) {
            self.synced(m, &guest);
        }
        Ok(n)
    }

    /// The guest path of `fd` if it is a tracked working-directory file opened O_SYNC/O_DSYNC.
    fn synced_write(&self, fd: i32) -> Option<String> {
        let d = self.desc(fd).ok()?;
        let d = d.borrow();
        let sync = matches!(d.kind, Kind::File { pm: false, .. }) && d.flags & libc::O_DSYNC != 0;
        (sync && self.tracked_rel(&d.guest_path).is_some()).then(|| d.guest_path.clone())
    }

    /// For a PM file the guest has mapped: its device file id, the offset a write at `at` (or
    /// at the current position) lands on, and a handle to read the old bytes.
    fn pm_target(&self, fd: i32, at: Option<u64>) -> Option<(u32, u64, std::fs::File)> {
        let d = self.desc(fd).ok()?;
        let d = d.borrow();
        let Kind::File { file, host, pm: true } = &d.kind else { return None };
        let id = *self.proc.pm_files.get(&host.to_string_lossy().into_owned())?;
        let mut f = file.try_clone().ok()?;
        let off = match at {
            Some(o) => o,
            None if d.flags & libc::O_APPEND != 0 => f.metadata().ok()?.len(),
            None => f.stream_position().ok()?,
        };
        Some((id, off, f))
    }

    /// The device range of a whole mapped PM file, for fsync.
    fn pm_file_range(&self, fd: i32) -> Option<(u64, u64)> {
        let (id, _, f) = self.pm_target(fd, Some(0))?;
        Some((emu::pm::device_addr(id, 0), f.metadata().ok()?.len()))
    }

    pub(crate) fn pwrite(&mut self, m: &mut Machine, fd: i32, buf: u64, len: u64, off: u64) -> SysResult {
        if (off as i64) < 0 {
            return err(libc::EINVAL);
        }
        self.check_seekable(fd)?;
        let mut data = vec![0u8; len.min(MAX_RW) as usize];
        m.read(buf, &mut data)?;
        m.kernel_pm_loads(buf, data.len() as u64);
        self.write_tracked(m, fd, &data, Some(off))
    }

    /// `sendfile(out, in, offp, count)`: copies up to `count` bytes from `in` — a file that can
    /// be read at an offset (a host file or a generated one, as Linux needs a page-cache file) —
    /// to any writable descriptor, as one `pread` and one `write` would. The bytes come from
    /// `*offp` (then updated, `in`'s offset untouched) or from `in`'s offset (then advanced), by
    /// as many bytes as the write took: a socket or pipe with less room takes part of them, and
    /// one with none blocks the caller (or `EAGAIN`) with nothing consumed.
    pub(crate) fn sendfile(&mut self, m: &mut Machine, out: i32, inp: i32, offp: u64, count: u64) -> SysResult {
        let (ind, outd) = (self.desc(inp)?, self.desc(out)?);
        {
            let i = ind.borrow();
            if i.flags & libc::O_ACCMODE == libc::O_WRONLY {
                return err(libc::EBADF);
            }
            if !matches!(i.kind, Kind::File { .. } | Kind::Virtual { .. } | Kind::Zero | Kind::Null) {
                return err(libc::EINVAL);
            }
            let o = outd.borrow();
            if o.flags & libc::O_ACCMODE == libc::O_RDONLY && !matches!(o.kind, Kind::Stdout | Kind::Stderr) {
                return err(libc::EBADF);
            }
            // Linux refuses an O_APPEND destination (do_sendfile).
            if o.flags & libc::O_APPEND != 0 {
                return err(libc::EINVAL);
            }
        }
        let start = if offp != 0 {
            let off = m.read_u64(offp)? as i64;
            if off < 0 {
                return err(libc::EINVAL);
            }
            off as u64
        } else {
            self.lseek(inp, 0, libc::SEEK_CUR)?
        };
        let data = self.read_bytes(m, inp, count.min(MAX_RW) as usize, Some(start))?;
        if data.is_empty() {
            return Ok(0);
        }
        let n = self.write_tracked(m, out, &data, None)?;
        if offp != 0 {
            m.write_u64(offp, start + n)?;
        } else {
            self.lseek(inp, (start + n) as i64, libc::SEEK_SET)?;
        }
        Ok(n)
    }

    fn check_seekable(&self, fd: i32) -> Result<(), Errno> {
        match self.desc(fd)?.borrow().kind {
            Kind::PipeRead(_) | Kind::PipeWrite(_) | Kind::PipeRdWr(_) | Kind::Stdin | Kind::Stdout | Kind::Stderr => {
                err(libc::ESPIPE)
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn iovecs(m: &Machine, iov: u64, cnt: u64) -> Result<Vec<(u64, u64)>, Errno> {
        if cnt > 1024 {
            return err(libc::EINVAL);
        }
        (0..cnt).map(|k| Ok((m.read_u64(iov + 16 * k)?, m.read_u64(iov + 16 * k + 8)?))).collect()
    }

    pub(crate) fn readv(&mut self, m: &mut Machine, fd: i32, iov: u64, cnt: u64) -> SysResult {
        let mut total = 0;
        for (base, len) in Self::iovecs(m, iov, cnt)? {
            if len == 0 {
                continue;
            }
            let n = match self.read(m, fd, base, len) {
                // Bytes came already: the call returns them rather than waiting for more.
                Err(Errno(crate::RESTART)) if total > 0 => {
                    self.block_keys.clear();
                    break;
                }
                r => r?,
            };
            total += n;
            if n < len {
                break;
            }
        }
        Ok(total)
    }

    pub(crate) fn writev(&mut self, m: &mut Machine, fd: i32, iov: u64, cnt: u64) -> SysResult {
        // One write of the gathered bytes, so a line assembled from several iovecs reaches the
        // terminal (or a pipe) in one piece, as Linux's writev does.
        let mut data = Vec::new();
        for (base, len) in Self::iovecs(m, iov, cnt)? {
            let start = data.len();
            data.resize(start + len.min(MAX_RW) as usize, 0);
            m.read(base, &mut data[start..])?;
            m.kernel_pm_loads(base, (data.len() - start) as u64);
        }
        self.write_tracked(m, fd, &data, None)
    }

    /// The checks `preadv` and `pwritev` (and their `2` forms) share: unknown `RWF_*` flags
    /// EOPNOTSUPP, a `2` form's offset -1 `None` (the file's own offset: `readv`/`writev`), any
    /// other negative offset EINVAL, a pipe or standard stream ESPIPE.
    fn vector_offset(&self, fd: i32, off: i64, v2: Option<u64>) -> Result<Option<u64>, Errno> {
        if v2.is_some_and(|f| f & !RWF_SUPPORTED != 0) {
            return err(libc::EOPNOTSUPP);
        }
        if off == -1 && v2.is_some() {
            return Ok(None);
        }
        if off < 0 {
            return err(libc::EINVAL);
        }
        self.check_seekable(fd)?;
        Ok(Some(off as u64))
    }

    /// `preadv(fd, iov, cnt, off)` and `preadv2(..., flags)`: `readv` at `off`, the file's
    /// offset untouched (preadv2 with `off` -1: at and advancing the file's offset, as `readv`);
    /// ESPIPE for a pipe or standard stream, EINVAL for another negative offset; `RWF_*` flags
    /// Linux 6.1 knows (`HIPRI`, `DSYNC`, `SYNC`, `NOWAIT`, `APPEND`) change nothing for a read,
    /// others are EOPNOTSUPP, as `kiocb_set_rw_flags`.
    pub(crate) fn preadv(
        &mut self,
        m: &mut Machine,
        fd: i32,
        iov: u64,
        cnt: u64,
        off: i64,
        v2: Option<u64>,
    ) -> SysResult {
        let Some(off) = self.vector_offset(fd, off, v2)? else { return self.readv(m, fd, iov, cnt) };
        let mut total = 0;
        for (base, len) in Self::iovecs(m, iov, cnt)? {
            if len == 0 {
                continue;
            }
            let n = self.pread(m, fd, base, len, off + total)?;
            total += n;
            if n < len {
                break;
            }
        }
        Ok(total)
    }

    /// `pwritev(fd, iov, cnt, off)` and `pwritev2(..., flags)`: the buffers gathered and written
    /// once at `off` as `pwrite` (a load event per PM buffer; durable on a mapped PM file), the
    /// file's offset untouched; with preadv2's `off` -1, `writev`. `RWF_APPEND` writes at the
    /// file's end; `RWF_DSYNC`/`RWF_SYNC` are accepted (a working-directory file is not made
    /// crash-durable by them, as it is by `O_DSYNC`); unknown flags EOPNOTSUPP.
    pub(crate) fn pwritev(
        &mut self,
        m: &mut Machine,
        fd: i32,
        iov: u64,
        cnt: u64,
        off: i64,
        v2: Option<u64>,
    ) -> SysResult {
        let Some(off) = self.vector_offset(fd, off, v2)? else { return self.writev(m, fd, iov, cnt) };
        let mut data = Vec::new();
        for (base, len) in Self::iovecs(m, iov, cnt)? {
            let start = data.len();
            data.resize(start + len.min(MAX_RW) as usize, 0);
            m.read(base, &mut data[start..])?;
            m.kernel_pm_loads(base, (data.len() - start) as u64);
        }
        let at = if v2.is_some_and(|f| f & RWF_APPEND != 0) {
            let d = self.desc(fd)?;
            let d = d.borrow();
            match &d.kind {
                Kind::File { file, .. } => file.metadata()?.len(),
                _ => off,
            }
        } else {
            off
        };
        self.write_tracked(m, fd, &data, Some(at))
    }

    pub(crate) fn close(&mut self, fd: i32) -> SysResult {
        let f = self.fds.fds.remove(&fd).ok_or(Errno(libc::EBADF))?;
        self.closed_lock_file(&f.desc);
        // The last descriptor of an open file description: its close is an inotify event.
        if self.inotify_watching() && Rc::strong_count(&f.desc) == 1 {
            self.fsnotify_close(&f.desc.borrow());
        }
        drop(f);
        self.io_ready_all();
        Ok(0)
    }

    pub(crate) fn close_range(&mut self, lo: u32, hi: u32, flags: u32) -> SysResult {
        const CLOSE_RANGE_UNSHARE: u32 = 2;
        const CLOSE_RANGE_CLOEXEC: u32 = 4;
        if flags & !(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC) != 0 || lo > hi {
            return err(libc::EINVAL);
        }
        let keys: Vec<i32> =
            self.fds.fds.range(lo.min(i32::MAX as u32) as i32..).map(|(k, _)| *k).filter(|k| *k as u32 <= hi).collect();
        for k in keys {
            if flags & CLOSE_RANGE_CLOEXEC != 0 {
                if let Some(f) = self.fds.fds.get_mut(&k) {
                    f.cloexec = true;
                }
            } else if let Some(f) = self.fds.fds.remove(&k) {
                self.closed_lock_file(&f.desc);
            }
        }
        self.io_ready_all();
        Ok(0)
    }

    pub(crate) fn lseek(&mut self, fd: i32, off: i64, whence: i32) -> SysResult {
        let d = self.desc(fd)?;
        let mut d = d.borrow_mut();
        let pos = match &mut d.kind {
            Kind::File { file, .. } => {
                let w = match whence {
                    libc::SEEK_SET if off >= 0 => SeekFrom::Start(off as u64),
                    libc::SEEK_CUR => SeekFrom::Current(off),
                    libc::SEEK_END => SeekFrom::End(off),
                    _ => return err(libc::EINVAL),
                };
                file.seek(w)?
            }
            Kind::Virtual { data, pos } => {
                let base = match whence {
                    libc::SEEK_SET => 0,
                    libc::SEEK_CUR => *pos as i64,
                    libc::SEEK_END => data.len() as i64,
                    _ => return err(libc::EINVAL),
                };
                let new = base.checked_add(off).filter(|p| *p >= 0).ok_or(Errno(libc::EINVAL))?;
                *pos = new as usize;
                new as u64
            }
            Kind::Dir { pos, .. } if whence == libc::SEEK_SET && off == 0 => {
                *pos = 0;
                0
            }
            Kind::Null | Kind::Zero | Kind::Urandom => 0,
            _ => return err(libc::ESPIPE),
        };
        Ok(pos)
    }

    pub(crate) fn dup(&mut self, fd: i32) -> SysResult {
        let f = self.fds.get(fd)?.clone();
        self.fds.insert_from(0, Fd { cloexec: false, ..f }).map(|n| n as u64)
    }

    pub(crate) fn dup3(&mut self, old: i32, new: i32, flags: i32, is_dup2: bool) -> SysResult {
        let f = self.fds.get(old)?.clone();
        if old == new {
            return if is_dup2 { Ok(new as u64) } else { err(libc::EINVAL) };
        }
        if new < 0 || new >= self.fds.limit || flags & !libc::O_CLOEXEC != 0 {
            return err(if flags & !libc::O_CLOEXEC != 0 { libc::EINVAL } else { libc::EBADF });
        }
        let old = self.fds.fds.insert(new, Fd { cloexec: flags & libc::O_CLOEXEC != 0, ..f });
        if old.is_some() {
            drop(old);
            self.io_ready_all();
        }
        Ok(new as u64)
    }

    pub(crate) fn pipe2(&mut self, m: &mut Machine, out: u64, flags: i32) -> SysResult {
        if flags & !(libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_DIRECT) != 0 {
            return err(libc::EINVAL);
        }
        let id = self.net.key();
        let p = Rc::new(RefCell::new(Pipe { readers: 1, writers: 1, id, ..Pipe::default() }));
        let cloexec = flags & libc::O_CLOEXEC != 0;
        // `/proc/self/fd/N` of either end reads `pipe:[INODE]`, the inode `fstat` shows.
        let name = format!("pipe:[{}]", crate::fs::pipe_ino(id));
        let r =
            Description { kind: Kind::PipeRead(p.clone()), guest_path: name.clone(), flags: libc::O_RDONLY | flags };
        let w = Description { kind: Kind::PipeWrite(p), guest_path: name, flags: libc::O_WRONLY | flags };
        let rfd = self.fds.insert(r, cloexec)?;
        let wfd = match self.fds.insert(w, cloexec) {
            Ok(n) => n,
            Err(e) => {
                self.fds.fds.remove(&rfd);
                return Err(e);
            }
        };
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&rfd.to_le_bytes());
        b[4..].copy_from_slice(&wfd.to_le_bytes());
        if let Err(e) = m.write(out, &b, false) {
            self.fds.fds.remove(&rfd);
            self.fds.fds.remove(&wfd);
            return Err(e.into());
        }
        Ok(0)
    }

    pub(crate) fn fcntl(&mut self, m: &mut Machine, fd: i32, cmd: i32, arg: u64) -> SysResult {
        match cmd {
            libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
                let f = self.fds.get(fd)?.clone();
                let cloexec = cmd == libc::F_DUPFD_CLOEXEC;
                // Linux's f_dupfd: a starting number at or beyond RLIMIT_NOFILE is EINVAL
                // (EMFILE is for a table full below it).
                if arg as u32 >= self.fds.limit as u32 {
                    return err(libc::EINVAL);
                }
                self.fds.insert_from(arg as i32, Fd { cloexec, ..f }).map(|n| n as u64)
            }
            libc::F_GETFD => Ok(u64::from(self.fds.get(fd)?.cloexec)),
            libc::F_SETFD => {
                let f = self.fds.fds.get_mut(&fd).ok_or(Errno(libc::EBADF))?;
                f.cloexec = arg & 1 != 0;
                Ok(0)
            }
            libc::F_GETFL => Ok(self.desc(fd)?.borrow().flags as u64),
            libc::F_SETFL => {
                let d = self.desc(fd)?;
                let mut d = d.borrow_mut();
                let settable = libc::O_APPEND | libc::O_NONBLOCK | libc::O_ASYNC | libc::O_DIRECT | libc::O_NOATIME;
                d.flags = (d.flags & !settable) | (arg as i32 & settable);
                Ok(0)
            }
            libc::F_GETLK
            | libc::F_OFD_GETLK
            | libc::F_SETLK
            | libc::F_SETLKW
            | libc::F_OFD_SETLK
            | libc::F_OFD_SETLKW => self.record_lock(m, fd, cmd, arg),
            crate::splice::F_ADD_SEALS | crate::splice::F_GET_SEALS => self.seals(fd, cmd, arg),
            // The owner of `O_ASYNC`'s SIGIO and the signal it is: accepted for any descriptor
            // (nginx's master sets them on each worker's channel, and gives the worker up if
            // either fails) but not kept, since no I/O signal is ever sent; `F_GETOWN` and
            // `F_GETSIG` say "none" (0), `F_GETOWN_EX` zeros, as of a description without one.
            libc::F_SETOWN | libc::F_GETOWN | F_GETSIG => {
                self.fds.get(fd)?;
                Ok(0)
            }
            F_SETSIG => {
                self.fds.get(fd)?;
                if arg > 64 {
                    return err(libc::EINVAL);
                }
                Ok(0)
            }
            F_SETOWN_EX | F_GETOWN_EX => {
                self.fds.get(fd)?;
                // struct f_owner_ex { int type; pid_t pid; }
                if cmd == F_GETOWN_EX {
                    m.write(arg, &[0u8; 8], false)?;
                } else {
                    let ty = m.read_u32(arg)?;
                    if ty > 2 {
                        return err(libc::EINVAL);
                    }
                }
                Ok(0)
            }
            _ => err(libc::EINVAL),
        }
    }

    pub(crate) fn ioctl(&mut self, m: &mut Machine, fd: i32, req: u64, arg: u64) -> SysResult {
        self.fds.get(fd)?;
        match req {
            // TCGETS / TIOCGWINSZ: no descriptor is a terminal, so output is fully buffered
            // the same way whatever ferrite's own stdout is.
            0x5401 | 0x5413 => err(libc::ENOTTY),
            // FIONBIO: sets or clears O_NONBLOCK, as fcntl's F_SETFL would.
            0x5421 => {
                let on = m.read_u32(arg)? != 0;
                let d = self.desc(fd)?;
                let mut d = d.borrow_mut();
                d.flags = if on { d.flags | libc::O_NONBLOCK } else { d.flags & !libc::O_NONBLOCK };
                Ok(0)
            }
            // FIOASYNC: sets or clears O_ASYNC, as fcntl's F_SETFL would (no SIGIO is sent, see
            // `fcntl`'s F_SETOWN).
            0x5452 => {
                let on = m.read_u32(arg)? != 0;
                let d = self.desc(fd)?;
                let mut d = d.borrow_mut();
                d.flags = if on { d.flags | libc::O_ASYNC } else { d.flags & !libc::O_ASYNC };
                Ok(0)
            }
            // FIONCLEX / FIOCLEX: the descriptor's close-on-exec flag, as F_SETFD.
            0x5450 | 0x5451 => {
                let f = self.fds.fds.get_mut(&fd).ok_or(Errno(libc::EBADF))?;
                f.cloexec = req == 0x5451;
                Ok(0)
            }
            // FIONREAD
            0x541b => {
                let n = match &self.desc(fd)?.borrow().kind {
                    Kind::PipeRead(p) | Kind::PipeRdWr(p) => p.borrow().buf.len(),
                    Kind::Inotify(i) => i.borrow().pending(),
                    Kind::Socket(s) => {
                        let s = s.borrow();
                        match (&s.conn, s.inbox.front()) {
                            (Some((rx, _)), _) => rx.borrow().buf.len(),
                            (None, Some((_, d, _))) => d.len(),
                            _ => 0,
                        }
                    }
                    _ => 0,
                };
                m.write(arg, &(n as i32).to_le_bytes(), false)?;
                Ok(0)
            }
            _ => err(libc::ENOTTY),
        }
    }

    /// fsync(2) and fdatasync(2): a mapped PM file's lines persist; a file of the working
    /// directory is durable as it is now, for crash images ([`crate::fs::Durable`]).
    pub(crate) fn fsync(&mut self, m: &mut Machine, fd: i32) -> SysResult {
        if let Some((dev, len)) = self.pm_file_range(fd) {
            m.pm_persist_device(dev, len);
        }
        let d = self.desc(fd)?;
        let d = d.borrow();
        if let Kind::File { file, pm, .. } = &d.kind {
            // Durability of the host file is not the guest's business: the PM device and the
            // tracked contents decide what a crash keeps. Still, flush so the host file is
            // complete.
            let _ = file.sync_data();
            if !*pm {
                let guest = d.guest_path.clone();
                drop(d);
                self.synced(m, &guest);
            }
        }
        Ok(0)
    }
}

/// `fcntl` commands the libc crate leaves out for glibc (Linux's `uapi/asm-generic/fcntl.h`).
const F_SETSIG: i32 = 10;
const F_GETSIG: i32 = 11;
const F_SETOWN_EX: i32 = 15;
const F_GETOWN_EX: i32 = 16;

/// `RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT | RWF_APPEND`: the flags of `preadv2` and
/// `pwritev2` Linux 6.1 (the kernel `uname` names) takes.
const RWF_SUPPORTED: u64 = 0x1f;
/// `RWF_APPEND`.
const RWF_APPEND: u64 = 0x10;
