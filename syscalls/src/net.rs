//! Sockets as far as the machine has a network: they exist, and there is nothing to reach.
//!
//! The machine has no network and, so far, no in-machine peers: nothing in it can `bind` or
//! `listen` yet (those calls are still reported as unsupported). So a socket is created as Linux
//! creates one, and connecting it fails as it fails on a host where nobody listens: `ENOENT` for an
//! `AF_UNIX` path or abstract name, `ECONNREFUSED` for a loopback TCP port, `ENETUNREACH` for any
//! other address. That is what programs that only probe need — glibc's NSS asks `nscd` over
//! `/var/run/nscd/socket` before reading `/etc/passwd` (`ls -l`, `id`, `tar`), its resolver
//! connects a UDP socket to the name server — and they fall back exactly as on a host without
//! those services, with no warning.

use emu::Machine;

use crate::fd::{Description, Kind};
use crate::{err, Errno, Kernel, SysResult};

const SOCK_TYPE_MASK: i32 = 0xf;

impl Kernel {
    pub(crate) fn socket(&mut self, domain: i32, ty: i32, _proto: i32) -> SysResult {
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
        let flags = libc::O_RDWR | if ty & libc::SOCK_NONBLOCK != 0 { libc::O_NONBLOCK } else { 0 };
        let d = Description { kind: Kind::Socket { domain, ty: base }, guest_path: "socket:".into(), flags };
        Ok(self.fds.insert(d, ty & libc::SOCK_CLOEXEC != 0)? as u64)
    }

    pub(crate) fn connect(&mut self, m: &mut Machine, fd: i32, addr: u64, len: u32) -> SysResult {
        let (domain, ty) = match &self.fds.get(fd)?.desc.borrow().kind {
            Kind::Socket { domain, ty } => (*domain, *ty),
            _ => return err(libc::ENOTSOCK),
        };
        if !(2..=128).contains(&len) {
            return err(libc::EINVAL);
        }
        let mut sa = vec![0u8; len as usize];
        m.read(addr, &mut sa).map_err(|_| Errno(libc::EFAULT))?;
        let family = i32::from(u16::from_ne_bytes([sa[0], sa[1]]));
        if family == libc::AF_UNSPEC && ty == libc::SOCK_DGRAM {
            // Dissolves a datagram socket's association: there is none.
            return Ok(0);
        }
        if family != domain {
            return err(if domain == libc::AF_UNIX { libc::EINVAL } else { libc::EAFNOSUPPORT });
        }
        match domain {
            libc::AF_UNIX => err(libc::ENOENT),
            libc::AF_INET if len < 16 => err(libc::EINVAL),
            libc::AF_INET6 if len < 24 => err(libc::EINVAL),
            _ if ty == libc::SOCK_STREAM && loopback(domain, &sa) => err(libc::ECONNREFUSED),
            _ => err(libc::ENETUNREACH),
        }
    }
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
