//! Opening a host path beneath a directory descriptor so that nothing on the way (a symbolic
//! link, `..`, a `/proc` magic link) can lead out of that directory, whatever another process or
//! another run does to the directories meanwhile. This is what makes the sandbox's write checks
//! ([`crate::vfs`]) free of races: a path is checked by name, then changed through a descriptor
//! of its writable root, never by name from `/`.
//!
//! `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` (Linux 5.6) does it in one call:
//! the kernel refuses (`EXDEV`, `ELOOP`) any step that would leave the directory, atomically with
//! the lookup. Where the kernel lacks it (`ENOSYS`, or `EPERM` from a seccomp filter that does not
//! know it) the path is walked one component at a time, each opened with
//! `O_PATH | O_DIRECTORY | O_NOFOLLOW` relative to the previous one and the last with
//! `O_NOFOLLOW`: a component that has become a symbolic link fails (`ELOOP`, `ENOTDIR`) instead
//! of being followed. Both refuse paths with `..` components (the sandbox never makes any: guest
//! paths are normalised first).

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once `openat2` answered ENOSYS: every later open walks.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

fn cstr(s: &OsStr) -> std::io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::ENOENT))
}

/// The components of `rel`, all of them plain names (`.` dropped; `..`, `/` refused with EXDEV).
fn names(rel: &Path) -> std::io::Result<Vec<&OsStr>> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return Err(std::io::Error::from_raw_os_error(libc::EXDEV)),
        }
    }
    Ok(out)
}

fn fd_result(r: libc::c_long) -> std::io::Result<OwnedFd> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(r as i32) })
    }
}

/// Opens `rel` (relative, without `..`) beneath `root` with `open(2)` flags and mode, refusing
/// every way out of `root`. `O_CLOEXEC` is always added.
pub fn open_beneath(root: BorrowedFd<'_>, rel: &Path, flags: i32, mode: u32) -> std::io::Result<OwnedFd> {
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        match openat2_beneath(root, rel, flags, mode) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
            // Some seccomp filters answer EPERM for system calls they do not know: walk this
            // time (a real EPERM comes back from the walk as well).
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
            r => return r,
        }
    }
    open_walk(root, rel, flags, mode)
}

/// `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`.
pub fn openat2_beneath(root: BorrowedFd<'_>, rel: &Path, flags: i32, mode: u32) -> std::io::Result<OwnedFd> {
    let parts = names(rel)?;
    let joined: Vec<u8> = if parts.is_empty() { b".".to_vec() } else { rel.as_os_str().as_bytes().to_vec() };
    let path = cstr(OsStr::from_bytes(&joined))?;
    // SAFETY: open_how is plain data; all-zero is its documented default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    // The kernel refuses a mode without O_CREAT/O_TMPFILE.
    how.mode = if flags & libc::O_CREAT != 0 { u64::from(mode & 0o7777) } else { 0 };
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: the arguments are a valid descriptor, a NUL-terminated path and an open_how of the
    // size passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    fd_result(r)
}

/// The fallback: one component at a time, never following a symbolic link.
pub fn open_walk(root: BorrowedFd<'_>, rel: &Path, flags: i32, mode: u32) -> std::io::Result<OwnedFd> {
    let parts = names(rel)?;
    let Some((last, dirs)) = parts.split_last() else {
        return openat(root, OsStr::new("."), flags, mode);
    };
    let mut cur: Option<OwnedFd> = None;
    for d in dirs {
        let at = cur.as_ref().map_or(root, |f| f.as_fd());
        cur = Some(openat(at, d, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0)?);
    }
    let at = cur.as_ref().map_or(root, |f| f.as_fd());
    openat(at, last, flags | libc::O_NOFOLLOW, mode)
}

fn openat(at: BorrowedFd<'_>, name: &OsStr, flags: i32, mode: u32) -> std::io::Result<OwnedFd> {
    let c = cstr(name)?;
    // SAFETY: a valid descriptor and a NUL-terminated name.
    let r = unsafe { libc::openat(at.as_raw_fd(), c.as_ptr(), flags | libc::O_CLOEXEC, mode & 0o7777) };
    fd_result(libc::c_long::from(r))
}

/// The directory holding `rel`, opened beneath `root` (`O_PATH`), and the name of `rel` in it:
/// for the calls that change a directory entry (`mkdirat`, `unlinkat`, `renameat`, ...), which
/// then never follow anything but that one name. `rel` empty names `root` itself as `.`.
pub fn parent_beneath(root: BorrowedFd<'_>, rel: &Path) -> std::io::Result<(OwnedFd, CString)> {
    let parts = names(rel)?;
    let (name, dir) = match parts.split_last() {
        Some((last, _)) => (*last, rel.parent().unwrap_or(Path::new(""))),
        None => (OsStr::new("."), Path::new("")),
    };
    let fd = open_beneath(root, dir, libc::O_PATH | libc::O_DIRECTORY, 0)?;
    Ok((fd, cstr(name)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn dir(p: &Path) -> OwnedFd {
        std::fs::File::open(p).unwrap().into()
    }

    /// Both the kernel's way and the fallback refuse a symbolic link out, absolute or relative,
    /// as a directory on the way or as the file itself, and `..`; both open what is inside.
    #[test]
    fn neither_way_leaves_the_root() {
        let base = std::env::temp_dir().join(format!("ferrite-beneath-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (root, outside) = (base.join("root"), base.join("outside"));
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("abs")).unwrap();
        std::os::unix::fs::symlink("../outside", root.join("rel")).unwrap();
        std::os::unix::fs::symlink(outside.join("f"), root.join("file")).unwrap();
        let fd = dir(&root);
        let create = libc::O_CREAT | libc::O_WRONLY;
        for open in [openat2_beneath, open_walk] {
            for bad in ["abs/x", "rel/x", "file", "../outside/x", "sub/../../outside/x"] {
                assert!(open(fd.as_fd(), Path::new(bad), create, 0o644).is_err(), "{bad} escaped");
            }
            assert!(open(fd.as_fd(), Path::new("sub/ok"), create, 0o644).is_ok());
            assert!(open(fd.as_fd(), Path::new(""), libc::O_PATH | libc::O_DIRECTORY, 0).is_ok());
        }
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "nothing was created outside");
        let (p, name) = parent_beneath(fd.as_fd(), Path::new("sub/ok")).unwrap();
        assert_eq!(name.as_bytes(), b"ok");
        // SAFETY: valid descriptor and name.
        assert_eq!(unsafe { libc::unlinkat(p.as_raw_fd(), name.as_ptr(), 0) }, 0);
        assert!(parent_beneath(fd.as_fd(), Path::new("abs/x")).is_err());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
