//! The guest's file namespace: how a guest path maps to a host path or a virtual file, and the
//! sandbox that decides what the guest may change.
//!
//! The guest sees the host's files read-only, with these exceptions:
//! - the PM mount (`/mnt/pmem0` by default) is the host directory given by `--pm-dir`, writable;
//!   a device-DAX namespace `/dev/daxN.M` is the file `daxN.M` in that directory;
//! - the working directory (the host directory ferrite was started in) is writable;
//! - `/tmp`, `/var/tmp` and `/dev/shm` are private overlays ([`GUEST_TMP_DIRS`]): the host's
//!   files show through, and what the guest changes there is its own;
//! - `/proc/self/*`, `/proc/cpuinfo`, `/proc/sys/kernel/random/uuid`, `/sys/devices/system/cpu/*`
//!   and `/dev/{null,zero,urandom,random}` are virtual, generated from the run's own state, so that
//!   nothing of the host shows through them;
//! - the PM device appears as one NVDIMM region, as the kernel shows an `memmap=` (e820) PM
//!   range: `/sys/bus/nd/devices/region0` is a symbolic link to
//!   `/sys/devices/platform/e820_pmem/ndbus0/region0`, whose `persistence_domain` says
//!   `memory_controller` under `--persistency adr` and `cpu_cache` under `eadr`. This is what
//!   PMDK reads to decide whether it must flush (libpmem2's `pmem2_auto_flush`, used by libpmem
//!   and libpmem2). `/sys/class/nd` stays absent, so libndctl finds no bus and PMDK's
//!   ndctl-based probes (unsafe-shutdown counts, bad blocks) are skipped as on a machine without
//!   NVDIMMs.
//!
//! Every directory leading to a virtual file is a virtual directory listing its children.
//!
//! Paths are normalised lexically in the guest's namespace first (`..` never climbs above `/`),
//! then walked component by component (`Kernel::walk`): every symbolic link met, on the host
//! or virtual, is read and its target resolved again *in the guest's namespace*, so a link to
//! `/proc/self/environ` reaches the virtual `/proc` (where it does not exist), not the host's,
//! and `/proc/self/fd/N`, `/dev/fd/N`, `/dev/stdin` name the guest's own descriptors. The walked
//! path has no symbolic link left in it. A path that may be written must then lie lexically
//! under a writable root, and the host file is changed through a descriptor of that root with
//! [`crate::beneath`] (`openat2(RESOLVE_BENEATH)`), so that a directory swapped for a symbolic
//! link between the check and the change cannot lead out of the root. Refused creations and
//! opens for writing fail with `EACCES`; changing an existing file outside (unlink, rename,
//! truncate) fails with `EROFS`, as on a read-only file system. `..` is resolved lexically, so
//! `a/../b` names `b` even when `a` does not exist (Linux would say ENOENT).
//!
//! A *private* working directory ([`crate::KernelConfig::private_cwd`], `ferrite crash`'s
//! workload and recovery runs) keeps the guest's view of its working directory, at the same
//! path, but never writes the host's: it is an overlay, as overlayfs builds one. Its upper layer
//! is the directory [`PRIVATE_CWD`]`/files` inside the PM directory (a crash image's files are
//! placed there), its lower layer the host working directory, read-only. A path is its upper
//! file if that exists, else the host's file unless it is marked gone (an empty file at the same
//! path under [`PRIVATE_CWD`]`/hidden`, placed for a file the crash image lacks or the guest
//! removed), else absent. Changing a file of the lower layer copies it up first; removing or
//! renaming one marks it gone; a directory lists both layers. The writable roots are then the
//! PM directory alone, so nothing the guest does reaches the host working directory, and the
//! guest never sees [`PRIVATE_CWD`] in the PM mount. Paths are redirected by their guest name,
//! relative or absolute alike, after the walk, so a symbolic link anywhere that points into the
//! working directory reaches the overlay too.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::{err, Errno, Kernel};

/// What a guest path names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A host path; `writable` if inside the working directory or the PM mount; `pm` if inside the
    /// PM mount.
    Host {
        /// The host path, after the walk and any private-working-directory redirection.
        host: PathBuf,
        /// Whether the guest may change it (it lies under a writable root).
        writable: bool,
        /// Whether it lies in the PM mount.
        pm: bool,
    },
    /// A file whose contents ferrite generates.
    Virtual(VirtualFile),
}

/// A file whose contents ferrite generates from the run's state (see the module doc for why).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VirtualFile {
    /// `/dev/null`.
    Null,
    /// `/dev/zero`.
    Zero,
    /// `/dev/urandom` and `/dev/random`: bytes from the run's seeded generator.
    Urandom,
    /// `/proc/self/maps`, from the machine's region table.
    Maps,
    /// `/proc/self/status`, with the process's identities, threads and memory size.
    Status,
    /// `/proc/self/stat`, the same as one line in the kernel's format (Redis reads its resident
    /// size there).
    Stat,
    /// `/proc/uptime`: the seconds since boot on the virtual clock, and as many idle (no CPU
    /// ever idles while the guest runs: the virtual CPU retires its instructions).
    Uptime,
    /// `/proc/stat`: the machine's CPU time (the retired instructions, as user time, on the
    /// first CPU), the boot time on the guest's wall clock (`btime`, which `ps` needs), the
    /// processes made.
    KernelStat,
    /// A file whose contents never change: the Linux defaults of the tunables servers read
    /// (`/proc/sys/vm/overcommit_memory`, `/proc/sys/net/core/somaxconn`, transparent huge
    /// pages), so that nothing of the host's settings shows through.
    Text(&'static str),
    /// `/proc/cpuinfo`, from ferrite's CPUID table, one entry per virtual CPU.
    CpuInfo,
    /// `/sys/devices/system/cpu/online` and `possible`: the virtual CPUs (`--cpus`).
    CpuOnline,
    /// `/proc/sys/kernel/random/uuid`: a fresh version-4 UUID from the seeded generator per open.
    Uuid,
    /// `/proc/self/mounts`: the guest's own mounts (root, `/proc`, `/sys`, the PM mount).
    Mounts,
    /// A directory that exists only virtually (`/proc/self`, `/proc/self/fd`, ...).
    Dir,
    /// A symbolic link with this target, resolved in the guest's namespace.
    Link(&'static str),
    /// `/proc/self/exe`, `/proc/self/cwd`, `/proc/self/root`: links whose targets come from the
    /// run's state (seen as such only when not followed).
    Magic,
    /// `/proc/self/fd/N` of a descriptor that is no file or directory (a pipe, a standard stream,
    /// a generated file), not followed: opening it opens that descriptor's file again.
    Descriptor(i32),
    /// The region's `persistence_domain`: `memory_controller` (ADR) or `cpu_cache` (eADR).
    PersistenceDomain,
    /// `/proc/self/cmdline`: the calling process's arguments, each NUL-terminated.
    Cmdline,
    /// `/proc/PID/stat`, `status` or `cmdline` of another guest process (alive or a zombie).
    Pid(u32, PidFile),
    /// `/proc/self/comm` (the main thread's), `/proc/thread-self/comm` and
    /// `/proc/self/task/TID/comm`: thread TID's name, `PR_SET_NAME`'s, read and written as
    /// Linux's `comm_show`/`comm_write` ([`crate::fd::Kind::Comm`]).
    Comm(u32),
    /// `/proc/sysvipc/shm`, `sem` or `msg`: the machine's System V objects of that kind, as
    /// Linux's `sysvipc_*_proc_show` lists them ([`crate::sysvipc`]).
    SysvIpc(crate::sysvipc::Kind),
}

/// Which file of another process's `/proc/PID` ([`VirtualFile::Pid`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PidFile {
    /// `stat`.
    Stat,
    /// `status`.
    Status,
    /// `cmdline`.
    Cmdline,
}

/// The NVDIMM region the PM device appears as, and the link to it from the nd bus.
pub const ND_REGION: &str = "/sys/devices/platform/e820_pmem/ndbus0/region0";
/// The nd-bus link to [`ND_REGION`].
pub const ND_REGION_LINK: &str = "/sys/bus/nd/devices/region0";
/// What `readlink` of [`ND_REGION_LINK`] says (relative, as sysfs's links are).
pub const ND_REGION_LINK_TARGET: &str = "../../../devices/platform/e820_pmem/ndbus0/region0";

/// Every virtual file and link; the directories leading to them are virtual too.
const VIRTUAL_FILES: &[(&str, VirtualFile)] = &[
    ("/proc/cpuinfo", VirtualFile::CpuInfo),
    ("/proc/mounts", VirtualFile::Link("self/mounts")),
    ("/proc/self/cmdline", VirtualFile::Cmdline),
    ("/proc/self/maps", VirtualFile::Maps),
    ("/proc/self/mounts", VirtualFile::Mounts),
    ("/proc/self/stat", VirtualFile::Stat),
    ("/proc/self/status", VirtualFile::Status),
    ("/proc/sys/kernel/random/uuid", VirtualFile::Uuid),
    ("/proc/sysvipc/msg", VirtualFile::SysvIpc(crate::sysvipc::Kind::Msg)),
    ("/proc/sysvipc/sem", VirtualFile::SysvIpc(crate::sysvipc::Kind::Sem)),
    ("/proc/sysvipc/shm", VirtualFile::SysvIpc(crate::sysvipc::Kind::Shm)),
    // The System V and POSIX message queue limits [`crate::sysvipc`] and [`crate::mqueue`]
    // enforce (Linux's defaults), which `ipcs -l` shows.
    ("/proc/sys/kernel/shmmax", VirtualFile::Text("18446744073692774399\n")),
    ("/proc/sys/kernel/shmall", VirtualFile::Text("18446744073692774399\n")),
    ("/proc/sys/kernel/shmmni", VirtualFile::Text("4096\n")),
    ("/proc/sys/kernel/sem", VirtualFile::Text("32000\t1024000000\t500\t32000\n")),
    ("/proc/sys/kernel/msgmax", VirtualFile::Text("8192\n")),
    ("/proc/sys/kernel/msgmnb", VirtualFile::Text("16384\n")),
    ("/proc/sys/kernel/msgmni", VirtualFile::Text("32000\n")),
    ("/proc/sys/fs/mqueue/msg_default", VirtualFile::Text("10\n")),
    ("/proc/sys/fs/mqueue/msg_max", VirtualFile::Text("10\n")),
    ("/proc/sys/fs/mqueue/msgsize_default", VirtualFile::Text("8192\n")),
    ("/proc/sys/fs/mqueue/msgsize_max", VirtualFile::Text("8192\n")),
    ("/proc/uptime", VirtualFile::Uptime),
    ("/proc/stat", VirtualFile::KernelStat),
    // The memory `sysinfo` describes (16 GiB, half free), no swap: procps reads it.
    (
        "/proc/meminfo",
        VirtualFile::Text(
            "MemTotal:       16777216 kB\nMemFree:         8388608 kB\nMemAvailable:    8388608 kB\n\
             Buffers:               0 kB\nCached:                0 kB\nSwapCached:            0 kB\n\
             Active:                0 kB\nInactive:              0 kB\nShmem:                 0 kB\n\
             Slab:                  0 kB\nSReclaimable:          0 kB\nSwapTotal:             0 kB\n\
             SwapFree:              0 kB\nDirty:                 0 kB\n",
        ),
    ),
    // Linux's defaults: heuristic overcommit (jemalloc, as in Redis, reads it to decide whether
    // it must commit its pages with mmap one range at a time), the listen backlog cap since
    // Linux 5.4, and Debian's transparent-huge-page setting.
    ("/proc/sys/net/core/somaxconn", VirtualFile::Text("4096\n")),
    ("/proc/sys/vm/overcommit_memory", VirtualFile::Text("0\n")),
    ("/sys/kernel/mm/transparent_hugepage/enabled", VirtualFile::Text("always [madvise] never\n")),
    (ND_REGION_LINK, VirtualFile::Link(ND_REGION_LINK_TARGET)),
    ("/sys/devices/platform/e820_pmem/ndbus0/region0/persistence_domain", VirtualFile::PersistenceDomain),
    ("/sys/devices/system/cpu/online", VirtualFile::CpuOnline),
    ("/sys/devices/system/cpu/possible", VirtualFile::CpuOnline),
];

/// Host files replaced by virtual links, whatever the host has there, because what they lead to
/// on the host would show the host (its mounts, ferrite's own descriptors).
const VIRTUAL_LINKS_ON_HOST: &[(&str, &str)] = &[
    ("/dev/fd", "/proc/self/fd"),
    ("/dev/stderr", "/proc/self/fd/2"),
    ("/dev/stdin", "/proc/self/fd/0"),
    ("/dev/stdout", "/proc/self/fd/1"),
    ("/etc/mtab", "../proc/self/mounts"),
];

/// The writable roots, each with its directory's descriptor (see `Kernel::roots`).
pub(crate) type Roots = std::cell::OnceCell<Vec<(PathBuf, Rc<OwnedFd>)>>;

/// The guest's temporary directories. Each is a private overlay over the host's directory of that
/// name (as the private working directory is): the guest reads the host's files there, but what
/// it creates, changes or removes goes to an upper layer of its own inside ferrite's private
/// temporary directory, removed at exit. So `mkstemp`, `sort`'s spill files, POSIX semaphores
/// and shared memory (`sem_open`, `shm_open` in `/dev/shm`) work, and no guest writes the host's.
pub const GUEST_TMP_DIRS: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// The upper layers of [`GUEST_TMP_DIRS`]: one directory made on first use, shared by the
/// kernel's processes and by the snapshots of one run (as the working directory is, see
/// docs/sandbox.md), and a fresh one for a recovery restored on another crash image; with its
/// descriptor, the writable root the guest's changes there are made beneath. The error is the
/// errno its creation failed with.
pub(crate) type GuestTmp = Rc<std::cell::OnceCell<Result<(tempfile::TempDir, Rc<OwnedFd>), i32>>>;

/// Whether `name` is that of a ferrite process's private temporary directory
/// (`crate::landlock::TempRoot`: `ferrite-PID-N`).
fn is_temp_root_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("ferrite-") else { return false };
    let mut parts = rest.split('-');
    let digits = |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    digits(parts.next()) && digits(parts.next()) && parts.next().is_none()
}

/// A private overlay: the guest sees the host directory `lower` at the same path, and
/// what it changes there lives in `upper` (its own files in `files/`, the marks of the host's
/// files it removed in `hidden/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Overlay {
    lower: PathBuf,
    upper: PathBuf,
    /// One of [`GUEST_TMP_DIRS`] (not the private working directory).
    temp: bool,
}

/// A guest path inside a private overlay: the overlay, and the path relative to its mount (`""`
/// for the mount itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OverlayPath {
    ov: Overlay,
    rel: String,
}

/// Most symbolic links one path may go through, as Linux's `MAXSYMLINKS`.
pub(crate) const MAX_LINKS: u32 = 40;

/// The directory inside the PM directory that holds a private working directory's own files
/// (`files/`) and the marks of the host files it lacks (`hidden/`).
pub const PRIVATE_CWD: &str = ".ferrite-cwd";

/// Virtual directories with no virtual file below them.
const VIRTUAL_DIRS: &[&str] = &["/proc/self/fd"];

/// Whether `guest` is a virtual directory: one leading to a virtual file, or listed as one.
fn is_virtual_dir(guest: &str) -> bool {
    guest == "/proc"
        || guest == "/sys"
        || VIRTUAL_DIRS.contains(&guest)
        || VIRTUAL_FILES.iter().any(|(f, _)| f.strip_prefix(guest).is_some_and(|r| r.starts_with('/')))
}

/// The entries of the virtual directory `dir` (a normalised guest path), sorted, without `.` and
/// `..`: name and whether it is a directory, a link or a file (a `DT_*` type).
pub fn virtual_children(dir: &str) -> Vec<(String, u8)> {
    let prefix = format!("{}/", dir.trim_end_matches('/'));
    let mut out: Vec<(String, u8)> = Vec::new();
    for (f, v) in VIRTUAL_FILES {
        let Some(rest) = f.strip_prefix(&prefix) else { continue };
        let (name, dtype) = match rest.split_once('/') {
            Some((d, _)) => (d, libc::DT_DIR),
            None if matches!(v, VirtualFile::Link(_)) => (rest, libc::DT_LNK),
            None => (rest, libc::DT_REG),
        };
        if !out.iter().any(|(n, _)| n == name) {
            out.push((name.to_string(), dtype));
        }
    }
    for d in VIRTUAL_DIRS {
        if let Some(name) = d.strip_prefix(&prefix).filter(|n| !n.contains('/')) {
            if !out.iter().any(|(n, _)| n == name) {
                out.push((name.to_string(), libc::DT_DIR));
            }
        }
    }
    out.sort();
    out
}

/// `/proc/PID/task...` split into the pid and what follows it (`task`, `task/TID`).
pub(crate) fn proc_pid_path(guest: &str) -> Option<(u32, &str)> {
    let rest = guest.strip_prefix("/proc/")?;
    let (pid, rest) = rest.split_once('/')?;
    let pid: u32 = pid.parse().ok()?;
    (rest == "task" || rest.strip_prefix("task/").is_some_and(|t| !t.contains('/'))).then_some((pid, rest))
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

pub(crate) fn under(path: &str, root: &str) -> Option<String> {
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
            if self.cfg.private_cwd && (rest == PRIVATE_CWD || rest.starts_with(&format!("{PRIVATE_CWD}/"))) {
                return err(libc::ENOENT);
            }
            let host = if rest.is_empty() { self.cfg.pm_dir.clone() } else { self.cfg.pm_dir.join(rest) };
            return Ok(Target::Host { host, writable: true, pm: true });
        }
        let virt = match guest {
            "/dev/null" => Some(VirtualFile::Null),
            "/dev/zero" => Some(VirtualFile::Zero),
            "/dev/urandom" | "/dev/random" => Some(VirtualFile::Urandom),
            "/proc/self/exe" | "/proc/self/cwd" | "/proc/self/root" => Some(VirtualFile::Magic),
            g => VIRTUAL_FILES
                .iter()
                .find(|(f, _)| *f == g)
                .map(|(_, v)| *v)
                .or_else(|| VIRTUAL_LINKS_ON_HOST.iter().find(|(f, _)| *f == g).map(|(_, t)| VirtualFile::Link(t)))
                .or_else(|| is_virtual_dir(g).then_some(VirtualFile::Dir)),
        };
        if let Some(v) = virt {
            return Ok(Target::Virtual(v));
        }
        // A thread's name: the process's own threads only (another's is not in /proc/self).
        let thread = |tid: u32| self.threads.get(&tid).is_some_and(|t| t.pid == self.pid);
        match guest {
            "/proc/self/comm" => return Ok(Target::Virtual(VirtualFile::Comm(self.main_thread(self.pid)))),
            "/proc/thread-self/comm" => return Ok(Target::Virtual(VirtualFile::Comm(self.current))),
            "/proc/thread-self" | "/proc/self/task" => return Ok(Target::Virtual(VirtualFile::Dir)),
            _ => {}
        }
        if let Some(rest) = guest.strip_prefix("/proc/self/task/") {
            let (tid, file) = rest.split_once('/').unwrap_or((rest, ""));
            let tid: u32 = tid.parse().map_err(|_| Errno(libc::ENOENT))?;
            return match file {
                _ if !thread(tid) => err(libc::ENOENT),
                "" => Ok(Target::Virtual(VirtualFile::Dir)),
                "comm" => Ok(Target::Virtual(VirtualFile::Comm(tid))),
                _ => err(libc::ENOENT),
            };
        }
        // `/proc/PID/...` of the calling process is `/proc/self/...` (procps looks itself up so).
        if let Some(rest) = guest.strip_prefix(&format!("/proc/{}/", self.pid)) {
            return self.resolve(&format!("/proc/self/{rest}"));
        }
        // `/proc/PID` of another guest process, alive or a zombie (ps lists both): `stat`,
        // `status`, `cmdline`, `comm` and `task`, its threads.
        let pid_dir = guest.strip_prefix("/proc/").and_then(|p| p.parse::<u32>().ok());
        if pid_dir.is_some_and(|pid| self.procs.contains_key(&pid)) {
            return Ok(Target::Virtual(VirtualFile::Dir));
        }
        if let Some((pid, file)) = guest
            .strip_prefix("/proc/")
            .and_then(|r| r.split_once('/'))
            .and_then(|(p, f)| Some((p.parse::<u32>().ok()?, f)))
            .filter(|(p, _)| self.procs.contains_key(p))
        {
            match file {
                "stat" => return Ok(Target::Virtual(VirtualFile::Pid(pid, PidFile::Stat))),
                "status" => return Ok(Target::Virtual(VirtualFile::Pid(pid, PidFile::Status))),
                "cmdline" => return Ok(Target::Virtual(VirtualFile::Pid(pid, PidFile::Cmdline))),
                "comm" => return Ok(Target::Virtual(VirtualFile::Comm(self.main_thread(pid)))),
                _ => {}
            }
        }
        if let Some((pid, rest)) = proc_pid_path(guest) {
            let alive = self.procs.get(&pid).is_some_and(|p| p.ended.is_none());
            let tid = rest.strip_prefix("task/").and_then(|t| t.parse::<u32>().ok());
            return match (alive, rest, tid) {
                (true, "task", _) => Ok(Target::Virtual(VirtualFile::Dir)),
                (true, _, Some(t)) if self.threads.get(&t).is_some_and(|t| t.pid == pid) => {
                    Ok(Target::Virtual(VirtualFile::Dir))
                }
                _ => err(libc::ENOENT),
            };
        }
        if let Some(n) = guest.strip_prefix("/proc/self/fd/") {
            let fd: i32 = n.parse().map_err(|_| Errno(libc::ENOENT))?;
            self.fds.get(fd).map_err(|_| Errno(libc::ENOENT))?;
            return Ok(Target::Virtual(VirtualFile::Descriptor(fd)));
        }
        if guest.starts_with("/proc/") || guest.starts_with("/sys/") {
            // Everything else there would show the host.
            return err(libc::ENOENT);
        }
        if let Some(p) = self.overlay_path(guest)? {
            return Ok(Target::Host { host: self.private_host(&p.ov, &p.rel).0, writable: true, pm: false });
        }
        let cwd = self.cfg.cwd.to_string_lossy().into_owned();
        let writable = under(guest, &cwd).is_some();
        Ok(Target::Host { host: PathBuf::from(guest), writable, pm: false })
    }

    /// `guest` (normalised) with every symbolic link in it resolved in the guest's namespace, the
    /// last component's too when `follow`: host links are read and their targets taken as guest
    /// paths (relative ones from the link's directory), virtual links and `/proc/self`'s magic
    /// links likewise. What comes back names no link but perhaps its last component (when not
    /// `follow`, or `/proc/self/fd/N` of a pipe or stream, which has no path). ELOOP after
    /// [`MAX_LINKS`] links; a component that does not exist ends the walk (the call that uses the
    /// path then says ENOENT).
    pub(crate) fn walk(&self, guest: &str, follow: bool) -> Result<String, Errno> {
        let mut path = guest.to_string();
        let mut links = 0;
        'again: loop {
            let mut end = 0;
            while end < path.len() {
                let next = path[end + 1..].find('/').map_or(path.len(), |i| end + 1 + i);
                let last = next == path.len();
                if last && !follow {
                    break;
                }
                if let Some(target) = self.link_target(&path[..next], last)? {
                    links += 1;
                    if links > MAX_LINKS {
                        return err(libc::ELOOP);
                    }
                    let parent = if end == 0 { "/" } else { &path[..end] };
                    path = normalize(parent, &format!("{target}{}", &path[next..]));
                    continue 'again;
                }
                end = next;
            }
            return Ok(path);
        }
    }

    /// Where the guest path `prefix` (a path without links up to its last component) points if
    /// it is a symbolic link, as a guest path; `None` if it is none (or does not exist).
    pub(crate) fn link_target(&self, prefix: &str, last: bool) -> Result<Option<String>, Errno> {
        // The PM mount, the working directory and the directories leading to them are
        // directories in the guest's namespace whatever the host has there (`--pm-dir` may be a
        // link; the working directory was canonical when the run started), and are not looked up.
        if under(&self.cfg.pm_mount, prefix).is_some()
            || under(&self.cfg.cwd.to_string_lossy(), prefix).is_some()
            || GUEST_TMP_DIRS.iter().any(|t| under(t, prefix).is_some())
        {
            return Ok(None);
        }
        match prefix {
            "/proc/self/exe" => return Ok(Some(self.exe().to_string())),
            "/proc/self/cwd" => return Ok(Some(self.guest_cwd())),
            "/proc/self/root" => return Ok(Some("/".into())),
            _ => {}
        }
        Ok(match self.resolve(prefix)? {
            Target::Virtual(VirtualFile::Link(t)) => Some(t.to_string()),
            // A descriptor's file or directory is reached by the path it was opened by; anything
            // else is opened as the descriptor itself, and has nothing below it.
            Target::Virtual(VirtualFile::Descriptor(fd)) => {
                let d = self.fds.get(fd)?.desc.borrow();
                match d.kind {
                    // A memfd has no path: it is opened as the descriptor itself.
                    crate::fd::Kind::File { .. } if crate::splice::is_memfd(&d.guest_path) && last => None,
                    crate::fd::Kind::File { .. } if crate::splice::is_memfd(&d.guest_path) => {
                        return err(libc::ENOTDIR)
                    }
                    crate::fd::Kind::File { .. } | crate::fd::Kind::Dir { .. } => Some(d.guest_path.clone()),
                    _ if last => None,
                    _ => return err(libc::ENOTDIR),
                }
            }
            Target::Virtual(_) => None,
            Target::Host { host, .. } => match std::fs::symlink_metadata(&host) {
                Ok(md) if md.file_type().is_symlink() => {
                    let t = std::fs::read_link(&host)?;
                    // Guest paths are UTF-8 (path_arg refuses others); a link that is not names nothing.
                    Some(t.into_os_string().into_string().map_err(|_| Errno(libc::ENOENT))?)
                }
                _ => None,
            },
        })
    }

    /// The private overlay `guest` lies in, if any, and its path there: the private working
    /// directory (`ferrite crash`), else one of the [`GUEST_TMP_DIRS`] (but not the working
    /// directory or the PM mount when they lie below one: those are the host's, writable). An
    /// error if the temporary directories' upper layer cannot be made.
    pub(crate) fn overlay_path(&self, guest: &str) -> Result<Option<OverlayPath>, Errno> {
        let cwd = self.cfg.cwd.to_string_lossy();
        if self.cfg.private_cwd {
            if let Some(rel) = under(guest, &cwd) {
                let ov = Overlay { lower: self.cfg.cwd.clone(), upper: self.private_root(), temp: false };
                return Ok(Some(OverlayPath { ov, rel }));
            }
        }
        if under(guest, &self.cfg.pm_mount).is_some() {
            return Ok(None);
        }
        for (i, t) in GUEST_TMP_DIRS.iter().enumerate() {
            let Some(rel) = under(guest, t) else { continue };
            if under(&cwd, t).is_some() && under(guest, &cwd).is_some() {
                return Ok(None);
            }
            let upper = self.guest_tmp()?.join(i.to_string());
            return Ok(Some(OverlayPath { ov: Overlay { lower: PathBuf::from(t), upper, temp: true }, rel }));
        }
        Ok(None)
    }

    /// `guest`'s place in a private overlay (where every change is allowed), if it lies in one.
    pub(crate) fn in_overlay(&self, guest: &str) -> Option<OverlayPath> {
        self.overlay_path(guest).ok().flatten()
    }

    /// The upper layers of the temporary directories, made on first use.
    fn guest_tmp(&self) -> Result<PathBuf, Errno> {
        let dir = self.tmp.get_or_init(|| {
            let d = tempfile::Builder::new().prefix("ferrite-guest-tmp-").tempdir().map_err(|e| Errno::from(e).0)?;
            for i in 0..GUEST_TMP_DIRS.len() {
                // The mount itself is the upper layer's, sticky and writable by all as on Linux.
                let files = d.path().join(i.to_string()).join("files");
                std::fs::create_dir_all(&files).map_err(|e| Errno::from(e).0)?;
                std::fs::set_permissions(&files, std::os::unix::fs::PermissionsExt::from_mode(0o1777))
                    .map_err(|e| Errno::from(e).0)?;
            }
            let fd = std::fs::File::open(d.path()).map_err(|e| Errno::from(e).0)?;
            Ok((d, Rc::new(OwnedFd::from(fd))))
        });
        match dir {
            Ok((d, _)) => Ok(d.path().to_path_buf()),
            Err(e) => err(*e),
        }
    }

    fn private_root(&self) -> PathBuf {
        self.cfg.pm_dir.join(PRIVATE_CWD)
    }

    /// Whether `rel`, or a directory above it, is marked gone from the overlay `ov`. In the
    /// temporary directories, ferrite's private directories (`ferrite-PID-N`: this run's, which
    /// holds the upper layer, and other runs') are always gone: they would show host pids and
    /// other runs, and differ from run to run.
    fn hidden(&self, ov: &Overlay, rel: &str) -> bool {
        if ov.temp && rel.split('/').next().is_some_and(is_temp_root_name) {
            return true;
        }
        let mut p = ov.upper.join("hidden");
        // Nothing marked yet (the usual case): one look-up instead of one per component.
        if std::fs::symlink_metadata(&p).is_err() {
            return false;
        }
        for c in rel.split('/').filter(|c| !c.is_empty()) {
            p.push(c);
            match std::fs::symlink_metadata(&p) {
                Ok(md) if md.is_dir() => {}
                Ok(_) => return true,
                Err(_) => return false,
            }
        }
        false
    }

    /// Where `rel` of the overlay `ov` is on the host: its own copy, else the host directory's
    /// file (then `true`) unless marked gone, else where its own copy would be (absent).
    pub(crate) fn private_host(&self, ov: &Overlay, rel: &str) -> (PathBuf, bool) {
        let upper = join_rel(&ov.upper.join("files"), rel);
        if std::fs::symlink_metadata(&upper).is_ok() {
            return (upper, false);
        }
        if !self.hidden(ov, rel) {
            let lower = join_rel(&ov.lower, rel);
            if std::fs::symlink_metadata(&lower).is_ok() {
                return (lower, true);
            }
        }
        (upper, false)
    }

    /// In a private overlay: `guest`'s overlay path if the host directory has a file there that
    /// shows through (below the overlay's own copy, if any), which must be marked gone when the
    /// guest removes or renames the file.
    pub(crate) fn private_shown(&self, guest: &str) -> Option<OverlayPath> {
        let p = self.in_overlay(guest)?;
        (!self.hidden(&p.ov, &p.rel) && std::fs::symlink_metadata(join_rel(&p.ov.lower, &p.rel)).is_ok()).then_some(p)
    }

    /// Marks `p` gone from its overlay (the host directory has it).
    pub(crate) fn hide(&self, p: &OverlayPath) -> Result<(), Errno> {
        let mark = join_rel(&p.ov.upper.join("hidden"), &p.rel);
        if let Some(parent) = mark.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if mark.is_dir() {
            std::fs::remove_dir_all(&mark)?;
        }
        std::fs::File::create(&mark)?;
        Ok(())
    }

    /// The overlay's own copy of `rel`, made before the guest changes it: the directories above
    /// it are made, and a file, link or directory of the host directory at `rel` is copied (a
    /// directory with everything below it when `deep`).
    fn copy_up(&self, ov: &Overlay, rel: &str, deep: bool) -> Result<PathBuf, Errno> {
        let files = ov.upper.join("files");
        let upper = join_rel(&files, rel);
        if std::fs::symlink_metadata(&upper).is_ok() {
            return Ok(upper);
        }
        match rel.rsplit_once('/') {
            Some((parent, _)) => {
                let (host, lower) = self.private_host(ov, parent);
                if lower && host.is_dir() {
                    std::fs::create_dir_all(join_rel(&files, parent))?;
                }
            }
            None => std::fs::create_dir_all(&files)?,
        }
        let (host, lower) = self.private_host(ov, rel);
        if lower {
            copy_tree(&host, &upper, deep)?;
        }
        Ok(upper)
    }

    /// The entries of the directory `guest` of a private overlay: both layers, its own copies
    /// first, without what is marked gone. `None` outside a private overlay.
    pub(crate) fn private_listing(&self, guest: &str) -> Option<Vec<(std::ffi::OsString, PathBuf)>> {
        let OverlayPath { ov, rel } = self.in_overlay(guest)?;
        let mut out: Vec<(std::ffi::OsString, PathBuf)> = Vec::new();
        let upper = join_rel(&ov.upper.join("files"), &rel);
        for e in std::fs::read_dir(&upper).into_iter().flatten().flatten() {
            out.push((e.file_name(), e.path()));
        }
        if !self.hidden(&ov, &rel) {
            let lower = join_rel(&ov.lower, &rel);
            for e in std::fs::read_dir(&lower).into_iter().flatten().flatten() {
                let name = e.file_name();
                let child = if rel.is_empty() {
                    name.to_string_lossy().into_owned()
                } else {
                    format!("{rel}/{}", name.to_string_lossy())
                };
                if !out.iter().any(|(n, _)| *n == name) && !self.hidden(&ov, &child) {
                    out.push((name, e.path()));
                }
            }
        }
        Some(out)
    }

    /// Resolves a path the guest wants to create, change or remove (walked already): refuses it
    /// outside the writable roots, and names it beneath the root it lies in, so that what is
    /// changed is there whatever happens to the directories between this check and the change.
    pub(crate) fn resolve_for_write(&self, guest: &str) -> Result<Writable, Errno> {
        match self.resolve(guest)? {
            Target::Host { host, writable: true, .. } => {
                let host = match self.overlay_path(guest)? {
                    Some(p) => self.copy_up(&p.ov, &p.rel, false)?,
                    None => host,
                };
                self.beneath_root(host)
            }
            Target::Host { .. } => err(libc::EACCES),
            Target::Virtual(_) => err(libc::EACCES),
        }
    }

    /// [`Self::resolve_for_write`] for a rename's source: a directory of the host working
    /// directory is copied up whole, so that it moves with everything in it.
    pub(crate) fn resolve_for_rename(&self, guest: &str) -> Result<Writable, Errno> {
        if let Some(p) = self.overlay_path(guest)? {
            self.copy_up(&p.ov, &p.rel, true)?;
        }
        self.resolve_for_write(guest)
    }

    /// Where the guest may write: the working directory and the PM directory, or the PM
    /// directory alone (which holds the private working directory's files); each with a
    /// descriptor opened when first needed, through which everything below it is changed. The
    /// upper layers of the temporary directories are a root too, once made ([`GuestTmp`], with
    /// its descriptor): a guest that never uses `/tmp` has no host path there, and its first
    /// write does not make them (seven directories, made and removed again for every crash
    /// recovery, were most of a small crash campaign's CPU on ext4).
    fn roots(&self) -> Result<&[(PathBuf, Rc<OwnedFd>)], Errno> {
        if let Some(r) = self.roots.get() {
            return Ok(r);
        }
        let paths: &[&PathBuf] =
            if self.cfg.private_cwd { &[&self.cfg.pm_dir] } else { &[&self.cfg.cwd, &self.cfg.pm_dir] };
        let mut roots = Vec::new();
        for p in paths {
            let f = std::fs::File::open(p)?;
            roots.push(((*p).clone(), Rc::new(OwnedFd::from(f))));
        }
        Ok(self.roots.get_or_init(|| roots))
    }

    /// `host` named beneath the writable root it lies in (lexically; the innermost if roots nest).
    fn beneath_root(&self, host: PathBuf) -> Result<Writable, Errno> {
        let tmp = self.tmp.get().and_then(|t| t.as_ref().ok()).map(|(d, fd)| (d.path(), fd));
        let (root, rel) = self
            .roots()?
            .iter()
            .map(|(p, fd)| (p.as_path(), fd))
            .chain(tmp)
            .filter_map(|(p, fd)| host.strip_prefix(p).ok().map(|rel| (fd.clone(), rel.to_path_buf())))
            .min_by_key(|(_, rel)| rel.components().count())
            .ok_or(Errno(libc::EACCES))?;
        Ok(Writable { host, root, rel })
    }
}

/// A host file the guest may change: its path (for messages and bookkeeping), and how to reach
/// it without leaving its writable root.
pub(crate) struct Writable {
    pub host: PathBuf,
    root: Rc<OwnedFd>,
    rel: PathBuf,
}

impl Writable {
    /// Opens the file with `open(2)` flags, beneath its root.
    pub fn open(&self, flags: i32, mode: u32) -> Result<std::fs::File, Errno> {
        Ok(crate::beneath::open_beneath(self.root.as_fd(), &self.rel, flags, mode)?.into())
    }

    /// The directory holding the file (opened beneath the root) and the file's name in it.
    pub fn parent(&self) -> Result<(OwnedFd, CString), Errno> {
        Ok(crate::beneath::parent_beneath(self.root.as_fd(), &self.rel)?)
    }
}

/// The result of a libc call that returns 0 or -1 with errno.
pub(crate) fn cvt(r: libc::c_int) -> Result<(), Errno> {
    if r < 0 {
        Err(std::io::Error::last_os_error().into())
    } else {
        Ok(())
    }
}

/// Runs `f` on the raw descriptor and the C name of an entry (see [`Writable::parent`]).
pub(crate) fn at<T>(p: &(OwnedFd, CString), f: impl FnOnce(i32, *const libc::c_char) -> T) -> T {
    f(p.0.as_raw_fd(), p.1.as_ptr())
}

/// `base/rel`, or `base` for an empty `rel`.
fn join_rel(base: &Path, rel: &str) -> PathBuf {
    if rel.is_empty() {
        base.to_path_buf()
    } else {
        base.join(rel)
    }
}

/// Copies the file, symbolic link or directory `from` to `to` (a directory's contents too when
/// `deep`).
fn copy_tree(from: &Path, to: &Path, deep: bool) -> std::io::Result<()> {
    let md = std::fs::symlink_metadata(from)?;
    if md.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)
    } else if md.is_dir() {
        std::fs::create_dir(to)?;
        if deep {
            for e in std::fs::read_dir(from)? {
                let e = e?;
                copy_tree(&e.path(), &to.join(e.file_name()), true)?;
            }
        }
        Ok(())
    } else {
        std::fs::copy(from, to).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn the_nd_region_and_the_directories_leading_to_it_are_virtual() {
        use super::*;
        assert_eq!(
            virtual_children("/sys"),
            vec![("bus".to_string(), libc::DT_DIR), ("devices".into(), libc::DT_DIR), ("kernel".into(), libc::DT_DIR)]
        );
        assert_eq!(virtual_children("/sys/bus/nd/devices"), vec![("region0".to_string(), libc::DT_LNK)]);
        assert_eq!(virtual_children(ND_REGION), vec![("persistence_domain".to_string(), libc::DT_REG)]);
        assert_eq!(virtual_children("/proc/self").len(), 6, "cmdline, fd, maps, mounts, stat, status");
        assert!(virtual_children("/proc").contains(&("mounts".to_string(), libc::DT_LNK)));
        assert!(is_virtual_dir("/sys/devices/platform/e820_pmem") && !is_virtual_dir("/sys/class/nd"));
        assert!(!is_virtual_dir("/etc") && !is_virtual_dir("/dev"), "virtual links on the host stay alone");
        assert_eq!(normalize(ND_REGION_LINK, &format!("../{ND_REGION_LINK_TARGET}")), ND_REGION);
    }

    #[test]
    fn normalisation_never_climbs_above_root() {
        assert_eq!(normalize("/a/b", "../../../etc/passwd"), "/etc/passwd");
        assert_eq!(normalize("/a", "./x//y/../z"), "/a/x/z");
        assert_eq!(normalize("/", "/"), "/");
        assert_eq!(normalize("/w", "/mnt/pmem0/../pmem0/pool"), "/mnt/pmem0/pool");
    }
}
