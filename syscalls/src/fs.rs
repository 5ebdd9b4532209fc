//! Path-based calls: open, stat, directories, links, renames, sizes.
//!
//! Host files are opened for real (read-only outside the writable roots, see [`crate::vfs`]).
//! What `stat` reports is virtualised so that a run does not depend on the host's file system:
//! device and inode numbers are derived from the guest path, every timestamp is the virtual epoch,
//! owners are the guest's own identity, and block counts follow from the size. Directory listings
//! are sorted by name, with `.` and `..` first.
//!
//! Links: hard links only between names inside the writable roots (so a read-only host file can
//! never become writable through one); symbolic links may be created inside them and point
//! anywhere, since everything written through one is checked where it lands.
//!
//! Left out: extended attributes, `O_TMPFILE` (EOPNOTSUPP), file locks beyond granting them.
//!
//! For `ferrite crash` ([`crate::KernelConfig::track_durable`]) the calls that change a regular
//! file of the working directory also keep what a crash would leave of it ([`Durable`]).

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use emu::Machine;

use crate::fd::{Description, Kind};
use crate::vfs::{Target, VirtualFile};
use crate::{err, Errno, Kernel, SysResult};

/// The virtual epoch (2030-01-01T00:00:00Z): where the guest's wall clock starts, and the time
/// `stat` shows of a file that has no other deterministic one ([`Kernel::file_time`]). It lies
/// ahead of the host's files, whose own times the guest sees: a file newer than the clock is
/// "in the future" (`make` and `tar` warn of clock skew, a build thinks its targets stale).
/// Before 2038, for programs that keep times in 32 bits (CPython's `.pyc` headers).
pub const EPOCH: i64 = 1_893_456_000;

/// When this ferrite process started, on the host's clock: a host file last modified before it
/// shows its host modification time; one modified since (a copy, an image, a file of an
/// earlier branch of this run) shows a virtual one. Taken by [`host_start`] when ferrite starts.
static HOST_START: std::sync::OnceLock<std::time::SystemTime> = std::sync::OnceLock::new();

/// Fixes ferrite's start time for [`Kernel::file_time`]; `main` calls it first thing, so every
/// file ferrite itself writes is newer.
pub fn host_start() -> std::time::SystemTime {
    *HOST_START.get_or_init(std::time::SystemTime::now)
}

/// Nanoseconds since the Unix epoch of [`EPOCH`].
const EPOCH_NS: i64 = EPOCH * 1_000_000_000;

/// `utimensat`'s special `tv_nsec` values.
const UTIME_NOW: i64 = (1 << 30) - 1;
const UTIME_OMIT: i64 = (1 << 30) - 2;

/// How a `utime`-family call gives the new times.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NewTimes {
    /// `struct timespec[2]` (`utimensat`), or now if null.
    Spec(u64),
    /// `struct timeval[2]` (`utimes`, `futimesat`), or now if null.
    Val(u64),
    /// `struct utimbuf` (`utime`), or now if null.
    Buf(u64),
}

/// What a crash would leave of the regular files the guest changes in its working directory (PM
/// files are the device's business), by path relative to it: the model of a journalling file
/// system such as ext4 in its default `data=ordered` mode, simplified.
///
/// - **Data is durable at `fsync`/`fdatasync`** of the file (and at a write through a descriptor
///   opened `O_SYNC`/`O_DSYNC`): a crash keeps a file's content as of its last one, or as it was
///   when the run started, and loses every write, truncation and extension since (what ext4's
///   delayed allocation does to data still in the page cache).
/// - **Names are durable at once**: creating, removing, renaming and linking a file survive any
///   later crash, as if the journal committed them before the call returned. A file created and
///   never synced is therefore *present and empty* in a crash image, and a rename moves the
///   durable content of its source (so `write(tmp); rename(tmp, file)` without an `fsync(tmp)`
///   leaves `file` empty, ext4's famous zero-length files). The `fsync` of a directory the
///   entries of which changed is not needed in this model (POSIX asks for it; ext4's journal
///   commits the entries with the next fsync of anything), so a program that forgets it is not
///   caught.
/// - Only files changed through the system calls are tracked, when first opened for writing,
///   truncated, removed, renamed or linked: their content at that moment (or their absence) is
///   their content at the start. Directories and symbolic links are not part of the model
///   (the working directory's final directories are in every image), a hard link is a copy, and
///   an `fsync` reads the file at the path its descriptor was opened by.
#[derive(Clone, Debug, Default)]
pub struct Durable {
    /// Every tracked file's content when the run started (`None`: absent).
    pub(crate) initial: BTreeMap<PathBuf, Option<Vec<u8>>>,
    /// What a crash now would leave of each tracked file.
    pub(crate) now: BTreeMap<PathBuf, Option<Vec<u8>>>,
    /// Counts the changes of `now`.
    pub(crate) generation: u64,
}

/// One directory entry as `getdents64` returns it.
#[derive(Clone, Debug)]
pub struct DirEntry {
    /// The entry's name, without a NUL.
    pub name: Vec<u8>,
    /// Its inode number: derived from the guest path, so listings do not depend on the host.
    pub ino: u64,
    /// Its `DT_*` type.
    pub dtype: u8,
}

/// What `stat` says about a file, before it is laid out for `stat` or `statx`.
struct StatInfo {
    dev: u64,
    ino: u64,
    nlink: u64,
    mode: u32,
    size: u64,
    rdev: u64,
    /// Every timestamp, in ns since the Unix epoch ([`Kernel::file_time`]).
    time: i64,
}

fn path_ino(path: &str) -> u64 {
    let h = blake3::hash(path.as_bytes());
    let b = h.as_bytes();
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) >> 16 | 2
}

fn dev_for(pm: bool) -> u64 {
    // makedev(259, 0) for the PM namespace (as /dev/pmem0 would be), makedev(8, 1) otherwise.
    if pm {
        259 << 8
    } else {
        (8 << 8) | 1
    }
}

/// The host's identity of a file for [`Kernel::inode`]: its device and inode numbers, and its
/// birth time where the host file system keeps one (so a host inode number reused by a later
/// file is another file).
type HostId = (u64, u64, i128);

fn host_id(meta: &std::fs::Metadata) -> HostId {
    let born = meta.created().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    (meta.dev(), meta.ino(), born.map_or(-1, |d| d.as_nanos() as i128))
}

/// A host file's `stat`: `ino` from [`Kernel::inode`]; a directory has 2 links, anything else
/// the host's count (hard links are real host links, which programs see: `tar` and `du` count
/// a file with several links once, `git clone` checks that the link it made is the source).
fn stat_of_meta(meta: &std::fs::Metadata, ino: u64, pm: bool, time: i64) -> StatInfo {
    let ft = meta.file_type();
    StatInfo {
        time,
        dev: dev_for(pm),
        ino,
        nlink: if ft.is_dir() { 2 } else { meta.nlink() },
        mode: meta.mode(),
        size: if ft.is_dir() { 4096 } else { meta.len() },
        rdev: if ft.is_char_device() || ft.is_block_device() { meta.rdev() } else { 0 },
    }
}

fn stat_of_virtual(v: VirtualFile, guest: &str) -> StatInfo {
    let (mode, rdev) = match v {
        VirtualFile::Null => (libc::S_IFCHR | 0o666, (1 << 8) | 3),
        VirtualFile::Zero => (libc::S_IFCHR | 0o666, (1 << 8) | 5),
        VirtualFile::Urandom => (libc::S_IFCHR | 0o666, (1 << 8) | 9),
        VirtualFile::Dir => (libc::S_IFDIR | 0o555, 0),
        VirtualFile::Link(t) => {
            let size = t.len() as u64;
            return StatInfo {
                dev: 5,
                ino: path_ino(guest),
                nlink: 1,
                mode: libc::S_IFLNK | 0o777,
                size,
                rdev: 0,
                time: EPOCH_NS,
            };
        }
        VirtualFile::Magic | VirtualFile::Descriptor(_) => (libc::S_IFLNK | 0o777, 0),
        VirtualFile::Comm(_) => (libc::S_IFREG | 0o644, 0),
        _ => (libc::S_IFREG | 0o444, 0),
    };
    StatInfo { dev: 5, ino: path_ino(guest), nlink: 1, mode, size: 0, rdev, time: EPOCH_NS }
}

impl Kernel {
    /// The listing of a virtual directory whose entries are the running machine's, not fixed:
    /// `/proc/self/task` and `/proc/PID/task` (the process's threads, by id), `/proc/self/task/TID`
    /// (`comm`), `/proc/PID` (`task`), `/proc/self/fd` (the descriptors, as links); `None` for
    /// any other.
    fn listing_of_the_running(&self, guest: &str) -> Option<Vec<DirEntry>> {
        if guest == "/proc" {
            // The generated entries, then a directory for each live process (ps lists them).
            let mut list = virtual_dir_entries(guest);
            for pid in self.procs.keys() {
                let name = pid.to_string();
                let ino = path_ino(&format!("/proc/{name}"));
                list.push(DirEntry { name: name.into_bytes(), ino, dtype: libc::DT_DIR });
            }
            return Some(list);
        }
        let (names, dtype): (Vec<String>, u8) = if guest == "/proc/self/fd" {
            (self.fds.fds.keys().map(|n| n.to_string()).collect(), libc::DT_LNK)
        } else if guest == "/proc/self/task" || crate::vfs::proc_pid_path(guest).is_some_and(|(_, r)| r == "task") {
            let pid = crate::vfs::proc_pid_path(guest).map_or(self.pid, |(p, _)| p);
            (self.threads.values().filter(|t| t.pid == pid).map(|t| t.tid.to_string()).collect(), libc::DT_DIR)
        } else if guest.starts_with("/proc/self/task/") {
            (vec!["comm".to_string()], libc::DT_REG)
        } else if guest.strip_prefix("/proc/").is_some_and(|p| p.parse::<u32>().is_ok()) {
            let mut list = virtual_dir_entries(guest);
            for (name, dtype) in [
                ("cmdline", libc::DT_REG),
                ("comm", libc::DT_REG),
                ("stat", libc::DT_REG),
                ("status", libc::DT_REG),
                ("task", libc::DT_DIR),
            ] {
                list.push(DirEntry {
                    name: name.as_bytes().to_vec(),
                    ino: path_ino(&format!("{guest}/{name}")),
                    dtype,
                });
            }
            return Some(list);
        } else {
            return None;
        };
        let mut list = vec![
            DirEntry { name: b".".to_vec(), ino: path_ino(guest), dtype: libc::DT_DIR },
            DirEntry { name: b"..".to_vec(), ino: path_ino(&crate::vfs::normalize(guest, "..")), dtype: libc::DT_DIR },
        ];
        for name in names {
            let ino = path_ino(&format!("{guest}/{name}"));
            list.push(DirEntry { name: name.into_bytes(), ino, dtype });
        }
        Some(list)
    }
}

/// The listing of the virtual directory `guest`: `.`, `..`, then its children.
fn virtual_dir_entries(guest: &str) -> Vec<DirEntry> {
    let mut list = vec![
        DirEntry { name: b".".to_vec(), ino: path_ino(guest), dtype: libc::DT_DIR },
        DirEntry { name: b"..".to_vec(), ino: path_ino(&crate::vfs::normalize(guest, "..")), dtype: libc::DT_DIR },
    ];
    for (name, dtype) in crate::vfs::virtual_children(guest) {
        let child = format!("{}/{name}", guest.trim_end_matches('/'));
        list.push(DirEntry { name: name.into_bytes(), ino: path_ino(&child), dtype });
    }
    list
}

impl StatInfo {
    /// A descriptor's file that has no path (a pipe, a socket, an eventfd...).
    fn anonymous(dev: u64, ino: u64, mode: u32) -> StatInfo {
        StatInfo { dev, ino, nlink: 1, mode, size: 0, rdev: 0, time: EPOCH_NS }
    }

    fn to_stat(&self) -> [u8; 144] {
        let mut b = [0u8; 144];
        let put = |b: &mut [u8; 144], off: usize, v: u64| b[off..off + 8].copy_from_slice(&v.to_le_bytes());
        put(&mut b, 0, self.dev);
        put(&mut b, 8, self.ino);
        put(&mut b, 16, self.nlink);
        b[24..28].copy_from_slice(&self.mode.to_le_bytes());
        b[28..32].copy_from_slice(&(crate::process::UID as u32).to_le_bytes());
        b[32..36].copy_from_slice(&(crate::process::UID as u32).to_le_bytes());
        put(&mut b, 40, self.rdev);
        put(&mut b, 48, self.size);
        put(&mut b, 56, 4096);
        put(&mut b, 64, self.size.div_ceil(4096) * 8);
        let (sec, nsec) = (self.time.div_euclid(1_000_000_000), self.time.rem_euclid(1_000_000_000));
        for off in [72, 88, 104] {
            put(&mut b, off, sec as u64);
            put(&mut b, off + 8, nsec as u64);
        }
        b
    }

    fn to_statx(&self) -> [u8; 256] {
        let mut b = [0u8; 256];
        let p32 = |b: &mut [u8; 256], off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_le_bytes());
        let p64 = |b: &mut [u8; 256], off: usize, v: u64| b[off..off + 8].copy_from_slice(&v.to_le_bytes());
        p32(&mut b, 0, 0x7ff); // STATX_BASIC_STATS | STATX_BTIME
        p32(&mut b, 4, 4096);
        p32(&mut b, 16, self.nlink as u32);
        p32(&mut b, 20, crate::process::UID as u32);
        p32(&mut b, 24, crate::process::UID as u32);
        b[28..30].copy_from_slice(&(self.mode as u16).to_le_bytes());
        p64(&mut b, 32, self.ino);
        p64(&mut b, 40, self.size);
        p64(&mut b, 48, self.size.div_ceil(4096) * 8);
        let (sec, nsec) = (self.time.div_euclid(1_000_000_000), self.time.rem_euclid(1_000_000_000));
        for off in [64, 80, 96, 112] {
            p64(&mut b, off, sec as u64);
            p32(&mut b, off + 8, nsec as u32);
        }
        p32(&mut b, 128, (self.rdev >> 8) as u32);
        p32(&mut b, 132, (self.rdev & 0xff) as u32);
        p32(&mut b, 136, (self.dev >> 8) as u32);
        p32(&mut b, 140, (self.dev & 0xff) as u32);
        b
    }
}

impl Kernel {
    /// The inode number `stat` and `getdents64` show for a host file: the number of the guest
    /// path it was first seen under in this run, kept for the file (by its host identity) from
    /// then on, so the names of one file, its hard links, show one inode, as on Linux, and a
    /// file keeps its number when renamed. Derived from paths and the guest's order of calls,
    /// never from host inode numbers, so runs on different hosts see the same numbers.
    pub(crate) fn inode(&self, md: &std::fs::Metadata, guest: &str) -> u64 {
        *self.inodes.borrow_mut().entry(host_id(md)).or_insert_with(|| path_ino(guest))
    }

    /// The guest path a path argument names (relative to `dirfd`), with its symbolic links
    /// resolved in the guest's namespace ([`Kernel::walk`]), the last one only when `follow`.
    pub(crate) fn path_arg(&self, m: &Machine, dirfd: i32, addr: u64, follow: bool) -> Result<String, Errno> {
        let guest = self.lexical_path_arg(m, dirfd, addr)?;
        self.walk(&guest, follow)
    }

    fn lexical_path_arg(&self, m: &Machine, dirfd: i32, addr: u64) -> Result<String, Errno> {
        let raw = m.read_cstr(addr, 4096).map_err(|e| match e {
            emu::MemError::Protection(_) if m.read_cstr(addr, 1 << 20).is_ok() => Errno(libc::ENAMETOOLONG),
            _ => Errno(libc::EFAULT),
        })?;
        if raw.is_empty() {
            return err(libc::ENOENT);
        }
        let s = String::from_utf8(raw).map_err(|_| Errno(libc::ENOENT))?;
        self.guest_path(dirfd, &s)
    }

    fn virtual_contents(&mut self, m: &Machine, v: VirtualFile) -> Vec<u8> {
        match v {
            VirtualFile::Maps => crate::process::proc_maps(m).into_bytes(),
            VirtualFile::Status => {
                self.proc_view(m, self.pid).map_or(Vec::new(), |v| crate::process::proc_status(&v).into_bytes())
            }
            VirtualFile::Stat => {
                self.proc_view(m, self.pid).map_or(Vec::new(), |v| crate::process::proc_stat(&v).into_bytes())
            }
            VirtualFile::Cmdline => self.cmdline_of(m, self.pid),
            VirtualFile::Pid(pid, crate::vfs::PidFile::Status) => {
                self.proc_view(m, pid).map_or(Vec::new(), |v| crate::process::proc_status(&v).into_bytes())
            }
            VirtualFile::Pid(pid, crate::vfs::PidFile::Stat) => {
                self.proc_view(m, pid).map_or(Vec::new(), |v| crate::process::proc_stat(&v).into_bytes())
            }
            VirtualFile::Pid(pid, crate::vfs::PidFile::Cmdline) => self.cmdline_of(m, pid),
            VirtualFile::Text(t) => t.as_bytes().to_vec(),
            VirtualFile::SysvIpc(kind) => self.sysvipc_proc(kind).into_bytes(),
            VirtualFile::KernelStat => {
                let ticks = m.icount() / 10_000_000;
                let mut f = format!("cpu  {ticks} 0 0 0 0 0 0 0 0 0\n");
                for c in 0..self.cfg.cpus.max(1) {
                    f += &format!("cpu{c} {} 0 0 0 0 0 0 0 0 0\n", if c == 0 { ticks } else { 0 });
                }
                let btime = self.realtime_offset_ns() / 1_000_000_000;
                let made = self.next_tid.saturating_sub(crate::process::PID);
                f += &format!("intr 0\nctxt 0\nbtime {btime}\nprocesses {made}\nprocs_running 1\nprocs_blocked 0\n");
                f.into_bytes()
            }
            VirtualFile::Uptime => {
                let cs = self.now_ns(m) / 10_000_000;
                format!("{}.{:02} {}.{:02}\n", cs / 100, cs % 100, cs / 100, cs % 100).into_bytes()
            }
            VirtualFile::CpuInfo => emu::cpuid::CpuidTable::default().proc_cpuinfo(self.cfg.cpus).into_bytes(),
            VirtualFile::CpuOnline => {
                if self.cfg.cpus <= 1 {
                    b"0\n".to_vec()
                } else {
                    format!("0-{}\n", self.cfg.cpus - 1).into_bytes()
                }
            }
            VirtualFile::Mounts => crate::process::proc_mounts(&self.cfg.pm_mount).into_bytes(),
            // What PMDK reads to decide whether flushing is needed (eADR: the caches are in the
            // persistence domain), consistent with the device's model.
            VirtualFile::PersistenceDomain => match m.pm().config().persistency {
                emu::pm::Persistency::Eadr => b"cpu_cache\n".to_vec(),
                emu::pm::Persistency::Adr => b"memory_controller\n".to_vec(),
            },
            VirtualFile::Uuid => {
                let mut r = [0u8; 16];
                self.rng.fill(&mut r);
                r[6] = (r[6] & 0x0f) | 0x40;
                r[8] = (r[8] & 0x3f) | 0x80;
                let h: String = r.iter().map(|b| format!("{b:02x}")).collect();
                format!("{}-{}-{}-{}-{}\n", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32]).into_bytes()
            }
            _ => Vec::new(),
        }
    }

    /// Hashes a host file the first time the guest opens it, before the guest can change it:
    /// its contents are an input of the run (a PM pool included). Files the guest created itself
    /// are outputs, not inputs.
    fn record_input(&mut self, guest: &str, host: &Path) {
        if !self.cfg.hash_inputs || self.inputs.contains_key(guest) || self.proc.created.contains(guest) {
            return;
        }
        let mut h = blake3::Hasher::new();
        let ok = std::fs::File::open(host).ok().and_then(|f| h.update_reader(f).ok().map(|_| ())).is_some();
        if ok {
            self.inputs.insert(guest.to_string(), h.finalize().to_hex().to_string());
        }
    }

    pub(crate) fn openat(&mut self, m: &mut Machine, dirfd: i32, path: u64, flags: i32, mode: u32) -> SysResult {
        // O_CREAT|O_EXCL never follows a final link (it fails with EEXIST on one).
        let follow =
            flags & libc::O_NOFOLLOW == 0 && flags & (libc::O_CREAT | libc::O_EXCL) != libc::O_CREAT | libc::O_EXCL;
        let guest = self.path_arg(m, dirfd, path, follow)?;
        self.open_walked(m, guest, flags, mode, follow)
    }

    /// The rest of `openat` (and `openat2`) once the path is walked: `guest`, with its links
    /// resolved (the last one only when `follow`).
    pub(crate) fn open_walked(
        &mut self,
        m: &mut Machine,
        guest: String,
        flags: i32,
        mode: u32,
        follow: bool,
    ) -> SysResult {
        let cloexec = flags & libc::O_CLOEXEC != 0;
        if flags & libc::O_TMPFILE == libc::O_TMPFILE {
            return err(libc::EOPNOTSUPP);
        }
        let acc = flags & libc::O_ACCMODE;
        // O_PATH ignores every flag but O_CLOEXEC, O_DIRECTORY and O_NOFOLLOW (open(2)).
        let o_path = flags & libc::O_PATH != 0;
        let wants_write = !o_path && (acc != libc::O_RDONLY || flags & (libc::O_CREAT | libc::O_TRUNC) != 0);
        let mut truncated = false;
        let desc = match self.resolve(&guest)? {
            // A location only, opened without reading anything: the host's own O_PATH
            // descriptor, of the link itself with O_NOFOLLOW (then `fstat` describes the link and
            // `readlinkat(fd, "")` reads it, as on Linux), never waiting on a FIFO.
            Target::Host { host, pm, .. } if o_path => {
                let md = std::fs::symlink_metadata(&host)?;
                if flags & libc::O_DIRECTORY != 0 && !md.is_dir() {
                    return err(libc::ENOTDIR);
                }
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | (flags & libc::O_DIRECTORY))
                    .open(&host)?;
                let kind =
                    if md.is_dir() { Kind::Dir { host, entries: None, pos: 0 } } else { Kind::File { file, host, pm } };
                Description { kind, guest_path: guest, flags }
            }
            Target::Virtual(VirtualFile::Link(_) | VirtualFile::Magic) => {
                // Only a link not followed gets here: O_NOFOLLOW, or O_CREAT|O_EXCL.
                return err(if flags & libc::O_CREAT != 0 { libc::EEXIST } else { libc::ELOOP });
            }
            Target::Virtual(VirtualFile::Descriptor(fd)) => {
                if !follow {
                    return err(if flags & libc::O_CREAT != 0 { libc::EEXIST } else { libc::ELOOP });
                }
                self.reopen(fd, flags)?
            }
            Target::Virtual(v) => {
                if wants_write
                    && !matches!(v, VirtualFile::Null | VirtualFile::Zero | VirtualFile::Urandom | VirtualFile::Comm(_))
                {
                    return err(libc::EACCES);
                }
                let kind = match v {
                    VirtualFile::Null => Kind::Null,
                    VirtualFile::Zero => Kind::Zero,
                    VirtualFile::Urandom => Kind::Urandom,
                    VirtualFile::Comm(tid) => Kind::Comm { tid, pos: 0 },
                    VirtualFile::Dir => {
                        let entries =
                            Some(self.listing_of_the_running(&guest).unwrap_or_else(|| virtual_dir_entries(&guest)));
                        Kind::Dir { host: Path::new("/nonexistent-virtual").into(), entries, pos: 0 }
                    }
                    v => Kind::Virtual { data: self.virtual_contents(m, v), pos: 0 },
                };
                Description { kind, guest_path: guest, flags }
            }
            Target::Host { host, pm, .. } => {
                if wants_write && !pm {
                    self.track(&guest);
                }
                let writable = if wants_write { Some(self.resolve_for_write(&guest)?) } else { None };
                let host = writable.as_ref().map_or(host, |w| w.host.clone());
                if flags & libc::O_TRUNC != 0 && acc == libc::O_RDONLY {
                    return err(libc::EACCES);
                }
                let meta = std::fs::symlink_metadata(&host);
                if let Ok(md) = &meta {
                    if md.file_type().is_fifo() {
                        if flags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL {
                            return err(libc::EEXIST);
                        }
                        return self.fifo_open(md, guest, flags, cloexec);
                    }
                    if md.is_dir() {
                        if acc != libc::O_RDONLY {
                            return err(libc::EISDIR);
                        }
                        let kind = Kind::Dir { host: host.clone(), entries: None, pos: 0 };
                        let d = Description { kind, guest_path: guest.clone(), flags };
                        let n = self.fds.insert(d, cloexec)?;
                        if self.inotify_watching() {
                            self.fsnotify(&guest, None, crate::inotify::IN_OPEN);
                        }
                        return Ok(n as u64);
                    }
                } else if flags & libc::O_DIRECTORY != 0 && flags & libc::O_CREAT == 0 {
                    return Err(meta.err().map(Errno::from).unwrap_or(Errno(libc::ENOENT)));
                }
                let existed = meta.is_ok();
                if let Ok(md) = &meta {
                    if md.is_file() && !owner_may(md.permissions().mode(), acc) {
                        return err(libc::EACCES);
                    }
                }
                if existed && flags & libc::O_TRUNC == 0 {
                    self.record_input(&guest, &host);
                }
                let old_len = meta.as_ref().map_or(0, |md| md.len());
                // The walk resolved every link, the last one included unless the guest asked not
                // to: a link found now was put there since, and is not followed.
                let host_flags = acc
                    | libc::O_NOFOLLOW
                    | flags
                        & (libc::O_APPEND
                            | libc::O_CREAT
                            | libc::O_EXCL
                            | libc::O_DIRECTORY
                            | libc::O_NONBLOCK
                            | if acc != libc::O_RDONLY { libc::O_TRUNC } else { 0 });
                let file = match &writable {
                    Some(w) => w.open(host_flags, mode & 0o777)?,
                    None => std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(host_flags & !libc::O_ACCMODE)
                        .open(&host)?,
                };
                if existed && flags & libc::O_TRUNC != 0 {
                    truncated = true;
                    self.file_shrunk(m, &guest, &host, old_len, 0);
                    self.changed(m, &guest);
                }
                if !existed {
                    self.changed(m, &guest);
                    self.changed_entry(m, &guest);
                    self.fsnotify_create(&guest);
                    self.proc.created.insert(guest.clone());
                    if !pm {
                        self.set_durable(m, &[(&guest, Some(Vec::new()))]);
                    }
                }
                Description { kind: Kind::File { file, host, pm }, guest_path: guest, flags }
            }
        };
        let n = self.fds.insert(desc, cloexec)?;
        if self.inotify_watching() {
            // Linux opens (fsnotify_open in do_dentry_open), then truncates (handle_truncate).
            self.fsnotify_fd(n, crate::inotify::IN_OPEN);
            if truncated {
                self.fsnotify_fd(n, crate::inotify::IN_MODIFY);
            }
        }
        Ok(n as u64)
    }

    /// Opens `/proc/self/fd/N` of a descriptor that has no path (a pipe, a standard stream, a
    /// generated file): a new description of the same thing, as Linux reopens the inode. A pipe
    /// end is chosen by the access asked for; a standard stream only in its own direction.
    fn reopen(&mut self, fd: i32, flags: i32) -> Result<Description, Errno> {
        let acc = flags & libc::O_ACCMODE;
        let f = self.fds.get(fd)?.clone();
        let d = f.desc.borrow();
        let kind = match (&d.kind, acc) {
            (Kind::PipeRead(p) | Kind::PipeWrite(p) | Kind::PipeRdWr(p), libc::O_RDONLY) => {
                p.borrow_mut().readers += 1;
                Kind::PipeRead(p.clone())
            }
            (Kind::PipeRead(p) | Kind::PipeWrite(p) | Kind::PipeRdWr(p), libc::O_WRONLY) => {
                p.borrow_mut().writers += 1;
                Kind::PipeWrite(p.clone())
            }
            (Kind::PipeRead(p) | Kind::PipeWrite(p) | Kind::PipeRdWr(p), libc::O_RDWR) => {
                let mut b = p.borrow_mut();
                b.readers += 1;
                b.writers += 1;
                Kind::PipeRdWr(p.clone())
            }
            (Kind::Stdin, libc::O_RDONLY) => Kind::Stdin,
            (Kind::Stdout, libc::O_WRONLY) => Kind::Stdout,
            (Kind::Stderr, libc::O_WRONLY) => Kind::Stderr,
            (Kind::Null, _) => Kind::Null,
            (Kind::Zero, _) => Kind::Zero,
            (Kind::Urandom, _) => Kind::Urandom,
            (Kind::Virtual { data, .. }, libc::O_RDONLY) => Kind::Virtual { data: data.clone(), pos: 0 },
            (Kind::File { file, pm, .. }, _) if crate::splice::is_memfd(&d.guest_path) => {
                // A memfd opened again (a new description of the same file), as Linux reopens
                // its inode through the link.
                let file = crate::splice::reopen_host(file, acc)?;
                let host = std::path::PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
                Kind::File { file, host, pm: *pm }
            }
            _ => return err(libc::EACCES),
        };
        Ok(Description { kind, guest_path: d.guest_path.clone(), flags })
    }

    /// What `stat` says of a walked guest path (whose links are resolved already when `follow`;
    /// a host link found now was put there since, and is described, not followed).
    fn stat_path(&self, guest: &str, follow: bool) -> Result<StatInfo, Errno> {
        match self.resolve(guest)? {
            Target::Virtual(VirtualFile::Descriptor(fd)) if follow => self.stat_fd(fd),
            Target::Virtual(v) => Ok(stat_of_virtual(v, guest)),
            Target::Host { host, pm, .. } => {
                let md = std::fs::symlink_metadata(&host)?;
                Ok(stat_of_meta(&md, self.inode(&md, guest), pm, self.file_time(guest, Some(&md), pm)))
            }
        }
    }

    fn stat_fd(&self, fd: i32) -> Result<StatInfo, Errno> {
        let f = self.fds.get(fd)?;
        let d = f.desc.borrow();
        let guest = d.guest_path.clone();
        Ok(match &d.kind {
            Kind::File { file, pm, .. } => {
                let md = file.metadata()?;
                stat_of_meta(&md, self.inode(&md, &guest), *pm, self.file_time(&guest, Some(&md), *pm))
            }
            Kind::Dir { host, .. } => match std::fs::metadata(host) {
                Ok(md) => stat_of_meta(&md, self.inode(&md, &guest), false, self.file_time(&guest, Some(&md), false)),
                Err(_) => stat_of_virtual(VirtualFile::Dir, &guest),
            },
            Kind::Virtual { data, .. } => {
                StatInfo { size: data.len() as u64, ..stat_of_virtual(VirtualFile::Maps, &guest) }
            }
            Kind::Comm { tid, .. } => stat_of_virtual(VirtualFile::Comm(*tid), &guest),
            Kind::Null => stat_of_virtual(VirtualFile::Null, &guest),
            Kind::Zero => stat_of_virtual(VirtualFile::Zero, &guest),
            Kind::Urandom => stat_of_virtual(VirtualFile::Urandom, &guest),
            Kind::EventFd(_) | Kind::Epoll(_) | Kind::TimerFd(_) | Kind::SignalFd(_) | Kind::Inotify(_) => {
                StatInfo::anonymous(13, fd as u64 + 3000, 0o600)
            }
            // A file of the mqueue file system, as Linux shows it.
            Kind::MQueue(_) => StatInfo::anonymous(19, fd as u64 + 4000, libc::S_IFREG | 0o600),
            Kind::Socket(_) => StatInfo::anonymous(8, fd as u64 + 2000, libc::S_IFSOCK | 0o777),
            // Both ends of a pipe (and every descriptor of it) are one inode, as on Linux.
            Kind::PipeRead(p) | Kind::PipeWrite(p) | Kind::PipeRdWr(p) => {
                StatInfo::anonymous(12, pipe_ino(p.borrow().id), libc::S_IFIFO | 0o600)
            }
            // Standard streams look like pipes whatever ferrite's own are, so the guest's
            // buffering does not depend on how ferrite was started.
            Kind::Stdin | Kind::Stdout | Kind::Stderr => StatInfo::anonymous(12, fd as u64 + 1, libc::S_IFIFO | 0o600),
        })
    }

    /// The time `stat` shows of `guest` (its modification, change, access and birth times alike):
    /// the guest's wall clock when it last changed the file in this run; else, for a host file
    /// outside the PM mount last modified before ferrite started (an input, like its bytes), its
    /// host modification time — programs compare it with what they recorded (CPython's
    /// `__pycache__` holds its sources' times, `make` compares targets with prerequisites); else
    /// the virtual epoch. A file modified on the host since ferrite started was written by this
    /// run or its copies, at a host time no run may see.
    fn file_time(&self, guest: &str, meta: Option<&std::fs::Metadata>, pm: bool) -> i64 {
        if let Some(&t) = self.times.get(guest) {
            return t;
        }
        let host = meta.filter(|_| !pm).and_then(|md| md.modified().ok()).filter(|&t| t < host_start());
        host.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_nanos()).ok())
            .unwrap_or(EPOCH_NS)
    }

    /// Notes that the guest changed `guest` now.
    pub(crate) fn changed(&mut self, m: &Machine, guest: &str) {
        let now = self.wall_ns(m);
        self.times.insert(guest.to_string(), now);
    }

    /// Notes that the guest created or removed `guest`: its directory changed too.
    pub(crate) fn changed_entry(&mut self, m: &Machine, guest: &str) {
        self.changed(m, &crate::vfs::normalize(guest, ".."));
    }

    pub(crate) fn fstat(&mut self, m: &mut Machine, fd: i32, buf: u64) -> SysResult {
        let st = self.stat_fd(fd)?;
        m.write(buf, &st.to_stat(), false)?;
        Ok(0)
    }

    fn stat_at(&self, m: &Machine, dirfd: i32, path: u64, flags: i32) -> Result<StatInfo, Errno> {
        if flags & libc::AT_EMPTY_PATH != 0 && m.read_cstr(path, 1).map(|s| s.is_empty()).unwrap_or(false) {
            return if dirfd == libc::AT_FDCWD { self.stat_path(&self.guest_cwd(), true) } else { self.stat_fd(dirfd) };
        }
        let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
        let guest = self.path_arg(m, dirfd, path, follow)?;
        self.stat_path(&guest, follow)
    }

    pub(crate) fn fstatat(&mut self, m: &mut Machine, dirfd: i32, path: u64, buf: u64, flags: i32) -> SysResult {
        let st = self.stat_at(m, dirfd, path, flags)?;
        m.write(buf, &st.to_stat(), false)?;
        Ok(0)
    }

    pub(crate) fn statx(&mut self, m: &mut Machine, dirfd: i32, path: u64, flags: i32, buf: u64) -> SysResult {
        let st = self.stat_at(m, dirfd, path, flags)?;
        m.write(buf, &st.to_statx(), false)?;
        Ok(0)
    }

    pub(crate) fn faccessat(&mut self, m: &mut Machine, dirfd: i32, path: u64, mode: i32) -> SysResult {
        let guest = self.path_arg(m, dirfd, path, true)?;
        let st = self.stat_path(&guest, true)?;
        if mode & libc::W_OK != 0 && self.in_overlay(&guest).is_none() && self.resolve_for_write(&guest).is_err() {
            return err(libc::EACCES);
        }
        if mode & libc::X_OK != 0 && st.mode & 0o111 == 0 {
            return err(libc::EACCES);
        }
        if (mode & libc::R_OK != 0 && st.mode & 0o400 == 0) || (mode & libc::W_OK != 0 && st.mode & 0o200 == 0) {
            // The guest owns every file and is unprivileged: its owner bits decide (below).
            if st.mode & libc::S_IFMT == libc::S_IFREG {
                return err(libc::EACCES);
            }
        }
        Ok(0)
    }

    /// `chmod`/`fchmodat`: sets the host file's permission bits, for files the guest may write
    /// (EPERM for others, as for a file it does not own). PMDK creates its pools with mode 0 and
    /// then chmods them: a pool left unreadable would outlive the run.
    pub(crate) fn fchmodat(&mut self, m: &mut Machine, dirfd: i32, path: u64, mode: u32, flags: i32) -> SysResult {
        if flags & !libc::AT_SYMLINK_NOFOLLOW != 0 {
            return err(libc::EINVAL);
        }
        let guest = self.path_arg(m, dirfd, path, true)?;
        self.stat_path(&guest, true)?;
        let w = self.write_target(&guest).map_err(|_| Errno(libc::EPERM))?;
        let file = w.open(libc::O_PATH, 0)?;
        chmod_fd(&file, mode & 0o7777)?;
        if self.inotify_watching() {
            self.fsnotify(&guest, None, crate::inotify::IN_ATTRIB);
        }
        Ok(0)
    }

    /// `fchmod`: as `chmod`, on the file a descriptor was opened for (a no-op on pipes and
    /// generated files, which have no host file of their own to change).
    pub(crate) fn fchmod(&mut self, fd: i32, mode: u32) -> SysResult {
        use std::os::unix::fs::PermissionsExt;
        let f = self.fds.get(fd)?.clone();
        let d = f.desc.borrow();
        match &d.kind {
            Kind::File { file, .. } => {
                if d.flags & libc::O_ACCMODE == libc::O_RDONLY && self.write_target(&d.guest_path).is_err() {
                    return err(libc::EPERM);
                }
                file.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))?;
                drop(d);
                if self.inotify_watching() {
                    self.fsnotify_fd(fd, crate::inotify::IN_ATTRIB);
                }
                Ok(0)
            }
            // A directory opened for its descriptor (rsync sets a copied directory's mode so,
            // after filling it): its host directory, where the guest may change it, as `chmod`.
            Kind::Dir { entries: None, .. } => {
                let w = self.write_target(&d.guest_path).map_err(|_| Errno(libc::EPERM))?;
                drop(d);
                chmod_fd(&w.open(libc::O_PATH, 0)?, mode & 0o7777)?;
                if self.inotify_watching() {
                    self.fsnotify_fd(fd, crate::inotify::IN_ATTRIB);
                }
                Ok(0)
            }
            _ => Ok(0),
        }
    }

    /// `fchownat` (and `chown`, `lchown`): every file belongs to the guest's user
    /// ([`process::UID`](crate::process::UID)), who is unprivileged, so as Linux's
    /// `chown_common` and `chown_ok` answer such a caller, the owner may only be "changed" to
    /// itself and the group to one of the user's (its only group is the same id): each id -1
    /// or [`UID`](crate::process::UID), else EPERM. Nothing about the owner changes, but the
    /// call drops the set-user-ID bit of a non-directory, and its set-group-ID bit when it is
    /// group-executable, as the kernel's `ATTR_KILL_SUID`/`ATTR_KILL_SGID` do even for a
    /// chown to -1, -1. The file must exist and be writable by the sandbox's rules (EPERM
    /// otherwise, as `chmod`).
    pub(crate) fn fchownat(&mut self, m: &mut Machine, dirfd: i32, path: u64, ids: [u64; 2], flags: i32) -> SysResult {
        if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return err(libc::EINVAL);
        }
        if flags & libc::AT_EMPTY_PATH != 0 && m.read_cstr(path, 1).is_ok_and(|p| p.is_empty()) {
            return self.fchown(dirfd, ids);
        }
        let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
        let guest = self.path_arg(m, dirfd, path, follow)?;
        let st = self.stat_path(&guest, follow)?;
        chown_ids(ids)?;
        if st.mode & libc::S_IFMT == libc::S_IFLNK {
            // A link's own mode has no set-id bits to drop; lchown changes nothing else.
            return Ok(0);
        }
        let w = self.write_target(&guest).map_err(|_| Errno(libc::EPERM))?;
        let file = w.open(libc::O_PATH, 0)?;
        drop_setid_bits(&file)?;
        if self.inotify_watching() {
            self.fsnotify(&guest, None, crate::inotify::IN_ATTRIB);
        }
        Ok(0)
    }

    /// `fchown`: as `fchownat` on the file a descriptor was opened for (pipes, sockets and
    /// generated files have no host file to change: the ids are checked and nothing else).
    pub(crate) fn fchown(&mut self, fd: i32, ids: [u64; 2]) -> SysResult {
        let f = self.fds.get(fd)?.clone();
        chown_ids(ids)?;
        let d = f.desc.borrow();
        match &d.kind {
            Kind::File { file, .. } => {
                if d.flags & libc::O_ACCMODE == libc::O_RDONLY && self.write_target(&d.guest_path).is_err() {
                    return err(libc::EPERM);
                }
                drop_setid_bits(file)?;
                drop(d);
                if self.inotify_watching() {
                    self.fsnotify_fd(fd, crate::inotify::IN_ATTRIB);
                }
                Ok(0)
            }
            _ => Ok(0),
        }
    }

    /// `utimensat` (and `utime`, `utimes`, `futimesat`): the file must exist and be one the
    /// guest may write (EPERM otherwise, as for a file it does not own); its new modification
    /// time is what `stat` shows from then on (access times are not kept apart from it). A
    /// null path sets the times of descriptor `dirfd`.
    pub(crate) fn utimensat(
        &mut self,
        m: &mut Machine,
        dirfd: i32,
        path: u64,
        times: NewTimes,
        flags: i32,
    ) -> SysResult {
        if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return err(libc::EINVAL);
        }
        let mtime = self.new_mtime(m, times)?;
        let guest = if path == 0 {
            self.fds.get(dirfd)?.desc.borrow().guest_path.clone()
        } else {
            let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
            let guest = self.path_arg(m, dirfd, path, follow)?;
            self.stat_path(&guest, follow)?;
            if self.in_overlay(&guest).is_none() && self.resolve_for_write(&guest).is_err() {
                return err(libc::EPERM);
            }
            guest
        };
        if self.inotify_watching() && !guest.is_empty() {
            self.fsnotify(&guest, None, crate::inotify::IN_ATTRIB);
        }
        if let (Some(t), false) = (mtime, guest.is_empty()) {
            self.times.insert(guest, t);
        }
        Ok(0)
    }

    /// The modification time a `utime`-family call sets (`None`: left as it is).
    fn new_mtime(&self, m: &Machine, times: NewTimes) -> Result<Option<i64>, Errno> {
        let now = Ok(Some(self.wall_ns(m)));
        let at = |sec: i64, nsec: i64| sec.checked_mul(1_000_000_000).and_then(|s| s.checked_add(nsec));
        match times {
            NewTimes::Spec(0) | NewTimes::Val(0) | NewTimes::Buf(0) => now,
            NewTimes::Spec(p) => {
                let (atime_ns, sec, nsec) = (
                    m.read_u64(p.wrapping_add(8))? as i64,
                    m.read_u64(p.wrapping_add(16))? as i64,
                    m.read_u64(p.wrapping_add(24))? as i64,
                );
                let valid = |n: i64| (0..1_000_000_000).contains(&n) || n == UTIME_NOW || n == UTIME_OMIT;
                if !valid(atime_ns) || !valid(nsec) {
                    return err(libc::EINVAL);
                }
                match nsec {
                    UTIME_NOW => now,
                    UTIME_OMIT => Ok(None),
                    _ => at(sec, nsec).map(Some).ok_or(Errno(libc::EINVAL)),
                }
            }
            NewTimes::Val(p) => {
                let (sec, usec) = (m.read_u64(p.wrapping_add(16))? as i64, m.read_u64(p.wrapping_add(24))? as i64);
                if !(0..1_000_000).contains(&usec) {
                    return err(libc::EINVAL);
                }
                at(sec, usec * 1000).map(Some).ok_or(Errno(libc::EINVAL))
            }
            NewTimes::Buf(p) => at(m.read_u64(p.wrapping_add(8))? as i64, 0).map(Some).ok_or(Errno(libc::EINVAL)),
        }
    }

    pub(crate) fn getdents64(&mut self, m: &mut Machine, fd: i32, buf: u64, len: u64) -> SysResult {
        let f = self.fds.get(fd)?.clone();
        let mut d = f.desc.borrow_mut();
        let guest = d.guest_path.clone();
        let Kind::Dir { host, entries, pos } = &mut d.kind else {
            return err(libc::ENOTDIR);
        };
        if entries.is_none() {
            let mut list = vec![
                DirEntry { name: b".".to_vec(), ino: path_ino(&guest), dtype: libc::DT_DIR },
                DirEntry {
                    name: b"..".to_vec(),
                    ino: path_ino(&crate::vfs::normalize(&guest, "..")),
                    dtype: libc::DT_DIR,
                },
            ];
            // A private working directory lists both of its layers; the PM directory never shows
            // the private working directory's files.
            let listing = match self.private_listing(&guest) {
                Some(l) => l,
                None => std::fs::read_dir(&*host)?.filter_map(|e| e.ok()).map(|e| (e.file_name(), e.path())).collect(),
            };
            let pm_root = self.cfg.private_cwd && *host == self.cfg.pm_dir;
            let mut rest: Vec<DirEntry> = listing
                .into_iter()
                .filter(|(name, _)| !(pm_root && name == crate::vfs::PRIVATE_CWD))
                .map(|(name, path)| {
                    let name = name.into_encoded_bytes();
                    let md = std::fs::symlink_metadata(&path);
                    let dtype = match md.as_ref().map(|md| md.file_type()) {
                        Ok(t) if t.is_dir() => libc::DT_DIR,
                        Ok(t) if t.is_symlink() => libc::DT_LNK,
                        Ok(t) if t.is_file() => libc::DT_REG,
                        Ok(t) if t.is_fifo() => libc::DT_FIFO,
                        Ok(t) if t.is_socket() => libc::DT_SOCK,
                        _ => libc::DT_UNKNOWN,
                    };
                    let child = format!("{}/{}", guest.trim_end_matches('/'), String::from_utf8_lossy(&name));
                    let ino = match &md {
                        Ok(md) => self.inode(md, &child),
                        Err(_) => path_ino(&child),
                    };
                    DirEntry { ino, name, dtype }
                })
                .collect();
            rest.sort_by(|a, b| a.name.cmp(&b.name));
            list.extend(rest);
            *entries = Some(list);
        }
        let list = entries.as_ref().expect("filled above");
        let mut out = Vec::new();
        while *pos < list.len() {
            let e = &list[*pos];
            let reclen = (19 + e.name.len() + 1).div_ceil(8) * 8;
            if out.len() + reclen > len as usize {
                break;
            }
            let start = out.len();
            out.extend_from_slice(&e.ino.to_le_bytes());
            out.extend_from_slice(&((*pos + 1) as u64).to_le_bytes());
            out.extend_from_slice(&(reclen as u16).to_le_bytes());
            out.push(e.dtype);
            out.extend_from_slice(&e.name);
            out.resize(start + reclen, 0);
            *pos += 1;
        }
        if out.is_empty() && *pos < list.len() {
            return err(libc::EINVAL);
        }
        m.write(buf, &out, false)?;
        Ok(out.len() as u64)
    }

    pub(crate) fn mkdirat(&mut self, m: &mut Machine, dirfd: i32, path: u64, mode: u32) -> SysResult {
        let guest = self.path_arg(m, dirfd, path, false)?;
        let p = self.write_target(&guest)?.parent()?;
        // SAFETY: `d` is an open directory and `n` a NUL-terminated C string, alive for the call.
        crate::vfs::at(&p, |d, n| crate::vfs::cvt(unsafe { libc::mkdirat(d, n, mode & 0o777) }))?;
        self.changed(m, &guest);
        self.changed_entry(m, &guest);
        self.fsnotify_create(&guest);
        Ok(0)
    }

    /// A path the guest changes: inside a writable root, or EROFS/EACCES.
    pub(crate) fn write_target(&self, guest: &str) -> Result<crate::vfs::Writable, Errno> {
        match self.resolve(guest)? {
            Target::Host { writable: false, host, .. } if host.exists() => err(libc::EROFS),
            _ => self.resolve_for_write(guest),
        }
    }

    pub(crate) fn unlinkat(&mut self, m: &mut Machine, dirfd: i32, path: u64, flags: i32) -> SysResult {
        let guest = self.path_arg(m, dirfd, path, false)?;
        // In a private working directory, a file of the host's is marked gone once removed.
        let shown = self.private_shown(&guest);
        let watched = self.fsnotify_before_remove(&guest);
        if flags & libc::AT_REMOVEDIR != 0 {
            if self.private_listing(&guest).is_some_and(|l| !l.is_empty()) {
                return err(libc::ENOTEMPTY);
            }
            let p = self.write_target(&guest)?.parent()?;
            // SAFETY: `d` is an open directory and `n` a NUL-terminated C string, alive for the call.
            crate::vfs::at(&p, |d, n| crate::vfs::cvt(unsafe { libc::unlinkat(d, n, libc::AT_REMOVEDIR) }))?;
            if let Some(rel) = shown {
                self.hide(&rel)?;
            }
        } else {
            self.track(&guest);
            let w = self.write_target(&guest)?;
            let host = w.host.clone();
            let md = std::fs::symlink_metadata(&host)?;
            if md.is_dir() {
                return err(libc::EISDIR);
            }
            // SAFETY: `d` is an open directory and `n` a NUL-terminated C string, alive for the call.
            crate::vfs::at(&w.parent()?, |d, n| crate::vfs::cvt(unsafe { libc::unlinkat(d, n, 0) }))?;
            if let Some(rel) = shown {
                self.hide(&rel)?;
            }
            self.set_durable(m, &[(&guest, None)]);
            // A removed PM file leaves the device; a file created later at the same path is a
            // new file with a new id.
            if let Some(id) = self.proc.pm_files.remove(&host.to_string_lossy().into_owned()) {
                m.pm_discard_device(emu::pm::device_addr(id, 0), md.len());
            }
        }
        self.times.remove(&guest);
        self.changed_entry(m, &guest);
        self.fsnotify_removed(&guest, watched);
        Ok(0)
    }

    pub(crate) fn renameat(&mut self, m: &mut Machine, olddir: i32, old: u64, newdir: i32, new: u64) -> SysResult {
        let from = self.path_arg(m, olddir, old, false)?;
        let to = self.path_arg(m, newdir, new, false)?;
        let shown = self.private_shown(&from);
        self.track_tree(&from);
        self.track(&to);
        let wf =
            if self.in_overlay(&from).is_some() { self.resolve_for_rename(&from)? } else { self.write_target(&from)? };
        let (pf, pt) = (wf.parent()?, self.write_target(&to)?.parent()?);
        // A renamed file keeps its time (a file of the host's copied up first would not).
        let time = self.stat_path(&from, false).map(|st| st.time);
        let (moved, replaced) = (self.fsnotify_before_remove(&from), self.fsnotify_before_remove(&to));
        // SAFETY: both descriptors are open directories and both names NUL-terminated C strings,
        // alive for the call.
        crate::vfs::cvt(unsafe { libc::renameat(pf.0.as_raw_fd(), pf.1.as_ptr(), pt.0.as_raw_fd(), pt.1.as_ptr()) })?;
        self.times.remove(&from);
        if let Ok(t) = time {
            self.times.insert(to.clone(), t);
        }
        self.changed_entry(m, &from);
        self.changed_entry(m, &to);
        if let Some(rel) = shown {
            self.hide(&rel)?;
        }
        self.moved(m, &from, &to);
        self.fsnotify_moved(&from, &to, moved, replaced);
        Ok(0)
    }

    /// symlink(2)/symlinkat(2): the link must be created inside a writable root; where it points
    /// is checked whenever something is written through it.
    pub(crate) fn symlinkat(&mut self, m: &mut Machine, target: u64, dirfd: i32, path: u64) -> SysResult {
        let target = m.read_cstr(target, 4096).map_err(|_| Errno(libc::EFAULT))?;
        if target.is_empty() {
            return err(libc::ENOENT);
        }
        let target = std::ffi::CString::new(target).map_err(|_| Errno(libc::EINVAL))?;
        let guest = self.path_arg(m, dirfd, path, false)?;
        let p = self.write_target(&guest)?.parent()?;
        // SAFETY: `d` is an open directory; `n` and `target` are NUL-terminated C strings alive for
        // the call.
        crate::vfs::at(&p, |d, n| crate::vfs::cvt(unsafe { libc::symlinkat(target.as_ptr(), d, n) }))?;
        self.changed(m, &guest);
        self.changed_entry(m, &guest);
        self.fsnotify_create(&guest);
        self.proc.created.insert(guest);
        Ok(0)
    }

    /// link(2)/linkat(2): both names inside writable roots, so a hard link can never make a
    /// read-only host file writable. AT_EMPTY_PATH links the file of a descriptor.
    pub(crate) fn linkat(
        &mut self,
        m: &mut Machine,
        olddir: i32,
        old: u64,
        newdir: i32,
        new: u64,
        flags: i32,
    ) -> SysResult {
        if flags & !(libc::AT_SYMLINK_FOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return err(libc::EINVAL);
        }
        let from = if flags & libc::AT_EMPTY_PATH != 0 && m.read_cstr(old, 1).map(|s| s.is_empty()).unwrap_or(false) {
            self.fds.get(olddir)?.desc.borrow().guest_path.clone()
        } else {
            self.path_arg(m, olddir, old, flags & libc::AT_SYMLINK_FOLLOW != 0)?
        };
        let to = self.path_arg(m, newdir, new, false)?;
        self.track(&to);
        let (pf, pt) = (self.write_target(&from)?.parent()?, self.write_target(&to)?.parent()?);
        // SAFETY: both descriptors are open directories and both names NUL-terminated C strings,
        // alive for the call.
        crate::vfs::cvt(unsafe { libc::linkat(pf.0.as_raw_fd(), pf.1.as_ptr(), pt.0.as_raw_fd(), pt.1.as_ptr(), 0) })?;
        // A crash keeps the new name with the durable content of the old one.
        if self.tracked_rel(&to).is_some() {
            let content = match self.tracked_rel(&from).and_then(|f| self.durable.now.get(&f).cloned()) {
                Some(c) => c,
                None => self.file_now(&from).ok().flatten(),
            };
            self.set_durable(m, &[(&to, content)]);
        }
        if let Ok(st) = self.stat_path(&from, false) {
            self.times.insert(to.clone(), st.time);
        }
        self.changed_entry(m, &to);
        if self.inotify_watching() {
            // Linux's vfs_link: the file's link count (IN_ATTRIB), then the new name.
            if let Some((ident, dir, _)) = self.fsnotify_before_remove(&to) {
                self.fsnotify_self(ident, crate::inotify::IN_ATTRIB | if dir { crate::inotify::IN_ISDIR } else { 0 });
            }
            self.fsnotify_create(&to);
        }
        self.proc.created.insert(to);
        Ok(0)
    }

    pub(crate) fn readlinkat(&mut self, m: &mut Machine, dirfd: i32, path: u64, buf: u64, len: u64) -> SysResult {
        // An empty path reads the link `dirfd` is (an `O_PATH | O_NOFOLLOW` descriptor of one);
        // ENOENT for anything else, as Linux's `do_readlinkat`.
        let mut first = [0u8; 1];
        m.read(path, &mut first).map_err(|_| Errno(libc::EFAULT))?;
        if dirfd != libc::AT_FDCWD && first[0] == 0 {
            let f = self.fds.get(dirfd)?.clone();
            let d = f.desc.borrow();
            let target = match &d.kind {
                Kind::File { host, .. } if d.flags & libc::O_PATH != 0 => {
                    std::fs::read_link(host).map_err(|_| Errno(libc::ENOENT))?
                }
                _ => return err(libc::ENOENT),
            };
            let target = target.into_os_string().into_encoded_bytes();
            let n = target.len().min(len as usize);
            m.write(buf, &target[..n], false)?;
            return Ok(n as u64);
        }
        let guest = self.path_arg(m, dirfd, path, false)?;
        let target: Vec<u8> = if guest == "/proc/self/exe" {
            self.exe().as_bytes().to_vec()
        } else if guest == "/proc/self/cwd" {
            self.guest_cwd().into_bytes()
        } else if guest == "/proc/self/root" {
            b"/".to_vec()
        } else if let Some(n) = guest.strip_prefix("/proc/self/fd/") {
            let fd: i32 = n.parse().map_err(|_| Errno(libc::ENOENT))?;
            self.fds.get(fd).map_err(|_| Errno(libc::ENOENT))?.desc.borrow().guest_path.clone().into_bytes()
        } else {
            match self.resolve(&guest)? {
                Target::Host { host, .. } => std::fs::read_link(host)?.into_os_string().into_encoded_bytes(),
                Target::Virtual(VirtualFile::Link(t)) => t.as_bytes().to_vec(),
                Target::Virtual(_) => return err(libc::EINVAL),
            }
        };
        let n = target.len().min(len as usize);
        m.write(buf, &target[..n], false)?;
        Ok(n as u64)
    }

    pub(crate) fn getcwd(&mut self, m: &mut Machine, buf: u64, len: u64) -> SysResult {
        let mut cwd = self.guest_cwd().into_bytes();
        cwd.push(0);
        if cwd.len() as u64 > len {
            return err(libc::ERANGE);
        }
        m.write(buf, &cwd, false)?;
        Ok(cwd.len() as u64)
    }

    pub(crate) fn chdir(&mut self, m: &mut Machine, path: u64) -> SysResult {
        let guest = self.path_arg(m, libc::AT_FDCWD, path, true)?;
        let st = self.stat_path(&guest, true)?;
        if st.mode & libc::S_IFMT != libc::S_IFDIR {
            return err(libc::ENOTDIR);
        }
        self.proc.cwd = Some(guest);
        Ok(0)
    }

    /// fchdir(2): into a directory opened before (glibc's `fts` walks directories this way).
    pub(crate) fn fchdir(&mut self, fd: i32) -> SysResult {
        let f = self.fds.get(fd)?;
        let d = f.desc.borrow();
        if !matches!(d.kind, Kind::Dir { .. }) {
            return err(libc::ENOTDIR);
        }
        self.proc.cwd = Some(d.guest_path.clone());
        Ok(0)
    }

    pub(crate) fn umask(&mut self, mask: u32) -> SysResult {
        Ok(u64::from(std::mem::replace(&mut self.proc.umask, mask & 0o777)))
    }

    fn statfs_bytes(pm: bool) -> [u8; 120] {
        let mut b = [0u8; 120];
        let vals: [u64; 7] = [0xef53, 4096, 1 << 24, 1 << 23, 1 << 23, 1 << 20, 1 << 19];
        for (i, v) in vals.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        b[56..64].copy_from_slice(&(if pm { 0x2_0000_0001u64 } else { 1 }).to_le_bytes());
        b[64..72].copy_from_slice(&255u64.to_le_bytes());
        b[72..80].copy_from_slice(&4096u64.to_le_bytes());
        b
    }

    pub(crate) fn statfs(&mut self, m: &mut Machine, path: u64, buf: u64) -> SysResult {
        let guest = self.path_arg(m, libc::AT_FDCWD, path, true)?;
        self.stat_path(&guest, true)?;
        let pm = matches!(self.resolve(&guest)?, Target::Host { pm: true, .. });
        m.write(buf, &Self::statfs_bytes(pm), false)?;
        Ok(0)
    }

    pub(crate) fn fstatfs(&mut self, m: &mut Machine, fd: i32, buf: u64) -> SysResult {
        let pm = matches!(self.fds.get(fd)?.desc.borrow().kind, Kind::File { pm: true, .. });
        m.write(buf, &Self::statfs_bytes(pm), false)?;
        Ok(0)
    }

    pub(crate) fn truncate(&mut self, m: &mut Machine, path: u64, len: u64) -> SysResult {
        let guest = self.path_arg(m, libc::AT_FDCWD, path, true)?;
        self.track(&guest);
        let w = self.write_target(&guest)?;
        let (file, host) = (w.open(libc::O_WRONLY, 0)?, w.host);
        let old = file.metadata()?.len();
        file.set_len(len)?;
        self.file_shrunk(m, &guest, &host, old, len);
        if len > old {
            self.file_grown(m, &host, len);
        }
        self.changed(m, &guest);
        if self.inotify_watching() {
            self.fsnotify(&guest, None, crate::inotify::IN_MODIFY);
        }
        Ok(0)
    }

    pub(crate) fn ftruncate(&mut self, m: &mut Machine, fd: i32, len: u64) -> SysResult {
        if (len as i64) < 0 {
            return err(libc::EINVAL);
        }
        let f = self.fds.get(fd)?.clone();
        let d = f.desc.borrow();
        if let Kind::File { pm: false, .. } = d.kind {
            self.track(&d.guest_path);
        }
        match &d.kind {
            Kind::File { file, host, .. } if d.flags & libc::O_ACCMODE != libc::O_RDONLY => {
                let old = file.metadata()?.len();
                file.set_len(len)?;
                self.file_shrunk(m, &d.guest_path, host, old, len);
                let (guest, host) = (d.guest_path.clone(), host.clone());
                drop(d);
                if len > old {
                    self.file_grown(m, &host, len);
                }
                self.changed(m, &guest);
                if self.inotify_watching() {
                    self.fsnotify_fd(fd, crate::inotify::IN_MODIFY);
                }
                Ok(0)
            }
            Kind::File { .. } => err(libc::EINVAL),
            _ => err(libc::EINVAL),
        }
    }

    /// fallocate(2): allocating (mode 0, or `FALLOC_FL_KEEP_SIZE`), `FALLOC_FL_PUNCH_HOLE` and
    /// `FALLOC_FL_ZERO_RANGE`, done on the host file. The bytes a hole or a zeroed range clears
    /// read as zeros through every mapping; in a mapped PM file the device sees them cleared
    /// and durable at once, as for a `pwrite` of zeros (a DAX file system zeroes the media and
    /// commits the change before the call returns). Collapsing and inserting ranges, which
    /// move a file's bytes under its mappings, are EOPNOTSUPP, as on file systems without them.
    pub(crate) fn fallocate(&mut self, m: &mut Machine, fd: i32, mode: i32, off: u64, len: u64) -> SysResult {
        const KEEP_SIZE: i32 = libc::FALLOC_FL_KEEP_SIZE;
        const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE;
        const ZERO: i32 = libc::FALLOC_FL_ZERO_RANGE;
        let f = self.fds.get(fd)?.clone();
        let d = f.desc.borrow();
        let Kind::File { file, host, pm } = &d.kind else {
            return err(libc::ENODEV);
        };
        if (off as i64) < 0 || (len as i64) <= 0 {
            return err(libc::EINVAL);
        }
        if d.flags & libc::O_ACCMODE == libc::O_RDONLY {
            return err(libc::EBADF);
        }
        if !matches!(mode, 0 | KEEP_SIZE) && mode != PUNCH | KEEP_SIZE && mode != ZERO && mode != ZERO | KEEP_SIZE {
            return err(libc::EOPNOTSUPP);
        }
        off.checked_add(len).filter(|&e| e <= i64::MAX as u64).ok_or(Errno(libc::EFBIG))?;
        let guest = d.guest_path.clone();
        let (file, host, pm) = (file.try_clone()?, host.clone(), *pm);
        drop(d);
        if !pm {
            self.track(&guest);
        }
        self.fallocate_host(m, &file, &host, pm, mode, off, len)?;
        self.changed(m, &guest);
        if self.inotify_watching() {
            self.fsnotify_fd(fd, crate::inotify::IN_MODIFY);
        }
        Ok(0)
    }

    /// fallocate(2) of the host file `file` (at `host`, on the PM mount if `pm`), telling the PM
    /// device about the mapped bytes a hole or zeroed range clears and the mappings past the
    /// file's end about its growth.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fallocate_host(
        &mut self,
        m: &mut Machine,
        file: &std::fs::File,
        host: &std::path::Path,
        pm: bool,
        mode: i32,
        off: u64,
        len: u64,
    ) -> Result<(), Errno> {
        let clears = mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0;
        let end = off.saturating_add(len);
        let old_size = file.metadata()?.len();
        // What the device must hear: the old bytes of the mapped lines the call clears.
        let id = pm.then(|| self.proc.pm_files.get(&host.to_string_lossy().into_owned()).copied()).flatten();
        let mut cleared: Vec<(u64, Vec<u8>)> = Vec::new();
        if let (Some(id), true) = (id, clears) {
            let base = emu::pm::device_addr(id, 0);
            let upto = end.min(old_size);
            if off < upto {
                for (dev, n) in m.pm_mapped_ranges(base + off, upto - off) {
                    let mut old = vec![0u8; n as usize];
                    let got = std::os::unix::fs::FileExt::read_at(file, &mut old, dev - base).unwrap_or(0);
                    old[got..].fill(0);
                    cleared.push((dev, old));
                }
            }
        }
        // SAFETY: a plain system call on a descriptor this function holds.
        if unsafe { libc::fallocate(file.as_raw_fd(), mode, off as libc::off_t, len as libc::off_t) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        for (dev, old) in cleared {
            m.pm_file_written(dev, &old, &vec![0u8; old.len()]);
        }
        let new_size = file.metadata()?.len();
        if new_size > old_size {
            self.file_grown(m, host, new_size);
        }
        Ok(())
    }

    /// The path of `guest` relative to the working directory, when changes there are tracked.
    pub(crate) fn tracked_rel(&self, guest: &str) -> Option<PathBuf> {
        if !self.cfg.track_durable {
            return None;
        }
        crate::vfs::under(guest, &self.cfg.cwd.to_string_lossy()).filter(|r| !r.is_empty()).map(PathBuf::from)
    }

    /// The content of the file `guest` names: `Some` for a regular file, `None` if there is none;
    /// an error for anything else (a directory, a link, a file that cannot be read).
    fn file_now(&self, guest: &str) -> Result<Option<Vec<u8>>, Errno> {
        let Target::Host { host, .. } = self.resolve(guest)? else { return err(libc::EINVAL) };
        match std::fs::symlink_metadata(&host) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Ok(md) if md.is_file() => Ok(Some(std::fs::read(&host)?)),
            Ok(_) => err(libc::EINVAL),
            Err(e) => Err(e.into()),
        }
    }

    /// Starts tracking the file `guest`, before the guest changes it: what it holds until then is
    /// what it held when the run started. Costs nothing for files that are never changed.
    pub(crate) fn track(&mut self, guest: &str) {
        let Some(rel) = self.tracked_rel(guest) else { return };
        if self.durable.initial.contains_key(&rel) {
            return;
        }
        if let Ok(content) = self.file_now(guest) {
            self.durable.initial.insert(rel.clone(), content.clone());
            self.durable.now.insert(rel, content);
        }
    }

    /// Tracks every regular file at or below `guest` (a rename's source, which may be a
    /// directory).
    fn track_tree(&mut self, guest: &str) {
        if self.tracked_rel(guest).is_none() {
            return;
        }
        let is_dir = match self.resolve(guest) {
            Ok(Target::Host { host, .. }) => std::fs::symlink_metadata(&host).is_ok_and(|md| md.is_dir()),
            _ => false,
        };
        if !is_dir {
            self.track(guest);
            return;
        }
        let names: Vec<String> = match self.private_listing(guest) {
            Some(l) => l.into_iter().map(|(n, _)| n.to_string_lossy().into_owned()).collect(),
            None => std::fs::read_dir(guest)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
        };
        for n in names {
            self.track_tree(&format!("{}/{n}", guest.trim_end_matches('/')));
        }
    }

    /// Sets what a crash keeps of tracked files (by guest path), with a crash point just before
    /// when that changes anything: a crash there keeps what was durable before the call.
    pub(crate) fn set_durable(&mut self, m: &mut Machine, changes: &[(&str, Option<Vec<u8>>)]) {
        let changes: Vec<(PathBuf, &Option<Vec<u8>>)> = changes
            .iter()
            .filter_map(|(g, c)| self.tracked_rel(g).filter(|r| self.durable.initial.contains_key(r)).map(|r| (r, c)))
            .collect();
        if changes.iter().all(|(r, c)| self.durable.now.get(r) == Some(*c)) {
            return;
        }
        m.crash_point_here();
        for (r, c) in changes {
            self.durable.now.insert(r, c.clone());
        }
        self.durable.generation += 1;
    }

    /// `fsync`, `fdatasync`, or a write through an `O_SYNC`/`O_DSYNC` descriptor of the file
    /// `guest`: its content now is what a crash keeps.
    pub(crate) fn synced(&mut self, m: &mut Machine, guest: &str) {
        if self.tracked_rel(guest).is_none() {
            return;
        }
        if let Ok(Some(content)) = self.file_now(guest) {
            self.set_durable(m, &[(guest, Some(content))]);
        }
    }

    /// A rename: the tracked files at or below `from` move to `to` with their durable content.
    fn moved(&mut self, m: &mut Machine, from: &str, to: &str) {
        let (Some(f), Some(t)) = (self.tracked_rel(from), self.tracked_rel(to)) else { return };
        let moving: Vec<(PathBuf, PathBuf, Option<Vec<u8>>)> = self
            .durable
            .now
            .iter()
            .filter_map(|(r, c)| {
                let below = r.strip_prefix(&f).ok()?;
                let dest = if below.as_os_str().is_empty() { t.clone() } else { t.join(below) };
                Some((r.clone(), dest, c.clone()))
            })
            .collect();
        let cwd = self.cfg.cwd.to_string_lossy().trim_end_matches('/').to_string();
        let guest = |r: &Path| format!("{cwd}/{}", r.display());
        // The sources are gone, then the destinations hold what they held (a destination not
        // tracked yet was absent before the rename: only `to` itself could exist, tracked then).
        let mut changes: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
        for (src, _, _) in &moving {
            changes.insert(guest(src), None);
        }
        for (_, dest, c) in moving {
            self.durable.initial.entry(dest.clone()).or_insert(None);
            self.durable.now.entry(dest.clone()).or_insert(None);
            changes.insert(guest(&dest), c);
        }
        let list: Vec<(&str, Option<Vec<u8>>)> = changes.iter().map(|(g, c)| (g.as_str(), c.clone())).collect();
        self.set_durable(m, &list);
    }
}

/// The ids of a `chown` an unprivileged owner may give: -1 (keep) or its own.
fn chown_ids(ids: [u64; 2]) -> Result<(), Errno> {
    if ids.iter().all(|&id| id as u32 == u32::MAX || u64::from(id as u32) == crate::process::UID) {
        Ok(())
    } else {
        err(libc::EPERM)
    }
}

/// Whether the owner of a regular file of mode `mode` may open it for access mode `acc`. Every
/// file is the guest's own (`stat` says so) and the guest is unprivileged, so its owner bits
/// decide, as Linux's `generic_permission` for an owner: a pool made read-only with `chmod 444`
/// refuses `O_RDWR` with EACCES. The host would let ferrite through when it runs as root, and
/// the guest would see what its user may not do.
fn owner_may(mode: u32, acc: i32) -> bool {
    let read = acc == libc::O_WRONLY || mode & 0o400 != 0;
    let write = acc == libc::O_RDONLY || mode & 0o200 != 0;
    read && write
}

/// What a `chown` does to the mode of a non-directory (Linux's `ATTR_KILL_SUID` and
/// `setattr_should_drop_sgid`): the set-user-ID bit goes, and the set-group-ID bit when the
/// file is group-executable (without that bit it marks mandatory locking and stays).
fn drop_setid_bits(f: &std::fs::File) -> Result<(), Errno> {
    use std::os::unix::fs::PermissionsExt;
    let md = f.metadata()?;
    if md.is_dir() {
        return Ok(());
    }
    let mode = md.permissions().mode() & 0o7777;
    let mut new = mode & !libc::S_ISUID;
    if mode & libc::S_IXGRP != 0 {
        new &= !libc::S_ISGID;
    }
    if new != mode {
        chmod_fd(f, new)?;
    }
    Ok(())
}

/// Sets the mode of the file `f` (opened `O_PATH`): `fchmodat2(AT_EMPTY_PATH)` (Linux 6.6), else
/// through its `/proc/self/fd` link, which names that very file whatever its path is now.
fn chmod_fd(f: &std::fs::File, mode: u32) -> Result<(), Errno> {
    // SAFETY: a valid descriptor and an empty NUL-terminated path.
    let r = unsafe { libc::syscall(libc::SYS_fchmodat2, f.as_raw_fd(), c"".as_ptr(), mode, libc::AT_EMPTY_PATH) };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if !matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EINVAL)) {
        return Err(e.into());
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(format!("/proc/self/fd/{}", f.as_raw_fd()), std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Extended attributes: the file systems the guest sees have none, and refuse new ones, like a
/// file system mounted without xattr support. (`ls -l` asks for SELinux labels and ACLs.)
impl Kernel {
    /// Any `*xattr` call on `path` (`fd` when `None`): the file must exist; then `answer` —
    /// ENODATA for a get, 0 (an empty list) for a list, EOPNOTSUPP for a set or remove.
    pub(crate) fn xattr(&self, m: &Machine, path: Option<u64>, fd: i32, follow: bool, answer: SysResult) -> SysResult {
        match path {
            Some(p) => {
                let guest = self.path_arg(m, libc::AT_FDCWD, p, follow)?;
                self.stat_path(&guest, follow)?;
            }
            None => {
                self.fds.get(fd)?;
            }
        }
        answer
    }
}

/// The inode number of the pipe whose readiness key is `id` (`fstat`'s, and the one
/// `/proc/self/fd/N` names): distinct from the other anonymous files' (numbered by descriptor
/// below 10,000).
pub(crate) fn pipe_ino(id: u64) -> u64 {
    100_000 + id
}
