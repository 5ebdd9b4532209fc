//! `signalfd` and `signalfd4`: a descriptor that reads the signals pending for the reading
//! thread and its process, among a mask, as `struct signalfd_siginfo` (128 bytes each).
//!
//! As on Linux (man 2 signalfd): the mask is the descriptor's (SIGKILL and SIGSTOP are dropped
//! from it silently); `fd = -1` makes a new descriptor (`SFD_NONBLOCK`, `SFD_CLOEXEC`), any other
//! `fd` must be a signalfd, whose mask is replaced (EBADF if it is not open, EINVAL if it is not
//! a signalfd; flags are then ignored, as Linux does); `sizemask` must be 8 (EINVAL) and the mask
//! readable (EFAULT). A read of fewer than 128 bytes is EINVAL; a read takes as many pending
//! signals of the mask as fit, lowest number first, and completes with at least one: with none
//! pending it blocks (a scheduling point like every blocking read: [`crate::thread::Wait::Io`]
//! on the process's signal key, which every signal made pending wakes) or, non-blocking, gives
//! EAGAIN. A signal read is taken: no handler runs for it. The descriptor is readable in
//! `poll`/`select`/`epoll` when a signal of its mask is pending for the thread that asks. Reads
//! and readiness are the *reading* process's signals, whoever made the descriptor (a child that
//! inherits one reads its own), as on Linux. Writes are EINVAL.
//!
//! A read takes the signals Linux's `dequeue_signal` would: those sent to the reading thread
//! itself (tkill/tgkill, SIGPIPE) first, then those of its process's shared set (kill,
//! sigqueue, timers, `SIGCHLD`); in each, a synchronous fault's signal first, then the lowest
//! number ([`Kernel::dequeue_signal`]). A signal sent to another thread is never read.
//!
//! Left out: `ssi_utime`,
//! `ssi_stime` and `ssi_errno` are 0.

use std::cell::RefCell;
use std::rc::Rc;

use emu::Machine;

use crate::fd::{Description, Kind};
use crate::signal::SigInfo;
use crate::{err, Errno, Kernel, SysResult};

/// A signalfd: the signals it reads (bit N-1 for signal N).
#[derive(Clone, Debug)]
pub struct SignalFd {
    /// Its mask.
    pub mask: u64,
}

/// Bytes of one `struct signalfd_siginfo`.
const SIGINFO_SIZE: usize = 128;
const SFD_CLOEXEC: i32 = libc::O_CLOEXEC;
const SFD_NONBLOCK: i32 = libc::O_NONBLOCK;
/// SIGKILL and SIGSTOP, which no mask holds.
const UNBLOCKABLE: u64 = (1 << (libc::SIGKILL - 1)) | (1 << (libc::SIGSTOP - 1));

/// The readiness key of process `pid`'s pending signals: far from the keys of pipes and sockets
/// (which count up from 1) and from the children's key (`procs::CHILD_KEY`).
pub(crate) fn key(pid: u32) -> u64 {
    1 << 60 | u64::from(pid)
}

/// `struct signalfd_siginfo` for a signal taken.
fn siginfo_bytes(info: &SigInfo) -> [u8; SIGINFO_SIZE] {
    let mut b = [0u8; SIGINFO_SIZE];
    b[0..4].copy_from_slice(&(info.signo as u32).to_le_bytes());
    b[8..12].copy_from_slice(&info.code.to_le_bytes());
    if info.code == crate::timers::SI_TIMER {
        // ssi_tid (the timer's id), ssi_overrun, ssi_int and ssi_ptr (sigev_value).
        b[24..28].copy_from_slice(&info.sender.to_le_bytes());
        b[32..36].copy_from_slice(&info.status.to_le_bytes());
        b[44..48].copy_from_slice(&(info.addr as u32).to_le_bytes());
        b[48..56].copy_from_slice(&info.addr.to_le_bytes());
    } else if info.from_kill {
        // ssi_pid, ssi_uid, and ssi_status for SIGCHLD or sigqueue's value (ssi_int, ssi_ptr).
        let sender = if info.sender == 0 { crate::process::PID } else { info.sender };
        b[12..16].copy_from_slice(&sender.to_le_bytes());
        b[16..20].copy_from_slice(&(crate::process::UID as u32).to_le_bytes());
        if info.queued() {
            b[44..48].copy_from_slice(&(info.addr as u32).to_le_bytes());
            b[48..56].copy_from_slice(&info.addr.to_le_bytes());
        } else {
            b[40..44].copy_from_slice(&info.status.to_le_bytes());
        }
    } else {
        // A fault's address.
        b[72..80].copy_from_slice(&info.addr.to_le_bytes());
    }
    b
}

impl Kernel {
    /// signalfd4(2) (and signalfd(2), `flags` 0): `fd, mask, sizemask, flags`.
    pub(crate) fn signalfd4(&mut self, m: &Machine, fd: i32, mask: u64, sizemask: u64, flags: i32) -> SysResult {
        if flags & !(SFD_CLOEXEC | SFD_NONBLOCK) != 0 || sizemask != 8 {
            return err(libc::EINVAL);
        }
        let set = m.read_u64(mask).map_err(|_| Errno(libc::EFAULT))? & !UNBLOCKABLE;
        if fd != -1 {
            let f = self.fds.get(fd)?;
            let d = f.desc.borrow();
            let Kind::SignalFd(s) = &d.kind else { return err(libc::EINVAL) };
            s.borrow_mut().mask = set;
            drop(d);
            // Readers and pollers look again with the new mask.
            self.io_ready(key(self.pid));
            return Ok(fd as u64);
        }
        let d = Description {
            kind: Kind::SignalFd(Rc::new(RefCell::new(SignalFd { mask: set }))),
            guest_path: "anon_inode:[signalfd]".into(),
            flags: libc::O_RDWR | if flags & SFD_NONBLOCK != 0 { libc::O_NONBLOCK } else { 0 },
        };
        Ok(self.fds.insert(d, flags & SFD_CLOEXEC != 0)? as u64)
    }

    /// Whether a signal of `mask` is pending for the running thread or its process (not one
    /// sent to another of its threads).
    pub(crate) fn signalfd_ready(&self, mask: u64) -> bool {
        self.pending_bits(self.current, false) & mask != 0
    }

    /// read(2) of a signalfd.
    pub(crate) fn signalfd_read(
        &mut self,
        s: &Rc<RefCell<SignalFd>>,
        len: usize,
        nonblock: bool,
    ) -> Result<Vec<u8>, Errno> {
        if len < SIGINFO_SIZE {
            return err(libc::EINVAL);
        }
        let mask = s.borrow().mask;
        let mut out = Vec::new();
        while out.len() + SIGINFO_SIZE <= len {
            let Some(mut info) = self.dequeue_signal(self.current, mask, false) else { break };
            // A POSIX timer's signal counts as taken (its overrun is reported and reset).
            self.timer_signal_taken(&mut info);
            out.extend_from_slice(&siginfo_bytes(&info));
        }
        if !out.is_empty() {
            return Ok(out);
        }
        if nonblock {
            return err(libc::EAGAIN);
        }
        self.would_block(&[key(self.pid)])
    }
}
