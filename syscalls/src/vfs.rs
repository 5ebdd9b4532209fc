//! The guest's file namespace: how a guest path maps to a host path or a virtual file, and the
//! sandbox that decides what the guest may change.
//!
//! The guest sees the host's files read-only, with these exceptions:
//! - the PM mount (`/mnt/pmem0` by default) is the host directory given by `--pm-dir`, writable;
//!   a device-DAX namespace `/dev/daxN.M` is the file `daxN.M` in that directory;
//! - the working directory (the host directory ferrite was started in) is writable;
//! - `/proc/self/*`, `/proc/cpuinfo`, `/proc/sys/kernel/random/uuid`, `/sys/devices/system/cpu/*`
//!   and `/dev/{null,zero,urandom,random}` are virtual, generated from the run's own state, so that
//!   nothing of the host shows through them.
//!
//! Paths are normalised lexically in the guest's namespace first (`..` never climbs above `/`).
//! A path that may be written is then checked on the host: its parent directory, with symbolic
//! links resolved, must still lie inside a writable root, and an existing final component that is
//! a symbolic link must resolve inside one too. Refused creations and opens for writing fail with
//! `EACCES`; changing an existing file outside (unlink, rename, truncate) fails with `EROFS`, as
//! on a read-only file system. `..` is resolved lexically, so `a/../b` names `b` even when `a`
//! does not exist (Linux would say ENOENT). What this does not protect against: a host process
//! racing to swap a directory for a symbolic link between the check and the open.

use std::path::{Path, PathBuf};

use crate::{err, Errno, Kernel};

/// What a guest path names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A host path; `writable` if inside the working directory or the PM mount; `pm` if inside the
    /// PM mount.
    Host { host: PathBuf, writable: bool, pm: bool },
    /// A file whose contents ferrite generates.
    Virtual(VirtualFile),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VirtualFile {
    Null,
    Zero,
    Urandom,
    Maps,
    Status,
    CpuInfo,
    CpuOnline,
    Uuid,
    /// A directory that exists only virtually (`/proc/self`, `/proc/self/fd`, ...).
    Dir,
}

/// Joins `path` onto `base` (both guest paths) and removes `.`, `..` and repeated slashes.
pub fn normalize(base: &str, path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let full = if path.starts_with('/') { path.to_string() } else { format!("{base}/{path}") };
    for c in full.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

fn under(path: &str, root: &str) -> Option<String> {
    let root = root.trim_end_matches('/');
    if path == root {
        Some(String::new())
    } else {
        path.strip_prefix(root).and_then(|r| r.strip_prefix('/')).map(|r| r.to_string())
    }
}

impl Kernel {
    /// The guest's working directory as a guest path.
    pub(crate) fn guest_cwd(&self) -> String {
        self.proc.cwd.clone().unwrap_or_else(|| self.cfg.cwd.to_string_lossy().into_owned())
    }

    /// The guest path `path` names relative to `dirfd` (`AT_FDCWD` or a directory descriptor).
    pub(crate) fn guest_path(&self, dirfd: i32, path: &str) -> Result<String, Errno> {
        if path.starts_with('/') {
            return Ok(normalize("/", path));
        }
        let base = if dirfd == libc::AT_FDCWD {
            self.guest_cwd()
        } else {
            let f = self.fds.get(dirfd)?;
            let d = f.desc.borrow();
            if !matches!(d.kind, crate::fd::Kind::Dir { .. }) {
                return err(libc::ENOTDIR);
            }
            d.guest_path.clone()
        };
        Ok(normalize(&base, path))
    }

    /// Maps a normalised guest path into the host or a virtual file.
    pub(crate) fn resolve(&self, guest: &str) -> Result<Target, Errno> {
        // A device-DAX namespace (/dev/daxN.M) is a file of that name in the PM directory.
        if let Some(name) = guest.strip_prefix("/dev/").filter(|n| n.starts_with("dax") && !n.contains('/')) {
            return Ok(Target::Host { host: self.cfg.pm_dir.join(name), writable: true, pm: true });
        }
        if let Some(rest) = under(guest, &self.cfg.pm_mount) {
            let host = if rest.is_empty() { self.cfg.pm_dir.clone() } else { self.cfg.pm_dir.join(rest) };
            return Ok(Target::Host { host, writable: true, pm: true });
        }
        let virt = match guest {
            "/dev/null" => Some(VirtualFile::Null),
            "/dev/zero" => Some(VirtualFile::Zero),
            "/dev/urandom" | "/dev/random" => Some(VirtualFile::Urandom),
            "/proc/self/maps" => Some(VirtualFile::Maps),
            "/proc/self/status" => Some(VirtualFile::Status),
            "/proc/cpuinfo" => Some(VirtualFile::CpuInfo),
            "/sys/devices/system/cpu/online" | "/sys/devices/system/cpu/possible" => Some(VirtualFile::CpuOnline),
            "/proc/sys/kernel/random/uuid" => Some(VirtualFile::Uuid),
            "/proc" | "/proc/self" | "/proc/self/fd" | "/sys" | "/sys/devices/system/cpu" => Some(VirtualFile::Dir),
            _ => None,
        };
        if let Some(v) = virt {
            return Ok(Target::Virtual(v));
        }
        if guest.starts_with("/proc/") || guest.starts_with("/sys/") {
            // Everything else there would show the host.
            return err(libc::ENOENT);
        }
        let cwd = self.cfg.cwd.to_string_lossy().into_owned();
        let writable = under(guest, &cwd).is_some();
        Ok(Target::Host { host: PathBuf::from(guest), writable, pm: false })
    }

    /// Resolves a path the guest wants to create, change or remove; refuses it outside the
    /// writable roots, also when symbolic links would lead there.
    pub(crate) fn resolve_for_write(&self, guest: &str) -> Result<(PathBuf, bool), Errno> {
        match self.resolve(guest)? {
            Target::Host { host, writable: true, pm } => {
                self.check_inside_roots(&host)?;
                Ok((host, pm))
            }
            Target::Host { .. } => err(libc::EACCES),
            Target::Virtual(_) => err(libc::EACCES),
        }
    }

    fn roots(&self) -> Vec<PathBuf> {
        [&self.cfg.cwd, &self.cfg.pm_dir].iter().filter_map(|p| std::fs::canonicalize(p).ok()).collect()
    }

    fn check_inside_roots(&self, host: &Path) -> Result<(), Errno> {
        let roots = self.roots();
        let inside = |p: &Path| roots.iter().any(|r| p.starts_with(r));
        let parent = host.parent().unwrap_or(Path::new("/"));
        match std::fs::canonicalize(parent) {
            Ok(p) if inside(&p) => {}
            Ok(_) => return err(libc::EACCES),
            Err(e) => return Err(e.into()),
        }
        if let Ok(meta) = std::fs::symlink_metadata(host) {
            if meta.file_type().is_symlink() {
                match std::fs::canonicalize(host) {
                    Ok(t) if inside(&t) => {}
                    // A dangling link: where it points is outside or unknown; refuse.
                    _ => return err(libc::EACCES),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn normalisation_never_climbs_above_root() {
        assert_eq!(normalize("/a/b", "../../../etc/passwd"), "/etc/passwd");
        assert_eq!(normalize("/a", "./x//y/../z"), "/a/x/z");
        assert_eq!(normalize("/", "/"), "/");
        assert_eq!(normalize("/w", "/mnt/pmem0/../pmem0/pool"), "/mnt/pmem0/pool");
    }
}
