//! inotify: `inotify_init`, `inotify_init1`, `inotify_add_watch`, `inotify_rm_watch`, and reading
//! events, for the changes the guest makes itself.
//!
//! Events come from the emulated kernel's own file operations, never from the host: a change
//! another program makes to a host file while ferrite runs is not seen (it would make the run
//! depend on host timing). Each operation that Linux's `fsnotify` hooks see reports what they
//! report, in their order ([`Kernel::fsnotify`]):
//!
//! - creating a name (`open` with `O_CREAT` of a new file, `mkdir`, `symlink`, `link`, `mknod`,
//!   an `AF_UNIX` `bind`): `IN_CREATE` to the directory (`IN_ISDIR` for a directory), and for
//!   `link` `IN_ATTRIB` to the file (its link count);
//! - `open`: `IN_OPEN` (after `IN_MODIFY` of an `O_TRUNC`); `close` of the last descriptor of
//!   an open file description: `IN_CLOSE_WRITE` or `IN_CLOSE_NOWRITE`;
//! - `read`/`pread`/`readv` that read bytes: `IN_ACCESS`; `write`/`pwrite`/`writev` that wrote,
//!   `truncate`, `ftruncate`: `IN_MODIFY`;
//! - `chmod`, `chown`, `utimensat` and friends: `IN_ATTRIB`;
//! - `unlink`: `IN_ATTRIB` to the file, `IN_DELETE` to the directory, and, as the file had no
//!   other name, `IN_DELETE_SELF` and `IN_IGNORED` (its watches go); `rmdir`: `IN_DELETE |
//!   IN_ISDIR`, then the directory's `IN_DELETE_SELF` and `IN_IGNORED`;
//! - `rename`: `IN_MOVED_FROM` and `IN_MOVED_TO` with one cookie, `IN_MOVE_SELF` to what moved,
//!   and what it replaced is unlinked as above.
//!
//! Events about a file go to watches on the file itself (no name) and on its directory (with
//! the name), as Linux's `fsnotify_parent`. A watch is on the host file's identity (device and
//! inode), as Linux's on the inode: it follows renames, and a file watched through two names is
//! one watch (the same descriptor). An event equal to the last one queued is merged into it
//! (`inotify_merge`); at 16,384 queued events one `IN_Q_OVERFLOW` is queued instead
//! (`max_queued_events`). A read returns as many whole events as fit (EINVAL if the first does
//! not), blocks while there is none (EAGAIN with `IN_NONBLOCK`) and is a scheduling point; the
//! descriptor is readable in `poll`, `select` and epoll while events are queued, and `FIONREAD`
//! gives their size.
//!
//! Left out: a file still open when its last name goes is deleted (`IN_DELETE_SELF`) at once,
//! not at its last close; the close of a description by `exit`, `execve`, `dup2` or
//! `close_range` reports no `IN_CLOSE_*`; `getdents` reports no `IN_ACCESS`; writes through a shared mapping report nothing (as
//! on Linux); `IN_EXCL_UNLINK` is accepted and changes nothing; `IN_UNMOUNT` never happens;
//! `/proc/sys/fs/inotify` limits on watches and instances are not enforced.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::{Rc, Weak};

use emu::Machine;

use crate::fd::{Description, Kind};
use crate::vfs::Target;
use crate::{err, Errno, Kernel, SysResult};

/// `IN_ACCESS`: a file was read.
pub const IN_ACCESS: u32 = 0x1;
/// `IN_MODIFY`: a file was written or truncated.
pub const IN_MODIFY: u32 = 0x2;
/// `IN_ATTRIB`: metadata changed (mode, owner, times, link count).
pub const IN_ATTRIB: u32 = 0x4;
/// `IN_CLOSE_WRITE`: a file open for writing was closed.
pub const IN_CLOSE_WRITE: u32 = 0x8;
/// `IN_CLOSE_NOWRITE`: a file open read-only was closed.
pub const IN_CLOSE_NOWRITE: u32 = 0x10;
/// `IN_OPEN`: a file was opened.
pub const IN_OPEN: u32 = 0x20;
/// `IN_MOVED_FROM`: a name left the watched directory.
pub const IN_MOVED_FROM: u32 = 0x40;
/// `IN_MOVED_TO`: a name arrived in the watched directory.
pub const IN_MOVED_TO: u32 = 0x80;
/// `IN_CREATE`: a name was created in the watched directory.
pub const IN_CREATE: u32 = 0x100;
/// `IN_DELETE`: a name was removed from the watched directory.
pub const IN_DELETE: u32 = 0x200;
/// `IN_DELETE_SELF`: the watched object was deleted.
pub const IN_DELETE_SELF: u32 = 0x400;
/// `IN_MOVE_SELF`: the watched object was moved.
pub const IN_MOVE_SELF: u32 = 0x800;
const IN_ALL_EVENTS: u32 = 0xfff;
const IN_Q_OVERFLOW: u32 = 0x4000;
const IN_IGNORED: u32 = 0x8000;
const IN_ONLYDIR: u32 = 0x0100_0000;
const IN_DONT_FOLLOW: u32 = 0x0200_0000;
const IN_EXCL_UNLINK: u32 = 0x0400_0000;
const IN_MASK_CREATE: u32 = 0x1000_0000;
const IN_MASK_ADD: u32 = 0x2000_0000;
/// `IN_ISDIR`: the event is about a directory.
pub const IN_ISDIR: u32 = 0x4000_0000;
const IN_ONESHOT: u32 = 0x8000_0000;
/// Linux's default `/proc/sys/fs/inotify/max_queued_events`.
const MAX_QUEUED: usize = 16384;

/// The identity of a watched object: the host file's device and inode.
pub(crate) type Ident = (u64, u64);

/// One queued event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The watch descriptor (-1 for `IN_Q_OVERFLOW`).
    pub wd: i32,
    /// What happened (`IN_*`, with `IN_ISDIR`).
    pub mask: u32,
    /// Ties an `IN_MOVED_FROM` to its `IN_MOVED_TO`; 0 otherwise.
    pub cookie: u32,
    /// The name in the watched directory, for an event about an entry of it.
    pub name: Vec<u8>,
}

impl Event {
    /// Its size in a read: `struct inotify_event` and the name, NUL-padded to a multiple of
    /// the structure's 16 bytes (Linux's `round_up(len + 1, sizeof(struct inotify_event))`).
    fn size(&self) -> usize {
        16 + if self.name.is_empty() { 0 } else { (self.name.len() + 1).div_ceil(16) * 16 }
    }

    fn bytes(&self, out: &mut Vec<u8>) {
        let len = self.size() - 16;
        out.extend_from_slice(&self.wd.to_le_bytes());
        out.extend_from_slice(&self.mask.to_le_bytes());
        out.extend_from_slice(&self.cookie.to_le_bytes());
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.extend_from_slice(&self.name);
        out.resize(out.len() + len - self.name.len(), 0);
    }
}

/// A watch: what it watches and for which events.
#[derive(Clone, Debug)]
pub struct Watch {
    /// The watched object.
    pub ident: Ident,
    /// The events asked for, with `IN_ONESHOT` and the other flags as given.
    pub mask: u32,
}

/// An inotify instance (what `inotify_init1` returns a descriptor of).
#[derive(Clone, Debug)]
pub struct Inotify {
    /// Its readiness key.
    pub id: u64,
    /// Events not read yet, oldest first.
    pub queue: VecDeque<Event>,
    /// Its watches by descriptor.
    pub watches: BTreeMap<i32, Watch>,
    /// The last watch descriptor given out (Linux hands them out cyclically from 1).
    pub last_wd: i32,
}

impl Inotify {
    /// Queues `e`, unless it equals the last event queued, or the queue is full (then one
    /// `IN_Q_OVERFLOW` ends it).
    fn push(&mut self, e: Event) {
        if self.queue.back() == Some(&e) {
            return;
        }
        if self.queue.len() >= MAX_QUEUED {
            if self.queue.back().is_none_or(|b| b.mask != IN_Q_OVERFLOW) {
                self.queue.push_back(Event { wd: -1, mask: IN_Q_OVERFLOW, cookie: 0, name: Vec::new() });
            }
            return;
        }
        self.queue.push_back(e);
    }

    /// Bytes a read could take now (`FIONREAD`).
    pub fn pending(&self) -> usize {
        self.queue.iter().map(Event::size).sum()
    }
}

/// Every inotify instance of the run, in creation order, and the move cookies given out.
#[derive(Debug, Default)]
pub struct Registry {
    /// The instances; one whose descriptors all closed is dropped at the next event.
    pub(crate) instances: Vec<Weak<RefCell<Inotify>>>,
    /// The last cookie given to a rename.
    pub(crate) cookie: u32,
}

impl Kernel {
    pub(crate) fn inotify_init1(&mut self, flags: i32) -> SysResult {
        if flags & !(libc::IN_NONBLOCK | libc::IN_CLOEXEC) != 0 {
            return err(libc::EINVAL);
        }
        let ino = Rc::new(RefCell::new(Inotify {
            id: self.net.key(),
            queue: VecDeque::new(),
            watches: BTreeMap::new(),
            last_wd: 0,
        }));
        self.inotify.instances.push(Rc::downgrade(&ino));
        let fl = libc::O_RDONLY | if flags & libc::IN_NONBLOCK != 0 { libc::O_NONBLOCK } else { 0 };
        let d = Description { kind: Kind::Inotify(ino), guest_path: "anon_inode:inotify".into(), flags: fl };
        Ok(self.fds.insert(d, flags & libc::IN_CLOEXEC != 0)? as u64)
    }

    fn inotify_of(&self, fd: i32) -> Result<Rc<RefCell<Inotify>>, Errno> {
        match &self.fds.get(fd)?.desc.borrow().kind {
            Kind::Inotify(i) => Ok(i.clone()),
            _ => err(libc::EINVAL),
        }
    }

    /// The identity of the object at guest path `guest` (not following a last link), and
    /// whether it is a directory.
    fn ident_of(&self, guest: &str) -> Option<(Ident, bool)> {
        use std::os::unix::fs::MetadataExt;
        let Ok(Target::Host { host, .. }) = self.resolve(guest) else { return None };
        let md = std::fs::symlink_metadata(host).ok()?;
        Some(((md.dev(), md.ino()), md.is_dir()))
    }

    pub(crate) fn inotify_add_watch(&mut self, m: &mut Machine, fd: i32, path: u64, mask: u32) -> SysResult {
        let ino = self.inotify_of(fd)?;
        // As Linux's inotify_add_watch: no known bit at all (a mask of flags alone is taken,
        // and then watches nothing), or both MASK_ADD and MASK_CREATE: EINVAL (before the
        // path is looked at).
        const ALL_BITS: u32 = IN_ALL_EVENTS
            | IN_Q_OVERFLOW
            | IN_IGNORED
            | IN_ONLYDIR
            | IN_DONT_FOLLOW
            | IN_EXCL_UNLINK
            | IN_MASK_CREATE
            | IN_MASK_ADD
            | IN_ISDIR
            | IN_ONESHOT
            | 0x2000; // IN_UNMOUNT
        if mask & ALL_BITS == 0 || mask & (IN_MASK_ADD | IN_MASK_CREATE) == IN_MASK_ADD | IN_MASK_CREATE {
            return err(libc::EINVAL);
        }
        let guest = self.path_arg(m, libc::AT_FDCWD, path, mask & IN_DONT_FOLLOW == 0)?;
        let (ident, dir) = self.ident_of(&guest).ok_or(Errno(libc::ENOENT))?;
        if mask & IN_ONLYDIR != 0 && !dir {
            return err(libc::ENOTDIR);
        }
        let mut i = ino.borrow_mut();
        let keep = IN_ALL_EVENTS | IN_ONESHOT | IN_EXCL_UNLINK;
        if let Some((&wd, w)) = i.watches.iter_mut().find(|(_, w)| w.ident == ident) {
            if mask & IN_MASK_CREATE != 0 {
                return err(libc::EEXIST);
            }
            w.mask = if mask & IN_MASK_ADD != 0 { w.mask | (mask & keep) } else { mask & keep };
            return Ok(wd as u64);
        }
        let mut wd = i.last_wd;
        loop {
            wd = if wd == i32::MAX { 1 } else { wd + 1 };
            if !i.watches.contains_key(&wd) {
                break;
            }
        }
        i.last_wd = wd;
        i.watches.insert(wd, Watch { ident, mask: mask & keep });
        Ok(wd as u64)
    }

    pub(crate) fn inotify_rm_watch(&mut self, fd: i32, wd: i32) -> SysResult {
        let ino = self.inotify_of(fd)?;
        let mut i = ino.borrow_mut();
        if i.watches.remove(&wd).is_none() {
            return err(libc::EINVAL);
        }
        i.push(Event { wd, mask: IN_IGNORED, cookie: 0, name: Vec::new() });
        let id = i.id;
        drop(i);
        self.io_ready(id);
        Ok(0)
    }

    pub(crate) fn inotify_read(
        &mut self,
        ino: &Rc<RefCell<Inotify>>,
        len: usize,
        nonblock: bool,
    ) -> Result<Vec<u8>, Errno> {
        let mut i = ino.borrow_mut();
        let Some(first) = i.queue.front() else {
            if nonblock {
                return err(libc::EAGAIN);
            }
            let id = i.id;
            drop(i);
            return self.would_block(&[id]);
        };
        if first.size() > len {
            return err(libc::EINVAL);
        }
        let mut out = Vec::new();
        while let Some(e) = i.queue.front() {
            if out.len() + e.size() > len {
                break;
            }
            e.bytes(&mut out);
            i.queue.pop_front();
        }
        Ok(out)
    }

    /// Whether any inotify instance is open: else no file operation looks for watches.
    pub(crate) fn inotify_watching(&self) -> bool {
        !self.inotify.instances.is_empty()
    }

    /// Queues `mask` (and `cookie`, `name`) on every watch of `ident`, in every instance, in the
    /// order the instances were made; removes one-shot watches that fired. With `gone`, the
    /// object was deleted: every watch of it is removed with `IN_IGNORED`.
    fn queue_event(&mut self, ident: Ident, mask: u32, cookie: u32, name: &[u8], gone: bool) {
        self.inotify.instances.retain(|w| w.strong_count() > 0);
        let instances: Vec<Rc<RefCell<Inotify>>> = self.inotify.instances.iter().filter_map(Weak::upgrade).collect();
        for ino in instances {
            let mut i = ino.borrow_mut();
            let wds: Vec<(i32, u32)> =
                i.watches.iter().filter(|(_, w)| w.ident == ident).map(|(wd, w)| (*wd, w.mask)).collect();
            if wds.is_empty() {
                continue;
            }
            for (wd, wmask) in wds {
                if mask & wmask & IN_ALL_EVENTS != 0 {
                    i.push(Event { wd, mask, cookie, name: name.to_vec() });
                    if wmask & IN_ONESHOT != 0 && !gone {
                        i.watches.remove(&wd);
                        i.push(Event { wd, mask: IN_IGNORED, cookie: 0, name: Vec::new() });
                    }
                }
                if gone && i.watches.remove(&wd).is_some() {
                    i.push(Event { wd, mask: IN_IGNORED, cookie: 0, name: Vec::new() });
                }
            }
            let id = i.id;
            drop(i);
            self.io_ready(id);
        }
    }

    /// Reports `mask` about the object at guest path `guest` (identity `ident`, a directory if
    /// `dir`): to its own watches, and, with its name, to its directory's, as Linux's
    /// `fsnotify_parent`. `mask` is one of the events both see (access, modify, attrib, open,
    /// close).
    pub(crate) fn fsnotify(&mut self, guest: &str, ident: Option<(Ident, bool)>, mask: u32) {
        let Some((ident, dir)) = ident.or_else(|| self.ident_of(guest)) else { return };
        let isdir = if dir { IN_ISDIR } else { 0 };
        // The directory's watches first, then the object's (Linux's fsnotify_handle_event).
        self.fsnotify_entry(guest, mask | isdir, 0);
        self.queue_event(ident, mask | isdir, 0, &[], false);
    }

    /// Reports `mask` (with `IN_ISDIR` if it is about a directory) to the watches of the
    /// directory holding `guest`, with its name.
    pub(crate) fn fsnotify_entry(&mut self, guest: &str, mask: u32, cookie: u32) {
        let parent = crate::vfs::normalize(guest, "..");
        let name = guest.rsplit('/').next().unwrap_or("").as_bytes().to_vec();
        if let Some((pid, _)) = self.ident_of(&parent) {
            self.queue_event(pid, mask, cookie, &name, false);
        }
    }

    /// Reports `mask` to the watches of `ident` itself.
    pub(crate) fn fsnotify_self(&mut self, ident: Ident, mask: u32) {
        self.queue_event(ident, mask, 0, &[], false);
    }

    /// A new name `guest` was created (a file, directory, link, node or socket).
    pub(crate) fn fsnotify_create(&mut self, guest: &str) {
        if !self.inotify_watching() {
            return;
        }
        let dir = self.ident_of(guest).is_some_and(|(_, d)| d);
        self.fsnotify_entry(guest, IN_CREATE | if dir { IN_ISDIR } else { 0 }, 0);
    }

    /// The identity of what `guest` names, looked at before an unlink, rmdir or rename (which
    /// of its events follow depends on it): its identity, whether a directory, and its link
    /// count. `None` when nobody watches.
    pub(crate) fn fsnotify_before_remove(&self, guest: &str) -> Option<(Ident, bool, u64)> {
        use std::os::unix::fs::MetadataExt;
        if !self.inotify_watching() {
            return None;
        }
        let Ok(Target::Host { host, .. }) = self.resolve(guest) else { return None };
        let md = std::fs::symlink_metadata(host).ok()?;
        Some(((md.dev(), md.ino()), md.is_dir(), md.nlink()))
    }

    /// `guest` (what [`Kernel::fsnotify_before_remove`] saw) lost its name: as Linux's
    /// `vfs_unlink` and `vfs_rmdir`, a file's link count changed (`IN_ATTRIB`), the directory
    /// lost the entry (`IN_DELETE`), and an object with no name left is deleted
    /// (`IN_DELETE_SELF`, then its watches go with `IN_IGNORED`).
    pub(crate) fn fsnotify_removed(&mut self, guest: &str, seen: Option<(Ident, bool, u64)>) {
        let Some((ident, dir, nlink)) = seen else { return };
        if !dir {
            self.queue_event(ident, IN_ATTRIB, 0, &[], false);
        }
        self.fsnotify_entry(guest, IN_DELETE | if dir { IN_ISDIR } else { 0 }, 0);
        if dir || nlink <= 1 {
            self.queue_event(ident, IN_DELETE_SELF, 0, &[], true);
        }
    }

    /// `from` was renamed to `to` (`moved` is what moved, `replaced` what was at `to`), as
    /// Linux's `fsnotify_move`: `IN_MOVED_FROM` and `IN_MOVED_TO` with one new cookie, the
    /// replaced file's link count (`IN_ATTRIB`), `IN_MOVE_SELF`, then the replaced object's
    /// deletion if it had no other name.
    pub(crate) fn fsnotify_moved(
        &mut self,
        from: &str,
        to: &str,
        moved: Option<(Ident, bool, u64)>,
        replaced: Option<(Ident, bool, u64)>,
    ) {
        let Some((ident, dir, _)) = moved else { return };
        self.inotify.cookie = self.inotify.cookie.wrapping_add(1);
        let cookie = self.inotify.cookie;
        let isdir = if dir { IN_ISDIR } else { 0 };
        self.fsnotify_entry(from, IN_MOVED_FROM | isdir, cookie);
        self.fsnotify_entry(to, IN_MOVED_TO | isdir, cookie);
        if let Some((r, rdir, _)) = replaced {
            if !rdir {
                self.queue_event(r, IN_ATTRIB, 0, &[], false);
            }
        }
        self.queue_event(ident, IN_MOVE_SELF | isdir, 0, &[], false);
        if let Some((r, rdir, nlink)) = replaced {
            if r != ident && (rdir || nlink <= 1) {
                self.queue_event(r, IN_DELETE_SELF, 0, &[], true);
            }
        }
    }

    /// The open file description `d` is being closed for the last time: `IN_CLOSE_WRITE` or
    /// `IN_CLOSE_NOWRITE`.
    pub(crate) fn fsnotify_close(&mut self, d: &Description) {
        use std::os::unix::fs::MetadataExt;
        let ident = match &d.kind {
            Kind::File { file, .. } => file.metadata().ok().map(|md| ((md.dev(), md.ino()), false)),
            Kind::Dir { host, .. } => std::fs::metadata(host).ok().map(|md| ((md.dev(), md.ino()), true)),
            _ => return,
        };
        let mask = if d.flags & libc::O_ACCMODE == libc::O_RDONLY { IN_CLOSE_NOWRITE } else { IN_CLOSE_WRITE };
        let guest = d.guest_path.clone();
        self.fsnotify(&guest, ident, mask);
    }

    /// Descriptor `fd` was read from (`IN_ACCESS`) or written to (`IN_MODIFY`), if it is a file.
    pub(crate) fn fsnotify_fd(&mut self, fd: i32, mask: u32) {
        use std::os::unix::fs::MetadataExt;
        let Ok(f) = self.fds.get(fd) else { return };
        let d = f.desc.borrow();
        let Kind::File { file, .. } = &d.kind else { return };
        let ident = file.metadata().ok().map(|md| ((md.dev(), md.ino()), false));
        let guest = d.guest_path.clone();
        drop(d);
        self.fsnotify(&guest, ident, mask);
    }
}
