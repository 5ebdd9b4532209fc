//! Moving bytes between descriptors in the kernel: `memfd_create`, `copy_file_range`,
//! `splice`, `tee` and `vmsplice`.
//!
//! `memfd_create` follows Linux's `mm/memfd.c`: the name may be up to 249 bytes (EINVAL
//! beyond, EFAULT for an unreadable one), the descriptor is `O_RDWR | O_LARGEFILE`, close-on-exec
//! with `MFD_CLOEXEC`, and `/proc/self/fd/N` names it `/memfd:NAME (deleted)`. The file is a
//! memfd of the host's, made with the guest's flags (so the host's kernel checks them, and
//! `MFD_ALLOW_SEALING`, `F_ADD_SEALS`/`F_GET_SEALS` and what the seals forbid are the host's
//! own); it is a regular file of the guest's like any other (read, write, `mmap`,
//! `ftruncate`, `fstat`), starts empty and holds nothing of the host's, so runs stay
//! deterministic.
//!
//! `copy_file_range` follows `vfs_copy_file_range` and `generic_copy_file_checks`: EBADF for a
//! descriptor not open or open the wrong way (an `O_APPEND` destination included), EINVAL for
//! flags, for anything but regular files (EISDIR for a directory) and for overlapping ranges
//! of one file, EOVERFLOW for a negative offset or one past the largest; offsets from the pointers given (and
//! written back) or the files' own (then advanced). It copies, as one read and one write at
//! the offsets, up to 8 MiB a call (Linux may copy less than asked too; callers loop). A PM
//! file on either side is EXDEV, as between file systems (the PM mount is one of its own):
//! callers then copy through `read` and `write`, whose PM loads and stores ferrite models; so
//! is a memfd with a file that is not one (memfds live on the kernel's shmem mount).
//!
//! `splice`, `tee` and `vmsplice` follow `fs/splice.c` over the emulated kernel's pipes
//! ([`crate::fd::Pipe`]): `splice` moves bytes from a pipe to a pipe, a file, a socket or a
//! standard stream, and from a file or socket into a pipe; `tee` copies from one pipe to
//! another without taking them; `vmsplice` writes user memory into a pipe, or reads a pipe
//! into it. A call waits (a scheduling point) for bytes in its source pipe (0 at end of file:
//! no writer left) and for room in its destination pipe, unless `SPLICE_F_NONBLOCK` or the
//! pipe's own `O_NONBLOCK` (EAGAIN). Checks as Linux's `do_splice`: 0 for a length of 0
//! before anything else; EINVAL for unknown flags, when neither side is a pipe, for one pipe
//! on both sides, an `O_APPEND` destination; EBADF for a side not open for its direction;
//! ESPIPE for an offset given for a pipe; a pipe with no reader left gives EPIPE and SIGPIPE.
//!
//! Left out: pages are copied, never moved or gifted (`SPLICE_F_MOVE`, `SPLICE_F_GIFT` are
//! hints Linux also ignores mostly); reading a PM file through `splice` or `copy_file_range`
//! is not a load event (as `sendfile`).

use std::ffi::CString;
use std::os::fd::FromRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;

use emu::Machine;

use crate::fd::{Description, Kind, Pipe, MAX_RW};
use crate::{err, Errno, Kernel, SysResult};
use std::cell::RefCell;
use std::rc::Rc;

/// An open file description, as descriptors share it.
type SharedDesc = Rc<RefCell<Description>>;

const MFD_CLOEXEC: u32 = 1;
/// Linux's `MFD_NAME_MAX_LEN`: `NAME_MAX` less the "memfd:" prefix.
const MFD_NAME_MAX: usize = 249;
const SPLICE_F_NONBLOCK: u32 = 2;
/// `SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE | SPLICE_F_GIFT`.
const SPLICE_F_ALL: u32 = 0xf;
/// The most `copy_file_range` copies in one call.
const COPY_CHUNK: u64 = 8 << 20;
/// `fcntl`'s sealing commands.
pub(crate) const F_ADD_SEALS: i32 = 1033;
pub(crate) const F_GET_SEALS: i32 = 1034;

/// The pipe behind a description, if it is a pipe's end that reads (`read`) or writes.
fn pipe_end(kind: &Kind, read: bool) -> Option<Rc<RefCell<Pipe>>> {
    match kind {
        Kind::PipeRead(p) if read => Some(p.clone()),
        Kind::PipeWrite(p) if !read => Some(p.clone()),
        Kind::PipeRdWr(p) => Some(p.clone()),
        _ => None,
    }
}

/// Whether a description's guest path is a memfd's (which no path reaches).
pub(crate) fn is_memfd(guest_path: &str) -> bool {
    guest_path.starts_with("/memfd:")
}

/// A description of its own of the host file `file`, opened for `acc` (`O_RDONLY` ...)
/// through the host's `/proc/self/fd`.
pub(crate) fn reopen_host(file: &std::fs::File, acc: i32) -> Result<std::fs::File, Errno> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .read(acc != libc::O_WRONLY)
        .write(acc != libc::O_RDONLY)
        .open(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    Ok(f)
}

fn is_pipe(kind: &Kind) -> bool {
    matches!(kind, Kind::PipeRead(_) | Kind::PipeWrite(_) | Kind::PipeRdWr(_))
}

impl Kernel {
    /// memfd_create(2): `name, flags`.
    pub(crate) fn memfd_create(&mut self, m: &Machine, name: u64, flags: u32) -> SysResult {
        let raw = match m.read_cstr(name, MFD_NAME_MAX + 1) {
            Ok(v) => v,
            Err(_) if m.read_cstr(name, 1 << 20).is_ok() => return err(libc::EINVAL),
            Err(_) => return err(libc::EFAULT),
        };
        let c = CString::new(raw.clone()).map_err(|_| Errno(libc::EINVAL))?;
        // ferrite's own descriptor is always close-on-exec; the guest's flag is the guest's.
        // SAFETY: a NUL-terminated name and plain flags; the descriptor returned is owned below.
        let fd = unsafe { libc::memfd_create(c.as_ptr(), (flags & !MFD_CLOEXEC) | MFD_CLOEXEC) };
        if fd < 0 {
            return err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
        }
        // SAFETY: `fd` was just created and nothing else owns it.
        let file = unsafe { std::fs::File::from_raw_fd(fd) };
        let guest_path = format!("/memfd:{} (deleted)", String::from_utf8_lossy(&raw));
        let host = PathBuf::from(format!("/proc/self/fd/{fd}"));
        let desc = Description {
            kind: Kind::File { file, host, pm: false },
            guest_path,
            flags: libc::O_RDWR | libc::O_LARGEFILE,
        };
        Ok(self.fds.insert(desc, flags & MFD_CLOEXEC != 0)? as u64)
    }

    /// fcntl(2)'s `F_ADD_SEALS` and `F_GET_SEALS` on a file: the host's answer for its file
    /// (a memfd's seals; EINVAL for a file that cannot be sealed; EPERM from `F_ADD_SEALS`
    /// without `MFD_ALLOW_SEALING`).
    pub(crate) fn seals(&mut self, fd: i32, cmd: i32, arg: u64) -> SysResult {
        use std::os::fd::AsRawFd;
        let d = self.desc(fd)?;
        let d = d.borrow();
        let Kind::File { file, .. } = &d.kind else { return err(libc::EINVAL) };
        if cmd == F_ADD_SEALS && d.flags & libc::O_ACCMODE == libc::O_RDONLY {
            // Linux's memfd_add_seals needs a writable descriptor.
            return err(libc::EPERM);
        }
        // SAFETY: fcntl on a descriptor owned by the description; the argument is a plain int.
        let r = unsafe { libc::fcntl(file.as_raw_fd(), cmd, arg as libc::c_int) };
        if r < 0 {
            return err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
        }
        Ok(r as u64)
    }

    /// An offset argument: the `loff_t` at `ptr`, or (`ptr` 0) the description's own offset.
    /// EFAULT for an unreadable one, EINVAL for a negative one.
    fn offset_arg(&mut self, m: &Machine, fd: i32, ptr: u64) -> Result<u64, Errno> {
        if ptr == 0 {
            return self.lseek(fd, 0, libc::SEEK_CUR);
        }
        let off = m.read_u64(ptr)? as i64;
        if off < 0 {
            return err(libc::EINVAL);
        }
        Ok(off as u64)
    }

    /// After moving `n` bytes from offset `start`: the pointer's offset, or the file's own.
    fn advance(&mut self, m: &mut Machine, fd: i32, ptr: u64, start: u64, n: u64) -> Result<(), Errno> {
        if ptr != 0 {
            m.write_u64(ptr, start + n)?;
        } else {
            self.lseek(fd, (start + n) as i64, libc::SEEK_SET)?;
        }
        Ok(())
    }

    /// copy_file_range(2): `fd_in, off_in, fd_out, off_out, len, flags`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn copy_file_range(
        &mut self,
        m: &mut Machine,
        fd_in: i32,
        off_in: u64,
        fd_out: i32,
        off_out: u64,
        len: u64,
        flags: u64,
    ) -> SysResult {
        let (ind, outd) = (self.desc(fd_in)?, self.desc(fd_out)?);
        if flags != 0 {
            return err(libc::EINVAL);
        }
        let (same, in_size) = {
            let (i, o) = (ind.borrow(), outd.borrow());
            let meta = |d: &Description| match &d.kind {
                Kind::File { file, pm, .. } => Ok((file.metadata()?, *pm)),
                Kind::Dir { .. } => err(libc::EISDIR),
                _ => err(libc::EINVAL),
            };
            let (mi, pi) = meta(&i)?;
            let (mo, po) = meta(&o)?;
            // A memfd is on the kernel's internal shmem mount: another file system.
            let (pi, po) = (pi || is_memfd(&i.guest_path), po || is_memfd(&o.guest_path));
            if !mi.is_file() || !mo.is_file() {
                return err(if mi.is_dir() || mo.is_dir() { libc::EISDIR } else { libc::EINVAL });
            }
            if i.flags & libc::O_ACCMODE == libc::O_WRONLY
                || o.flags & libc::O_ACCMODE == libc::O_RDONLY
                || o.flags & libc::O_APPEND != 0
            {
                return err(libc::EBADF);
            }
            if pi != po || pi && !(is_memfd(&i.guest_path) && is_memfd(&o.guest_path)) {
                return err(libc::EXDEV);
            }
            ((mi.dev(), mi.ino()) == (mo.dev(), mo.ino()), mi.len())
        };
        // A negative offset is one `pos + len` overflows: EOVERFLOW, as generic_copy_file_checks.
        let pos_in = if off_in != 0 { m.read_u64(off_in)? } else { self.lseek(fd_in, 0, libc::SEEK_CUR)? };
        let pos_out = if off_out != 0 { m.read_u64(off_out)? } else { self.lseek(fd_out, 0, libc::SEEK_CUR)? };
        if pos_in.checked_add(len).is_none_or(|e| e > i64::MAX as u64)
            || pos_out.checked_add(len).is_none_or(|e| e > i64::MAX as u64)
        {
            return err(libc::EOVERFLOW);
        }
        if len == 0 || pos_in >= in_size {
            return Ok(0);
        }
        let count = len.min(in_size - pos_in);
        if same && pos_in < pos_out + count && pos_out < pos_in + count {
            return err(libc::EINVAL);
        }
        let count = count.min(COPY_CHUNK).min(MAX_RW) as usize;
        let mut data = vec![0u8; count];
        let got = {
            let i = ind.borrow();
            let Kind::File { file, .. } = &i.kind else { return err(libc::EINVAL) };
            let mut got = 0;
            while got < count {
                match file.read_at(&mut data[got..], pos_in + got as u64)? {
                    0 => break,
                    n => got += n,
                }
            }
            got
        };
        data.truncate(got);
        if data.is_empty() {
            return Ok(0);
        }
        let n = self.write_tracked(m, fd_out, &data, Some(pos_out))?;
        self.advance(m, fd_in, off_in, pos_in, n)?;
        self.advance(m, fd_out, off_out, pos_out, n)?;
        Ok(n)
    }

    /// Whether a pipe side of a splice waits without blocking: `SPLICE_F_NONBLOCK` or the
    /// pipe's own `O_NONBLOCK` (Linux's `do_splice` adds the one to the other).
    fn splice_nonblock(d: &Description, flags: u32) -> bool {
        flags & SPLICE_F_NONBLOCK != 0 || d.flags & libc::O_NONBLOCK != 0
    }

    /// splice(2): `fd_in, off_in, fd_out, off_out, len, flags`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn splice(
        &mut self,
        m: &mut Machine,
        fd_in: i32,
        off_in: u64,
        fd_out: i32,
        off_out: u64,
        len: u64,
        flags: u32,
    ) -> SysResult {
        let Some((ind, outd)) = self.splice_descs(fd_in, fd_out, len, flags)? else { return Ok(0) };
        let (src, dst, nonblock_in, nonblock_out) = {
            let (i, o) = (ind.borrow(), outd.borrow());
            if i.flags & libc::O_ACCMODE == libc::O_WRONLY
                || (o.flags & libc::O_ACCMODE == libc::O_RDONLY && !matches!(o.kind, Kind::Stdout | Kind::Stderr))
            {
                return err(libc::EBADF);
            }
            let (src, dst) = (pipe_end(&i.kind, true), pipe_end(&o.kind, false));
            if (is_pipe(&i.kind) && src.is_none()) || (is_pipe(&o.kind) && dst.is_none()) {
                return err(libc::EBADF);
            }
            if src.is_none() && dst.is_none() {
                return err(libc::EINVAL);
            }
            if (src.is_some() && off_in != 0) || (dst.is_some() && off_out != 0) {
                return err(libc::ESPIPE);
            }
            if dst.is_none() && o.flags & libc::O_APPEND != 0 {
                return err(libc::EINVAL);
            }
            if src.is_none() && !matches!(i.kind, Kind::File { .. } | Kind::Socket(_)) {
                return err(libc::EINVAL);
            }
            if dst.is_none()
                && !matches!(o.kind, Kind::File { .. } | Kind::Socket(_) | Kind::Stdout | Kind::Stderr | Kind::Null)
            {
                return err(libc::EINVAL);
            }
            if off_in != 0 && !matches!(i.kind, Kind::File { .. })
                || off_out != 0 && !matches!(o.kind, Kind::File { .. })
            {
                return err(libc::ESPIPE);
            }
            (src, dst, Self::splice_nonblock(&i, flags), Self::splice_nonblock(&o, flags))
        };
        let len = len.min(MAX_RW) as usize;
        match (src, dst) {
            (Some(a), Some(b)) => {
                if Rc::ptr_eq(&a, &b) {
                    return err(libc::EINVAL);
                }
                self.pipe_to_pipe(&a, &b, len, nonblock_in, nonblock_out, true)
            }
            (Some(a), None) => {
                // From a pipe: what it holds (up to `len`) goes to the destination, and what
                // the destination took leaves the pipe.
                let data = match self.pipe_bytes(&a, len, nonblock_in)? {
                    Some(d) => d,
                    None => return Ok(0),
                };
                let at = if off_out != 0 { Some(self.offset_arg(m, fd_out, off_out)?) } else { None };
                let n = self.write_tracked(m, fd_out, &data, at)?;
                self.pipe_consume(&a, n as usize);
                if let Some(start) = at {
                    m.write_u64(off_out, start + n)?;
                }
                Ok(n)
            }
            (None, Some(b)) => {
                // Into a pipe: as much of the source as there is room for.
                let room = self.pipe_room(&b, nonblock_out)?;
                let start = if off_in != 0 { Some(self.offset_arg(m, fd_in, off_in)?) } else { None };
                let data = self.read_bytes(m, fd_in, len.min(room), start)?;
                if data.is_empty() {
                    return Ok(0);
                }
                let n = b.borrow_mut().put(&data);
                let id = b.borrow().id;
                self.io_ready(id);
                if let Some(start) = start {
                    m.write_u64(off_in, start + n as u64)?;
                }
                Ok(n as u64)
            }
            (None, None) => err(libc::EINVAL),
        }
    }

    /// The first `len` bytes a pipe holds, not taken; `None` at end of file (empty, no writer).
    /// An empty pipe with a writer blocks the caller (EAGAIN if `nonblock`).
    fn pipe_bytes(&mut self, p: &Rc<RefCell<Pipe>>, len: usize, nonblock: bool) -> Result<Option<Vec<u8>>, Errno> {
        let b = p.borrow();
        if b.buf.is_empty() {
            if b.writers == 0 {
                return Ok(None);
            }
            if nonblock {
                return err(libc::EAGAIN);
            }
            let id = b.id;
            drop(b);
            return self.would_block(&[id]);
        }
        Ok(Some(b.buf.iter().take(len).copied().collect()))
    }

    /// Takes `n` bytes from the front of a pipe, waking whoever waits on it.
    /// Room in pipe `p` for a write, as `pipe_write` finds it: EPIPE (and SIGPIPE) with no reader
    /// left, EAGAIN when full and `nonblock`, else a wait for room (a scheduling point).
    fn pipe_room(&mut self, p: &Rc<RefCell<Pipe>>, nonblock: bool) -> Result<usize, Errno> {
        let (readers, room, id) = {
            let q = p.borrow();
            (q.readers, q.room(), q.id)
        };
        if readers == 0 {
            self.raise(libc::SIGPIPE);
            return err(libc::EPIPE);
        }
        if room == 0 {
            if nonblock {
                return err(libc::EAGAIN);
            }
            return self.would_block(&[id]);
        }
        Ok(room)
    }

    fn pipe_consume(&mut self, p: &Rc<RefCell<Pipe>>, n: usize) {
        if n == 0 {
            return;
        }
        let id = {
            let mut b = p.borrow_mut();
            b.take(n, false);
            b.id
        };
        self.io_ready(id);
    }

    /// Moves (`take`) or copies (`tee`) up to `len` bytes from pipe `a` to pipe `b`: waits for
    /// bytes in `a` (0 at end of file) and for room in `b`.
    fn pipe_to_pipe(
        &mut self,
        a: &Rc<RefCell<Pipe>>,
        b: &Rc<RefCell<Pipe>>,
        len: usize,
        nonblock_in: bool,
        nonblock_out: bool,
        take: bool,
    ) -> SysResult {
        let Some(data) = self.pipe_bytes(a, len, nonblock_in)? else { return Ok(0) };
        let room = self.pipe_room(b, nonblock_out)?;
        let n = b.borrow_mut().put(&data[..data.len().min(room)]);
        let id = b.borrow().id;
        self.io_ready(id);
        if take {
            self.pipe_consume(a, n);
        }
        Ok(n as u64)
    }

    /// The descriptors of a `splice` or `tee` after the checks both make first (`None`: `len` is
    /// 0, nothing to move; EINVAL for unknown flags, EBADF for a bad descriptor).
    fn splice_descs(
        &self,
        fd_in: i32,
        fd_out: i32,
        len: u64,
        flags: u32,
    ) -> Result<Option<(SharedDesc, SharedDesc)>, Errno> {
        if len == 0 {
            return Ok(None);
        }
        if flags & !SPLICE_F_ALL != 0 {
            return err(libc::EINVAL);
        }
        Ok(Some((self.desc(fd_in)?, self.desc(fd_out)?)))
    }

    /// tee(2): `fd_in, fd_out, len, flags`: copies up to `len` bytes from one pipe to another,
    /// leaving them in the first.
    pub(crate) fn tee(&mut self, fd_in: i32, fd_out: i32, len: u64, flags: u32) -> SysResult {
        let Some((ind, outd)) = self.splice_descs(fd_in, fd_out, len, flags)? else { return Ok(0) };
        let (a, b, nb_in, nb_out) = {
            let (i, o) = (ind.borrow(), outd.borrow());
            if i.flags & libc::O_ACCMODE == libc::O_WRONLY || o.flags & libc::O_ACCMODE == libc::O_RDONLY {
                return err(libc::EBADF);
            }
            match (pipe_end(&i.kind, true), pipe_end(&o.kind, false)) {
                (Some(a), Some(b)) => (a, b, Self::splice_nonblock(&i, flags), Self::splice_nonblock(&o, flags)),
                _ => return err(libc::EINVAL),
            }
        };
        if Rc::ptr_eq(&a, &b) {
            return err(libc::EINVAL);
        }
        self.pipe_to_pipe(&a, &b, len.min(MAX_RW) as usize, nb_in, nb_out, false)
    }

    /// vmsplice(2): `fd, iov, nr_segs, flags`: the buffers written into a pipe's write end, or
    /// a pipe's read end read into them (as `writev`/`readv`, with `SPLICE_F_NONBLOCK`).
    pub(crate) fn vmsplice(&mut self, m: &mut Machine, fd: i32, iov: u64, nr: u64, flags: u32) -> SysResult {
        if flags & !SPLICE_F_ALL != 0 {
            return err(libc::EINVAL);
        }
        let d = self.desc(fd)?;
        let (writes, p, nonblock) = {
            let d = d.borrow();
            let acc = d.flags & libc::O_ACCMODE;
            let nb = Self::splice_nonblock(&d, flags);
            match &d.kind {
                Kind::PipeWrite(p) if acc != libc::O_RDONLY => (true, p.clone(), nb),
                Kind::PipeRead(p) if acc != libc::O_WRONLY => (false, p.clone(), nb),
                // Linux's vmsplice_type: a descriptor open both ways is taken as the write end.
                Kind::PipeRdWr(p) => (true, p.clone(), nb),
                _ => return err(libc::EBADF),
            }
        };
        let segs = Self::iovecs(m, iov, nr)?;
        if segs.is_empty() {
            return Ok(0);
        }
        if writes {
            let mut data = Vec::new();
            for (base, len) in segs {
                let mut b = vec![0u8; len.min(MAX_RW) as usize];
                m.read(base, &mut b).map_err(|_| Errno(libc::EFAULT))?;
                m.kernel_pm_loads(base, b.len() as u64);
                data.extend_from_slice(&b);
            }
            self.pipe_room(&p, nonblock)?;
            let n = p.borrow_mut().put(&data);
            let id = p.borrow().id;
            self.io_ready(id);
            return Ok(n as u64);
        }
        let total: u64 = segs.iter().map(|s| s.1).sum();
        let Some(data) = self.pipe_bytes(&p, total.min(MAX_RW) as usize, nonblock)? else { return Ok(0) };
        let mut done = 0;
        for (base, len) in segs {
            let k = (len as usize).min(data.len() - done);
            m.write(base, &data[done..done + k], false).map_err(|_| Errno(libc::EFAULT))?;
            done += k;
            if done == data.len() {
                break;
            }
        }
        self.pipe_consume(&p, done);
        Ok(done as u64)
    }
}
