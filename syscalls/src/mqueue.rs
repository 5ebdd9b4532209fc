//! POSIX message queues (`mq_open`, `mq_unlink`, `mq_timedsend`, `mq_timedreceive`,
//! `mq_notify`, `mq_getsetattr`), as Linux's `ipc/mqueue.c`, in a namespace of the machine's
//! own ([`Kernel::mqueues`]): never the host's `/dev/mqueue`.
//!
//! glibc's `mq_open` passes the name without its leading slash; a name with another slash is
//! EACCES, an empty one ENOENT, one longer than 255 bytes ENAMETOOLONG. A queue holds at most
//! `mq_maxmsg` messages of at most `mq_msgsize` bytes (10 and 8,192 by default, and at most, as
//! `/proc/sys/fs/mqueue/msg_max` and `msgsize_max` allow an unprivileged process); messages are
//! received highest priority first, in the order sent within one priority. A queue lives while
//! it has a name or an open descriptor.
//!
//! A full queue's send and an empty queue's receive wait, unless the description is
//! `O_NONBLOCK` (EAGAIN), until the absolute `CLOCK_REALTIME` timeout passes (ETIMEDOUT): calls
//! on descriptors ([`crate::RESTART`]), so a scheduling point, part of a deadlock finding when
//! nothing can end them, interrupted by a signal (EINTR; made again under `SA_RESTART`, Linux's
//! `-ERESTARTSYS`, the timeout being absolute). The descriptor is readable in `poll`, `select`
//! and epoll while a message is queued, writable while there is room.
//!
//! `mq_notify`: `SIGEV_SIGNAL` (the signal, `si_code` `SI_MESGQ`, the sender's pid and uid and
//! `sigev_value`) and `SIGEV_NONE`, to the registering process, once, when a message arrives in
//! the empty queue and no receiver waits (Linux's `__do_notify`); EBUSY if another process has
//! registered. `SIGEV_THREAD` is glibc's helper thread listening on a netlink socket, which
//! ferrite does not provide (`socket(AF_NETLINK)` is EAFNOSUPPORT): glibc's `mq_notify` then
//! returns -1 with ENOSYS.
//!
//! Snapshots of a run copy each queue once, for its name and every description open on it
//! (`crate::snapshot`'s copier, as pipes).
//!
//! Left out: `read` of the descriptor (Linux's `QSIZE:` line) is EINVAL here; a queue's mode is
//! kept but only the owner's bits are checked.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use emu::Machine;

use crate::fd::{Description, Kind};
use crate::signal::SigInfo;
use crate::{err, Errno, Kernel, SysResult};

/// `si_code` of a message queue's notification.
const SI_MESGQ: i32 = -3;
const MQ_PRIO_MAX: u64 = 32768;
/// `/proc/sys/fs/mqueue` defaults: `msg_default`, `msg_max`, `msgsize_default`, `msgsize_max`.
const MSG_DEFAULT: i64 = 10;
const MSG_MAX: i64 = 10;
const MSGSIZE_DEFAULT: i64 = 8192;
const MSGSIZE_MAX: i64 = 8192;
const SIGEV_SIGNAL: i32 = 0;
const SIGEV_NONE: i32 = 1;
const SIGEV_THREAD: i32 = 2;

/// A registration of `mq_notify`.
#[derive(Clone, Debug)]
struct Notify {
    pid: u32,
    notify: i32,
    signo: i32,
    value: u64,
}

/// A message queue.
#[derive(Clone, Debug)]
pub struct MQueue {
    /// Messages by (priority descending, arrival): the next to receive first.
    msgs: BTreeMap<(std::cmp::Reverse<u32>, u64), Vec<u8>>,
    /// Arrivals so far (orders messages of one priority).
    sent: u64,
    maxmsg: i64,
    msgsize: i64,
    mode: u32,
    notify: Option<Notify>,
    /// Readiness key ([`crate::net::Net::key`]).
    pub(crate) id: u64,
    /// Edge stamps for edge-triggered epoll: messages arrived, messages taken.
    pub(crate) edges: [u64; 2],
}

impl MQueue {
    /// `poll`'s view: readable with a message, writable with room.
    pub(crate) fn events(&self) -> u32 {
        let mut r = 0;
        if !self.msgs.is_empty() {
            r |= (libc::POLLIN | libc::POLLRDNORM) as u32;
        }
        if (self.msgs.len() as i64) < self.maxmsg {
            r |= (libc::POLLOUT | libc::POLLWRNORM) as u32;
        }
        r
    }
}

impl Kernel {
    /// A send to a full queue or a receive from an empty one: EAGAIN with `O_NONBLOCK`,
    /// ETIMEDOUT past the deadline, else the call waits on the queue (`key`) and is made again.
    fn mq_block(&mut self, m: &Machine, key: u64, flags: i32, timeout: Option<u64>) -> SysResult {
        if flags & libc::O_NONBLOCK != 0 {
            return err(libc::EAGAIN);
        }
        if self.io_deadline(m, timeout) {
            return err(libc::ETIMEDOUT);
        }
        self.block_keys.push(key);
        err(crate::RESTART)
    }

    /// The queue the name at `addr` names (without glibc's slash), after Linux's checks.
    fn mq_name(m: &Machine, addr: u64) -> Result<Vec<u8>, Errno> {
        let name = m.read_cstr(addr, 4097)?;
        if name.len() > 4096 {
            return err(libc::ENAMETOOLONG);
        }
        if name.is_empty() {
            return err(libc::ENOENT);
        }
        if name.contains(&b'/') {
            return err(libc::EACCES);
        }
        if name.len() > 255 {
            return err(libc::ENAMETOOLONG);
        }
        Ok(name)
    }

    /// mq_open(2): `name, oflag, mode, attr`.
    pub(crate) fn mq_open(&mut self, m: &Machine, name: u64, oflag: i32, mode: u32, attr: u64) -> SysResult {
        let name = Self::mq_name(m, name)?;
        let acc = oflag & libc::O_ACCMODE;
        if acc == libc::O_ACCMODE {
            return err(libc::EINVAL);
        }
        let q = match self.mqueues.get(&name) {
            Some(q) => {
                if oflag & libc::O_CREAT != 0 && oflag & libc::O_EXCL != 0 {
                    return err(libc::EEXIST);
                }
                let want = match acc {
                    libc::O_RDONLY => 4,
                    libc::O_WRONLY => 2,
                    _ => 6,
                };
                if want & !(q.borrow().mode >> 6) & 7 != 0 {
                    return err(libc::EACCES);
                }
                q.clone()
            }
            None if oflag & libc::O_CREAT == 0 => return err(libc::ENOENT),
            None => {
                let (maxmsg, msgsize) = if attr == 0 {
                    (MSG_DEFAULT, MSGSIZE_DEFAULT)
                } else {
                    let maxmsg = m.read_u64(attr + 8)? as i64;
                    let msgsize = m.read_u64(attr + 16)? as i64;
                    // `mq_attr_ok` for a process without CAP_SYS_RESOURCE.
                    if maxmsg <= 0 || msgsize <= 0 || maxmsg > MSG_MAX || msgsize > MSGSIZE_MAX {
                        return err(libc::EINVAL);
                    }
                    (maxmsg, msgsize)
                };
                let q = Rc::new(RefCell::new(MQueue {
                    msgs: BTreeMap::new(),
                    sent: 0,
                    maxmsg,
                    msgsize,
                    mode: mode & 0o777 & !self.proc.umask,
                    notify: None,
                    id: self.net.key(),
                    edges: [0, 0],
                }));
                self.mqueues.insert(name.clone(), q.clone());
                q
            }
        };
        let flags = acc | (oflag & libc::O_NONBLOCK);
        let d =
            Description { kind: Kind::MQueue(q), guest_path: format!("/{}", String::from_utf8_lossy(&name)), flags };
        Ok(self.fds.insert(d, oflag & libc::O_CLOEXEC != 0)? as u64)
    }

    /// mq_unlink(2): the name goes; the queue lives while a descriptor has it open.
    pub(crate) fn mq_unlink(&mut self, m: &Machine, name: u64) -> SysResult {
        let name = Self::mq_name(m, name)?;
        self.mqueues.remove(&name).ok_or(Errno(libc::ENOENT))?;
        Ok(0)
    }

    /// The queue of descriptor `fd`, its description's flags.
    fn mq_of(&self, fd: i32) -> Result<(Rc<RefCell<MQueue>>, i32), Errno> {
        let f = self.fds.get(fd)?;
        let d = f.desc.borrow();
        match &d.kind {
            Kind::MQueue(q) => Ok((q.clone(), d.flags)),
            _ => err(libc::EBADF),
        }
    }

    /// The relative time until the absolute `CLOCK_REALTIME` timeout at `addr` (0: none).
    fn mq_timeout(&self, m: &Machine, addr: u64) -> Result<Option<u64>, Errno> {
        if addr == 0 {
            return Ok(None);
        }
        let t = Self::read_timespec(m, addr)?;
        Ok(Some(t.saturating_sub(self.wall_ns(m) as u64)))
    }

    /// mq_timedsend(2).
    pub(crate) fn mq_timedsend(
        &mut self,
        m: &Machine,
        fd: i32,
        ptr: u64,
        len: u64,
        prio: u64,
        timeout: u64,
    ) -> SysResult {
        if prio >= MQ_PRIO_MAX {
            return err(libc::EINVAL);
        }
        let timeout = self.mq_timeout(m, timeout)?;
        let (q, flags) = self.mq_of(fd)?;
        if flags & libc::O_ACCMODE == libc::O_RDONLY {
            return err(libc::EBADF);
        }
        if len as i64 > q.borrow().msgsize {
            return err(libc::EMSGSIZE);
        }
        let mut text = vec![0u8; len as usize];
        m.read(ptr, &mut text)?;
        let key = q.borrow().id;
        if q.borrow().msgs.len() as i64 >= q.borrow().maxmsg {
            return self.mq_block(m, key, flags, timeout);
        }
        let notify = {
            let mut q = q.borrow_mut();
            let was_empty = q.msgs.is_empty();
            let seq = q.sent;
            q.sent += 1;
            q.msgs.insert((std::cmp::Reverse(prio as u32), seq), text);
            q.edges[0] += 1;
            // Linux notifies only when no receiver waits for the message.
            let receivers = self.waits.io.get(&key).is_some_and(|w| !w.is_empty());
            if was_empty && !receivers {
                q.notify.take()
            } else {
                None
            }
        };
        if let Some(n) = notify.filter(|n| n.notify == SIGEV_SIGNAL && n.signo != 0) {
            let info =
                SigInfo { signo: n.signo, code: SI_MESGQ, addr: n.value, from_kill: true, sender: self.pid, status: 0 };
            self.send_signal(n.pid, None, info);
        }
        self.handoffs.push((1 << 59 | key, true));
        self.io_ready(key);
        Ok(0)
    }

    /// mq_timedreceive(2): the first message of the highest priority into `ptr`, its priority
    /// to `prio` (if not 0); its length.
    pub(crate) fn mq_timedreceive(
        &mut self,
        m: &mut Machine,
        fd: i32,
        ptr: u64,
        len: u64,
        prio: u64,
        timeout: u64,
    ) -> SysResult {
        let timeout = self.mq_timeout(m, timeout)?;
        let (q, flags) = self.mq_of(fd)?;
        if flags & libc::O_ACCMODE == libc::O_WRONLY {
            return err(libc::EBADF);
        }
        if (len as i64) < q.borrow().msgsize {
            return err(libc::EMSGSIZE);
        }
        let key = q.borrow().id;
        let Some((&(p, seq), text)) = q.borrow().msgs.iter().next().map(|(k, v)| (k, v.clone())) else {
            return self.mq_block(m, key, flags, timeout);
        };
        m.write(ptr, &text, false)?;
        if prio != 0 {
            m.write(prio, &p.0.to_le_bytes(), false)?;
        }
        {
            let mut q = q.borrow_mut();
            q.msgs.remove(&(p, seq));
            q.edges[1] += 1;
        }
        self.handoffs.push((1 << 59 | key, false));
        self.io_ready(key);
        Ok(text.len() as u64)
    }

    /// mq_notify(2): registers the running process for a notification (`sevp`, a `struct
    /// sigevent`), or removes its registration (`sevp` 0).
    pub(crate) fn mq_notify(&mut self, m: &Machine, fd: i32, sevp: u64) -> SysResult {
        let ev = if sevp == 0 {
            None
        } else {
            let value = m.read_u64(sevp)?;
            let signo = m.read_u32(sevp + 8)? as i32;
            let notify = m.read_u32(sevp + 12)? as i32;
            match notify {
                SIGEV_NONE | SIGEV_SIGNAL | SIGEV_THREAD => {}
                _ => return err(libc::EINVAL),
            }
            if notify == SIGEV_SIGNAL && !(1..=64).contains(&signo) {
                return err(libc::EINVAL);
            }
            if notify == SIGEV_THREAD {
                // glibc's helper thread reads a netlink socket, which the machine has not: it
                // never asks for this (its `socket(AF_NETLINK)` failed first).
                return err(libc::EBADF);
            }
            Some(Notify { pid: self.pid, notify, signo, value })
        };
        let (q, _) = self.mq_of(fd)?;
        let mut q = q.borrow_mut();
        match ev {
            None => {
                if q.notify.as_ref().is_some_and(|n| n.pid == self.pid) {
                    q.notify = None;
                }
            }
            Some(n) => {
                // Linux's `do_mq_notify`: one registration at a time, whoever holds it.
                if q.notify.is_some() {
                    return err(libc::EBUSY);
                }
                q.notify = Some(n);
            }
        }
        Ok(0)
    }

    /// mq_getsetattr(2): `struct mq_attr { flags, maxmsg, msgsize, curmsgs }` (longs): the old
    /// attributes to `old`, and `O_NONBLOCK` from `new` set on the description.
    pub(crate) fn mq_getsetattr(&mut self, m: &mut Machine, fd: i32, new: u64, old: u64) -> SysResult {
        let newflags = if new != 0 {
            let mut b = [0u8; 64];
            m.read(new, &mut b)?;
            let flags = i64::from_le_bytes(b[0..8].try_into().unwrap_or_default());
            if flags & !i64::from(libc::O_NONBLOCK) != 0 {
                return err(libc::EINVAL);
            }
            Some(flags as i32)
        } else {
            None
        };
        let (q, flags) = self.mq_of(fd)?;
        if old != 0 {
            let q = q.borrow();
            let mut b = [0u8; 64];
            b[0..8].copy_from_slice(&i64::from(flags & libc::O_NONBLOCK).to_le_bytes());
            b[8..16].copy_from_slice(&q.maxmsg.to_le_bytes());
            b[16..24].copy_from_slice(&q.msgsize.to_le_bytes());
            b[24..32].copy_from_slice(&(q.msgs.len() as i64).to_le_bytes());
            m.write(old, &b, false)?;
        }
        if let Some(nf) = newflags {
            let f = self.fds.get(fd)?.clone();
            let mut d = f.desc.borrow_mut();
            d.flags = (d.flags & !libc::O_NONBLOCK) | nf;
        }
        Ok(0)
    }

    /// Process `pid` ends: its notification registrations go (Linux's `mqueue_flush_file`
    /// removes them as its descriptors close).
    pub(crate) fn mq_exit(&mut self, pid: u32) {
        for q in self.mqueues.values() {
            let mut q = q.borrow_mut();
            if q.notify.as_ref().is_some_and(|n| n.pid == pid) {
                q.notify = None;
            }
        }
    }
}
