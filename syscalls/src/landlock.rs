//! Landlock: the kernel confines ferrite's own process, so that whatever a bug in the sandbox's
//! checks ([`crate::vfs`]) lets a guest ask for, ferrite cannot create, change or remove a file
//! outside the places it is meant to write. Defence in depth, not the sandbox itself: every
//! check in `vfs` stays.
//!
//! [`confine`] is called by the `ferrite` binary once at start, before any thread exists (a
//! Landlock domain applies to the thread that asks and to the threads it starts later, so every
//! rayon worker is confined too). It handles every file-system *write* right the running kernel
//! knows (making, removing, renaming, linking, writing and truncating files, `ioctl` on devices)
//! and grants them only beneath:
//!
//! - ferrite's working directory (the guest's writable working directory; also where reports,
//!   crash images and the like are written by default),
//! - the directories of the output files named on the command line (reports, host statistics),
//!   and `--pm-dir`,
//! - ferrite's private temporary directory: [`TempRoot`] makes one below the system's, and the
//!   binary makes every temporary directory later inside it (the PM copies of `--explore`, crash
//!   testing's images and recoveries, `bench`'s native runs); in the system's temporary directory itself only
//!   removing an empty directory is allowed, so that the private one can be removed at exit,
//! - `/dev/null` (written only, for programs run natively) and ferrite's own
//!   `/proc/self/clear_refs` (`ferrite compare` resets its peak memory count there).
//!
//! Reading is not confined (the guest may read the host's files, see docs/sandbox.md), nor are
//! descriptors opened before: the standard streams stay usable. Where the kernel has no Landlock
//! (or an older ABI), [`confine`] does what it can and says which; `FERRITE_NO_LANDLOCK=1`
//! turns it off (for tests that show what the path checks alone do).

use std::path::{Path, PathBuf};

use landlock::{AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, ABI};

/// The newest Landlock ABI this code knows the rights of.
const ABI_WANTED: ABI = ABI::V7;

/// How far the process is confined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confinement {
    /// Every right asked for is enforced.
    Full,
    /// The kernel knows only some of the rights (an older Landlock ABI).
    Partial,
    /// No Landlock (kernel without it, or `FERRITE_NO_LANDLOCK=1`).
    None,
}

/// Confines the process's writes to `writable` (directories, with everything below them), the
/// private temporary directory `temp` and the places listed in the module's doc. `writable`
/// entries that do not exist are skipped.
pub fn confine(writable: &[PathBuf], temp: &TempRoot) -> Result<Confinement, String> {
    if std::env::var_os("FERRITE_NO_LANDLOCK").is_some_and(|v| v == "1") {
        return Ok(Confinement::None);
    }
    let write = AccessFs::from_write(ABI_WANTED);
    let mut rules: Vec<(PathFd, landlock::BitFlags<AccessFs>)> = Vec::new();
    let mut add = |p: &Path, access: landlock::BitFlags<AccessFs>| {
        if let Ok(fd) = PathFd::new(p) {
            rules.push((fd, access));
        }
    };
    for p in writable {
        add(p, write);
    }
    // The private temporary directory is removed at exit: removing a directory is a right on
    // the directory holding it. Nothing else is granted there, so nothing but an empty
    // directory can be removed in it.
    add(temp.path(), write);
    if let Some(base) = temp.path().parent() {
        add(base, AccessFs::RemoveDir.into());
    }
    add(Path::new("/dev/null"), AccessFs::WriteFile.into());
    // `ferrite compare` resets its peak memory count here between runs.
    add(Path::new("/proc/self/clear_refs"), AccessFs::WriteFile.into());
    let status = Ruleset::default()
        .handle_access(write)
        .and_then(|r| r.create())
        .and_then(|r| {
            r.add_rules(rules.into_iter().map(|(fd, a)| Ok::<_, landlock::RulesetError>(PathBeneath::new(fd, a))))
        })
        .and_then(|r| r.restrict_self())
        .map_err(|e| format!("Landlock: {e}"))?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => Confinement::Full,
        RulesetStatus::PartiallyEnforced => Confinement::Partial,
        _ => Confinement::None,
    })
}

/// ferrite's private temporary directory, below the system's temporary directory: every
/// temporary directory ferrite makes later lies inside it, so one Landlock rule covers them all.
/// Removed with everything in it when dropped. The environment is left alone (a guest that
/// inherits it sees the user's `TMPDIR`, not a name with ferrite's pid in it).
pub struct TempRoot {
    path: PathBuf,
}

impl TempRoot {
    /// Creates `$TMPDIR/ferrite-PID-N` (mode 0700).
    pub fn new() -> std::io::Result<TempRoot> {
        let base = std::env::temp_dir();
        let mut n = 0u32;
        let path = loop {
            // Unique among live processes by the pid; the counter skips leftovers of a dead one.
            let p = base.join(format!("ferrite-{}-{n}", std::process::id()));
            match std::fs::create_dir(&p) {
                Ok(()) => break p,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(e) => return Err(e),
            }
        };
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
        Ok(TempRoot { path })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread confined to one directory and its private temporary directory can create files
    /// there and not beside them, and can still remove the temporary directory. Landlock confines
    /// the thread that asks (and threads it starts), so the test's other threads stay free.
    #[test]
    fn a_confined_thread_writes_only_where_allowed() {
        let base = std::env::temp_dir().join(format!("ferrite-landlock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (inside, outside) = (base.join("inside"), base.join("outside"));
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let (ins, outs) = (inside.clone(), outside.clone());
        let (status, tmp_path) = std::thread::spawn(move || {
            let tmp = TempRoot::new().unwrap();
            let status = confine(std::slice::from_ref(&ins), &tmp).unwrap();
            if status != Confinement::None {
                assert!(std::fs::write(ins.join("ok"), b"x").is_ok());
                assert!(std::fs::write(tmp.path().join("ok"), b"x").is_ok());
                let e = std::fs::write(outs.join("escaped"), b"x").unwrap_err();
                assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
                assert!(std::fs::create_dir(outs.join("d")).is_err());
            }
            (status, tmp.path().to_path_buf())
        })
        .join()
        .unwrap();
        if status == Confinement::None {
            eprintln!("this kernel has no Landlock: nothing to check");
        }
        assert!(!tmp_path.exists(), "the private temporary directory was removed under Landlock");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
