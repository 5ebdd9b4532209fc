//! `--listen GUEST_PORT=HOST_PORT`: native clients on host loopback ports talk to a guest's TCP
//! listener, and everything they did is recorded so that `ferrite replay` runs the server again
//! without them, as rr does.
//!
//! The host never writes into the machine from another thread. Its connections, bytes and
//! closes are read (non-blocking) by the [`Bridge`] and enter the machine only at *points*: the
//! start of every system call and every turn of the scheduler's idle loop (every thread
//! blocked). Points are counted, and the count is a function of the guest's execution alone,
//! so a recorded event is replayed at the point of the same number, where the machine is in
//! the same state. Each native connection becomes an in-machine connection to the guest's
//! listener (a socket of the bridge's own at its other end, [`crate::net`]); what the guest
//! sends is taken from it at every point, in record and replay alike (taking it frees room a
//! blocked sender waits for, so it must happen at the same points), and only its length and
//! hash are kept.
//!
//! When every thread is blocked and the host could still wake one (the guest listens on a
//! `--listen` port or reads an open bridge connection), recording waits for the host (blocking
//! in `poll` on its sockets) instead of calling it a deadlock; the virtual clock does not move meanwhile. With a
//! wait's deadline or a timer armed, it waits at most that long in host time and then lets the
//! clock jump as it would without `--listen`. An interrupt of ferrite (SIGINT, SIGTERM, SIGHUP;
//! `INTERRUPTS`, counted by `ferrite`'s signal watcher) is an event too: the signal is sent to
//! the guest's first process group at the next point (SIGKILL for a second interrupt), so the
//! run ends as the guest ends, with its report, and replays to the same end.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::net::Sock;
use crate::Kernel;

/// Host input bytes one run may record; beyond it the host connections are closed.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;
/// Host connections and data events one run may record; beyond it the host connections are
/// closed (a close event each, on top of the limit, as are the at most two signal events).
pub const MAX_EVENTS: usize = 1_000_000;
/// The guest's output a host client may leave unread; beyond it the client's connection is shut
/// down and what the guest sends it dropped (the guest never sees this, so runs stay the same).
const MAX_PENDING_OUT: usize = 64 << 20;
/// Bytes one read from a host connection takes, and most a connection buffers unread.
const HOST_CHUNK: usize = 64 << 10;
/// How often (host time) a point outside the idle loop looks at the host sockets at most: a
/// busy server pays one clock read per system call, and a `poll` only this often.
const POLL_EVERY: Duration = Duration::from_micros(100);

/// Interrupts of ferrite while a run listens (set by the signal watcher, read at points).
pub static INTERRUPTS: AtomicU32 = AtomicU32::new(0);
/// The first interrupt's signal number.
pub static INTERRUPT_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// An eventfd the watcher writes to wake a bridge waiting for the host; -1 before the first
/// listening run. One for the whole process and never closed, so that a watcher that read it
/// just before a run ended never writes into a descriptor reused for something else.
pub static INTERRUPT_FD: AtomicI32 = AtomicI32::new(-1);
/// Whether a run listens now (else the watcher ends ferrite as before).
pub static LISTENING: AtomicBool = AtomicBool::new(false);

/// [`INTERRUPT_FD`], made on first use.
fn interrupt_fd() -> std::io::Result<i32> {
    static FD: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    // SAFETY: eventfd(2) has no memory arguments.
    let fd = *FD.get_or_init(|| unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) });
    if fd < 0 {
        return Err(std::io::Error::other("--listen: cannot make an eventfd for interrupts"));
    }
    INTERRUPT_FD.store(fd, Ordering::SeqCst);
    Ok(fd)
}

/// What a run with `--listen` is given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenSpec {
    /// Serve host clients: (guest port, host port; 0 for any free one).
    Record(Vec<(u16, u16)>),
    /// Inject a recorded run's events.
    Replay(Recorded),
}

/// A host event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// A connection to the guest's listener on this port; it gets the next connection number.
    Connect(u16),
    /// Bytes the client sent.
    Data(Vec<u8>),
    /// The client closed its side (the guest reads end of file).
    Close,
    /// ferrite was interrupted: this signal went to the guest's first process group.
    Signal(i32),
}

/// A host event and the point it entered the machine at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The point's number (1 is the first system call's start).
    pub at: u64,
    /// The connection (numbered from 0 in order of `Connect`); 0 for a signal.
    pub conn: u32,
    /// What happened.
    pub what: What,
}

/// What the guest sent one host connection: its length and BLAKE3.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// Bytes sent.
    pub bytes: u64,
    /// Their BLAKE3, hexadecimal.
    pub blake3: String,
}

/// What a run with `--listen` recorded (or a replay injected and observed).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Recorded {
    /// The guest ports listened for.
    pub ports: Vec<u16>,
    /// Every host event, in order.
    pub events: Vec<Event>,
    /// What the guest sent each connection, by connection number.
    pub outputs: Vec<Output>,
    /// Host input was cut at [`MAX_INPUT_BYTES`] or [`MAX_EVENTS`].
    pub truncated: bool,
}

impl Event {
    /// The compact form the report keeps: `AT CONN connect PORT`, `AT CONN data BASE64`,
    /// `AT CONN close`, `AT 0 signal N`.
    pub fn line(&self) -> String {
        let (at, c) = (self.at, self.conn);
        match &self.what {
            What::Connect(p) => format!("{at} {c} connect {p}"),
            What::Data(d) => format!("{at} {c} data {}", base64(d)),
            What::Close => format!("{at} {c} close"),
            What::Signal(s) => format!("{at} {c} signal {s}"),
        }
    }

    /// [`Event::line`] cut to a length a message can quote.
    pub fn brief(&self) -> String {
        brief(&self.line())
    }

    /// Reads [`Event::line`]'s form back.
    pub fn parse(s: &str) -> Result<Event, String> {
        let parts: Vec<&str> = s.split(' ').collect();
        let num = |i: usize| parts.get(i).and_then(|p| p.parse::<u64>().ok());
        let (Some(at), Some(conn)) = (num(0), num(1)) else {
            return Err(format!("`{}`: no point and connection", brief(s)));
        };
        let conn = u32::try_from(conn).map_err(|_| format!("`{}`: connection number too large", brief(s)))?;
        let what = match (parts.get(2).copied(), parts.len()) {
            (Some("connect"), 4) => What::Connect(
                parts[3].parse().map_err(|_| format!("`{}`: `{}` is not a port", brief(s), brief(parts[3])))?,
            ),
            (Some("data"), 4) => {
                let d = unbase64(parts[3]).ok_or_else(|| format!("`{}`: not base64 data", brief(s)))?;
                if d.is_empty() {
                    return Err(format!("`{}`: empty data", brief(s)));
                }
                What::Data(d)
            }
            (Some("close"), 3) => What::Close,
            (Some("signal"), 4) => match parts[3].parse::<i32>() {
                Ok(n) if (1..=64).contains(&n) => What::Signal(n),
                _ => return Err(format!("`{}`: `{}` is not a signal", brief(s), brief(parts[3]))),
            },
            _ => return Err(format!("`{}` is not an event", brief(s))),
        };
        Ok(Event { at, conn, what })
    }
}

/// `s`, cut after 60 characters.
fn brief(s: &str) -> String {
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

impl Recorded {
    /// The first thing no recording run could have written: points out of order, a connection
    /// used before it was made or after its close, a port not listened for, more input than
    /// the limits.
    pub fn validate(&self) -> Result<(), String> {
        let counted = self.events.iter().filter(|e| matches!(e.what, What::Connect(_) | What::Data(_))).count();
        if counted > MAX_EVENTS {
            return Err(format!("more than {MAX_EVENTS} connect and data events"));
        }
        if self.events.iter().filter(|e| matches!(e.what, What::Signal(_))).count() > 2 {
            return Err("more than 2 signal events".into());
        }
        let mut conns: Vec<bool> = Vec::new();
        let (mut last, mut bytes) = (0u64, 0u64);
        for (i, e) in self.events.iter().enumerate() {
            let bad = |why: &str| Err(format!("event {i} (`{}`): {why}", e.brief()));
            if e.at == 0 || e.at < last {
                return bad("its point is out of order");
            }
            last = e.at;
            match &e.what {
                What::Connect(p) => {
                    if e.conn as usize != conns.len() {
                        return bad("connections are not numbered in order");
                    }
                    if !self.ports.contains(p) {
                        return bad("the port was not listened for");
                    }
                    conns.push(true);
                }
                What::Data(_) | What::Close if !conns.get(e.conn as usize).copied().unwrap_or(false) => {
                    return bad("no such open connection");
                }
                What::Data(d) => bytes += d.len() as u64,
                What::Close => conns[e.conn as usize] = false,
                What::Signal(_) => {}
            }
        }
        if bytes > MAX_INPUT_BYTES {
            return Err(format!("more than {MAX_INPUT_BYTES} bytes of input"));
        }
        if self.outputs.len() != conns.len() {
            return Err(format!("{} outputs for {} connections", self.outputs.len(), conns.len()));
        }
        if let Some(o) =
            self.outputs.iter().find(|o| o.blake3.len() != 64 || !o.blake3.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(format!("output hash `{}` is not a BLAKE3 hash", brief(&o.blake3).escape_debug()));
        }
        Ok(())
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n =
            (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(B64[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// [`base64`]'s bytes back, or `None` for anything it would not have written.
pub fn unbase64(s: &str) -> Option<Vec<u8>> {
    let s = s.as_bytes();
    if !s.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    for (k, q) in s.chunks(4).enumerate() {
        let last = k + 1 == s.len() / 4;
        let pad = q.iter().rev().take_while(|b| **b == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &b in &q[..4 - pad] {
            n = (n << 6) | B64.iter().position(|x| *x == b)? as u32;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
        if base64(&bytes[..3 - pad]).as_bytes() != q {
            return None;
        }
    }
    Some(out)
}

/// A native client's connection, on the host side.
#[derive(Default)]
struct HostConn {
    /// The connection; closed (`None`) once both sides are done, so that clients that come and
    /// go do not use up ferrite's descriptors.
    stream: Option<TcpStream>,
    /// Read from the client, not yet in the machine.
    inbuf: VecDeque<u8>,
    /// The client closed its side (or the connection failed).
    eof: bool,
    /// From the guest, not yet written to the client.
    out: VecDeque<u8>,
    /// The guest closed its side: shut the client's down once `out` is written.
    guest_done: bool,
    /// Writing to the client failed: what the guest sends is dropped.
    broken: bool,
}

/// The host's side of a recording: the listening sockets and the native connections.
struct Host {
    listeners: Vec<(u16, TcpListener)>,
    /// Accepted, waiting for the guest's listener to exist.
    waiting: VecDeque<(u16, TcpStream)>,
    /// By connection number.
    conns: Vec<HostConn>,
    /// The numbers of the connections whose stream is open, ascending.
    open: Vec<usize>,
    last_poll: Instant,
    /// Interrupts turned into events so far.
    interrupts: u32,
    /// A client left more than [`MAX_PENDING_OUT`] unread (warned once).
    overflowed: bool,
    /// Wakes a `poll` on an interrupt ([`INTERRUPT_FD`]).
    wake: i32,
}

enum Mode {
    Record(Box<Host>),
    Replay { events: VecDeque<Event> },
}

/// A connection into the machine: the bridge's in-machine socket and what the guest sent on it.
struct Conn {
    sock: Rc<RefCell<Sock>>,
    sent: u64,
    hash: blake3::Hasher,
    /// The client's close went in.
    closed: bool,
    /// The guest closed its side and everything it sent was taken.
    guest_eof: bool,
}

/// A connection by number: in use, or done (closed both ways) with what the guest sent it, its
/// socket dropped so that its ephemeral port is free again.
enum Slot {
    /// Boxed: a done connection keeps only its output's few bytes.
    Live(Box<Conn>),
    Done(Output),
}

impl Conn {
    fn output(&self) -> Output {
        Output { bytes: self.sent, blake3: self.hash.finalize().to_hex().to_string() }
    }
}

/// Connection `i` of `conns`, if live.
fn live_conn(conns: &[Slot], i: u32) -> Option<&Conn> {
    match conns.get(i as usize) {
        Some(Slot::Live(k)) => Some(&**k),
        _ => None,
    }
}

/// The bridge between host clients and the guest's listeners ([`Kernel::listen_point`]).
pub struct Bridge {
    mode: Mode,
    point: u64,
    conns: Vec<Slot>,
    /// The numbers of the live connections, ascending: a point loops over these only.
    live: Vec<u32>,
    rec: Recorded,
    input: u64,
    /// Connect and data events recorded (what [`MAX_EVENTS`] limits).
    counted: usize,
    diverged: Option<String>,
}

impl Bridge {
    /// A bridge for `spec`: for a recording, the host sockets bound (127.0.0.1 only) and each
    /// announced on standard error as `ferrite: listening on 127.0.0.1:PORT for guest port G`.
    pub fn new(spec: &ListenSpec) -> std::io::Result<Bridge> {
        let (mode, ports) = match spec {
            ListenSpec::Record(pairs) => {
                let mut listeners = Vec::new();
                for &(guest, host) in pairs {
                    let l = TcpListener::bind(("127.0.0.1", host)).map_err(|e| {
                        std::io::Error::new(
                            e.kind(),
                            format!("--listen {guest}={host}: cannot listen on 127.0.0.1:{host}: {e}"),
                        )
                    })?;
                    l.set_nonblocking(true)?;
                    let _ = writeln!(
                        std::io::stderr(),
                        "ferrite: listening on 127.0.0.1:{} for guest port {guest}",
                        l.local_addr()?.port()
                    );
                    listeners.push((guest, l));
                }
                let wake = interrupt_fd()?;
                LISTENING.store(true, Ordering::SeqCst);
                let host = Host {
                    listeners,
                    waiting: VecDeque::new(),
                    conns: Vec::new(),
                    open: Vec::new(),
                    last_poll: Instant::now(),
                    interrupts: INTERRUPTS.load(Ordering::SeqCst),
                    overflowed: false,
                    wake,
                };
                (Mode::Record(Box::new(host)), pairs.iter().map(|p| p.0).collect())
            }
            ListenSpec::Replay(r) => (Mode::Replay { events: r.events.iter().cloned().collect() }, r.ports.clone()),
        };
        let truncated = matches!(spec, ListenSpec::Replay(r) if r.truncated);
        Ok(Bridge {
            mode,
            point: 0,
            conns: Vec::new(),
            live: Vec::new(),
            rec: Recorded { ports, truncated, ..Recorded::default() },
            input: 0,
            counted: 0,
            diverged: None,
        })
    }

    /// What the run recorded (or, replaying, injected), with what the guest sent each
    /// connection; or why a replay diverged from its recording.
    pub fn finish(mut self) -> Result<Recorded, String> {
        if let Some(d) = self.diverged.take() {
            return Err(d);
        }
        if let Mode::Replay { events } = &self.mode {
            if let Some(e) = events.front() {
                return Err(format!(
                    "{} recorded host event(s) were never reached, the first `{}` (the run made {} points)",
                    events.len(),
                    e.brief(),
                    self.point
                ));
            }
        }
        self.rec.outputs = self
            .conns
            .iter()
            .map(|c| match c {
                Slot::Live(k) => k.output(),
                Slot::Done(o) => o.clone(),
            })
            .collect();
        Ok(self.rec)
    }

    /// Connection `i`, if live.
    fn conn(&self, i: u32) -> Option<&Conn> {
        live_conn(&self.conns, i)
    }

    /// Finalises the connections that are done both ways: their output is kept, their socket
    /// (and so its ephemeral port) freed.
    fn retire(&mut self) {
        let conns = &mut self.conns;
        self.live.retain(|&i| {
            let slot = &mut conns[i as usize];
            let Slot::Live(k) = slot else { return false };
            if !(k.closed && k.guest_eof) {
                return true;
            }
            *slot = Slot::Done(k.output());
            false
        });
    }

    fn recording(&self) -> bool {
        matches!(self.mode, Mode::Record(_))
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // Interrupts end ferrite again, as without `--listen`.
        LISTENING.store(false, Ordering::SeqCst);
    }
}

impl Host {
    /// Accepts, reads and writes what the host sockets allow, waiting at most `wait` (`None`:
    /// until something happens) for the first of it.
    fn pump(&mut self, wait: Option<Duration>) {
        self.last_poll = Instant::now();
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let pfd = |fd: i32, events: i16| libc::pollfd { fd, events, revents: 0 };
        fds.push(pfd(self.wake, libc::POLLIN));
        for (_, l) in &self.listeners {
            fds.push(pfd(l.as_raw_fd(), libc::POLLIN));
        }
        // Only connections with something to wait for: poll refuses more descriptors than
        // RLIMIT_NOFILE, and clients that came and went have none.
        let mut polled: Vec<usize> = Vec::new();
        let conns = &mut self.conns;
        self.open.retain(|&i| {
            let c = &mut conns[i];
            if c.stream.is_none() && c.inbuf.is_empty() {
                // Its buffers go too: a client that came and went keeps nothing but its flags.
                (c.inbuf, c.out) = (VecDeque::new(), VecDeque::new());
            }
            c.stream.is_some()
        });
        for &i in &self.open {
            let c = &self.conns[i];
            let mut ev = 0;
            if !c.eof && c.inbuf.len() < HOST_CHUNK {
                ev |= libc::POLLIN;
            }
            if !c.out.is_empty() && !c.broken {
                ev |= libc::POLLOUT;
            }
            if let (Some(s), true) = (&c.stream, ev != 0) {
                fds.push(pfd(s.as_raw_fd(), ev));
                polled.push(i);
            }
        }
        let timeout = match wait {
            None => -1,
            Some(d) => i32::try_from(d.as_millis().max(u128::from(!d.is_zero()))).unwrap_or(i32::MAX),
        };
        // SAFETY: `fds` holds `fds.len()` pollfds for the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if n <= 0 {
            return;
        }
        if fds[0].revents != 0 {
            // Drained whenever readable (the interrupt itself is counted in INTERRUPTS): a
            // readable eventfd left alone would make every later wait return at once.
            let mut buf = [0u8; 8];
            // SAFETY: reads at most 8 bytes into `buf`; the eventfd is non-blocking.
            unsafe { libc::read(self.wake, buf.as_mut_ptr().cast(), 8) };
        }
        for (i, (guest, l)) in self.listeners.iter().enumerate() {
            if fds[1 + i].revents == 0 {
                continue;
            }
            while let Ok((s, _)) = l.accept() {
                if s.set_nonblocking(true).is_ok() {
                    let _ = s.set_nodelay(true);
                    self.waiting.push_back((*guest, s));
                }
            }
        }
        let base = 1 + self.listeners.len();
        for (k, &i) in polled.iter().enumerate() {
            if fds[base + k].revents != 0 {
                let c = &mut self.conns[i];
                c.read();
                c.flush();
            }
        }
    }
}

impl HostConn {
    fn read(&mut self) {
        let mut buf = [0u8; 16 << 10];
        while !self.eof && self.inbuf.len() < HOST_CHUNK {
            let Some(s) = self.stream.as_mut() else {
                self.eof = true;
                return;
            };
            match s.read(&mut buf) {
                Ok(0) => self.eof = true,
                Ok(n) => self.inbuf.extend(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => self.eof = true,
            }
        }
    }

    fn flush(&mut self) {
        while !self.out.is_empty() && !self.broken {
            let (a, _) = self.out.as_slices();
            let Some(s) = self.stream.as_mut() else {
                self.broken = true;
                break;
            };
            match s.write(a) {
                Ok(n) => drop(self.out.drain(..n)),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => self.broken = true,
            }
        }
        if self.broken {
            self.out.clear();
        }
        if self.guest_done && self.out.is_empty() {
            if let Some(s) = &self.stream {
                let _ = s.shutdown(std::net::Shutdown::Write);
            }
            if self.eof {
                self.stream = None;
            }
        }
    }
}

impl Kernel {
    /// Starts listening for `spec` (`ferrite run --listen`, or its replay).
    pub fn set_listen(&mut self, spec: &ListenSpec) -> std::io::Result<()> {
        self.listen = Some(Box::new(Bridge::new(spec)?));
        Ok(())
    }

    /// Whether the bridge sent the guest `sig` because ferrite was interrupted (in a recording,
    /// or at the same point of its replay): a guest that dies of it did not kill itself.
    pub fn host_sent_signal(&self, sig: i32) -> bool {
        (1..=64).contains(&sig) && self.host_signals & (1u64 << (sig - 1)) != 0
    }

    /// The bridge's record, once the run is over ([`Bridge::finish`]); `None` without `--listen`.
    pub fn take_listen(&mut self) -> Option<Result<Recorded, String>> {
        self.listen.take().map(|b| b.finish())
    }

    /// A point ([`crate::listen`]): host events due enter the machine, and what the guest sent
    /// goes out. `idle`: every thread is blocked, and `Some(deadline)` is how long (virtual ns)
    /// until a wait or timer ends, if any; recording then waits for the host that long (or
    /// without end). Returns whether the idle loop should look again instead of advancing the
    /// clock or reporting a deadlock.
    pub(crate) fn listen_point(&mut self, idle: Option<Option<u64>>) -> bool {
        let Some(mut b) = self.listen.take() else { return false };
        b.point += 1;
        let mut again = false;
        match &mut b.mode {
            Mode::Replay { events } => {
                let mut due = Vec::new();
                while events.front().is_some_and(|e| e.at == b.point) {
                    due.extend(events.pop_front());
                }
                let pending = !events.is_empty();
                for e in due {
                    if b.diverged.is_none() {
                        if let Err(why) = self.apply(&mut b, &e) {
                            b.diverged = Some(format!("at point {}: {why} (recorded `{}`)", b.point, e.brief()));
                        }
                    }
                    b.rec.events.push(e);
                }
                // Without a deadline the recording waited for the host here: it went on waiting
                // (a later point) as long as it recorded anything later and the host could
                // still reach the guest.
                again = matches!(idle, Some(None)) && pending && b.diverged.is_none() && self.host_can_reach(&b);
            }
            Mode::Record(_) => {
                if let Some(limit) = idle {
                    let recorded = self.record_events(&mut b);
                    // Without a deadline and with nothing the host could reach, every thread
                    // waits for another: a deadlock, not a wait for the host.
                    if !recorded && (limit.is_some() || self.host_can_reach(&b)) {
                        let wait = limit.map(Duration::from_nanos);
                        if let Mode::Record(h) = &mut b.mode {
                            h.pump(wait);
                        }
                        self.record_events(&mut b);
                    }
                    // Without a deadline nothing but the host can wake anyone: keep waiting
                    // while it can (decided from the guest's state alone, as replay decides).
                    again = limit.is_none() && self.host_can_reach(&b);
                } else {
                    if let Mode::Record(h) = &mut b.mode {
                        if h.last_poll.elapsed() >= POLL_EVERY {
                            h.pump(Some(Duration::ZERO));
                        }
                    }
                    self.record_events(&mut b);
                }
            }
        }
        self.drain_guest_output(&mut b);
        b.retire();
        if let Mode::Replay { events } = &b.mode {
            // Still idle with no deadline: every point until the next event's is a turn in
            // which nothing can happen (no thread runs, nothing more to take), so skip them.
            // An edited far-off point is then reached at once instead of one turn at a time.
            if let (true, true, Some(next)) = (again, self.runnable_count() == 0, events.front()) {
                b.point = b.point.max(next.at - 1);
            }
        }
        self.listen = Some(b);
        again
    }

    /// Turns what the host did into events at this point, each applied as it is recorded.
    /// Returns whether there was any.
    fn record_events(&mut self, b: &mut Bridge) -> bool {
        let Mode::Record(h) = &mut b.mode else { return false };
        let quiet = h.waiting.is_empty()
            && INTERRUPTS.load(Ordering::Relaxed) == h.interrupts
            && b.live.iter().all(|&i| {
                let c = &h.conns[i as usize];
                live_conn(&b.conns, i).is_none_or(|k| k.closed) || (c.inbuf.is_empty() && !c.eof)
            });
        if quiet {
            return false;
        }
        let mut events = Vec::new();
        let n = INTERRUPTS.load(Ordering::SeqCst);
        if n > h.interrupts {
            h.interrupts = n;
            let sig = if n == 1 { INTERRUPT_SIGNAL.load(Ordering::SeqCst) } else { libc::SIGKILL };
            events.push(What::Signal(sig));
        }
        let mut out: Vec<(u32, What)> = events.into_iter().map(|w| (0, w)).collect();
        // Clients waiting for a listener the guest has now.
        let mut still = VecDeque::new();
        // Connects and data count towards MAX_EVENTS; closes and signals do not.
        let base = b.counted;
        while let Some((port, s)) = h.waiting.pop_front() {
            if b.rec.truncated || b.diverged.is_some() || base + out.len() >= MAX_EVENTS || !self.has_listener(port) {
                still.push_back((port, s));
                continue;
            }
            let conn = (h.conns.len()) as u32;
            h.open.push(h.conns.len());
            h.conns.push(HostConn { stream: Some(s), ..HostConn::default() });
            out.push((conn, What::Connect(port)));
        }
        h.waiting = still;
        let mut full = false;
        let mut closing = Vec::new();
        for &i in &b.live {
            let c = &mut h.conns[i as usize];
            let Some(k) = live_conn(&b.conns, i) else { continue };
            if k.closed {
                continue;
            }
            // Checked at each push: several connections' data at one point must not pass it.
            full = full || b.input >= MAX_INPUT_BYTES || base + out.len() >= MAX_EVENTS;
            if !c.inbuf.is_empty() && !full {
                let room = Self::host_room(k);
                let take = room.min(c.inbuf.len()).min((MAX_INPUT_BYTES - b.input) as usize);
                if take > 0 {
                    let data: Vec<u8> = c.inbuf.drain(..take).collect();
                    b.input += take as u64;
                    out.push((i, What::Data(data)));
                }
            }
            if c.eof && c.inbuf.is_empty() {
                out.push((i, What::Close));
            } else {
                closing.push(i);
            }
        }
        full = full || b.input >= MAX_INPUT_BYTES || base + out.len() >= MAX_EVENTS;
        if full {
            // Every connection still open closes: these closes are on top of the limit.
            out.extend(closing.into_iter().map(|i| (i, What::Close)));
        }
        if full && !b.rec.truncated {
            b.rec.truncated = true;
            let _ = writeln!(
                std::io::stderr(),
                "ferrite: warning: --listen recorded {} bytes in {} events of host input, the most a report keeps \
                 ({MAX_INPUT_BYTES} bytes, {MAX_EVENTS} events); the host connections are closed",
                b.input,
                b.rec.events.len()
            );
            for c in &h.conns {
                if let Some(s) = &c.stream {
                    let _ = s.shutdown(std::net::Shutdown::Both);
                }
            }
            h.listeners.clear();
            h.waiting.clear();
        }
        let any = !out.is_empty();
        for (conn, what) in out {
            b.counted += usize::from(matches!(what, What::Connect(_) | What::Data(_)));
            let e = Event { at: b.point, conn, what };
            if let Err(why) = self.apply(b, &e) {
                // Recording applies only what fits: a failure here is ferrite's own fault.
                b.diverged.get_or_insert_with(|| format!("recording `{}` failed: {why}", e.brief()));
            }
            b.rec.events.push(e);
        }
        any
    }

    /// Whether a host event could still wake a guest thread: the guest listens on a `--listen`
    /// port, or reads a bridge connection the client has not closed. Only guest state, so that
    /// a recording and its replay decide alike.
    fn host_can_reach(&mut self, b: &Bridge) -> bool {
        b.rec.ports.iter().any(|&p| self.has_listener(p))
            || b.live
                .iter()
                .filter_map(|&i| b.conn(i))
                .any(|k| !k.closed && matches!(&k.sock.borrow().conn, Some((_, tx)) if tx.borrow().readers > 0))
    }

    /// Bytes the guest's side of a connection has room for.
    fn host_room(k: &Conn) -> usize {
        let s = k.sock.borrow();
        match &s.conn {
            Some((_, tx)) if tx.borrow().readers > 0 => tx.borrow().room(),
            // The guest closed its socket: what the client sends is dropped, as a closed
            // socket's peer sees its bytes go nowhere.
            _ => usize::MAX,
        }
    }

    /// Whether the guest listens on TCP `port`.
    fn has_listener(&mut self, port: u16) -> bool {
        self.tcp_listener(port).is_some()
    }

    /// One event, into the machine.
    fn apply(&mut self, b: &mut Bridge, e: &Event) -> Result<(), String> {
        match &e.what {
            What::Connect(port) => {
                if e.conn as usize != b.conns.len() {
                    return Err("connections out of order".into());
                }
                let sock = self.connect_from_host(*port).ok_or_else(|| format!("no guest listener on port {port}"))?;
                b.live.push(e.conn);
                b.conns.push(Slot::Live(Box::new(Conn {
                    sock,
                    sent: 0,
                    hash: blake3::Hasher::new(),
                    closed: false,
                    guest_eof: false,
                })));
            }
            What::Data(d) => {
                let k = b.conn(e.conn).ok_or("no such open connection")?;
                let s = k.sock.borrow();
                let Some((_, tx)) = &s.conn else { return Err("not connected".into()) };
                let mut p = tx.borrow_mut();
                if p.readers == 0 {
                    return Ok(());
                }
                if p.put(d) != d.len() {
                    return Err("the guest's socket has no room for the bytes".into());
                }
                let id = p.id;
                drop(p);
                drop(s);
                self.io_ready(id);
            }
            What::Close => {
                let Some(Slot::Live(k)) = b.conns.get_mut(e.conn as usize) else {
                    return Err("no such open connection".into());
                };
                k.closed = true;
                let sock = k.sock.clone();
                let keys = Self::shut_host_side(&sock);
                for key in keys {
                    self.io_ready(key);
                }
            }
            What::Signal(sig) => {
                self.host_signals |= 1u64 << (*sig - 1);
                let group = self.procs.get(&crate::process::PID).map_or(crate::process::PID, |p| p.pgid);
                let targets: Vec<u32> =
                    self.procs.iter().filter(|(_, p)| p.pgid == group).map(|(&pid, _)| pid).collect();
                for pid in targets {
                    self.send_signal(pid, None, crate::signal::SigInfo::user(*sig, 0));
                }
            }
        }
        Ok(())
    }

    /// Takes what the guest sent each connection (as recording and replay both do, at every
    /// point) and, recording, passes it to the client.
    fn drain_guest_output(&mut self, b: &mut Bridge) {
        let recording = b.recording();
        for &i in &b.live {
            let Some(Slot::Live(k)) = b.conns.get_mut(i as usize) else { continue };
            if k.guest_eof {
                continue;
            }
            let rx = match &k.sock.borrow().conn {
                Some((rx, _)) => rx.clone(),
                None => continue,
            };
            let mut p = rx.borrow_mut();
            let done = p.writers == 0;
            if p.buf.is_empty() && !done {
                continue;
            }
            k.guest_eof = done;
            let n = p.buf.len();
            let id = p.id;
            let (a, c) = p.buf.as_slices();
            k.hash.update(a);
            k.hash.update(c);
            k.sent += n as u64;
            let Mode::Record(h) = &mut b.mode else {
                p.buf.clear();
                p.takes += 1;
                drop(p);
                if n > 0 {
                    self.io_ready(id);
                }
                continue;
            };
            let hc = &mut h.conns[i as usize];
            if !hc.broken && hc.out.len() + n > MAX_PENDING_OUT {
                if !h.overflowed {
                    h.overflowed = true;
                    let _ = writeln!(std::io::stderr(),
                        "ferrite: warning: --listen: host connection {i} left more than {MAX_PENDING_OUT} bytes of the \
                         guest's output unread; it is shut down and what the guest sends it is dropped"
                    );
                }
                hc.broken = true;
                hc.out.clear();
                if let Some(s) = &hc.stream {
                    let _ = s.shutdown(std::net::Shutdown::Both);
                }
            }
            if !hc.broken {
                hc.out.extend(p.buf.iter());
            }
            p.buf.clear();
            p.takes += 1;
            drop(p);
            if n > 0 {
                self.io_ready(id);
            }
            if done && !hc.guest_done {
                hc.guest_done = true;
            }
            if recording {
                hc.flush();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_refuses_what_it_would_not_write() {
        for n in 0..20usize {
            let data: Vec<u8> = (0..n).map(|i| (i * 37 + 5) as u8).collect();
            assert_eq!(unbase64(&base64(&data)), Some(data));
        }
        assert_eq!(base64(b"set k1 v1\n"), "c2V0IGsxIHYxCg==");
        for bad in ["YQ", "YQ=a", "Y===", "YR==", "YQ==YQ==", "!!!!"] {
            assert_eq!(unbase64(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_recording_cut_at_the_event_limit_reads_back() {
        let hash = "0".repeat(64);
        let ev = |at, conn, what| Event { at, conn, what };
        let mut r = Recorded { ports: vec![7711], ..Recorded::default() };
        r.events.push(ev(1, 0, What::Connect(7711)));
        r.events.push(ev(1, 1, What::Connect(7711)));
        r.events.extend((2..MAX_EVENTS as u64 - 1).map(|at| ev(at, (at % 2) as u32, What::Data(vec![b'x']))));
        r.events.push(ev(MAX_EVENTS as u64, 0, What::Data(vec![b'y'])));
        // The closes of the cut, and the two signals an interrupted run can add, are on top.
        let end = MAX_EVENTS as u64 + 1;
        r.events.extend([ev(end, 0, What::Close), ev(end, 1, What::Close)]);
        r.events.extend([ev(end, 0, What::Signal(2)), ev(end, 0, What::Signal(9))]);
        r.outputs = vec![Output { bytes: 0, blake3: hash.clone() }; 2];
        assert_eq!(r.validate(), Ok(()));
        let mut more = r.clone();
        more.events.insert(MAX_EVENTS, ev(MAX_EVENTS as u64, 1, What::Data(vec![b'z'])));
        assert!(more.validate().unwrap_err().contains("more than"), "{:?}", more.validate());
        let mut more = r.clone();
        more.events.push(ev(end, 0, What::Signal(9)));
        assert!(more.validate().unwrap_err().contains("signal"), "{:?}", more.validate());
    }

    #[test]
    fn events_read_back_as_written() {
        for what in [What::Connect(7711), What::Data(b"get k\n".to_vec()), What::Close, What::Signal(2)] {
            let e = Event { at: 42, conn: 3, what };
            assert_eq!(Event::parse(&e.line()), Ok(e));
        }
        for bad in
            ["", "1", "1 0", "1 0 data", "1 0 data ", "x 0 close", "1 0 close x", "1 0 signal 0", "1 0 connect 70000"]
        {
            assert!(Event::parse(bad).is_err(), "{bad}");
        }
    }
}
