//! Sockets between the guest's threads: `AF_UNIX` (paths and abstract names) and loopback
//! `AF_INET`/`AF_INET6` (TCP streams and UDP datagrams), entirely inside ferrite.
//!
//! A connected stream is two [`Pipe`]s, one per direction, so a socket's bytes, its end of file
//! and its wake-ups work as a pipe's do; `SOCK_SEQPACKET` keeps each message's length in the
//! pipe. A listener holds the connections made to it until `accept` takes them: a loopback
//! `connect` completes at once (no handshake to wait for, also when non-blocking). A datagram
//! socket has an inbox of (source address, bytes). Names — `AF_UNIX` paths and abstract names,
//! TCP and UDP ports — live in [`Net`], released when their socket closes; port 0 binds the
//! next free ephemeral port from 32768 up, in order, so the same run gets the same ports. IPv4
//! and IPv6 sockets bind a port apart and meet as on Linux with `net.ipv6.bindv6only` 0: an
//! `AF_INET6` socket on `::` without `IPV6_V6ONLY` is dual-stack (it holds the port for IPv4
//! too and takes IPv4 clients as `::ffff:127.0.0.1`); `::1` reaches `AF_INET6` sockets only.
//! All of `127.0.0.0/8` is one address.
//!
//! Blocking follows Linux: a call that cannot complete (nothing to read, no room to write, no
//! connection to accept) fails with `EAGAIN` on a non-blocking socket or with `MSG_DONTWAIT`,
//! else blocks the thread on the socket's readiness keys ([`crate::thread::Wait::Io`]) and is
//! made again when they change.
//!
//! Nothing reaches the host's network: a connection to a loopback port nobody listens on is
//! refused (`ECONNREFUSED`), an `AF_UNIX` name nobody bound is `ENOENT` (a path) or
//! `ECONNREFUSED` (an abstract name), any other address is unreachable (`ENETUNREACH`) — which is
//! what programs that only probe need (glibc's NSS asks `nscd` over `/var/run/nscd/socket`
//! before reading `/etc/passwd`; `ls -l`, `id` and `tar` fall back as on a host without it).
//!
//! Left out: an `AF_UNIX` path is a name in the machine, not a file (it does not appear in
//! listings and `unlink` does not remove it; the name goes when its socket closes); listen
//! backlogs are not enforced; a blocking send to a full socket that fits partly writes what
//! fits (a short write, as for a signal-interrupted send on Linux).
//!
//! Ancillary data of `AF_UNIX` sockets (`SCM_RIGHTS`, `SCM_CREDENTIALS`) follows Linux's
//! `af_unix.c` and `scm.c`: each send's credentials and passed open file descriptions ride
//! with its bytes ([`crate::fd::Anc`], Linux's `UNIXCB(skb)`), holding the descriptions open
//! while in flight; a receive installs them as new descriptors sharing the descriptions
//! (offsets and status flags), or closes those its control buffer has no room for
//! (`MSG_CTRUNC`), and the receiving socket's close closes what it never received. Left out
//! there: Linux's garbage collection of sockets in flight inside each other (a socket sent
//! over itself and then closed stays open until the run ends), the per-user limit on
//! descriptors in flight (`ETOOMANYREFS`), `SCM_PIDFD` and `SO_PASSPIDFD`, and the split of a
//! large stream send into several buffers (its descriptors ride with all of its bytes, not
//! only the first buffer's).

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::{Rc, Weak};

use emu::Machine;

use crate::fd::{Anc, Ancillary, Description, Kind, Pipe};
use crate::{err, Errno, Kernel, SysResult, RESTART};

const SOCK_TYPE_MASK: i32 = 0xf;
/// `sizeof(struct cmsghdr)` on x86-64: `cmsg_len` (8 bytes), `cmsg_level`, `cmsg_type`.
const CMSG_HDR: usize = 16;
/// Bytes a stream socket's direction holds before a send blocks (Linux's default `SO_SNDBUF`
/// for `AF_UNIX` is 212,992).
pub const SOCK_CAPACITY: usize = 212_992;

/// The kernel's tick rate: socket timeouts are kept in whole jiffies, as Linux keeps them
/// (`sock_set_timeout`), so what `getsockopt` gives back is rounded as there. 250 is Debian's
/// `CONFIG_HZ`.
const HZ: u64 = 250;
/// `SO_RCVTIMEO_NEW` and `SO_SNDTIMEO_NEW` (`struct __kernel_sock_timeval`, the same 16 bytes
/// as the old `struct timeval` on x86-64).
const SO_RCVTIMEO_NEW: i32 = 66;
const SO_SNDTIMEO_NEW: i32 = 67;

/// Which of [`Sock::timeouts`] option `name` of `SOL_SOCKET` sets, if it is a timeout.
fn timeout_index(level: i32, name: i32) -> Option<usize> {
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO | SO_RCVTIMEO_NEW) => Some(0),
        (libc::SOL_SOCKET, libc::SO_SNDTIMEO | SO_SNDTIMEO_NEW) => Some(1),
        _ => None,
    }
}

/// Linux's `sock_set_timeout`: a `struct timeval` to whole jiffies in ns; zero is no timeout
/// (`None`), a negative second count a timeout of 0 (the call never waits).
fn timeout_from_timeval(sec: i64, usec: i64) -> Result<Option<u64>, Errno> {
    if !(0..1_000_000).contains(&usec) {
        return err(libc::EDOM);
    }
    if sec < 0 {
        return Ok(Some(0));
    }
    if sec == 0 && usec == 0 {
        return Ok(None);
    }
    let jiffies = (sec as u64).saturating_mul(HZ).saturating_add((usec as u64).div_ceil(1_000_000 / HZ));
    Ok(Some(jiffies.saturating_mul(1_000_000_000 / HZ)))
}
const FIRST_EPHEMERAL: u16 = 32768;
const LAST_EPHEMERAL: u16 = 60999;

/// A socket as descriptors (and listeners' queues) hold it.
pub(crate) type SockRef = Rc<RefCell<Sock>>;

/// A shared pipe: one direction of a connected socket.
pub type Chan = Rc<RefCell<Pipe>>;

/// What a receive got: the bytes, the whole length of the datagram they came from (`MSG_TRUNC`),
/// the sender's address (datagrams), and (`AF_UNIX`) the sender's credentials and the
/// descriptions passed with `SCM_RIGHTS`.
pub(crate) type Received = (Vec<u8>, usize, Option<Vec<u8>>, Ancillary);

/// A socket's state.
#[derive(Debug)]
pub struct Sock {
    /// `AF_UNIX`, `AF_INET` or `AF_INET6`.
    pub domain: i32,
    /// `SOCK_STREAM`, `SOCK_DGRAM` or `SOCK_SEQPACKET` (without the flags).
    pub ty: i32,
    /// Its readiness key: connections queued on a listener, datagrams arriving.
    pub id: u64,
    /// Its own address (`sockaddr` bytes) once bound.
    pub local: Option<Vec<u8>>,
    /// The peer's address once connected.
    pub peer: Option<Vec<u8>>,
    /// A connected stream or seqpacket socket's directions: (from the peer, to the peer).
    pub conn: Option<(Chan, Chan)>,
    /// A listener's connections not accepted yet; `None` until `listen`.
    pub queue: Option<VecDeque<Rc<RefCell<Sock>>>>,
    /// A datagram socket's arrivals: (source address, bytes, and for `AF_UNIX` what the send
    /// attached: the sender's credentials and descriptions in flight).
    pub inbox: VecDeque<(Vec<u8>, Vec<u8>, Option<Anc>)>,
    /// A datagram socket's peer from `socketpair` or `connect` to an `AF_UNIX` name.
    pub dgram_peer: Option<Weak<RefCell<Sock>>>,
    /// `shutdown(SHUT_RD)` was called.
    pub shut_rd: bool,
    /// `shutdown(SHUT_WR)` was called (the peer reads end of file).
    pub shut_wr: bool,
    /// Options set with `setsockopt`, returned by `getsockopt`: (level, name) → value.
    pub opts: BTreeMap<(i32, i32), i32>,
    /// Connections queued and datagrams received so far: an edge-triggered epoll entry on the
    /// socket is due again when this moves ([`crate::poll`]).
    pub arrivals: u64,
    /// `SO_RCVTIMEO` and `SO_SNDTIMEO`, in virtual ns (whole jiffies, [`HZ`]): how long a
    /// receive or an `accept` (a send) waits before EAGAIN; `None`: forever.
    pub timeouts: [Option<u64>; 2],
}

impl Drop for Sock {
    fn drop(&mut self) {
        // Descriptions in flight to this socket close with it (Linux purges the receive queue
        // in `unix_release_sock`); they are dropped once no pipe is borrowed, as closing one
        // may close a socket whose pipes these are.
        let mut in_flight = Vec::new();
        if let Some((rx, tx)) = &self.conn {
            let mut r = rx.borrow_mut();
            r.readers -= 1;
            in_flight.extend(r.anc.iter_mut().map(|a| std::mem::take(&mut a.files)));
            drop(r);
            if !self.shut_wr {
                tx.borrow_mut().writers -= 1;
            }
        }
        drop(in_flight);
    }
}

/// Where a socket can be found by address.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Name {
    /// An `AF_UNIX` path or abstract name (leading NUL), as bytes.
    Unix(Vec<u8>),
    /// A loopback port, for streams or datagrams, of `AF_INET6` sockets (`v6`) or `AF_INET` ones:
    /// the two families bind the same port separately, and [`Kernel::port_conflict`] and
    /// [`Kernel::reach`] say where they meet.
    Port { dgram: bool, port: u16, v6: bool },
}

/// The machine's network: bound names and the allocation of readiness keys and ports.
#[derive(Debug, Default)]
pub struct Net {
    names: BTreeMap<Name, Weak<RefCell<Sock>>>,
    /// The other sockets bound to a name with `SO_REUSEPORT` (a group whose first socket is in
    /// `names`), in the order they were bound.
    reuse: BTreeMap<Name, Vec<Weak<RefCell<Sock>>>>,
    next_key: u64,
    next_port: u16,
}

impl Net {
    /// A copy for a snapshot of a kernel that holds no socket: no names, the same next key and
    /// port, so a restored run allocates what the original did.
    pub fn copy_keys(&self) -> Net {
        Net { names: BTreeMap::new(), reuse: BTreeMap::new(), next_key: self.next_key, next_port: self.next_port }
    }

    /// A copy for a snapshot of a kernel whose sockets were copied: each bound name names the
    /// copy `find` gives of its socket (a name whose socket has no copy, being closed, goes).
    pub(crate) fn copy_with(&self, find: &dyn Fn(&SockRef) -> Option<SockRef>) -> Net {
        let names =
            self.names.iter().filter_map(|(n, w)| Some((n.clone(), Rc::downgrade(&find(&w.upgrade()?)?)))).collect();
        let reuse = self
            .reuse
            .iter()
            .map(|(n, ws)| {
                (n.clone(), ws.iter().filter_map(|w| Some(Rc::downgrade(&find(&w.upgrade()?)?))).collect::<Vec<_>>())
            })
            .filter(|(_, ws)| !ws.is_empty())
            .collect();
        Net { names, reuse, next_key: self.next_key, next_port: self.next_port }
    }

    /// A fresh readiness key, for a pipe, socket, eventfd or epoll set.
    pub fn key(&mut self) -> u64 {
        self.next_key += 1;
        self.next_key
    }

    fn lookup(&mut self, name: &Name) -> Option<Rc<RefCell<Sock>>> {
        let s = self.names.get(name)?.upgrade();
        if s.is_none() {
            self.names.remove(name);
            // The first of a `SO_REUSEPORT` group closed: the next still open holds the name.
            let next = self.reuse.get_mut(name).and_then(|ws| {
                ws.retain(|w| w.strong_count() > 0);
                (!ws.is_empty()).then(|| ws.remove(0))
            });
            if self.reuse.get(name).is_some_and(|ws| ws.is_empty()) {
                self.reuse.remove(name);
            }
            let next = next?;
            self.names.insert(name.clone(), next.clone());
            return next.upgrade();
        }
        s
    }

    /// The socket of `name`'s `SO_REUSEPORT` group a connection or datagram from the next
    /// ephemeral port goes to: one of the listeners (streams) or any (datagrams), picked by
    /// that port as Linux's `reuseport_select_sock` picks by a hash of the addresses and ports,
    /// so that a server's workers share the connections, the same way in every run. A name
    /// without a group is its one socket.
    fn lookup_pick(&mut self, name: &Name) -> Option<Rc<RefCell<Sock>>> {
        let first = self.lookup(name)?;
        let Some(others) = self.reuse.get(name) else { return Some(first) };
        let dgram = matches!(name, Name::Port { dgram: true, .. });
        let mut group: Vec<_> = std::iter::once(first.clone()).chain(others.iter().filter_map(Weak::upgrade)).collect();
        if !dgram {
            group.retain(|s| s.borrow().queue.is_some());
        }
        if group.is_empty() {
            return Some(first);
        }
        let pick = usize::from(self.next_port) % group.len();
        Some(group.swap_remove(pick))
    }

    /// The next free ephemeral port, for streams or datagrams.
    fn ephemeral(&mut self, dgram: bool) -> Result<u16, Errno> {
        if self.next_port < FIRST_EPHEMERAL {
            self.next_port = FIRST_EPHEMERAL;
        }
        for _ in FIRST_EPHEMERAL..=LAST_EPHEMERAL {
            let port = self.next_port;
            self.next_port = if port == LAST_EPHEMERAL { FIRST_EPHEMERAL } else { port + 1 };
            if self.lookup(&Name::Port { dgram, port, v6: false }).is_none()
                && self.lookup(&Name::Port { dgram, port, v6: true }).is_none()
            {
                return Ok(port);
            }
        }
        err(libc::EADDRINUSE)
    }
}

/// A `sockaddr_in` or `sockaddr_in6` for loopback (or the any address) and `port`.
fn inet_addr(domain: i32, any: bool, port: u16) -> Vec<u8> {
    let mut sa = vec![0u8; if domain == libc::AF_INET { 16 } else { 28 }];
    sa[..2].copy_from_slice(&(domain as u16).to_ne_bytes());
    sa[2..4].copy_from_slice(&port.to_be_bytes());
    if !any {
        if domain == libc::AF_INET {
            sa[4..8].copy_from_slice(&[127, 0, 0, 1]);
        } else {
            sa[23] = 1;
        }
    }
    sa
}

/// Whether an `AF_INET`/`AF_INET6` socket address names this machine (127.0.0.0/8, ::1, or
/// 127.0.0.0/8 mapped into IPv6).
fn loopback(domain: i32, sa: &[u8]) -> bool {
    if domain == libc::AF_INET {
        return sa[4] == 127;
    }
    let a = &sa[8..24];
    let v4_mapped = a[..10].iter().all(|b| *b == 0) && a[10] == 0xff && a[11] == 0xff && a[12] == 127;
    v4_mapped || (a[..15].iter().all(|b| *b == 0) && a[15] == 1)
}

/// Whether an inet address is the any address (0.0.0.0 or ::).
fn any_addr(domain: i32, sa: &[u8]) -> bool {
    if domain == libc::AF_INET {
        sa[4..8].iter().all(|b| *b == 0)
    } else {
        sa[8..24].iter().all(|b| *b == 0)
    }
}

/// Whether `s` set `SO_REUSEPORT`, so that it may share its port with others that did.
fn reuseport(s: &Sock) -> bool {
    s.opts.get(&(libc::SOL_SOCKET, libc::SO_REUSEPORT)).is_some_and(|v| *v != 0)
}

/// Whether a bound `AF_INET6` socket also takes IPv4 (a dual-stack socket, the Linux default
/// with `net.ipv6.bindv6only` 0): `IPV6_V6ONLY` is not set and it is bound to the any address
/// `::` or to an IPv4-mapped address.
fn dual_stack(s: &Sock) -> bool {
    if s.domain != libc::AF_INET6 || s.opts.get(&(libc::IPPROTO_IPV6, libc::IPV6_V6ONLY)).is_some_and(|v| *v != 0) {
        return false;
    }
    let Some(sa) = &s.local else { return false };
    let a = &sa[8..24];
    any_addr(libc::AF_INET6, sa) || (a[..10].iter().all(|b| *b == 0) && a[10] == 0xff && a[11] == 0xff)
}

/// Whether an `AF_INET6` address is an IPv4-mapped one (`::ffff:a.b.c.d`).
fn v4_mapped(sa: &[u8]) -> bool {
    sa.len() >= 24 && sa[8..18].iter().all(|b| *b == 0) && sa[18] == 0xff && sa[19] == 0xff
}

/// `sa` (an inet address) as `domain` writes it: an IPv4 address as `AF_INET6` becomes
/// `::ffff:a.b.c.d`, an IPv4-mapped one as `AF_INET` the IPv4 address; the port is kept.
fn in_family(domain: i32, sa: &[u8]) -> Vec<u8> {
    let from = i32::from(u16::from_ne_bytes([sa[0], sa[1]]));
    if from == domain || from == libc::AF_UNIX {
        return sa.to_vec();
    }
    let mut out = inet_addr(domain, true, u16::from_be_bytes([sa[2], sa[3]]));
    if domain == libc::AF_INET6 {
        out[18] = 0xff;
        out[19] = 0xff;
        out[20..24].copy_from_slice(&sa[4..8]);
    } else if v4_mapped(sa) {
        out[4..8].copy_from_slice(&sa[20..24]);
    } else {
        // ::1 (or ::) has no IPv4 form; the machine's one host is 127.0.0.1.
        out[4..8].copy_from_slice(&[127, 0, 0, 1]);
    }
    out
}

/// The source address a socket bound to `local` sends to `dest` from: a wildcard address is
/// the loopback address the packet leaves from (`::ffff:127.0.0.1` towards an IPv4-mapped
/// destination), as Linux picks it by the route.
fn source_addr(local: &[u8], dest: &[u8]) -> Vec<u8> {
    if local.len() < 16 {
        return local.to_vec();
    }
    let domain = i32::from(u16::from_ne_bytes([local[0], local[1]]));
    if domain == libc::AF_UNIX || !any_addr(domain, local) {
        return local.to_vec();
    }
    let port = u16::from_be_bytes([local[2], local[3]]);
    if domain == libc::AF_INET6 && v4_mapped(dest) {
        in_family(libc::AF_INET6, &inet_addr(libc::AF_INET, false, port))
    } else {
        inet_addr(domain, false, port)
    }
}

/// A socket's options as `getsockopt` reads them back when never set.
fn default_opt(s: &Sock, level: i32, name: i32) -> Option<i32> {
    Some(match (level, name) {
        (libc::SOL_SOCKET, libc::SO_TYPE) => s.ty,
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => s.domain,
        (libc::SOL_SOCKET, libc::SO_ACCEPTCONN) => i32::from(s.queue.is_some()),
        (libc::SOL_SOCKET, libc::SO_ERROR) => 0,
        (libc::SOL_SOCKET, libc::SO_RCVBUF | libc::SO_SNDBUF) => SOCK_CAPACITY as i32,
        (libc::SOL_SOCKET, libc::SO_PROTOCOL) => match (s.domain, s.ty) {
            (libc::AF_UNIX, _) => 0,
            (_, libc::SOCK_STREAM) => libc::IPPROTO_TCP,
            _ => libc::IPPROTO_UDP,
        },
        (libc::SOL_SOCKET, _) | (libc::IPPROTO_TCP, _) | (libc::IPPROTO_IP, _) | (libc::IPPROTO_IPV6, _) => 0,
        _ => return None,
    })
}

impl Kernel {
    fn new_sock(&mut self, domain: i32, ty: i32) -> Sock {
        Sock {
            domain,
            ty,
            id: self.net.key(),
            local: None,
            peer: None,
            conn: None,
            queue: None,
            inbox: VecDeque::new(),
            dgram_peer: None,
            shut_rd: false,
            shut_wr: false,
            opts: BTreeMap::new(),
            arrivals: 0,
            timeouts: [None; 2],
        }
    }

    fn install_sock(&mut self, s: Sock, flags: i32) -> Result<i32, Errno> {
        let fl = libc::O_RDWR | if flags & libc::SOCK_NONBLOCK != 0 { libc::O_NONBLOCK } else { 0 };
        let d = Description { kind: Kind::Socket(Rc::new(RefCell::new(s))), guest_path: "socket:".into(), flags: fl };
        self.fds.insert(d, flags & libc::SOCK_CLOEXEC != 0)
    }

    /// Linux's `import_ubuf`, which `sendto` and `recvfrom` call before they look at the
    /// descriptor: a buffer reaching above user space (`access_ok`, after the length is cut to
    /// `MAX_RW_COUNT`) is EFAULT even on a descriptor that is no socket.
    fn user_buffer(buf: u64, len: u64) -> Result<(), Errno> {
        match buf.checked_add(len.min(crate::fd::MAX_RW)) {
            Some(end) if end <= crate::mem::STACK_TOP => Ok(()),
            _ => err(libc::EFAULT),
        }
    }

    /// The socket behind `fd` and whether its description is non-blocking.
    fn sock(&self, fd: i32) -> Result<(Rc<RefCell<Sock>>, bool), Errno> {
        let d = self.fds.get(fd)?.desc.borrow();
        match &d.kind {
            Kind::Socket(s) => Ok((s.clone(), d.flags & libc::O_NONBLOCK != 0)),
            _ => err(libc::ENOTSOCK),
        }
    }

    fn check_type(domain: i32, ty: i32) -> Result<i32, Errno> {
        if !matches!(domain, libc::AF_UNIX | libc::AF_INET | libc::AF_INET6) {
            return err(libc::EAFNOSUPPORT);
        }
        if ty & !(SOCK_TYPE_MASK | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
            return err(libc::EINVAL);
        }
        let base = ty & SOCK_TYPE_MASK;
        if !matches!(base, libc::SOCK_STREAM | libc::SOCK_DGRAM | libc::SOCK_SEQPACKET) {
            return err(libc::ESOCKTNOSUPPORT);
        }
        if base == libc::SOCK_SEQPACKET && domain != libc::AF_UNIX {
            return err(libc::ESOCKTNOSUPPORT);
        }
        Ok(base)
    }

    pub(crate) fn socket(&mut self, domain: i32, ty: i32, _proto: i32) -> SysResult {
        let base = Self::check_type(domain, ty)?;
        let s = self.new_sock(domain, base);
        Ok(self.install_sock(s, ty)? as u64)
    }

    pub(crate) fn socketpair(&mut self, m: &mut Machine, domain: i32, ty: i32, _proto: i32, out: u64) -> SysResult {
        let base = Self::check_type(domain, ty)?;
        if domain != libc::AF_UNIX {
            return err(libc::EOPNOTSUPP);
        }
        let (a, b) =
            (Rc::new(RefCell::new(self.new_sock(domain, base))), Rc::new(RefCell::new(self.new_sock(domain, base))));
        let unnamed = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        if base == libc::SOCK_DGRAM {
            a.borrow_mut().dgram_peer = Some(Rc::downgrade(&b));
            b.borrow_mut().dgram_peer = Some(Rc::downgrade(&a));
        } else {
            self.join(&mut a.borrow_mut(), &mut b.borrow_mut());
        }
        for s in [&a, &b] {
            let mut s = s.borrow_mut();
            s.local = Some(unnamed.clone());
            s.peer = Some(unnamed.clone());
        }
        let fl = libc::O_RDWR | if ty & libc::SOCK_NONBLOCK != 0 { libc::O_NONBLOCK } else { 0 };
        let cloexec = ty & libc::SOCK_CLOEXEC != 0;
        let fa =
            self.fds.insert(Description { kind: Kind::Socket(a), guest_path: "socket:".into(), flags: fl }, cloexec)?;
        let fb = match self
            .fds
            .insert(Description { kind: Kind::Socket(b), guest_path: "socket:".into(), flags: fl }, cloexec)
        {
            Ok(n) => n,
            Err(e) => {
                self.fds.fds.remove(&fa);
                return Err(e);
            }
        };
        let mut buf = [0u8; 8];
        buf[..4].copy_from_slice(&fa.to_le_bytes());
        buf[4..].copy_from_slice(&fb.to_le_bytes());
        if let Err(e) = m.write(out, &buf, false) {
            self.fds.fds.remove(&fa);
            self.fds.fds.remove(&fb);
            return Err(e.into());
        }
        Ok(0)
    }

    /// Connects two stream or seqpacket sockets with a pipe each way.
    fn join(&mut self, a: &mut Sock, b: &mut Sock) {
        let msgs = (a.ty == libc::SOCK_SEQPACKET).then(VecDeque::new);
        let mut pipe = || {
            Rc::new(RefCell::new(Pipe {
                readers: 1,
                writers: 1,
                id: self.net.key(),
                capacity: SOCK_CAPACITY,
                msgs: msgs.clone(),
                ..Pipe::default()
            }))
        };
        let (ab, ba) = (pipe(), pipe());
        a.conn = Some((ba.clone(), ab.clone()));
        b.conn = Some((ab, ba));
    }

    /// Reads a socket address argument: its bytes, checked against the socket's family.
    fn read_sockaddr(m: &Machine, domain: i32, addr: u64, len: u32) -> Result<Vec<u8>, Errno> {
        if !(2..=128).contains(&len) {
            return err(libc::EINVAL);
        }
        let mut sa = vec![0u8; len as usize];
        m.read(addr, &mut sa).map_err(|_| Errno(libc::EFAULT))?;
        let family = i32::from(u16::from_ne_bytes([sa[0], sa[1]]));
        if family != domain {
            return err(if domain == libc::AF_UNIX { libc::EINVAL } else { libc::EAFNOSUPPORT });
        }
        match domain {
            libc::AF_INET if len < 16 => err(libc::EINVAL),
            libc::AF_INET6 if len < 24 => err(libc::EINVAL),
            _ => Ok(sa),
        }
    }

    /// The name an address binds or reaches, with its canonical `sockaddr`.
    fn name_of(domain: i32, ty: i32, sa: &[u8]) -> Result<(Name, Vec<u8>), Errno> {
        if domain == libc::AF_UNIX {
            let path = &sa[2..];
            // A path ends at its NUL; an abstract name (leading NUL) is every byte given.
            let path = if path.first() == Some(&0) {
                path.to_vec()
            } else {
                path[..path.iter().position(|b| *b == 0).unwrap_or(path.len())].to_vec()
            };
            if path.is_empty() {
                return err(libc::EINVAL);
            }
            let mut canon = sa[..2].to_vec();
            canon.extend_from_slice(&path);
            if path[0] != 0 {
                canon.push(0);
            }
            return Ok((Name::Unix(path), canon));
        }
        let port = u16::from_be_bytes([sa[2], sa[3]]);
        let mut canon = sa[..if domain == libc::AF_INET { 16 } else { 28.min(sa.len()) }].to_vec();
        canon.resize(if domain == libc::AF_INET { 16 } else { 28 }, 0);
        Ok((Name::Port { dgram: ty == libc::SOCK_DGRAM, port, v6: domain == libc::AF_INET6 }, canon))
    }

    pub(crate) fn bind(&mut self, m: &mut Machine, fd: i32, addr: u64, len: u32) -> SysResult {
        let (s, _) = self.sock(fd)?;
        let (domain, ty) = {
            let s = s.borrow();
            (s.domain, s.ty)
        };
        let sa = Self::read_sockaddr(m, domain, addr, len)?;
        if s.borrow().local.is_some() {
            return err(libc::EINVAL);
        }
        let (mut name, mut canon) = Self::name_of(domain, ty, &sa)?;
        if domain != libc::AF_UNIX {
            if !loopback(domain, &sa) && !any_addr(domain, &sa) {
                return err(libc::EADDRNOTAVAIL);
            }
            if let Name::Port { dgram, port: 0, v6 } = name {
                let port = self.net.ephemeral(dgram)?;
                canon[2..4].copy_from_slice(&port.to_be_bytes());
                name = Name::Port { dgram, port, v6 };
            }
        }
        if let Name::Unix(p) = &name {
            if p[0] != 0 {
                // A path names a socket file, made here: EADDRINUSE if the name exists (a
                // socket file left by a closed socket too, as on Linux).
                name = Name::Unix(self.make_socket_file(m, p)?.into_bytes());
            }
        }
        // A path's file was made just now: a socket still known by it had its file removed, and
        // is reached no more.
        let path = matches!(&name, Name::Unix(p) if p[0] != 0);
        let mut join = false;
        if !path {
            if let Some(holder) = self.net.lookup(&name) {
                // Linux's `sk_reuseport_match`: every socket on the port set SO_REUSEPORT
                // before binding (and has the same owner, here always).
                if !(reuseport(&s.borrow()) && reuseport(&holder.borrow())) {
                    return err(libc::EADDRINUSE);
                }
                join = true;
            }
        }
        s.borrow_mut().local = Some(canon);
        if self.port_conflict(&s, &name) {
            s.borrow_mut().local = None;
            return err(libc::EADDRINUSE);
        }
        if join {
            self.net.reuse.entry(name).or_default().push(Rc::downgrade(&s));
        } else {
            self.net.names.insert(name, Rc::downgrade(&s));
        }
        Ok(0)
    }

    /// Whether `s`, given its address, may not take the port `name` because a socket of the
    /// other family holds it and one of the two covers the other's addresses: an `AF_INET`
    /// socket and a dual-stack `AF_INET6` one ([`dual_stack`]) conflict, an `AF_INET6` socket
    /// with `IPV6_V6ONLY` or bound to `::1` shares the port with an `AF_INET` one (Redis binds
    /// `0.0.0.0` and then `::` with `IPV6_V6ONLY` on the same port).
    fn port_conflict(&mut self, s: &SockRef, name: &Name) -> bool {
        let Name::Port { dgram, port, v6 } = *name else { return false };
        let Some(other) = self.net.lookup(&Name::Port { dgram, port, v6: !v6 }) else { return false };
        let six = if v6 { s.borrow() } else { other.borrow() };
        dual_stack(&six)
    }

    /// An inet socket not bound yet gets the next ephemeral port on loopback, as Linux's
    /// autobind at connect or first send.
    fn autobind(&mut self, s: &Rc<RefCell<Sock>>) -> Result<(), Errno> {
        self.autobind_to(s, None)
    }

    /// [`Self::autobind`] towards `dest`: an `AF_INET6` socket sending to an IPv4-mapped address
    /// goes out from `::ffff:127.0.0.1`, as Linux picks the source address by the route.
    fn autobind_to(&mut self, s: &Rc<RefCell<Sock>>, dest: Option<&[u8]>) -> Result<(), Errno> {
        let (domain, ty, bound) = {
            let b = s.borrow();
            (b.domain, b.ty, b.local.is_some())
        };
        if bound {
            return Ok(());
        }
        if domain == libc::AF_UNIX {
            s.borrow_mut().local = Some((libc::AF_UNIX as u16).to_ne_bytes().to_vec());
            return Ok(());
        }
        let dgram = ty == libc::SOCK_DGRAM;
        let port = self.net.ephemeral(dgram)?;
        self.net.names.insert(Name::Port { dgram, port, v6: domain == libc::AF_INET6 }, Rc::downgrade(s));
        let lo = inet_addr(domain, false, port);
        let lo = match dest {
            Some(d) if domain == libc::AF_INET6 && v4_mapped(d) => {
                in_family(libc::AF_INET6, &inet_addr(libc::AF_INET, false, port))
            }
            _ => lo,
        };
        s.borrow_mut().local = Some(lo);
        Ok(())
    }

    pub(crate) fn listen(&mut self, fd: i32, _backlog: i32) -> SysResult {
        let (s, _) = self.sock(fd)?;
        if s.borrow().ty == libc::SOCK_DGRAM {
            return err(libc::EOPNOTSUPP);
        }
        if s.borrow().conn.is_some() {
            return err(libc::EINVAL);
        }
        self.autobind(&s)?;
        let mut b = s.borrow_mut();
        if b.domain == libc::AF_UNIX && b.local.as_ref().is_some_and(|l| l.len() <= 2) {
            return err(libc::EINVAL);
        }
        if b.queue.is_none() {
            b.queue = Some(VecDeque::new());
        }
        Ok(0)
    }

    /// `bind` of an `AF_UNIX` socket to the path `p`: makes the socket file there, in a writable
    /// root, as Linux's `unix_bind` does (`mknod` of an `S_IFSOCK` node, mode 0777: the umask is
    /// not applied), so it is listed, `stat` says `S_IFSOCK`, `chmod` and `unlink` act on it,
    /// and it stays when the socket closes. EADDRINUSE if the name exists; the errors of
    /// `mknod` otherwise (ENOENT without the directory, EROFS/EACCES outside writable roots).
    /// Returns the guest path (absolute, its directories' links resolved) the socket is known by.
    fn make_socket_file(&mut self, m: &Machine, p: &[u8]) -> Result<String, Errno> {
        let path = String::from_utf8(p.to_vec()).map_err(|_| Errno(libc::ENOENT))?;
        let guest = self.walk(&self.guest_path(libc::AT_FDCWD, &path)?, false)?;
        let dir = self.write_target(&guest)?.parent()?;
        // SAFETY: `d` is an open directory and `n` a NUL-terminated C string, alive for the call.
        crate::vfs::at(&dir, |d, n| crate::vfs::cvt(unsafe { libc::mknodat(d, n, libc::S_IFSOCK | 0o777, 0) }))
            .map_err(|e| if e.0 == libc::EEXIST { Errno(libc::EADDRINUSE) } else { e })?;
        self.changed(m, &guest);
        self.changed_entry(m, &guest);
        self.fsnotify_create(&guest);
        Ok(guest)
    }

    /// The name a connection or datagram to the `AF_UNIX` path `p` reaches: the socket file
    /// there must exist (ENOENT) and be a socket (ECONNREFUSED, as Linux for another file).
    fn socket_file(&self, p: &[u8]) -> Result<Name, Errno> {
        use std::os::unix::fs::FileTypeExt;
        let path = String::from_utf8(p.to_vec()).map_err(|_| Errno(libc::ENOENT))?;
        let guest = self.walk(&self.guest_path(libc::AT_FDCWD, &path)?, true)?;
        match self.resolve(&guest)? {
            crate::vfs::Target::Host { host, .. } => match std::fs::symlink_metadata(&host) {
                Ok(md) if md.file_type().is_socket() => Ok(Name::Unix(guest.into_bytes())),
                Ok(_) => err(libc::ECONNREFUSED),
                Err(e) => Err(e.into()),
            },
            _ => err(libc::ECONNREFUSED),
        }
    }

    /// The socket an address reaches, or the error of nobody being there.
    fn reach(&mut self, domain: i32, ty: i32, sa: &[u8]) -> Result<Option<Rc<RefCell<Sock>>>, Errno> {
        if domain != libc::AF_UNIX && !loopback(domain, sa) {
            return err(libc::ENETUNREACH);
        }
        let (mut name, _) = Self::name_of(domain, ty, sa)?;
        if let Name::Unix(p) = &name {
            if p[0] != 0 {
                name = self.socket_file(p)?;
            }
        }
        let found = match name {
            // An IPv4 destination (or an IPv4-mapped one) reaches the AF_INET socket on the
            // port, else a dual-stack AF_INET6 one; ::1 reaches AF_INET6 sockets only.
            Name::Port { dgram, port, v6 } if !v6 || v4_mapped(sa) => {
                self.net.lookup_pick(&Name::Port { dgram, port, v6: false }).or_else(|| {
                    self.net.lookup_pick(&Name::Port { dgram, port, v6: true }).filter(|t| dual_stack(&t.borrow()))
                })
            }
            Name::Port { dgram, port, .. } => self
                .net
                .lookup_pick(&Name::Port { dgram, port, v6: true })
                .filter(|t| !v4_mapped(t.borrow().local.as_deref().unwrap_or_default())),
            Name::Unix(_) => self.net.lookup(&name),
        };
        match (&name, found) {
            // A path's socket file is there (checked above) but its socket has closed.
            (Name::Unix(_), None) => err(libc::ECONNREFUSED),
            (Name::Unix(_), Some(t)) if t.borrow().ty != ty => err(libc::EPROTOTYPE),
            (_, found) => Ok(found),
        }
    }

    pub(crate) fn connect(&mut self, m: &mut Machine, fd: i32, addr: u64, len: u32) -> SysResult {
        let (s, _) = self.sock(fd)?;
        let (domain, ty) = {
            let s = s.borrow();
            (s.domain, s.ty)
        };
        if !(2..=128).contains(&len) {
            return err(libc::EINVAL);
        }
        let mut fam = [0u8; 2];
        m.read(addr, &mut fam).map_err(|_| Errno(libc::EFAULT))?;
        if i32::from(u16::from_ne_bytes(fam)) == libc::AF_UNSPEC && ty == libc::SOCK_DGRAM {
            // Dissolves a datagram socket's association.
            let mut b = s.borrow_mut();
            b.peer = None;
            b.dgram_peer = None;
            return Ok(0);
        }
        let sa = Self::read_sockaddr(m, domain, addr, len)?;
        if ty == libc::SOCK_DGRAM {
            let target = self.reach(domain, ty, &sa)?;
            self.autobind_to(&s, Some(&sa))?;
            let (_, canon) = Self::name_of(domain, ty, &sa)?;
            let mut b = s.borrow_mut();
            b.peer = Some(canon);
            b.dgram_peer = target.map(|t| Rc::downgrade(&t));
            return Ok(0);
        }
        {
            let b = s.borrow();
            if b.conn.is_some() {
                return err(libc::EISCONN);
            }
            if b.queue.is_some() {
                return err(libc::EINVAL);
            }
        }
        let target = match self.reach(domain, ty, &sa)? {
            Some(t) if t.borrow().queue.is_some() => t,
            _ => return err(libc::ECONNREFUSED),
        };
        self.autobind_to(&s, Some(&sa))?;
        let (_, canon) = Self::name_of(domain, ty, &sa)?;
        let peer = if domain == libc::AF_UNIX { target.borrow().local.clone().unwrap_or(canon) } else { canon };
        self.queue_connection(&s, &target, ty, peer);
        Ok(0)
    }

    /// Connects `client` (bound) to listener `target`: a new server end, joined to it, goes on
    /// the listener's queue for `accept`. `peer` is the client's peer address.
    /// The server end has the listener's family: an IPv4 client of a dual-stack `AF_INET6`
    /// listener is `::ffff:127.0.0.1` to it.
    fn queue_connection(&mut self, client: &Rc<RefCell<Sock>>, target: &Rc<RefCell<Sock>>, ty: i32, peer: Vec<u8>) {
        let domain = target.borrow().domain;
        let mut server = self.new_sock(domain, ty);
        if domain != libc::AF_UNIX {
            // A TCP connection is a copy of its listener (`sk_clone_lock`): its options and
            // timeouts come with it. An `AF_UNIX` one is a new socket (`unix_create1`).
            let t = target.borrow();
            server.opts = t.opts.clone();
            server.timeouts = t.timeouts;
        }
        {
            let mut c = client.borrow_mut();
            self.join(&mut c, &mut server);
            server.peer = c.local.as_deref().map(|l| in_family(domain, &source_addr(l, &peer)));
            server.local = Some(in_family(domain, &peer));
            c.peer = Some(peer);
        }
        let key = {
            let mut t = target.borrow_mut();
            if let Some(q) = t.queue.as_mut() {
                q.push_back(Rc::new(RefCell::new(server)));
                t.arrivals += 1;
            }
            t.id
        };
        self.io_ready(key);
    }

    /// The guest's TCP listener on loopback `port` ([`crate::listen`]).
    pub(crate) fn tcp_listener(&mut self, port: u16) -> Option<Rc<RefCell<Sock>>> {
        [false, true].into_iter().find_map(|v6| {
            self.net.lookup(&Name::Port { dgram: false, port, v6 }).filter(|t| t.borrow().queue.is_some())
        })
    }

    /// A host client's connection to the guest's listener on `port`, as an in-machine connect
    /// from loopback and the next ephemeral port makes it ([`crate::listen`]): the client's
    /// end, which the bridge holds, or `None` if nobody listens there.
    pub(crate) fn connect_from_host(&mut self, port: u16) -> Option<Rc<RefCell<Sock>>> {
        let target = self.tcp_listener(port)?;
        let domain = target.borrow().domain;
        let client = Rc::new(RefCell::new(self.new_sock(domain, libc::SOCK_STREAM)));
        self.autobind(&client).ok()?;
        self.queue_connection(&client, &target, libc::SOCK_STREAM, inet_addr(domain, false, port));
        Some(client)
    }

    /// Shuts down the writing side of a host client's end (the client closed): the guest reads
    /// end of file. Returns the readiness keys that changed.
    pub(crate) fn shut_host_side(s: &Rc<RefCell<Sock>>) -> Vec<u64> {
        let mut b = s.borrow_mut();
        let Some((_, tx)) = b.conn.clone() else { return Vec::new() };
        if b.shut_wr {
            return Vec::new();
        }
        b.shut_wr = true;
        let mut t = tx.borrow_mut();
        t.writers -= 1;
        vec![t.id]
    }

    pub(crate) fn accept4(&mut self, m: &mut Machine, fd: i32, addr: u64, lenp: u64, flags: i32) -> SysResult {
        if flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
            return err(libc::EINVAL);
        }
        let (s, nonblock) = self.sock(fd)?;
        let next = {
            let mut b = s.borrow_mut();
            let id = b.id;
            let timeout = b.timeouts[0];
            match b.queue.as_mut() {
                None => return err(libc::EINVAL),
                Some(q) => match q.pop_front() {
                    Some(c) => c,
                    None if nonblock => return err(libc::EAGAIN),
                    None => {
                        drop(b);
                        return self.sock_wait(m, &[id], timeout);
                    }
                },
            }
        };
        let peer = next.borrow().peer.clone().unwrap_or_default();
        let n = match Rc::try_unwrap(next) {
            Ok(c) => self.install_sock(c.into_inner(), flags)?,
            Err(shared) => {
                let fl = libc::O_RDWR | if flags & libc::SOCK_NONBLOCK != 0 { libc::O_NONBLOCK } else { 0 };
                let d = Description { kind: Kind::Socket(shared), guest_path: "socket:".into(), flags: fl };
                self.fds.insert(d, flags & libc::SOCK_CLOEXEC != 0)?
            }
        };
        if addr != 0 {
            Self::put_sockaddr(m, &peer, addr, lenp)?;
        }
        Ok(n as u64)
    }

    /// Writes a socket address for `getsockname`, `accept`, `recvfrom`: as much as the buffer
    /// holds, and its whole length into `*lenp`.
    fn put_sockaddr(m: &mut Machine, sa: &[u8], addr: u64, lenp: u64) -> Result<(), Errno> {
        let room = m.read_u32(lenp)? as i32;
        if room < 0 {
            return err(libc::EINVAL);
        }
        let n = sa.len().min(room as usize);
        m.write(addr, &sa[..n], false)?;
        m.write(lenp, &(sa.len() as u32).to_le_bytes(), false)?;
        Ok(())
    }

    /// getsockname (`peer` false) and getpeername (`peer` true).
    pub(crate) fn sockname(&mut self, m: &mut Machine, fd: i32, addr: u64, lenp: u64, peer: bool) -> SysResult {
        let (s, _) = self.sock(fd)?;
        let b = s.borrow();
        let sa = if peer {
            b.peer.clone().ok_or(Errno(libc::ENOTCONN))?
        } else {
            match &b.local {
                Some(l) => l.clone(),
                None if b.domain == libc::AF_UNIX => (libc::AF_UNIX as u16).to_ne_bytes().to_vec(),
                None => inet_addr(b.domain, true, 0),
            }
        };
        drop(b);
        Self::put_sockaddr(m, &sa, addr, lenp)?;
        Ok(0)
    }

    pub(crate) fn shutdown(&mut self, fd: i32, how: i32) -> SysResult {
        let (s, _) = self.sock(fd)?;
        let mut b = s.borrow_mut();
        if !(0..=2).contains(&how) {
            return err(libc::EINVAL);
        }
        let Some((rx, tx)) = b.conn.clone() else { return err(libc::ENOTCONN) };
        if how != libc::SHUT_WR {
            b.shut_rd = true;
        }
        if how != libc::SHUT_RD && !b.shut_wr {
            b.shut_wr = true;
            tx.borrow_mut().writers -= 1;
        }
        drop(b);
        let (r, t) = (rx.borrow().id, tx.borrow().id);
        self.io_ready(r);
        self.io_ready(t);
        Ok(0)
    }

    pub(crate) fn setsockopt(
        &mut self,
        m: &mut Machine,
        fd: i32,
        level: i32,
        name: i32,
        val: u64,
        len: u32,
    ) -> SysResult {
        let (s, _) = self.sock(fd)?;
        if default_opt(&s.borrow(), level, name).is_none() {
            return err(libc::ENOPROTOOPT);
        }
        // A bound socket's family coverage is fixed (Linux: EINVAL once it has a port).
        if (level, name) == (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) && s.borrow().local.is_some() {
            return err(libc::EINVAL);
        }
        if let Some(i) = timeout_index(level, name) {
            if len < 16 {
                return err(libc::EINVAL);
            }
            let t = timeout_from_timeval(m.read_u64(val)? as i64, m.read_u64(val + 8)? as i64)?;
            s.borrow_mut().timeouts[i] = t;
            return Ok(0);
        }
        // Integer options are kept; longer ones (SO_LINGER) are accepted and change nothing:
        // nothing lingers in the machine's network.
        if len >= 4 {
            let v = m.read_u32(val)? as i32;
            s.borrow_mut().opts.insert((level, name), v);
        } else if len != 0 {
            return err(libc::EINVAL);
        }
        Ok(0)
    }

    pub(crate) fn getsockopt(
        &mut self,
        m: &mut Machine,
        fd: i32,
        level: i32,
        name: i32,
        val: u64,
        lenp: u64,
    ) -> SysResult {
        let (s, _) = self.sock(fd)?;
        let b = s.borrow();
        let def = default_opt(&b, level, name).ok_or(Errno(libc::ENOPROTOOPT))?;
        if let Some(i) = timeout_index(level, name) {
            // Linux's `sock_get_timeout`: a `struct timeval` (none: zeros), as much of it as
            // the buffer holds.
            let ns = b.timeouts[i].unwrap_or(0);
            drop(b);
            let mut tv = [0u8; 16];
            tv[..8].copy_from_slice(&(ns / 1_000_000_000).to_le_bytes());
            tv[8..].copy_from_slice(&(ns % 1_000_000_000 / 1000).to_le_bytes());
            let room = m.read_u32(lenp)? as i32;
            if room < 0 {
                return err(libc::EINVAL);
            }
            let n = 16.min(room as usize);
            m.write(val, &tv[..n], false)?;
            m.write(lenp, &(n as u32).to_le_bytes(), false)?;
            return Ok(0);
        }
        let v = match (level, name) {
            (libc::SOL_SOCKET, libc::SO_TYPE | libc::SO_DOMAIN | libc::SO_ACCEPTCONN | libc::SO_ERROR) => def,
            _ => b.opts.get(&(level, name)).copied().unwrap_or(def),
        };
        drop(b);
        let room = m.read_u32(lenp)? as i32;
        if room < 0 {
            return err(libc::EINVAL);
        }
        let n = 4.min(room as usize);
        m.write(val, &v.to_le_bytes()[..n], false)?;
        m.write(lenp, &(n as u32).to_le_bytes(), false)?;
        Ok(0)
    }

    /// The call waits on `keys`: [`RESTART`], which blocks the thread until one changes.
    pub(crate) fn would_block<T>(&mut self, keys: &[u64]) -> Result<T, Errno> {
        self.block_keys.extend_from_slice(keys);
        err(RESTART)
    }

    /// A blocking socket call waits on `keys` for at most `timeout` (`SO_RCVTIMEO` or
    /// `SO_SNDTIMEO`; `None`: forever): EAGAIN once it has passed, counted from the call's
    /// first try ([`Kernel::io_deadline`]), as Linux's `sock_rcvtimeo` wait ends.
    fn sock_wait<T>(&mut self, m: &Machine, keys: &[u64], timeout: Option<u64>) -> Result<T, Errno> {
        if timeout.is_some() && self.io_deadline(m, timeout) {
            return err(libc::EAGAIN);
        }
        self.would_block(keys)
    }

    /// Receives up to `len` bytes: the bytes and the sender's address (datagrams). `MSG_PEEK`
    /// leaves them; `MSG_TRUNC` on a datagram gives its whole length in the second value.
    pub(crate) fn sock_recv(
        &mut self,
        m: &Machine,
        s: &Rc<RefCell<Sock>>,
        len: usize,
        flags: i32,
        nonblock: bool,
    ) -> Result<Received, Errno> {
        let nonblock = nonblock || flags & libc::MSG_DONTWAIT != 0;
        let peek = flags & libc::MSG_PEEK != 0;
        let mut b = s.borrow_mut();
        let passcred = b.opts.get(&(libc::SOL_SOCKET, libc::SO_PASSCRED)).is_some_and(|v| *v != 0);
        let timeout = b.timeouts[0];
        if b.ty == libc::SOCK_DGRAM {
            if b.inbox.is_empty() {
                if nonblock {
                    return err(libc::EAGAIN);
                }
                let id = b.id;
                drop(b);
                return self.sock_wait(m, &[id], timeout);
            }
            let (src, data, anc) = if peek { b.inbox[0].clone() } else { b.inbox.pop_front().unwrap_or_default() };
            let whole = data.len();
            let mut data = data;
            data.truncate(len);
            let anc = anc.map(|a| (Some(a.cred), a.files)).unwrap_or_default();
            return Ok((data, whole, Some(src), anc));
        }
        let Some((rx, _)) = b.conn.clone() else {
            return if len == 0 {
                Ok((Vec::new(), 0, None, Ancillary::default()))
            } else if b.domain == libc::AF_UNIX {
                err(libc::EINVAL)
            } else {
                err(libc::ENOTCONN)
            };
        };
        let shut = b.shut_rd;
        drop(b);
        let data = {
            let mut p = rx.borrow_mut();
            if p.is_empty() {
                if p.writers == 0 || shut || len == 0 {
                    return Ok((Vec::new(), 0, None, Ancillary::default()));
                }
                if nonblock {
                    return err(libc::EAGAIN);
                }
                let id = p.id;
                drop(p);
                return self.sock_wait(m, &[id], timeout);
            }
            // A message's whole length, for MSG_TRUNC (`SOCK_SEQPACKET` reads as datagrams do).
            let msg = p.msgs.as_ref().and_then(|m| m.front().copied());
            (p.take_anc(len, peek, passcred), msg)
        };
        let ((data, anc), msg) = data;
        let id = rx.borrow().id;
        self.io_ready(id);
        let whole = msg.unwrap_or(data.len());
        Ok((data, whole, None, anc))
    }

    /// Sends `data` to the connected peer or to `dest`, with (`AF_UNIX`) the credentials and
    /// descriptions `scm` attaches (the sender's own credentials if it names none). Returns
    /// how many bytes went.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sock_send(
        &mut self,
        m: &Machine,
        s: &Rc<RefCell<Sock>>,
        data: &[u8],
        dest: Option<Vec<u8>>,
        flags: i32,
        nonblock: bool,
        scm: Ancillary,
    ) -> SysResult {
        let nonblock = nonblock || flags & libc::MSG_DONTWAIT != 0;
        let (domain, ty) = {
            let b = s.borrow();
            (b.domain, b.ty)
        };
        let unix = domain == libc::AF_UNIX;
        let (cred, files) = scm;
        let cred = cred.unwrap_or(self.own_cred());
        if ty == libc::SOCK_DGRAM {
            let target = match dest {
                Some(sa) => self.reach(domain, ty, &sa)?,
                None => {
                    let b = s.borrow();
                    match (&b.dgram_peer, &b.peer) {
                        (Some(w), _) => Some(w.upgrade().ok_or(Errno(libc::ECONNREFUSED))?),
                        (None, Some(sa)) => {
                            let sa = sa.clone();
                            drop(b);
                            self.reach(domain, ty, &sa)?
                        }
                        (None, None) => {
                            return err(if domain == libc::AF_UNIX { libc::ENOTCONN } else { libc::EDESTADDRREQ })
                        }
                    }
                }
            };
            self.autobind(s)?;
            let src = s.borrow().local.clone().unwrap_or_default();
            // A datagram to a loopback port nobody bound is dropped, as the host drops it.
            if let Some(t) = target {
                let key = {
                    let mut t = t.borrow_mut();
                    let src = in_family(t.domain, &source_addr(&src, t.local.as_deref().unwrap_or(&src)));
                    let anc = unix.then(|| Anc { end: 0, cred, files });
                    t.inbox.push_back((src, data.to_vec(), anc));
                    t.arrivals += 1;
                    t.id
                };
                self.io_ready(key);
            }
            return Ok(data.len() as u64);
        }
        if dest.is_some() && s.borrow().conn.is_none() {
            return err(if domain == libc::AF_UNIX { libc::EOPNOTSUPP } else { libc::EPIPE });
        }
        let (tx, shut) = {
            let b = s.borrow();
            match &b.conn {
                Some((_, tx)) => (tx.clone(), b.shut_wr),
                None if domain == libc::AF_UNIX => return err(libc::ENOTCONN),
                None => (Rc::new(RefCell::new(Pipe::default())), true),
            }
        };
        let mut p = tx.borrow_mut();
        if shut || p.readers == 0 {
            drop(p);
            // EPIPE, with SIGPIPE unless MSG_NOSIGNAL.
            if flags & libc::MSG_NOSIGNAL == 0 {
                self.raise(libc::SIGPIPE);
            }
            return err(libc::EPIPE);
        }
        if p.msgs.is_some() && data.len() > p.capacity {
            return err(libc::EMSGSIZE);
        }
        let room = p.room();
        if room == 0 || (p.msgs.is_some() && room < data.len()) {
            if nonblock {
                return err(libc::EAGAIN);
            }
            let id = p.id;
            drop(p);
            let timeout = s.borrow().timeouts[1];
            return self.sock_wait(m, &[id], timeout);
        }
        let n = p.put(data);
        // A stream send of no bytes sends nothing, its descriptors included (Linux's
        // `unix_stream_sendmsg` makes no skb); a message channel's empty message carries them.
        if unix && (n > 0 || p.msgs.is_some()) {
            p.attach(cred, files);
        }
        let id = p.id;
        drop(p);
        self.io_ready(id);
        Ok(n as u64)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sendto(
        &mut self,
        m: &mut Machine,
        fd: i32,
        buf: u64,
        len: u64,
        flags: i32,
        addr: u64,
        alen: u32,
    ) -> SysResult {
        Self::user_buffer(buf, len)?;
        let (s, nonblock) = self.sock(fd)?;
        let mut data = vec![0u8; len.min(crate::fd::MAX_RW) as usize];
        m.read(buf, &mut data)?;
        m.kernel_pm_loads(buf, data.len() as u64);
        let dest = if addr != 0 { Some(Self::read_sockaddr(m, s.borrow().domain, addr, alen)?) } else { None };
        self.sock_send(m, &s, &data, dest, flags, nonblock, Ancillary::default())
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn recvfrom(
        &mut self,
        m: &mut Machine,
        fd: i32,
        buf: u64,
        len: u64,
        flags: i32,
        addr: u64,
        lenp: u64,
    ) -> SysResult {
        Self::user_buffer(buf, len)?;
        let (s, nonblock) = self.sock(fd)?;
        // Descriptors passed with the bytes close here: there is nowhere to put them (Linux
        // receives with an empty control buffer).
        let (data, whole, src, _) = self.sock_recv(m, &s, len.min(crate::fd::MAX_RW) as usize, flags, nonblock)?;
        m.write(buf, &data, false)?;
        if addr != 0 {
            if let Some(src) = src {
                Self::put_sockaddr(m, &src, addr, lenp)?;
            } else {
                m.write(lenp, &0u32.to_le_bytes(), false)?;
            }
        }
        Ok(if flags & libc::MSG_TRUNC != 0 { whole } else { data.len() } as u64)
    }

    /// The calling process's credentials as `SCM_CREDENTIALS` carries them: pid, uid, gid.
    fn own_cred(&self) -> (u32, u32, u32) {
        let id = crate::process::UID as u32;
        (self.pid, id, id)
    }

    /// Reads `sendmsg`'s control buffer as Linux's `__scm_send` does: each `cmsghdr` must lie
    /// within it (EINVAL); at `SOL_SOCKET`, `SCM_RIGHTS` takes the open file descriptions of
    /// its descriptors (EBADF for one not open; EINVAL beyond `SCM_MAX_FD`, 253, in all) and
    /// `SCM_CREDENTIALS` names the sender, who may only name itself (EPERM), and must be of a
    /// `struct ucred`'s size (EINVAL); any other type there is EINVAL; other levels are
    /// ignored, and so is everything on an inet socket.
    fn read_scm(&mut self, m: &Machine, domain: i32, ctl: u64, len: u64) -> Result<Ancillary, Errno> {
        const SCM_MAX_FD: usize = 253;
        if len > i32::MAX as u64 {
            return err(libc::ENOBUFS);
        }
        let mut buf = vec![0u8; len as usize];
        m.read(ctl, &mut buf)?;
        let (mut cred, mut files) = (None, Vec::new());
        let mut at = 0usize;
        while at + CMSG_HDR <= buf.len() {
            let clen = u64::from_le_bytes(buf[at..at + 8].try_into().unwrap_or_default());
            if clen < CMSG_HDR as u64 || clen > (buf.len() - at) as u64 {
                return err(libc::EINVAL);
            }
            let clen = clen as usize;
            let level = i32::from_le_bytes(buf[at + 8..at + 12].try_into().unwrap_or_default());
            let ty = i32::from_le_bytes(buf[at + 12..at + 16].try_into().unwrap_or_default());
            let data = &buf[at + CMSG_HDR..at + clen];
            // An inet socket's `ip_cmsg_send` checks each header's bounds and ignores what
            // ferrite's loopback has no use for (`IP_PKTINFO`, `SO_MARK` ...), descriptors too.
            if level == libc::SOL_SOCKET && domain == libc::AF_UNIX {
                match ty {
                    libc::SCM_RIGHTS => {
                        let n = data.len() / 4;
                        if files.len() + n > SCM_MAX_FD {
                            return err(libc::EINVAL);
                        }
                        for c in data.chunks_exact(4).take(n) {
                            let fd = i32::from_le_bytes(c.try_into().unwrap_or_default());
                            files.push(self.fds.get(fd)?.desc.clone());
                        }
                    }
                    libc::SCM_CREDENTIALS => {
                        if clen != CMSG_HDR + 12 {
                            return err(libc::EINVAL);
                        }
                        let word = |i: usize| u32::from_le_bytes(data[i..i + 4].try_into().unwrap_or_default());
                        let c = (word(0), word(4), word(8));
                        // `scm_check_creds`: ids that name nobody are invalid; an unprivileged
                        // sender may name only its own process, user and group.
                        if c.1 == u32::MAX || c.2 == u32::MAX {
                            return err(libc::EINVAL);
                        }
                        if c != self.own_cred() {
                            return err(libc::EPERM);
                        }
                        cred = Some(c);
                    }
                    _ => return err(libc::EINVAL),
                }
            }
            at += clen.next_multiple_of(8);
        }
        Ok((cred, files))
    }

    /// Writes what a receive got besides bytes into `recvmsg`'s control buffer, as Linux's
    /// `scm_recv`: the sender's credentials first when the socket asked for them
    /// (`SO_PASSCRED`; `put_cmsg`, cut to the room), then the passed descriptions installed as
    /// the lowest free descriptors (`MSG_CMSG_CLOEXEC` sets their `FD_CLOEXEC`), as many as the
    /// room left holds (`scm_detach_fds`); those that do not fit, or find the table full
    /// (EMFILE), close, and the message says `MSG_CTRUNC`. Returns the bytes of control data
    /// written and the flags to add.
    fn put_scm(
        &mut self,
        m: &mut Machine,
        ctl: u64,
        room: u64,
        cred: Option<(u32, u32, u32)>,
        files: Vec<Rc<RefCell<Description>>>,
        cloexec: bool,
    ) -> Result<(u64, i32), Errno> {
        let mut out: Vec<u8> = Vec::new();
        let mut flags = 0;
        let room = room.min(i32::MAX as u64) as usize;
        let header = |len: usize, ty: i32| {
            let mut h = (len as u64).to_le_bytes().to_vec();
            h.extend_from_slice(&libc::SOL_SOCKET.to_le_bytes());
            h.extend_from_slice(&ty.to_le_bytes());
            h
        };
        if let Some((pid, uid, gid)) = cred {
            if room < CMSG_HDR {
                flags |= libc::MSG_CTRUNC;
            } else {
                let mut c = header(CMSG_HDR + 12, libc::SCM_CREDENTIALS);
                for w in [pid, uid, gid] {
                    c.extend_from_slice(&w.to_le_bytes());
                }
                if room < c.len() {
                    flags |= libc::MSG_CTRUNC;
                    c.truncate(room);
                    c[..8].copy_from_slice(&(room as u64).to_le_bytes());
                }
                c.resize((CMSG_HDR + 12).next_multiple_of(8).min(room), 0);
                out.extend_from_slice(&c);
            }
        }
        if !files.is_empty() {
            let left = room - out.len();
            let fit = if left > CMSG_HDR { (left - CMSG_HDR) / 4 } else { 0 };
            let mut fds = Vec::new();
            for d in files.iter().take(fit) {
                match self.fds.insert_from(0, crate::fd::Fd { desc: d.clone(), cloexec }) {
                    Ok(n) => fds.push(n),
                    Err(_) => break,
                }
            }
            if fds.len() < files.len() {
                flags |= libc::MSG_CTRUNC;
            }
            if !fds.is_empty() {
                let mut c = header(CMSG_HDR + 4 * fds.len(), libc::SCM_RIGHTS);
                for n in &fds {
                    c.extend_from_slice(&n.to_le_bytes());
                }
                c.resize(c.len().next_multiple_of(8).min(left), 0);
                out.extend_from_slice(&c);
            }
            if let Err(e) = m.write(ctl, &out, false) {
                for n in fds {
                    self.fds.fds.remove(&n);
                }
                drop(files);
                return Err(e.into());
            }
        } else if !out.is_empty() {
            m.write(ctl, &out, false)?;
        }
        drop(files);
        Ok((out.len() as u64, flags))
    }

    pub(crate) fn sendmsg(&mut self, m: &mut Machine, fd: i32, msg: u64, flags: i32) -> SysResult {
        let (s, nonblock) = self.sock(fd)?;
        let (name, namelen) = (m.read_u64(msg)?, m.read_u32(msg + 8)?);
        let (iov, iovlen) = (m.read_u64(msg + 16)?, m.read_u64(msg + 24)?);
        let (ctl, controllen) = (m.read_u64(msg + 32)?, m.read_u64(msg + 40)?);
        let mut data = Vec::new();
        for (base, len) in Self::iovecs(m, iov, iovlen)? {
            let start = data.len();
            data.resize(start + len.min(crate::fd::MAX_RW) as usize, 0);
            m.read(base, &mut data[start..])?;
            m.kernel_pm_loads(base, (data.len() - start) as u64);
        }
        let domain = s.borrow().domain;
        let scm = if controllen != 0 { self.read_scm(m, domain, ctl, controllen)? } else { Ancillary::default() };
        let dest = if name != 0 { Some(Self::read_sockaddr(m, domain, name, namelen)?) } else { None };
        self.sock_send(m, &s, &data, dest, flags, nonblock, scm)
    }

    pub(crate) fn recvmsg(&mut self, m: &mut Machine, fd: i32, msg: u64, flags: i32) -> SysResult {
        let (s, nonblock) = self.sock(fd)?;
        let (name, iov, iovlen) = (m.read_u64(msg)?, m.read_u64(msg + 16)?, m.read_u64(msg + 24)?);
        let (ctl, controllen) = (m.read_u64(msg + 32)?, m.read_u64(msg + 40)?);
        let iovs = Self::iovecs(m, iov, iovlen)?;
        let want: u64 = iovs.iter().map(|v| v.1).sum();
        let (data, whole, src, (cred, files)) =
            self.sock_recv(m, &s, want.min(crate::fd::MAX_RW) as usize, flags, nonblock)?;
        let mut at = 0;
        for (base, len) in iovs {
            let n = (len as usize).min(data.len() - at);
            m.write(base, &data[at..at + n], false)?;
            at += n;
        }
        if name != 0 {
            let src = src.unwrap_or_default();
            let room = m.read_u32(msg + 8)? as usize;
            m.write(name, &src[..src.len().min(room)], false)?;
            m.write(msg + 8, &(src.len() as u32).to_le_bytes(), false)?;
        }
        // Credentials only for a socket that asked for them (`SO_PASSCRED`, read again: a
        // datagram carries them whatever the receiver wants).
        let passcred = s.borrow().opts.get(&(libc::SOL_SOCKET, libc::SO_PASSCRED)).is_some_and(|v| *v != 0);
        let cred = cred.filter(|_| passcred);
        let cloexec = flags & libc::MSG_CMSG_CLOEXEC != 0;
        let (used, ctl_flags) = self.put_scm(m, ctl, if ctl == 0 { 0 } else { controllen }, cred, files, cloexec)?;
        m.write_u64(msg + 40, used)?;
        // MSG_TRUNC when a datagram was longer than the buffers, MSG_CTRUNC when the control
        // data did not fit.
        let out_flags = if whole > data.len() { libc::MSG_TRUNC } else { 0 } | ctl_flags;
        m.write(msg + 48, &out_flags.to_le_bytes(), false)?;
        Ok(if flags & libc::MSG_TRUNC != 0 { whole } else { data.len() } as u64)
    }
}
