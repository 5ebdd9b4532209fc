//! `openat2`: `openat` with its flags checked strictly and the path walked under the
//! `RESOLVE_*` rules of `struct open_how`.
//!
//! Follows Linux's `fs/open.c` (`do_sys_openat2`, `build_open_flags`) and `fs/namei.c`: a
//! `size` below `OPEN_HOW_SIZE_VER0` (24) is EINVAL, one above a page E2BIG, and the bytes
//! beyond the structure this kernel knows must be zero (E2BIG, `copy_struct_from_user`);
//! unknown open flags (the upper 32 bits included) or resolve flags are EINVAL, as are
//! `RESOLVE_BENEATH` with `RESOLVE_IN_ROOT`, a mode with bits beyond `07777` when creating and
//! any mode when not; `RESOLVE_CACHED` with `O_CREAT`, `O_TRUNC` or `O_TMPFILE` is EAGAIN (and
//! otherwise changes nothing: every lookup here is "cached").
//!
//! The walk, component by component in the guest's namespace ([`Kernel::link_target`]):
//! `RESOLVE_NO_SYMLINKS` refuses every symbolic link on the way (ELOOP), the last one too
//! unless it is not followed (`O_NOFOLLOW`); `RESOLVE_NO_MAGICLINKS` refuses `/proc`'s magic
//! links (`/proc/self/fd/N`, `/proc/self/exe`, `cwd`, `root`: ELOOP); `RESOLVE_BENEATH` keeps
//! the walk below the directory of `dirfd` (an absolute path, an absolute link, a `..` above it
//! or a magic link: EXDEV); `RESOLVE_IN_ROOT` takes that directory as the root (absolute paths,
//! absolute links and `..` stay inside it; a magic link is EXDEV); `RESOLVE_NO_XDEV` refuses to
//! cross a mount point (EXDEV). The guest's mounts are those its `/proc/self/mounts` shows: the
//! root, `/proc`, `/sys` and the PM mount. Then the file is opened as `openat` opens it.
//!
//! Left out: the host's own mounts below the root (the guest sees one file system there); a
//! rename racing with the walk (`-EAGAIN` retries in Linux) cannot happen, as one thread runs.

use std::collections::VecDeque;

use emu::Machine;

use crate::vfs::{normalize, Target, VirtualFile, MAX_LINKS};
use crate::{err, Errno, Kernel, SysResult};

const RESOLVE_NO_XDEV: u64 = 0x01;
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;
const RESOLVE_IN_ROOT: u64 = 0x10;
const RESOLVE_CACHED: u64 = 0x20;
/// `struct open_how`'s first version: flags, mode, resolve.
const OPEN_HOW_SIZE_VER0: u64 = 24;
/// Linux's `VALID_OPEN_FLAGS`.
const VALID_OPEN_FLAGS: u64 = 0o3
    | 0o100
    | 0o200
    | 0o400
    | 0o1000
    | 0o2000
    | 0o4000
    | 0o4010000
    | 0o10000
    | 0o20000
    | 0o40000
    | 0o100000
    | 0o200000
    | 0o400000
    | 0o1000000
    | 0o2000000
    | 0o10000000
    | 0o20000000;
/// `__O_TMPFILE`.
const O_TMPFILE_BIT: u64 = 0o20000000;

impl Kernel {
    /// openat2(2): `dirfd, how, size` (`path` read first, as Linux copies it at the call).
    pub(crate) fn openat2(&mut self, m: &mut Machine, dirfd: i32, path: u64, how: u64, size: u64) -> SysResult {
        if size < OPEN_HOW_SIZE_VER0 {
            return err(libc::EINVAL);
        }
        if size > 4096 {
            return err(libc::E2BIG);
        }
        let mut b = vec![0u8; size as usize];
        m.read(how, &mut b).map_err(|_| Errno(libc::EFAULT))?;
        if b[OPEN_HOW_SIZE_VER0 as usize..].iter().any(|&x| x != 0) {
            return err(libc::E2BIG);
        }
        let word = |i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap_or_default());
        let (flags, mode, resolve) = (word(0), word(1), word(2));
        if flags & !VALID_OPEN_FLAGS != 0 || resolve & !0x3f != 0 {
            return err(libc::EINVAL);
        }
        if resolve & RESOLVE_BENEATH != 0 && resolve & RESOLVE_IN_ROOT != 0 {
            return err(libc::EINVAL);
        }
        let creates = flags & (libc::O_CREAT as u64 | O_TMPFILE_BIT) != 0;
        if (creates && mode & !0o7777 != 0) || (!creates && mode != 0) {
            return err(libc::EINVAL);
        }
        if resolve & RESOLVE_CACHED != 0 && flags & (libc::O_CREAT as u64 | libc::O_TRUNC as u64 | O_TMPFILE_BIT) != 0 {
            return err(libc::EAGAIN);
        }
        let flags = flags as i32;
        let raw = m.read_cstr(path, 4096).map_err(|e| match e {
            emu::MemError::Protection(_) if m.read_cstr(path, 1 << 20).is_ok() => Errno(libc::ENAMETOOLONG),
            _ => Errno(libc::EFAULT),
        })?;
        if raw.is_empty() {
            return err(libc::ENOENT);
        }
        let raw = String::from_utf8(raw).map_err(|_| Errno(libc::ENOENT))?;
        let follow =
            flags & libc::O_NOFOLLOW == 0 && flags & (libc::O_CREAT | libc::O_EXCL) != libc::O_CREAT | libc::O_EXCL;
        let guest = self.walk_scoped(dirfd, &raw, resolve, follow)?;
        self.open_walked(m, guest, flags, mode as u32, follow)
    }

    /// The mount point a guest path is under: the PM mount, `/proc`, `/sys`, or the root.
    fn mount_of<'a>(&'a self, guest: &str) -> &'a str {
        let pm = self.cfg.pm_mount.as_str();
        [pm, "/proc", "/sys"].into_iter().find(|mp| crate::vfs::under(guest, mp).is_some()).unwrap_or("/")
    }

    /// Walks `raw` from `dirfd` under the `RESOLVE_*` rules of `resolve` (module doc), the last
    /// component's link followed when `follow`. Returns the guest path reached.
    fn walk_scoped(&self, dirfd: i32, raw: &str, resolve: u64, follow: bool) -> Result<String, Errno> {
        let base = self.guest_path(dirfd, ".")?;
        let scoped = resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT) != 0;
        let root = if scoped { base.clone() } else { "/".to_string() };
        let no_xdev = resolve & RESOLVE_NO_XDEV != 0;
        let mount = self.mount_of(&base).to_string();
        let crosses = |p: &str| no_xdev && self.mount_of(p) != mount;
        let mut cur = base.clone();
        if raw.starts_with('/') {
            if resolve & RESOLVE_BENEATH != 0 {
                return err(libc::EXDEV);
            }
            cur = root.clone();
            if crosses(&cur) {
                return err(libc::EXDEV);
            }
        }
        let mut rest: VecDeque<String> = raw.split('/').filter(|c| !c.is_empty()).map(str::to_string).collect();
        let mut links = 0;
        while let Some(c) = rest.pop_front() {
            let last = rest.is_empty();
            if c == "." {
                continue;
            }
            if c == ".." {
                if cur == root {
                    if resolve & RESOLVE_BENEATH != 0 {
                        return err(libc::EXDEV);
                    }
                    // The root's parent is the root (IN_ROOT's root too).
                    continue;
                }
                cur = normalize(&cur, "..");
                if crosses(&cur) {
                    return err(libc::EXDEV);
                }
                continue;
            }
            let next = normalize(&cur, &c);
            if crosses(&next) {
                return err(libc::EXDEV);
            }
            if last && !follow {
                cur = next;
                break;
            }
            let magic =
                matches!(self.resolve(&next), Ok(Target::Virtual(VirtualFile::Magic | VirtualFile::Descriptor(_))));
            if magic {
                // Linux's nd_jump_link.
                if resolve & RESOLVE_NO_MAGICLINKS != 0 {
                    return err(libc::ELOOP);
                }
                if scoped {
                    return err(libc::EXDEV);
                }
            }
            let Some(target) = self.link_target(&next, last)? else {
                cur = next;
                continue;
            };
            if !magic && resolve & RESOLVE_NO_SYMLINKS != 0 {
                return err(libc::ELOOP);
            }
            links += 1;
            if links > MAX_LINKS {
                return err(libc::ELOOP);
            }
            if target.starts_with('/') {
                if resolve & RESOLVE_BENEATH != 0 && !magic {
                    return err(libc::EXDEV);
                }
                cur = if magic { "/".to_string() } else { root.clone() };
                if crosses(&cur) {
                    return err(libc::EXDEV);
                }
            }
            for t in target.split('/').filter(|c| !c.is_empty()).rev() {
                rest.push_front(t.to_string());
            }
        }
        Ok(cur)
    }
}
