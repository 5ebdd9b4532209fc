//! Waiting for descriptors: `poll`, `ppoll`, `select`, `pselect6`, epoll sets and eventfds.
//!
//! Every descriptor has a readiness (`POLLIN`, `POLLOUT`, `POLLHUP`, `POLLERR`, `POLLRDHUP`)
//! computed from its object's state, and readiness keys naming what changes it ([`Kernel::readiness`]):
//! regular files, directories and the devices are always ready, as on Linux; pipes, sockets,
//! eventfds, signalfds and epoll sets are ready when their state says so. A call that finds nothing ready
//! and may wait blocks on the keys of every descriptor it watches, with its timeout as the
//! wait's deadline on the virtual clock ([`crate::thread::Wait::Io`]); woken, it is made again,
//! keeping the deadline it computed first, and once that has passed it returns what is ready
//! (nothing: 0). A signal the waiting thread does not block interrupts the wait (EINTR, never
//! restarted: [`crate::signal`]); the signal masks of `ppoll`, `pselect6` and `epoll_pwait` are
//! installed for the call's duration ([`Kernel::call_mask`]).
//!
//! epoll entries are level-triggered unless `EPOLLET`. Linux queues an edge-triggered entry
//! when its file's wait queue is woken with an event the entry asks for (`ep_poll_callback`)
//! and reports it once, if it is then ready; ferrite keeps counters of what would wake it
//! (bytes written into a pipe or a socket's receiving side, connections queued, datagrams
//! received, eventfd writes, timer expiries — the `EPOLLIN` side; reads that make room — the
//! `EPOLLOUT` side, for a pipe only reads from a full pipe as Linux's `pipe_read`, for a socket
//! every read as `unix_write_space`; an end of file or hang-up for both) and reports an
//! edge-triggered entry when the counters of a side it asks for moved since it was last
//! reported ([`Interest::due`]). A signalfd, or an epoll set inside a set, has no such counter:
//! any change of any descriptor counts, so it may be reported more often than on Linux, never
//! less; so may a TCP socket's `EPOLLOUT` (Linux wakes a TCP writer only after it ran out of
//! room). `EPOLLONESHOT` disarms an entry once reported, until `EPOLL_CTL_MOD`.
//! `EPOLLEXCLUSIVE` is checked as Linux's `do_epoll_ctl` checks it (only with
//! `EPOLL_CTL_ADD`, only with `EPOLLIN`/`OUT`/`ERR`/`HUP`/`ET`/`WAKEUP`, not on an epoll set,
//! an exclusive entry cannot be modified: EINVAL); it does not limit how many waiters one
//! event wakes (every set's waiters look again; the man page promises "one or more").
//! `EPOLLWAKEUP` is dropped (it needs `CAP_BLOCK_SUSPEND`). Ready entries are reported in
//! descriptor order (Linux: in the order they became ready); an entry goes when its open file
//! description closes. Regular files cannot be added (`EPERM`), as on Linux.
//!
//! `select` leaves its timeout argument as it was (Linux writes back the time left).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};

use emu::Machine;

use crate::fd::{Description, Kind};
use crate::{err, Errno, Kernel, SysResult};

const POLLIN: u32 = 0x1;
const POLLPRI: u32 = 0x2;
const POLLOUT: u32 = 0x4;
const POLLERR: u32 = 0x8;
const POLLHUP: u32 = 0x10;
const POLLNVAL: u32 = 0x20;
const POLLRDNORM: u32 = 0x40;
const POLLWRNORM: u32 = 0x100;
const POLLRDHUP: u32 = 0x2000;
const EPOLLONESHOT: u32 = 1 << 30;
const EPOLLET: u32 = 1 << 31;
const EPOLLEXCLUSIVE: u32 = 1 << 28;
const EPOLLWAKEUP: u32 = 1 << 29;

/// An eventfd's counter.
#[derive(Clone, Debug)]
pub struct EventFd {
    /// The counter.
    pub count: u64,
    /// `EFD_SEMAPHORE`: a read takes 1, not all.
    pub semaphore: bool,
    /// Its readiness key.
    pub id: u64,
    /// Writes that raised the counter so far, and reads that lowered it: the edges of an
    /// edge-triggered epoll entry watching it for reading and for writing.
    pub edges: [u64; 2],
}

/// One descriptor in an epoll set.
#[derive(Debug)]
pub struct Interest {
    /// The events asked for (with `EPOLLONESHOT`...); 0 once a one-shot entry fired.
    pub events: u32,
    /// `EPOLLET`: reported when its descriptor becomes ready, not while it stays ready.
    pub et: bool,
    /// For an edge-triggered entry, the descriptor's edge stamps ([`Watch::edges`]) when the
    /// entry was last reported; `None` since `EPOLL_CTL_ADD`/`MOD` (then it is due if ready,
    /// as Linux queues an entry that is ready when it is added or modified).
    pub seen: Option<[u64; 2]>,
    /// The guest's data, returned with each event.
    pub data: u64,
    /// The open file description it watches: the entry goes when that closes.
    pub desc: Weak<RefCell<Description>>,
}

impl Interest {
    /// The events to report for this entry if its descriptor is ready for `ready` with edge
    /// stamps `edges`: `None` if it is not due. Level-triggered: whenever an asked-for event
    /// (or `EPOLLERR`/`EPOLLHUP`) is ready. Edge-triggered, as Linux's `ep_poll_callback`
    /// queues an entry only when its file is woken with an event the entry asks for: also only
    /// if something happened on the side it watches since it was last reported (an arrival
    /// for `EPOLLIN`, room made for `EPOLLOUT`; an end of file or hang-up counts for both).
    pub(crate) fn due(&self, ready: u32, edges: [u64; 2]) -> Option<u32> {
        let asked = self.events & !(EPOLLONESHOT | EPOLLET | EPOLLEXCLUSIVE | EPOLLWAKEUP);
        let r = ready & (asked | POLLERR | POLLHUP);
        if r == 0 || asked == 0 {
            return None;
        }
        if !self.et {
            return Some(r);
        }
        let Some(seen) = self.seen else { return Some(r) };
        let input = asked & (POLLIN | POLLRDNORM | POLLPRI | POLLRDHUP) != 0 && edges[0] != seen[0];
        let output = asked & (POLLOUT | POLLWRNORM) != 0 && edges[1] != seen[1];
        (input || output || (edges != seen && r & (POLLERR | POLLHUP) != 0)).then_some(r)
    }
}

/// An epoll set.
#[derive(Debug)]
pub struct Epoll {
    /// Its entries by descriptor number.
    pub interest: BTreeMap<i32, Interest>,
    /// Its readiness key: `epoll_ctl` wakes the set's waiters.
    pub id: u64,
}

/// What a wait for descriptors waits on: readiness keys, and the earliest time a timer among
/// them expires (virtual ns since boot), gathered while their readiness is computed at `now`.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// Readiness keys of the objects watched.
    pub keys: Vec<u64>,
    /// When the first timerfd watched expires.
    pub wake: Option<u64>,
    /// The virtual time readiness is computed at.
    pub now: u64,
    /// What has happened to the objects looked at, for edge-triggered epoll: counters that
    /// move when something arrives for reading (`[0]`: bytes written into a pipe, a
    /// connection queued, a datagram received, an eventfd raised, a timer expiry, an end of
    /// file or hang-up) and when room is made for writing (`[1]`: bytes taken, an eventfd
    /// lowered, the reading end gone), summed over what [`Kernel::readiness`] looked at.
    pub edges: [u64; 2],
}

/// A count that changes when `closed` becomes true (an end of file, a hang-up): an edge like
/// an arrival.
fn stamp(count: u64, closed: bool) -> u64 {
    count.wrapping_add(u64::from(closed) << 48)
}

/// A timerfd: its next expiry and period on the virtual clock.
#[derive(Clone, Debug)]
pub struct TimerFd {
    /// When it next expires (virtual ns since boot); `None`: disarmed.
    pub next: Option<u64>,
    /// Its period in ns; 0: it expires once.
    pub interval: u64,
    /// Whether it counts on CLOCK_REALTIME (for `TFD_TIMER_ABSTIME` values and `gettime`).
    pub realtime: bool,
    /// Its readiness key.
    pub id: u64,
    /// Expirations read so far (with those pending, an edge-triggered entry's stamp).
    pub read: u64,
}

impl TimerFd {
    /// Expirations by `now` not yet read.
    fn ticks(&self, now: u64) -> u64 {
        match self.next {
            Some(n) if n <= now => 1 + (now - n).checked_div(self.interval).unwrap_or(0),
            _ => 0,
        }
    }
}

/// A wait's timeout in ns from a `struct timespec` argument (0: NULL, forever).
fn timespec_ns(m: &Machine, addr: u64) -> Result<Option<u64>, Errno> {
    if addr == 0 {
        return Ok(None);
    }
    let (s, ns) = (m.read_u64(addr)? as i64, m.read_u64(addr + 8)? as i64);
    if s < 0 || !(0..1_000_000_000).contains(&ns) {
        return err(libc::EINVAL);
    }
    Ok(Some((s as u64).saturating_mul(1_000_000_000).saturating_add(ns as u64)))
}

/// A timeout in milliseconds (`poll`, `epoll_wait`): negative is forever.
fn ms_ns(ms: i32) -> Option<u64> {
    (ms >= 0).then(|| ms as u64 * 1_000_000)
}

impl Kernel {
    /// An empty watch at the current virtual time.
    pub(crate) fn watch(&self, m: &Machine) -> Watch {
        Watch { now: self.now_ns(m), ..Watch::default() }
    }

    /// What `d` is ready for now; pushes onto `keys` what a wait for it must wait on.
    pub(crate) fn readiness(&self, d: &Description, w: &mut Watch, depth: u32) -> u32 {
        let acc = d.flags & libc::O_ACCMODE;
        let rw = match acc {
            libc::O_RDONLY => POLLIN | POLLRDNORM,
            libc::O_WRONLY => POLLOUT | POLLWRNORM,
            _ => POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM,
        };
        match &d.kind {
            Kind::PipeRead(p) => {
                let p = p.borrow();
                w.keys.push(p.id);
                w.edges[0] = w.edges[0].wrapping_add(stamp(p.puts, p.writers == 0));
                let mut r = if p.buf.is_empty() { 0 } else { POLLIN | POLLRDNORM };
                if p.writers == 0 {
                    r |= POLLHUP;
                }
                r
            }
            // Both ends: it is its own reader and writer, so never hung up.
            Kind::PipeRdWr(p) => {
                let p = p.borrow();
                w.keys.push(p.id);
                w.edges[0] = w.edges[0].wrapping_add(p.puts);
                w.edges[1] = w.edges[1].wrapping_add(p.full_takes);
                (if p.buf.is_empty() { 0 } else { POLLIN | POLLRDNORM })
                    | if p.room() > 0 { POLLOUT | POLLWRNORM } else { 0 }
            }
            Kind::PipeWrite(p) => {
                let p = p.borrow();
                w.keys.push(p.id);
                w.edges[1] = w.edges[1].wrapping_add(stamp(p.full_takes, p.readers == 0));
                if p.readers == 0 {
                    POLLOUT | POLLWRNORM | POLLERR
                } else if p.room() > 0 {
                    POLLOUT | POLLWRNORM
                } else {
                    0
                }
            }
            Kind::Socket(s) => {
                let s = s.borrow();
                w.keys.push(s.id);
                w.edges[0] = w.edges[0].wrapping_add(stamp(s.arrivals, s.shut_rd));
                w.edges[1] = w.edges[1].wrapping_add(stamp(0, s.shut_wr));
                if let Some(q) = &s.queue {
                    return if q.is_empty() { 0 } else { POLLIN | POLLRDNORM };
                }
                if s.ty == libc::SOCK_DGRAM {
                    return POLLOUT | POLLWRNORM | if s.inbox.is_empty() { 0 } else { POLLIN | POLLRDNORM };
                }
                let Some((rx, tx)) = &s.conn else {
                    // Unconnected: Linux says POLLOUT|POLLHUP for TCP, POLLHUP for AF_UNIX.
                    return POLLHUP | if s.domain == libc::AF_UNIX { 0 } else { POLLOUT | POLLWRNORM };
                };
                let (rx, tx) = (rx.borrow(), tx.borrow());
                w.keys.push(rx.id);
                w.keys.push(tx.id);
                w.edges[0] = w.edges[0].wrapping_add(stamp(rx.puts, rx.writers == 0));
                w.edges[1] = w.edges[1].wrapping_add(stamp(tx.takes, tx.readers == 0));
                let mut r = 0;
                let eof = rx.writers == 0 || s.shut_rd;
                if !rx.is_empty() || eof {
                    r |= POLLIN | POLLRDNORM;
                }
                if eof {
                    r |= POLLRDHUP;
                }
                if tx.readers == 0 || s.shut_wr {
                    if eof {
                        r |= POLLHUP;
                    }
                    if tx.readers == 0 {
                        r |= POLLOUT | POLLWRNORM;
                    }
                } else if tx.room() > 0 {
                    r |= POLLOUT | POLLWRNORM;
                }
                r
            }
            Kind::TimerFd(t) => {
                let t = t.borrow();
                w.keys.push(t.id);
                w.edges[0] = w.edges[0].wrapping_add(t.read + t.ticks(w.now));
                if let Some(next) = t.next {
                    if next <= w.now {
                        return POLLIN | POLLRDNORM;
                    }
                    w.wake = Some(w.wake.map_or(next, |x| x.min(next)));
                }
                0
            }
            Kind::SignalFd(s) => {
                w.keys.push(crate::signalfd::key(self.pid));
                // No count of signals sent: every look is an edge (reported more often than
                // Linux would, never less).
                w.edges[0] = w.edges[0].wrapping_add(self.io_epoch);
                if self.signalfd_ready(s.borrow().mask) {
                    POLLIN | POLLRDNORM
                } else {
                    0
                }
            }
            Kind::MQueue(q) => {
                let q = q.borrow();
                w.keys.push(q.id);
                w.edges[0] = w.edges[0].wrapping_add(q.edges[0]);
                w.edges[1] = w.edges[1].wrapping_add(q.edges[1]);
                q.events()
            }
            Kind::EventFd(e) => {
                let e = e.borrow();
                w.keys.push(e.id);
                w.edges[0] = w.edges[0].wrapping_add(e.edges[0]);
                w.edges[1] = w.edges[1].wrapping_add(e.edges[1]);
                let mut r = 0;
                if e.count > 0 {
                    r |= POLLIN | POLLRDNORM;
                }
                if e.count < u64::MAX - 1 {
                    r |= POLLOUT | POLLWRNORM;
                }
                r
            }
            Kind::Epoll(ep) => {
                let ep = ep.borrow();
                w.keys.push(ep.id);
                // A set inside a set: any change is an edge (more often than Linux, never less).
                w.edges[0] = w.edges[0].wrapping_add(self.io_epoch);
                // A set inside a set (or in poll) is readable when an entry is ready; deeper
                // nesting is not looked into.
                if depth > 0 {
                    return 0;
                }
                let ready = ep.interest.values().any(|i| {
                    i.desc.upgrade().is_some_and(|d| {
                        let before = w.edges;
                        w.edges = [0, 0];
                        let r = self.readiness(&d.borrow(), w, depth + 1);
                        let due = i.due(r, w.edges);
                        w.edges = before;
                        due.is_some()
                    })
                });
                if ready {
                    POLLIN | POLLRDNORM
                } else {
                    0
                }
            }
            Kind::Inotify(i) => {
                let i = i.borrow();
                w.keys.push(i.id);
                // Each event queued is an edge (its count only grows while nobody reads).
                w.edges[0] = w.edges[0].wrapping_add(self.io_epoch);
                if i.queue.is_empty() {
                    0
                } else {
                    POLLIN | POLLRDNORM
                }
            }
            Kind::Stdin => POLLIN | POLLRDNORM,
            Kind::Stdout | Kind::Stderr => POLLOUT | POLLWRNORM,
            Kind::File { .. }
            | Kind::Dir { .. }
            | Kind::Virtual { .. }
            | Kind::Comm { .. }
            | Kind::Null
            | Kind::Zero
            | Kind::Urandom => rw,
        }
    }

    /// The readiness of descriptor `fd` (`POLLNVAL` if it is not open), its keys pushed.
    fn fd_readiness(&self, fd: i32, w: &mut Watch) -> u32 {
        match self.fds.get(fd) {
            Ok(f) => self.readiness(&f.desc.borrow(), w, 0),
            Err(_) => POLLNVAL,
        }
    }

    /// Nothing is ready: the call returns `zero` if its deadline passed (or it has no time to
    /// wait), else blocks on the keys it gathered.
    fn wait_or<T>(&mut self, m: &Machine, timeout: Option<u64>, w: Watch, zero: T) -> Result<T, Errno> {
        if self.io_deadline(m, timeout) {
            return Ok(zero);
        }
        self.block_wake = w.wake;
        self.would_block(&w.keys)
    }

    pub(crate) fn poll(&mut self, m: &mut Machine, fds: u64, nfds: u64, timeout: Option<u64>) -> SysResult {
        if nfds > self.fds.limit as u64 {
            return err(libc::EINVAL);
        }
        let mut raw = vec![0u8; nfds as usize * 8];
        m.read(fds, &mut raw)?;
        let mut w = self.watch(m);
        let mut count = 0;
        for e in raw.chunks_mut(8) {
            let fd = i32::from_le_bytes([e[0], e[1], e[2], e[3]]);
            let events = u32::from(u16::from_le_bytes([e[4], e[5]]));
            let rev = if fd < 0 { 0 } else { self.fd_readiness(fd, &mut w) & (events | POLLERR | POLLHUP | POLLNVAL) };
            e[6..8].copy_from_slice(&(rev as u16).to_le_bytes());
            count += u64::from(rev != 0);
        }
        if count == 0 {
            self.wait_or(m, timeout, w, ())?;
        }
        m.write(fds, &raw, false)?;
        Ok(count)
    }

    /// select and pselect6: `fd_set`s of `nfds` bits for reading, writing and exceptions.
    pub(crate) fn select(&mut self, m: &mut Machine, nfds: i32, sets: [u64; 3], timeout: Option<u64>) -> SysResult {
        if !(0..=1024).contains(&nfds) {
            return err(libc::EINVAL);
        }
        let words = (nfds as usize).div_ceil(64);
        let mut ins = [vec![0u64; words], vec![0u64; words], vec![0u64; words]];
        for (k, set) in sets.iter().enumerate() {
            if *set != 0 {
                for (w, word) in ins[k].iter_mut().enumerate() {
                    *word = m.read_u64(set + 8 * w as u64)?;
                }
            }
        }
        let mut outs = [vec![0u64; words], vec![0u64; words], vec![0u64; words]];
        let mut watch = self.watch(m);
        let mut count = 0;
        let masks = [POLLIN | POLLRDNORM | POLLHUP | POLLERR, POLLOUT | POLLWRNORM | POLLERR, POLLPRI];
        for fd in 0..nfds {
            let (w, bit) = (fd as usize / 64, 1u64 << (fd % 64));
            if ins.iter().all(|s| s[w] & bit == 0) {
                continue;
            }
            let r = self.fd_readiness(fd, &mut watch);
            if r & POLLNVAL != 0 {
                return err(libc::EBADF);
            }
            for k in 0..3 {
                if ins[k][w] & bit != 0 && r & masks[k] != 0 {
                    outs[k][w] |= bit;
                    count += 1;
                }
            }
        }
        if count == 0 {
            self.wait_or(m, timeout, watch, ())?;
        }
        for (k, set) in sets.iter().enumerate() {
            if *set != 0 {
                for (w, word) in outs[k].iter().enumerate() {
                    m.write_u64(set + 8 * w as u64, *word)?;
                }
            }
        }
        Ok(count)
    }

    /// select's `struct timeval` timeout (0: NULL, forever).
    pub(crate) fn timeval_ns(m: &Machine, addr: u64) -> Result<Option<u64>, Errno> {
        if addr == 0 {
            return Ok(None);
        }
        let (s, us) = (m.read_u64(addr)? as i64, m.read_u64(addr + 8)? as i64);
        if s < 0 || us < 0 {
            return err(libc::EINVAL);
        }
        Ok(Some((s as u64).saturating_mul(1_000_000_000).saturating_add((us as u64).saturating_mul(1000))))
    }

    /// ppoll's and pselect6's `struct timespec` timeout.
    pub(crate) fn timespec_timeout(m: &Machine, addr: u64) -> Result<Option<u64>, Errno> {
        timespec_ns(m, addr)
    }

    /// poll's and epoll_wait's millisecond timeout.
    pub(crate) fn ms_timeout(ms: i32) -> Option<u64> {
        ms_ns(ms)
    }

    pub(crate) fn eventfd2(&mut self, init: u32, flags: i32) -> SysResult {
        if flags & !(libc::EFD_SEMAPHORE | libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) != 0 {
            return err(libc::EINVAL);
        }
        let e = EventFd {
            count: u64::from(init),
            semaphore: flags & libc::EFD_SEMAPHORE != 0,
            id: self.net.key(),
            edges: [0, 0],
        };
        let fl = libc::O_RDWR | if flags & libc::EFD_NONBLOCK != 0 { libc::O_NONBLOCK } else { 0 };
        let d = Description {
            kind: Kind::EventFd(Rc::new(RefCell::new(e))),
            guest_path: "anon_inode:[eventfd]".into(),
            flags: fl,
        };
        Ok(self.fds.insert(d, flags & libc::EFD_CLOEXEC != 0)? as u64)
    }

    pub(crate) fn eventfd_read(
        &mut self,
        e: &Rc<RefCell<EventFd>>,
        len: usize,
        nonblock: bool,
    ) -> Result<Vec<u8>, Errno> {
        if len < 8 {
            return err(libc::EINVAL);
        }
        let mut b = e.borrow_mut();
        if b.count == 0 {
            if nonblock {
                return err(libc::EAGAIN);
            }
            let id = b.id;
            drop(b);
            return self.would_block(&[id]);
        }
        let v = if b.semaphore { 1 } else { b.count };
        b.count -= v;
        b.edges[1] += 1;
        let id = b.id;
        drop(b);
        self.io_ready(id);
        Ok(v.to_le_bytes().to_vec())
    }

    pub(crate) fn eventfd_write(&mut self, e: &Rc<RefCell<EventFd>>, data: &[u8], nonblock: bool) -> SysResult {
        if data.len() < 8 {
            return err(libc::EINVAL);
        }
        let v = u64::from_le_bytes(data[..8].try_into().unwrap_or([0; 8]));
        if v == u64::MAX {
            return err(libc::EINVAL);
        }
        let mut b = e.borrow_mut();
        if v > u64::MAX - 1 - b.count {
            if nonblock {
                return err(libc::EAGAIN);
            }
            let id = b.id;
            drop(b);
            return self.would_block(&[id]);
        }
        b.count += v;
        b.edges[0] += 1;
        let id = b.id;
        drop(b);
        self.io_ready(id);
        Ok(8)
    }

    pub(crate) fn timerfd_create(&mut self, clock: i32, flags: i32) -> SysResult {
        if !matches!(clock, libc::CLOCK_REALTIME | libc::CLOCK_MONOTONIC | libc::CLOCK_BOOTTIME) {
            return err(libc::EINVAL);
        }
        if flags & !(libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) != 0 {
            return err(libc::EINVAL);
        }
        let t =
            TimerFd { next: None, interval: 0, realtime: clock == libc::CLOCK_REALTIME, id: self.net.key(), read: 0 };
        let fl = libc::O_RDWR | if flags & libc::TFD_NONBLOCK != 0 { libc::O_NONBLOCK } else { 0 };
        let d = Description {
            kind: Kind::TimerFd(Rc::new(RefCell::new(t))),
            guest_path: "anon_inode:[timerfd]".into(),
            flags: fl,
        };
        Ok(self.fds.insert(d, flags & libc::TFD_CLOEXEC != 0)? as u64)
    }

    fn timerfd(&self, fd: i32) -> Result<Rc<RefCell<TimerFd>>, Errno> {
        match &self.fds.get(fd)?.desc.borrow().kind {
            Kind::TimerFd(t) => Ok(t.clone()),
            _ => err(libc::EINVAL),
        }
    }

    /// A timer's `struct itimerspec` as the guest reads it: (interval, time to the next expiry).
    fn timer_value(t: &TimerFd, now: u64) -> [u64; 2] {
        [t.interval, t.next.map_or(0, |n| n.saturating_sub(now))]
    }

    pub(crate) fn write_itimerspec(m: &mut Machine, addr: u64, v: [u64; 2]) -> Result<(), Errno> {
        let mut b = [0u8; 32];
        for (k, ns) in v.iter().enumerate() {
            b[16 * k..16 * k + 8].copy_from_slice(&(ns / 1_000_000_000).to_le_bytes());
            b[16 * k + 8..16 * k + 16].copy_from_slice(&(ns % 1_000_000_000).to_le_bytes());
        }
        m.write(addr, &b, false)?;
        Ok(())
    }

    pub(crate) fn timerfd_settime(&mut self, m: &mut Machine, fd: i32, flags: i32, new: u64, old: u64) -> SysResult {
        const TFD_TIMER_ABSTIME: i32 = 1;
        const TFD_TIMER_CANCEL_ON_SET: i32 = 2;
        let t = self.timerfd(fd)?;
        if flags & !(TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET) != 0 {
            return err(libc::EINVAL);
        }
        let interval = timespec_ns(m, new)?.unwrap_or(0);
        let value = timespec_ns(m, new + 16)?.unwrap_or(0);
        let now = self.now_ns(m);
        if old != 0 {
            Self::write_itimerspec(m, old, Self::timer_value(&t.borrow(), now))?;
        }
        let mut b = t.borrow_mut();
        // Expirations not read are discarded, as Linux's `timerfd_setup` does: counted as read,
        // so the edge stamp never goes back.
        b.read += b.ticks(now);
        b.interval = interval;
        b.next = match value {
            0 => None,
            v if flags & TFD_TIMER_ABSTIME != 0 && b.realtime => Some(v.saturating_sub(self.realtime_offset_ns())),
            v if flags & TFD_TIMER_ABSTIME != 0 => Some(v),
            v => Some(now.saturating_add(v)),
        };
        let id = b.id;
        drop(b);
        self.io_ready(id);
        Ok(0)
    }

    pub(crate) fn timerfd_gettime(&mut self, m: &mut Machine, fd: i32, cur: u64) -> SysResult {
        let t = self.timerfd(fd)?;
        let now = self.now_ns(m);
        let v = Self::timer_value(&t.borrow(), now);
        Self::write_itimerspec(m, cur, v)?;
        Ok(0)
    }

    pub(crate) fn timerfd_read(
        &mut self,
        m: &Machine,
        t: &Rc<RefCell<TimerFd>>,
        len: usize,
        nonblock: bool,
    ) -> Result<Vec<u8>, Errno> {
        if len < 8 {
            return err(libc::EINVAL);
        }
        let now = self.now_ns(m);
        let mut b = t.borrow_mut();
        let ticks = b.ticks(now);
        if ticks == 0 {
            if nonblock {
                return err(libc::EAGAIN);
            }
            self.block_wake = b.next;
            let id = b.id;
            drop(b);
            return self.would_block(&[id]);
        }
        b.next = match (b.next, b.interval) {
            (Some(n), i) if i > 0 => Some(n + ticks * i),
            _ => None,
        };
        b.read += ticks;
        Ok(ticks.to_le_bytes().to_vec())
    }

    pub(crate) fn epoll_create1(&mut self, flags: i32) -> SysResult {
        if flags & !libc::EPOLL_CLOEXEC != 0 {
            return err(libc::EINVAL);
        }
        let ep = Epoll { interest: BTreeMap::new(), id: self.net.key() };
        let d = Description {
            kind: Kind::Epoll(Rc::new(RefCell::new(ep))),
            guest_path: "anon_inode:[eventpoll]".into(),
            flags: libc::O_RDWR,
        };
        Ok(self.fds.insert(d, flags & libc::EPOLL_CLOEXEC != 0)? as u64)
    }

    fn epoll(&self, epfd: i32) -> Result<Rc<RefCell<Epoll>>, Errno> {
        match &self.fds.get(epfd)?.desc.borrow().kind {
            Kind::Epoll(ep) => Ok(ep.clone()),
            _ => err(libc::EINVAL),
        }
    }

    pub(crate) fn epoll_ctl(&mut self, m: &mut Machine, epfd: i32, op: i32, fd: i32, ev: u64) -> SysResult {
        let ep = self.epoll(epfd)?;
        let target = self.fds.get(fd)?.desc.clone();
        // A set cannot watch itself, through any descriptor of it (Linux: EINVAL).
        if matches!(&target.borrow().kind, Kind::Epoll(x) if Rc::ptr_eq(x, &ep)) {
            return err(libc::EINVAL);
        }
        if matches!(target.borrow().kind, Kind::File { .. } | Kind::Dir { .. }) {
            return err(libc::EPERM);
        }
        let read_event = |m: &Machine| -> Result<(u32, u64), Errno> { Ok((m.read_u32(ev)?, m.read_u64(ev + 4)?)) };
        // Linux's do_epoll_ctl: EPOLLEXCLUSIVE only when adding, only with these events, and
        // never on an epoll set (EINVAL).
        const EXCLUSIVE_OK: u32 = POLLIN | POLLOUT | POLLERR | POLLHUP | EPOLLWAKEUP | EPOLLET | EPOLLEXCLUSIVE;
        let is_epoll = matches!(&target.borrow().kind, Kind::Epoll(_));
        let mut set = ep.borrow_mut();
        let live = set.interest.get(&fd).is_some_and(|i| i.desc.upgrade().is_some_and(|d| Rc::ptr_eq(&d, &target)));
        match op {
            libc::EPOLL_CTL_ADD => {
                let (events, data) = read_event(m)?;
                if events & EPOLLEXCLUSIVE != 0 && (is_epoll || events & !EXCLUSIVE_OK != 0) {
                    return err(libc::EINVAL);
                }
                if live {
                    return err(libc::EEXIST);
                }
                // EPOLLWAKEUP needs CAP_BLOCK_SUSPEND, which the guest lacks: dropped silently.
                let events = events & !EPOLLWAKEUP;
                let et = events & EPOLLET != 0;
                set.interest.insert(fd, Interest { events, et, seen: None, data, desc: Rc::downgrade(&target) });
            }
            libc::EPOLL_CTL_MOD => {
                let (events, data) = read_event(m)?;
                if events & EPOLLEXCLUSIVE != 0 {
                    return err(libc::EINVAL);
                }
                if !live {
                    return err(libc::ENOENT);
                }
                let events = events & !EPOLLWAKEUP;
                if let Some(i) = set.interest.get_mut(&fd) {
                    // An exclusive entry cannot be modified.
                    if i.events & EPOLLEXCLUSIVE != 0 {
                        return err(libc::EINVAL);
                    }
                    i.events = events;
                    i.et = events & EPOLLET != 0;
                    i.seen = None;
                    i.data = data;
                }
            }
            libc::EPOLL_CTL_DEL => {
                if !live {
                    return err(libc::ENOENT);
                }
                set.interest.remove(&fd);
            }
            _ => return err(libc::EINVAL),
        }
        let id = set.id;
        drop(set);
        self.io_ready(id);
        Ok(0)
    }

    pub(crate) fn epoll_wait(
        &mut self,
        m: &mut Machine,
        epfd: i32,
        out: u64,
        max: i32,
        timeout: Option<u64>,
    ) -> SysResult {
        if max <= 0 {
            return err(libc::EINVAL);
        }
        let ep = self.epoll(epfd)?;
        let mut w = self.watch(m);
        w.keys.push(ep.borrow().id);
        let mut events: Vec<(u32, u64)> = Vec::new();
        {
            let mut set = ep.borrow_mut();
            set.interest.retain(|_, i| i.desc.strong_count() > 0);
            for i in set.interest.values_mut() {
                let Some(d) = i.desc.upgrade() else { continue };
                w.edges = [0, 0];
                let ready = self.readiness(&d.borrow(), &mut w, 1);
                let Some(r) = i.due(ready, w.edges) else { continue };
                if events.len() >= max as usize {
                    continue;
                }
                events.push((r, i.data));
                i.seen = Some(w.edges);
                if i.events & EPOLLONESHOT != 0 {
                    // Disarmed until EPOLL_CTL_MOD (Linux keeps only its private bits).
                    i.events &= EPOLLONESHOT | EPOLLET | EPOLLEXCLUSIVE;
                }
            }
        }
        if events.is_empty() {
            return self.wait_or(m, timeout, w, 0);
        }
        let mut raw = Vec::with_capacity(events.len() * 12);
        for (e, data) in &events {
            raw.extend_from_slice(&e.to_le_bytes());
            raw.extend_from_slice(&data.to_le_bytes());
        }
        m.write(out, &raw, false)?;
        Ok(events.len() as u64)
    }
}
