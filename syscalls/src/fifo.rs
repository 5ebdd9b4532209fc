//! Named pipes (FIFOs): `mknod`/`mknodat` make one in a writable root (a real host FIFO, so
//! `stat` and listings show it), and `open` of one joins the in-machine pipe kept for that host
//! file, as Linux's `fifo_open` does: ferrite never opens the host FIFO itself (that would block
//! ferrite, not the guest).
//!
//! As Linux: an open for reading counts the reader and, unless `O_NONBLOCK`, waits until the
//! FIFO has a writer or one has opened it since the reader began waiting (it may have closed
//! again: the reader then reads what it wrote, and end of file); an open for writing counts the
//! writer and waits likewise for a reader, while a non-blocking one with no reader fails with
//! ENXIO. A waiting opener counts as an end, so its partner does not wait (nor get EPIPE). A FIFO
//! that nobody has open starts empty at its next open. The wait is a wait on descriptors
//! ([`crate::thread`]): a FIFO nobody will open is part of a deadlock finding, where Linux hangs.
//!
//! An open for reading and writing (`O_RDWR`, which Linux lets a process use to hold a FIFO open
//! without waiting; POSIX leaves it undefined) counts as a reader and a writer and never waits.
//!
//! Left out: an open interrupted by a signal while it waits stays counted as an end of the FIFO.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::rc::Rc;

use emu::Machine;

use crate::fd::{Description, Kind, Pipe};
use crate::{err, Kernel, SysResult};

/// The pipe of one host FIFO and who waits to open it.
#[derive(Debug, Clone)]
pub struct Fifo {
    /// The bytes and the ends' counts (waiting openers included).
    pub pipe: Rc<RefCell<Pipe>>,
    /// Opens for reading so far (Linux's `r_counter`): a waiting writer goes on once it moves.
    r_opens: u64,
    /// Opens for writing so far (`w_counter`).
    w_opens: u64,
    /// Threads waiting in `open`: whether to read, and the partner's opens when they began.
    waiting: BTreeMap<u32, (bool, u64)>,
}

impl Fifo {
    /// This FIFO with its pipe replaced by `pipe` (a snapshot's copy of it).
    pub(crate) fn with_pipe(&self, pipe: Rc<RefCell<Pipe>>) -> Fifo {
        Fifo { pipe, ..self.clone() }
    }
}

impl Kernel {
    /// `mknod`/`mknodat`: a FIFO, a regular file (type 0 too) or a socket node, made on the host
    /// in a writable root (EROFS/EACCES elsewhere, EEXIST if the name exists); character and
    /// block devices need `CAP_MKNOD` (EPERM); other types EINVAL. The permission bits are
    /// `mode & 0777` (the umask is not applied, as for `mkdir`).
    pub(crate) fn mknodat(&mut self, m: &mut Machine, dirfd: i32, path: u64, mode: u32) -> SysResult {
        let kind = match mode & libc::S_IFMT {
            0 => libc::S_IFREG,
            k @ (libc::S_IFREG | libc::S_IFIFO | libc::S_IFSOCK) => k,
            libc::S_IFCHR | libc::S_IFBLK => return err(libc::EPERM),
            _ => return err(libc::EINVAL),
        };
        let guest = self.path_arg(m, dirfd, path, false)?;
        let p = self.write_target(&guest)?.parent()?;
        // SAFETY: `d` is an open directory and `n` a NUL-terminated C string, alive for the call.
        crate::vfs::at(&p, |d, n| crate::vfs::cvt(unsafe { libc::mknodat(d, n, kind | (mode & 0o777), 0) }))?;
        self.changed(m, &guest);
        self.changed_entry(m, &guest);
        self.fsnotify_create(&guest);
        Ok(0)
    }

    /// `open` of the host FIFO `md` describes ([module docs](self)).
    pub(crate) fn fifo_open(&mut self, md: &std::fs::Metadata, guest: String, flags: i32, cloexec: bool) -> SysResult {
        let acc = flags & libc::O_ACCMODE;
        let reader = acc == libc::O_RDONLY;
        let nonblock = flags & libc::O_NONBLOCK != 0;
        let key = (md.dev(), md.ino());
        if !self.fifos.contains_key(&key) {
            let pipe = Pipe { id: self.net.key(), ..Pipe::default() };
            let f = Fifo { pipe: Rc::new(RefCell::new(pipe)), r_opens: 0, w_opens: 0, waiting: BTreeMap::new() };
            self.fifos.insert(key, f);
        }
        if acc == libc::O_RDWR {
            // Linux's `fifo_open` for `FMODE_READ | FMODE_WRITE`: a reader and a writer at once,
            // never waiting (POSIX leaves it undefined); partners waiting to open go on.
            let f = self.fifos.get_mut(&key).expect("inserted above");
            let mut p = f.pipe.borrow_mut();
            if p.readers == 0 && p.writers == 0 {
                p.buf.clear();
            }
            p.readers += 1;
            p.writers += 1;
            f.r_opens += 1;
            f.w_opens += 1;
            let id = p.id;
            drop(p);
            let kind = Kind::PipeRdWr(f.pipe.clone());
            let d =
                Description { kind, guest_path: guest, flags: flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC) };
            let fd = self.fds.insert(d, cloexec);
            self.io_ready(id);
            return Ok(fd? as u64);
        }
        let tid = self.current;
        let f = self.fifos.get_mut(&key).expect("inserted above");
        let id = f.pipe.borrow().id;
        match f.waiting.get(&tid).copied() {
            // Made again after a wait: it goes on once a partner is there or came and went.
            Some((r, since)) if r == reader => {
                let (partners, opens) = {
                    let p = f.pipe.borrow();
                    if reader {
                        (p.writers, f.w_opens)
                    } else {
                        (p.readers, f.r_opens)
                    }
                };
                if partners == 0 && opens == since {
                    return self.would_block(&[id]);
                }
                f.waiting.remove(&tid);
            }
            _ => {
                let mut p = f.pipe.borrow_mut();
                if p.readers == 0 && p.writers == 0 {
                    // Nobody has it open: what an earlier pipe held is gone.
                    p.buf.clear();
                }
                if !reader && nonblock && p.readers == 0 {
                    return err(libc::ENXIO);
                }
                let partners = if reader {
                    p.readers += 1;
                    f.r_opens += 1;
                    p.writers
                } else {
                    p.writers += 1;
                    f.w_opens += 1;
                    p.readers
                };
                drop(p);
                if partners == 0 && !nonblock {
                    let since = if reader { f.w_opens } else { f.r_opens };
                    f.waiting.insert(tid, (reader, since));
                    // A partner waiting for this end goes on now.
                    self.io_ready(id);
                    return self.would_block(&[id]);
                }
            }
        }
        let pipe = f.pipe.clone();
        let kind = if reader { Kind::PipeRead(pipe) } else { Kind::PipeWrite(pipe) };
        let d = Description { kind, guest_path: guest, flags: flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC) };
        let fd = match self.fds.insert(d, cloexec) {
            Ok(fd) => fd,
            // The description's drop took its end back; a partner may wait on it no more.
            Err(e) => {
                self.io_ready_all();
                return Err(e);
            }
        };
        self.io_ready(id);
        Ok(fd as u64)
    }
}
