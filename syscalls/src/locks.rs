//! Advisory file locks between the machine's processes: `flock(2)` and `fcntl(2)`'s record
//! locks, POSIX (`F_SETLK`, `F_SETLKW`, `F_GETLK`: owned by the process, released when it closes
//! any descriptor of the file or ends) and open-file-description ones (`F_OFD_*`: owned by the
//! description, as `flock`'s are, released when its last descriptor closes), as Linux's
//! `fs/locks.c` keeps them. A file is its host device and inode, so every name and every
//! description of it share its locks; `flock` locks and record locks do not see each other.
//!
//! Once every process ran alone and every lock was granted; with `fork`, SQLite's processes
//! on one database lost each other's inserts. A conflicting request fails (`EAGAIN` for
//! `F_SETLK`, `EWOULDBLOCK` for `LOCK_NB`) or blocks on [`LOCK_KEY`] until some lock is
//! released or a descriptor closes (the closes' [`Kernel::io_ready_all`] wakes it), then tries
//! again. Left out: `EDEADLK` for POSIX waits that would deadlock (the run's deadlock finding
//! names them instead), mandatory locks, leases.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use emu::Machine;

use crate::fd::{Description, Kind};
use crate::{err, Errno, Kernel, SysResult};

/// A file as its host device and inode.
type FileId = (u64, u64);

/// The wait key of every thread blocked on a lock: one for all, as releases are rare and each
/// waiter looks again.
pub(crate) const LOCK_KEY: u64 = 1 << 61;

/// Whom a lock belongs to.
#[derive(Clone, Debug)]
pub(crate) enum Owner {
    /// A POSIX record lock's process.
    Process(u32),
    /// A `flock` or OFD lock's open file description (gone when its last descriptor is).
    Desc(Weak<RefCell<Description>>),
}

impl Owner {
    fn same(&self, o: &Owner) -> bool {
        match (self, o) {
            (Owner::Process(a), Owner::Process(b)) => a == b,
            (Owner::Desc(a), Owner::Desc(b)) => Weak::ptr_eq(a, b),
            _ => false,
        }
    }

    fn alive(&self) -> bool {
        match self {
            Owner::Process(_) => true,
            Owner::Desc(d) => d.strong_count() > 0,
        }
    }
}

/// One lock: a byte range `[start, end)` of a file (`end` `u64::MAX`: to the end, wherever it
/// is), shared or exclusive.
#[derive(Clone, Debug)]
pub(crate) struct Lock {
    /// The host file's device and inode.
    file: FileId,
    /// A `flock` lock (whole file), not a record lock.
    flock: bool,
    owner: Owner,
    write: bool,
    start: u64,
    end: u64,
}

/// Every lock held in the machine, in the order taken (so conflicts are found in the same
/// order by every run).
#[derive(Clone, Debug, Default)]
pub(crate) struct Locks {
    list: Vec<Lock>,
}

impl Locks {
    /// The first lock another owner holds that a `write` (or read) lock of `[start, end)`
    /// would conflict with.
    fn conflict(&self, file: FileId, flock: bool, owner: &Owner, write: bool, start: u64, end: u64) -> Option<&Lock> {
        self.list.iter().find(|l| {
            l.file == file
                && l.flock == flock
                && (write || l.write)
                && l.start < end
                && start < l.end
                && !l.owner.same(owner)
                && l.owner.alive()
        })
    }

    /// Sets `owner`'s lock of `[start, end)` to `kind` (`None`: unlocks it), splitting the
    /// ranges it held there (Linux's `posix_lock_inode`; adjacent ranges are not merged).
    fn set(&mut self, file: FileId, flock: bool, owner: Owner, kind: Option<bool>, start: u64, end: u64) {
        self.list.retain(|l| l.owner.alive());
        let mut kept = Vec::with_capacity(self.list.len() + 2);
        for l in self.list.drain(..) {
            if l.file != file || l.flock != flock || !l.owner.same(&owner) || l.end <= start || end <= l.start {
                kept.push(l);
                continue;
            }
            if l.start < start {
                kept.push(Lock { end: start, ..l.clone() });
            }
            if end < l.end {
                kept.push(Lock { start: end, ..l });
            }
        }
        if let Some(write) = kind {
            kept.push(Lock { file, flock, owner, write, start, end });
        }
        self.list = kept;
    }

    /// Process `pid`'s record locks on `file` go (it closed a descriptor of the file), or all of
    /// its record locks (`None`: it ended). Whether any went.
    pub(crate) fn release_process(&mut self, pid: u32, file: Option<FileId>) -> bool {
        let before = self.list.len();
        self.list.retain(|l| !(matches!(l.owner, Owner::Process(p) if p == pid) && file.is_none_or(|f| f == l.file)));
        self.list.len() != before
    }

    /// Whether process `pid` holds a record lock (so its closes need to look).
    pub(crate) fn held_by(&self, pid: u32) -> bool {
        self.list.iter().any(|l| matches!(l.owner, Owner::Process(p) if p == pid))
    }

    /// A copy for a snapshot whose descriptions are copies: `map` gives each description's
    /// copy (`None`: not copied, its locks are gone with it).
    pub(crate) fn copy_with(
        &self,
        map: &dyn Fn(*const RefCell<Description>) -> Option<Rc<RefCell<Description>>>,
    ) -> Locks {
        let list = self
            .list
            .iter()
            .filter_map(|l| {
                let owner = match &l.owner {
                    Owner::Process(p) => Owner::Process(*p),
                    Owner::Desc(d) => Owner::Desc(Rc::downgrade(&map(d.as_ptr())?)),
                };
                Some(Lock { owner, ..l.clone() })
            })
            .collect();
        Locks { list }
    }
}

/// `struct flock`'s `l_type` values.
const F_RDLCK: i16 = libc::F_RDLCK as i16;
const F_WRLCK: i16 = libc::F_WRLCK as i16;
const F_UNLCK: i16 = libc::F_UNLCK as i16;

impl Kernel {
    /// The device and inode of descriptor `fd`'s file, if it is a host file (locks on other
    /// descriptors are granted: nothing else can name them).
    fn lock_file(&self, fd: i32) -> Result<(Rc<RefCell<Description>>, Option<FileId>), Errno> {
        use std::os::unix::fs::MetadataExt;
        let d = self.desc(fd)?;
        let id = match &d.borrow().kind {
            Kind::File { file, .. } => file.metadata().ok().map(|md| (md.dev(), md.ino())),
            _ => None,
        };
        Ok((d, id))
    }

    /// flock(2).
    pub(crate) fn flock(&mut self, fd: i32, op: i32) -> SysResult {
        let (d, file) = self.lock_file(fd)?;
        let kind = match op & !libc::LOCK_NB {
            libc::LOCK_SH => Some(false),
            libc::LOCK_EX => Some(true),
            libc::LOCK_UN => None,
            _ => return err(libc::EINVAL),
        };
        let Some(file) = file else { return Ok(0) };
        let owner = Owner::Desc(Rc::downgrade(&d));
        if let Some(write) = kind {
            if self.locks.conflict(file, true, &owner, write, 0, u64::MAX).is_some() {
                if op & libc::LOCK_NB != 0 {
                    return err(libc::EWOULDBLOCK);
                }
                return self.would_block(&[LOCK_KEY]);
            }
        }
        self.locks.set(file, true, owner, kind, 0, u64::MAX);
        self.io_ready(LOCK_KEY);
        Ok(0)
    }

    /// fcntl(2)'s `F_GETLK`, `F_SETLK`, `F_SETLKW` and their `F_OFD_` forms, `arg` pointing to
    /// a `struct flock` (type, whence, start, length, pid).
    pub(crate) fn record_lock(&mut self, m: &mut Machine, fd: i32, cmd: i32, arg: u64) -> SysResult {
        let (d, file) = self.lock_file(fd)?;
        let mut b = [0u8; 32];
        m.read(arg, &mut b)?;
        let ty = i16::from_le_bytes([b[0], b[1]]);
        let whence = i16::from_le_bytes([b[2], b[3]]);
        let l_start = i64::from_le_bytes(b[8..16].try_into().unwrap_or_default());
        let l_len = i64::from_le_bytes(b[16..24].try_into().unwrap_or_default());
        let l_pid = i32::from_le_bytes(b[24..28].try_into().unwrap_or_default());
        let ofd = matches!(cmd, libc::F_OFD_GETLK | libc::F_OFD_SETLK | libc::F_OFD_SETLKW);
        if ofd && l_pid != 0 {
            return err(libc::EINVAL);
        }
        let kind = match ty {
            F_RDLCK => Some(false),
            F_WRLCK => Some(true),
            F_UNLCK => None,
            _ => return err(libc::EINVAL),
        };
        // Linux's `flock_to_posix_lock`: the range from whence, a negative length before start.
        let base: i64 = match i32::from(whence) {
            libc::SEEK_SET => 0,
            libc::SEEK_CUR | libc::SEEK_END => {
                let mut dd = d.borrow_mut();
                match &mut dd.kind {
                    Kind::File { file, .. } if i32::from(whence) == libc::SEEK_CUR => {
                        use std::io::Seek;
                        file.stream_position().map_err(|_| Errno(libc::EINVAL))? as i64
                    }
                    Kind::File { file, .. } => file.metadata().map_err(|_| Errno(libc::EINVAL))?.len() as i64,
                    _ => 0,
                }
            }
            _ => return err(libc::EINVAL),
        };
        let start = base.checked_add(l_start).ok_or(Errno(libc::EOVERFLOW))?;
        let (start, end) = match l_len {
            0 => (start, u64::MAX),
            n if n > 0 => (start, start.checked_add(n).map_or(u64::MAX, |e| e as u64)),
            n => (start.checked_add(n).ok_or(Errno(libc::EINVAL))?, start as u64),
        };
        if start < 0 {
            return err(libc::EINVAL);
        }
        let start = start as u64;
        let owner = if ofd { Owner::Desc(Rc::downgrade(&d)) } else { Owner::Process(self.pid) };
        let getlk = matches!(cmd, libc::F_GETLK | libc::F_OFD_GETLK);
        if getlk {
            // F_UNLCK asks nothing (EINVAL, as Linux's `fcntl_getlk`).
            let Some(write) = kind else { return err(libc::EINVAL) };
            let found = file.and_then(|f| self.locks.conflict(f, false, &owner, write, start, end));
            match found {
                None => m.write(arg, &F_UNLCK.to_le_bytes(), false)?,
                Some(l) => {
                    let mut o = b;
                    o[0..2].copy_from_slice(&(if l.write { F_WRLCK } else { F_RDLCK }).to_le_bytes());
                    o[2..4].copy_from_slice(&(libc::SEEK_SET as i16).to_le_bytes());
                    o[8..16].copy_from_slice(&(l.start as i64).to_le_bytes());
                    let len = if l.end == u64::MAX { 0 } else { (l.end - l.start) as i64 };
                    o[16..24].copy_from_slice(&len.to_le_bytes());
                    let pid = match l.owner {
                        Owner::Process(p) => p as i32,
                        Owner::Desc(_) => -1,
                    };
                    o[24..28].copy_from_slice(&pid.to_le_bytes());
                    m.write(arg, &o, false)?;
                }
            }
            return Ok(0);
        }
        // A read lock needs a descriptor open for reading, a write lock one for writing.
        let acc = d.borrow().flags & libc::O_ACCMODE;
        match kind {
            Some(false) if acc == libc::O_WRONLY => return err(libc::EBADF),
            Some(true) if acc == libc::O_RDONLY => return err(libc::EBADF),
            _ => {}
        }
        let Some(file) = file else { return Ok(0) };
        if let Some(write) = kind {
            if self.locks.conflict(file, false, &owner, write, start, end).is_some() {
                if matches!(cmd, libc::F_SETLK | libc::F_OFD_SETLK) {
                    return err(libc::EAGAIN);
                }
                return self.would_block(&[LOCK_KEY]);
            }
        }
        self.locks.set(file, false, owner, kind, start, end);
        self.io_ready(LOCK_KEY);
        Ok(0)
    }

    /// The running process closed descriptor `desc` (it may have been its file's last): its
    /// record locks on that file go, as Linux's `filp_close` → `locks_remove_posix`.
    pub(crate) fn closed_lock_file(&mut self, desc: &Rc<RefCell<Description>>) {
        use std::os::unix::fs::MetadataExt;
        if !self.locks.held_by(self.pid) {
            return;
        }
        let file = match &desc.borrow().kind {
            Kind::File { file, .. } => file.metadata().ok().map(|md| (md.dev(), md.ino())),
            _ => None,
        };
        if let Some(f) = file {
            if self.locks.release_process(self.pid, Some(f)) {
                self.io_ready(LOCK_KEY);
            }
        }
    }
}
