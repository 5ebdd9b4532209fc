//! Memory calls: brk, mmap, munmap, mprotect, mremap, madvise, msync.
//!
//! Placement follows Linux without address randomisation: the program where it was linked (PIEs
//! at 0x555555554000), the heap right after it, the stack below 0x7ffffffff000 with room for
//! `RLIMIT_STACK`, and mappings allocated top-down below the stack's gap. A hint is honoured when
//! the range is free; `MAP_FIXED` replaces what was there; `MAP_FIXED_NOREPLACE` fails with EEXIST
//! instead. `--max-memory` is enforced on the total mapped, as `RLIMIT_AS` would be.
//!
//! File mappings: `MAP_SHARED` of a file maps the host file itself, so stores reach it and the
//! host's page cache keeps the mapping coherent with `read`/`write`. On the PM mount the PM device
//! models what a crash would keep; for an ordinary file, what a crash keeps follows the file
//! model (`fs::Durable`): `msync(MS_SYNC)` of the mapping makes the file durable, as `fsync`
//! does. Every other file mapping (private, or shared and read-only) is a private copy of the
//! file's bytes at the time of the call.

use std::os::fd::AsRawFd;

use emu::{Backing, HostBlock, Machine, MemError, Perm, Region, PAGE};

use crate::fd::Kind;
use crate::{err, Errno, Kernel, SysResult};

/// The top of the main thread's stack (no ASLR).
pub const STACK_TOP: u64 = 0x7fff_ffff_f000;
/// The main thread's stack limit (`RLIMIT_STACK`).
pub const STACK_LIMIT: u64 = 8 << 20;
/// Linux leaves at least 128 MiB between the stack limit and the mmap base.
pub const MMAP_TOP: u64 = STACK_TOP - STACK_LIMIT - (128 << 20);
/// `vm.mmap_min_addr`.
pub const MMAP_BOTTOM: u64 = 0x10000;
/// How much lower `remap_pm` places PM mappings (64 GiB).
pub const REMAP_GAP: u64 = 1 << 36;

const MAP_SHARED: u64 = 0x01;
const MAP_PRIVATE: u64 = 0x02;
const MAP_SHARED_VALIDATE: u64 = 0x03;
const MAP_FIXED: u64 = 0x10;
const MAP_ANONYMOUS: u64 = 0x20;
const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
const MAP_SYNC: u64 = 0x8_0000;
const MREMAP_MAYMOVE: u64 = 1;
const MREMAP_FIXED: u64 = 2;

/// Where the heap is.
#[derive(Clone, Debug, Default)]
pub struct MemLayout {
    /// Where the heap starts.
    pub brk_start: u64,
    /// The current break.
    pub brk: u64,
    /// The last request `--max-memory` refused (bytes asked for), so that a guest that dies
    /// soon after (a SIGSEGV through a null pointer it did not check) is told why.
    pub refused: Option<u64>,
    /// The pages of shared file mappings that lie past their file's end, in this address space.
    pub past_end: Vec<PastEnd>,
    /// Shared file mappings made through a read-only descriptor: `mprotect` cannot make them
    /// writable (EACCES), as Linux leaves out their `VM_MAYWRITE`.
    pub no_write: Vec<(u64, u64)>,
}

/// Pages of a shared file mapping past the end of its file. Touching them raises SIGBUS, and
/// they become the file's again when the file grows over them (`ftruncate`, `truncate`,
/// `fallocate`, a write past the end): on Linux the mapping never stopped being the file's, so
/// a program that maps more than its file and grows the file later (LMDB, logs that map ahead)
/// reads and writes the new bytes where it mapped them.
#[derive(Clone, Debug)]
pub struct PastEnd {
    /// First guest address (page-aligned).
    pub start: u64,
    /// One past the last guest address.
    pub end: u64,
    /// What `start` maps once the file covers it ([`Backing::Pm`] or [`Backing::SharedFile`],
    /// at that page's file offset).
    pub backing: Backing,
    /// The host file.
    pub host: std::path::PathBuf,
}

/// The label of anonymous memory standing for pages past the end of a mapped file.
const PAST_END: &str = "[past end of file]";

/// `backing`'s file offset, moved on by `delta` bytes (the backing of a later page of a region).
fn backing_at(backing: &Backing, delta: u64) -> Backing {
    let mut b = backing.clone();
    match &mut b {
        Backing::Pm { offset, .. } | Backing::SharedFile { offset, .. } | Backing::File { offset, .. } => {
            *offset += delta
        }
        Backing::Anon { .. } => {}
    }
    b
}

/// Whether region `r` stands for pages past the end of a mapped file.
fn is_past_end(r: &Region) -> bool {
    matches!(r.backing, Backing::Anon { label: Some(PAST_END) })
}

/// Whether `r` is shared anonymous memory (`MAP_SHARED | MAP_ANONYMOUS`) or a System V
/// attachment: host memory of a fixed-size object that the processes sharing it map.
fn is_shared_anon(r: &Region) -> bool {
    matches!(r.backing, Backing::Anon { label: Some(l) } if l == emu::memory::SHARED_ANON || l == emu::memory::SYSV_SHM)
}

/// Maps `[a, b)` as pages past the end of what a mapping maps (its file's end, or the fixed size
/// of a shared anonymous object or System V segment that `mremap` grew it beyond): fresh pages
/// that raise SIGBUS when touched, as Linux's fault handlers answer past the end.
fn map_sigbus_pages(m: &mut Machine, a: u64, b: u64, perm: Perm) -> Result<(), Errno> {
    let block = HostBlock::anon((b - a) as usize).map_err(|_| Errno(libc::ENOMEM))?;
    let region = Region {
        start: a,
        end: b,
        perm,
        block,
        block_off: 0,
        backing: Backing::Anon { label: Some(PAST_END) },
        on_fork: Default::default(),
    };
    m.map(region).map_err(|_| Errno(libc::ENOMEM))?;
    m.add_sigbus_range(a, b);
    Ok(())
}

/// The file offset of a file backing (0 for anonymous memory).
fn backing_offset(backing: &Backing) -> u64 {
    match backing {
        Backing::Pm { offset, .. } | Backing::SharedFile { offset, .. } | Backing::File { offset, .. } => *offset,
        Backing::Anon { .. } => 0,
    }
}

fn page_up(x: u64) -> Option<u64> {
    emu::memory::page_up(x)
}

impl Kernel {
    pub(crate) fn check_budget(&mut self, m: &Machine, extra: u64) -> Result<(), Errno> {
        if m.mem.mapped_bytes().saturating_add(extra) > self.memory_limit() {
            self.mm.refused = Some(extra);
            return err(libc::ENOMEM);
        }
        Ok(())
    }

    /// The bytes of the last mapping `--max-memory` refused (with ENOMEM), if any was.
    pub fn memory_refused(&self) -> Option<u64> {
        self.mm.refused
    }

    pub(crate) fn brk(&mut self, m: &mut Machine, want: u64) -> SysResult {
        let cur = self.mm.brk;
        if want < self.mm.brk_start {
            return Ok(cur);
        }
        let (old_end, new_end) = match (page_up(cur), page_up(want)) {
            (Some(a), Some(b)) => (a, b),
            _ => return Ok(cur),
        };
        if new_end > old_end {
            if m.mem.overlaps(old_end, new_end) || self.check_budget(m, new_end - old_end).is_err() {
                return Ok(cur);
            }
            let Ok(block) = HostBlock::anon((new_end - old_end) as usize) else {
                return Ok(cur);
            };
            let r = Region {
                start: old_end,
                end: new_end,
                perm: Perm::RW,
                block,
                block_off: 0,
                backing: Backing::Anon { label: Some("[heap]") },
                on_fork: Default::default(),
            };
            if m.map(r).is_err() {
                return Ok(cur);
            }
        } else if new_end < old_end {
            m.unmap(new_end, old_end);
        }
        self.mm.brk = want;
        Ok(want)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mmap(
        &mut self,
        m: &mut Machine,
        addr: u64,
        len: u64,
        prot: u64,
        flags: u64,
        fd: i32,
        off: u64,
    ) -> SysResult {
        let kind = flags & 0x0f;
        if len == 0 || !off.is_multiple_of(PAGE) || !matches!(kind, MAP_SHARED | MAP_PRIVATE | MAP_SHARED_VALIDATE) {
            return err(libc::EINVAL);
        }
        if flags & MAP_SYNC != 0 && kind != MAP_SHARED_VALIDATE {
            // Linux ignores MAP_SYNC without MAP_SHARED_VALIDATE.
        }
        let len = page_up(len).ok_or(Errno(libc::ENOMEM))?;
        let fixed = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE) != 0;
        if fixed && !addr.is_multiple_of(PAGE) {
            return err(libc::EINVAL);
        }
        let end = addr.checked_add(len).ok_or(Errno(libc::ENOMEM))?;
        if fixed && (addr < MMAP_BOTTOM || end > STACK_TOP) {
            return err(if addr < MMAP_BOTTOM { libc::EPERM } else { libc::ENOMEM });
        }
        if flags & MAP_FIXED_NOREPLACE != 0 && m.mem.overlaps(addr, end) {
            return err(libc::EEXIST);
        }
        self.check_budget(m, len)?;
        let perm = Perm::from_prot(prot);
        let read_only_shared = kind != MAP_PRIVATE
            && flags & MAP_ANONYMOUS == 0
            && self.fds.get(fd).is_ok_and(|f| f.desc.borrow().flags & libc::O_ACCMODE == libc::O_RDONLY);
        let (block, block_off, backing) = if flags & MAP_ANONYMOUS != 0 {
            // Shared anonymous memory is named as Linux names it, and a fork shares it.
            let label = (kind != MAP_PRIVATE).then_some(emu::memory::SHARED_ANON);
            (HostBlock::anon(len as usize).map_err(|_| Errno(libc::ENOMEM))?, 0, Backing::Anon { label })
        } else {
            self.file_block(fd, off, len, kind, perm, flags)?
        };
        if let Backing::Pm { offset, .. } = &backing {
            // Device addresses give each PM file 1 TiB (`emu::pm::FILE_SHIFT`): a mapping past
            // that would name another file's lines, and crash images would mix the two.
            if offset.checked_add(len).is_none_or(|e| e > 1 << emu::pm::FILE_SHIFT) {
                self.note_refused(m, 9, "mmap of a PM file past its first TiB", "EOVERFLOW");
                return err(libc::EOVERFLOW);
            }
        }
        if let Backing::Pm { file_id, .. } = &backing {
            // The device reads the file back instead of keeping copies of unpersisted lines.
            let f = self.fds.get(fd)?.clone();
            let d = f.desc.borrow();
            if let Kind::File { file, .. } = &d.kind {
                m.pm_mut().attach_file(*file_id, file).map_err(|_| Errno(libc::ENOMEM))?;
            }
        }
        let start = if fixed {
            if flags & MAP_FIXED != 0 {
                m.unmap(addr, end);
                // A System V attachment it replaced is detached.
                self.shm_reconcile(m);
            }
            addr
        } else if self.cfg.remap_pm && matches!(backing, Backing::Pm { .. }) {
            m.mem.find_free(len, 0, MMAP_BOTTOM, MMAP_TOP - REMAP_GAP).ok_or(Errno(libc::ENOMEM))?
        } else {
            let hint = if addr.is_multiple_of(PAGE) { addr } else { 0 };
            m.mem.find_free(len, hint, MMAP_BOTTOM, MMAP_TOP).ok_or(Errno(libc::ENOMEM))?
        };
        // A shared mapping may extend past the end of its file: only the file's pages are the
        // file's; touching the rest raises SIGBUS in the guest (never in ferrite: those pages
        // are anonymous memory here).
        let file_part = match &backing {
            Backing::Pm { .. } | Backing::SharedFile { .. } => self.file_pages(fd, off).min(len),
            _ => len,
        };
        if file_part < len {
            let host = match &self.fds.get(fd)?.desc.borrow().kind {
                Kind::File { host, .. } => Some(host.clone()),
                _ => None,
            };
            if let Some(host) = host {
                let backing = backing_at(&backing, file_part);
                self.note_past_end(PastEnd { start: start + file_part, end: start + len, backing, host });
            }
        }
        if file_part > 0 {
            let region =
                Region { start, end: start + file_part, perm, block, block_off, backing, on_fork: Default::default() };
            m.map(region).map_err(|_| Errno(libc::ENOMEM))?;
        }
        if file_part < len {
            map_sigbus_pages(m, start + file_part, start + len, perm)?;
        }
        if perm.exec() {
            m.code_changed(start, start + len);
        }
        self.mm.no_write.retain(|&(a, b)| b <= start || a >= start + len);
        if read_only_shared {
            self.mm.no_write.push((start, start + len));
        }
        Ok(start)
    }

    /// The host memory behind a file mapping.
    fn file_block(
        &mut self,
        fd: i32,
        off: u64,
        len: u64,
        kind: u64,
        perm: Perm,
        flags: u64,
    ) -> Result<(std::rc::Rc<HostBlock>, usize, Backing), Errno> {
        let f = self.fds.get(fd)?.clone();
        let d = f.desc.borrow();
        let acc = d.flags & libc::O_ACCMODE;
        let shared = kind != MAP_PRIVATE;
        match &d.kind {
            Kind::File { file, host, pm } => {
                if acc == libc::O_WRONLY || (shared && perm.write() && acc == libc::O_RDONLY) {
                    return err(libc::EACCES);
                }
                if shared && *pm {
                    // Guest memory is a read-write host mapping of the file, which a read-only
                    // descriptor cannot give: a pool opened `O_RDONLY` and mapped `PROT_READ`
                    // (a checker, a recovery that only reads) is mapped through a read-write
                    // descriptor of ferrite's own. Where ferrite may not write the file either,
                    // the mapping is a private copy below, as for an ordinary file.
                    let again =
                        (acc == libc::O_RDONLY).then(|| std::fs::OpenOptions::new().read(true).write(true).open(host));
                    let raw = match &again {
                        None => Some(file.as_raw_fd()),
                        Some(Ok(f)) => Some(f.as_raw_fd()),
                        Some(Err(_)) => None,
                    };
                    if let Some(raw) = raw {
                        let file_id = self.pm_file_id(host);
                        let block = HostBlock::file_shared(raw, off, len as usize).map_err(|_| Errno(libc::ENOMEM))?;
                        return Ok((block, 0, Backing::Pm { path: d.guest_path.clone(), file_id, offset: off }));
                    }
                }
                if flags & MAP_SYNC != 0 && kind == MAP_SHARED_VALIDATE {
                    // MAP_SYNC needs a DAX file: only the PM mount is one.
                    return err(libc::EOPNOTSUPP);
                }
                // A shared mapping is the file's pages whenever the descriptor could write them,
                // whatever the protection asked now: a later `mprotect` may add PROT_WRITE, and
                // another mapping of the file (a JIT's read-write view of the code it runs
                // through a read-execute one, a ring buffer mapped twice) or `write(2)` must show
                // through it. A read-only descriptor's shared mapping is still a copy made at
                // `mmap` (docs/syscalls.md, "Memory").
                if shared && (perm.write() || acc == libc::O_RDWR) {
                    let block =
                        HostBlock::file_shared(file.as_raw_fd(), off, len as usize).map_err(|_| Errno(libc::ENOMEM))?;
                    let ino = self.inode(&file.metadata()?, &d.guest_path);
                    return Ok((block, 0, Backing::SharedFile { path: d.guest_path.clone(), offset: off, ino }));
                }
                self.pm_file_reads += u64::from(*pm);
                let block = HostBlock::anon(len as usize).map_err(|_| Errno(libc::ENOMEM))?;
                let size = file.metadata()?.len();
                if off < size {
                    let n = ((size - off).min(len)) as usize;
                    // SAFETY: the block is `len` bytes of fresh host memory owned here.
                    let dst = unsafe { std::slice::from_raw_parts_mut(block.as_ptr(), n) };
                    std::os::unix::fs::FileExt::read_exact_at(file, dst, off)?;
                }
                Ok((block, 0, Backing::File { path: d.guest_path.clone(), offset: off }))
            }
            Kind::Zero | Kind::Null => {
                Ok((HostBlock::anon(len as usize).map_err(|_| Errno(libc::ENOMEM))?, 0, Backing::Anon { label: None }))
            }
            _ => err(libc::ENODEV),
        }
    }

    /// After the file at guest path `guest` (host path `host`) shrank from `old` to `len` bytes
    /// (ftruncate, truncate, an `O_TRUNC` open): the pages of its shared mappings past the new
    /// end are no longer the file's. Touching them raises SIGBUS in the guest, as on Linux; here
    /// they become anonymous memory first, since the host would raise it in ferrite itself. For
    /// a PM file, what a crash could have kept past the new end is gone with it.
    pub(crate) fn file_shrunk(&mut self, m: &mut Machine, guest: &str, host: &std::path::Path, old: u64, len: u64) {
        if len >= old {
            return;
        }
        let file_id = self.proc.pm_files.get(&host.to_string_lossy().into_owned()).copied();
        self.unmap_past_end(m, guest, host, file_id, len);
        // The other processes' address spaces too (a fork's share of the mapping, or a mapping
        // of their own). Left as they were, their pages past the end raised SIGBUS in
        // ferrite itself when those processes next touched them (SQLite's WAL index, whose
        // `-shm` file a process truncates while others map it, killed ferrite).
        self.in_other_spaces(m, |_| true, |k, m| k.unmap_past_end(m, guest, host, file_id, len));
        if let Some(id) = file_id {
            m.pm_discard_device(emu::pm::device_addr(id, len), old - len);
        }
    }

    /// The pages of the shared mappings of `guest` (PM file `file_id`) past byte `len` of the
    /// file become anonymous memory that raises SIGBUS in the guest.
    fn unmap_past_end(&mut self, m: &mut Machine, guest: &str, host: &std::path::Path, file_id: Option<u32>, len: u64) {
        let Some(keep) = page_up(len) else { return };
        let cuts: Vec<(u64, u64, Perm, Backing)> = m
            .mem
            .regions()
            .filter_map(|r| {
                let off = match &r.backing {
                    Backing::Pm { file_id: id, offset, .. } if Some(*id) == file_id => *offset,
                    Backing::SharedFile { path, offset, .. } if path == guest => *offset,
                    _ => return None,
                };
                let from = r.start + keep.saturating_sub(off);
                (from < r.end).then(|| (from, r.end, r.perm, backing_at(&r.backing, from - r.start)))
            })
            .collect();
        for (a, b, perm, backing) in cuts {
            m.unmap(a, b);
            if map_sigbus_pages(m, a, b, perm).is_ok() {
                self.note_past_end(PastEnd { start: a, end: b, backing, host: host.to_path_buf() });
            }
        }
    }

    /// Whether some process maps pages past the end of a file ([`PastEnd`]): only then must a
    /// write that grows a file look for them.
    pub(crate) fn maps_past_end(&self) -> bool {
        !self.mm.past_end.is_empty()
            || self.procs.values().any(|p| {
                p.saved.as_ref().is_some_and(|s| s.space.as_ref().is_some_and(|(_, mm)| !mm.past_end.is_empty()))
            })
    }

    /// Remembers a range of pages past the end of a mapped file, forgetting the ranges it
    /// replaced.
    fn note_past_end(&mut self, e: PastEnd) {
        self.mm.past_end.retain(|o| o.end <= e.start || o.start >= e.end);
        self.mm.past_end.push(e);
    }

    /// After the file at host path `host` grew to `len` bytes: the pages of its shared mappings
    /// that lay past its end and that it now covers are the file's again, in every process.
    pub(crate) fn file_grown(&mut self, m: &mut Machine, host: &std::path::Path, len: u64) {
        if !self.mm.past_end.is_empty() {
            self.past_end_grown(m, host, len);
        }
        self.in_other_spaces(m, |mm| !mm.past_end.is_empty(), |k, m| k.past_end_grown(m, host, len));
    }

    /// Runs `f` in the address space of each other live process whose layout `wants`: each is
    /// the machine's (and its layout the kernel's `mm`) for a moment, as a fork's child's is for
    /// its `CLONE_CHILD_SETTID`.
    fn in_other_spaces(
        &mut self,
        m: &mut Machine,
        wants: impl Fn(&MemLayout) -> bool,
        mut f: impl FnMut(&mut Kernel, &mut Machine),
    ) {
        let holders: Vec<u32> = self
            .procs
            .iter()
            .filter(|(_, p)| {
                p.ended.is_none() && p.saved.as_ref().is_some_and(|s| s.space.as_ref().is_some_and(|(_, mm)| wants(mm)))
            })
            .map(|(&pid, _)| pid)
            .collect();
        for pid in holders {
            let held = self.procs.get_mut(&pid).and_then(|p| p.saved.as_mut()).and_then(|s| s.space.take());
            let Some((mut space, mut mm)) = held else { continue };
            m.swap_address_space(&mut space);
            std::mem::swap(&mut self.mm, &mut mm);
            f(self, m);
            std::mem::swap(&mut self.mm, &mut mm);
            m.swap_address_space(&mut space);
            if let Some(s) = self.procs.get_mut(&pid).and_then(|p| p.saved.as_mut()) {
                s.space = Some((space, mm));
            }
        }
    }

    /// [`Kernel::file_grown`] in the machine's address space.
    fn past_end_grown(&mut self, m: &mut Machine, host: &std::path::Path, len: u64) {
        let Some(cover) = page_up(len) else { return };
        let ranges = std::mem::take(&mut self.mm.past_end);
        for e in ranges {
            let off = backing_offset(&e.backing);
            if e.host != host || off >= cover {
                self.mm.past_end.push(e);
                continue;
            }
            // Still the pages this range left, unless the guest mapped something else there.
            let pieces: Vec<Perm> = m
                .mem
                .regions()
                .filter(|r| r.start < e.end && r.end > e.start)
                .filter(|r| matches!(r.backing, Backing::Anon { label: Some(PAST_END) }))
                .map(|r| r.perm)
                .collect();
            let whole = m.mem.first_hole(e.start, e.end).is_none()
                && m.mem.regions().filter(|r| r.start < e.end && r.end > e.start).count() == pieces.len();
            if !whole || pieces.is_empty() {
                continue;
            }
            let Ok(file) = std::fs::OpenOptions::new().read(true).write(true).open(&e.host) else {
                self.mm.past_end.push(e);
                continue;
            };
            let n = (cover - off).min(e.end - e.start);
            let Ok(block) = HostBlock::file_shared(file.as_raw_fd(), off, n as usize) else {
                self.mm.past_end.push(e);
                continue;
            };
            let perm = pieces[0];
            m.unmap(e.start, e.end);
            let region = Region {
                start: e.start,
                end: e.start + n,
                perm,
                block,
                block_off: 0,
                backing: e.backing.clone(),
                on_fork: Default::default(),
            };
            if m.map(region).is_err() {
                continue;
            }
            if perm.exec() {
                m.code_changed(e.start, e.start + n);
            }
            if e.start + n < e.end {
                let (a, b) = (e.start + n, e.end);
                if map_sigbus_pages(m, a, b, perm).is_ok() {
                    let backing = backing_at(&e.backing, n);
                    self.mm.past_end.push(PastEnd { start: a, end: b, backing, host: e.host });
                }
            }
        }
    }

    /// Bytes of a file mapping at `off` that the file covers, in whole pages.
    fn file_pages(&self, fd: i32, off: u64) -> u64 {
        let size = match self.fds.get(fd).ok().map(|f| f.desc.clone()) {
            Some(d) => match &d.borrow().kind {
                Kind::File { file, .. } => file.metadata().map(|md| md.len()).unwrap_or(0),
                _ => 0,
            },
            None => 0,
        };
        page_up(size.saturating_sub(off)).unwrap_or(0)
    }

    /// A stable id per PM file for device addresses (`file_id << 40 | offset`).
    fn pm_file_id(&mut self, host: &std::path::Path) -> u32 {
        let key = host.to_string_lossy().into_owned();
        if let Some(id) = self.proc.pm_files.get(&key) {
            return *id;
        }
        self.proc.next_pm_file += 1;
        self.proc.pm_files.insert(key, self.proc.next_pm_file);
        self.proc.next_pm_file
    }

    pub(crate) fn munmap(&mut self, m: &mut Machine, addr: u64, len: u64) -> SysResult {
        if !addr.is_multiple_of(PAGE) || len == 0 {
            return err(libc::EINVAL);
        }
        let end = page_up(len).and_then(|l| addr.checked_add(l)).ok_or(Errno(libc::EINVAL))?;
        m.unmap(addr, end);
        self.mm.no_write.retain(|&(a, b)| b <= addr || a >= end);
        self.shm_reconcile(m);
        Ok(0)
    }

    pub(crate) fn mprotect(&mut self, m: &mut Machine, addr: u64, len: u64, prot: u64) -> SysResult {
        if !addr.is_multiple_of(PAGE) || prot & !0x7 & !0x0100_0000 & !0x0200_0000 != 0 {
            return err(libc::EINVAL);
        }
        let end = page_up(len).and_then(|l| addr.checked_add(l)).ok_or(Errno(libc::ENOMEM))?;
        if end == addr {
            return Ok(0);
        }
        if prot & libc::PROT_WRITE as u64 != 0 && self.mm.no_write.iter().any(|&(a, b)| a < end && b > addr) {
            return err(libc::EACCES);
        }
        match m.protect(addr, end, Perm::from_prot(prot)) {
            Ok(()) => {
                // A change of part of an attachment splits it (Linux counts the pieces).
                self.shm_reconcile(m);
                Ok(0)
            }
            Err(MemError::Unmapped(_)) => err(libc::ENOMEM),
            Err(_) => err(libc::EACCES),
        }
    }

    pub(crate) fn mremap(
        &mut self,
        m: &mut Machine,
        old: u64,
        old_len: u64,
        new_len: u64,
        flags: u64,
        new_addr: u64,
    ) -> SysResult {
        let r = self.mremap_pieces(m, old, old_len, new_len, flags, new_addr);
        // What it moved, shrank or replaced of a System V segment's attachments.
        if r.is_ok() {
            self.shm_reconcile(m);
        }
        r
    }

    fn mremap_pieces(
        &mut self,
        m: &mut Machine,
        old: u64,
        old_len: u64,
        new_len: u64,
        flags: u64,
        new_addr: u64,
    ) -> SysResult {
        if !old.is_multiple_of(PAGE) || new_len == 0 || flags & !(MREMAP_MAYMOVE | MREMAP_FIXED | 4) != 0 {
            return err(libc::EINVAL);
        }
        if flags & MREMAP_FIXED != 0 && flags & MREMAP_MAYMOVE == 0 {
            return err(libc::EINVAL);
        }
        let old_len = page_up(old_len).ok_or(Errno(libc::EINVAL))?;
        let new_len = page_up(new_len).ok_or(Errno(libc::EINVAL))?;
        let old_end = old.checked_add(old_len).ok_or(Errno(libc::EFAULT))?;
        // The regions of the range: one mapping on Linux, here perhaps several pieces (a file
        // mapping grown before, its pages past the file's end, parts of other protections).
        if old_len == 0 || m.mem.first_hole(old, old_end).is_some() {
            return err(libc::EFAULT);
        }
        let pieces: Vec<Region> = m.mem.regions().filter(|r| r.start < old_end && r.end > old).cloned().collect();
        // A read-only shared file mapping stays one where it lands (and in what it grows by, the
        // same mapping on Linux): `mprotect(PROT_WRITE)` is refused there as before the move.
        let no_write: Vec<(u64, u64)> = self
            .mm
            .no_write
            .iter()
            .filter(|&&(a, b)| a < old_end && b > old)
            .map(|&(a, b)| (a.max(old), b.min(old_end)))
            .collect();
        let last_read_only = no_write.iter().any(|&(_, b)| b == old_end);
        // Called once the remap has succeeded: the range's refusals go where its pages went.
        let moved_no_write = |mm: &mut MemLayout, to: u64, keep: u64| {
            mm.no_write.retain(|&(a, b)| b <= old || a >= old_end);
            for &(a, b) in &no_write {
                if a < old + keep {
                    mm.no_write.push((to + (a - old), to + (b.min(old + keep) - old)));
                }
            }
            if last_read_only && new_len > keep {
                mm.no_write.push((to + keep, to + new_len));
            }
        };
        let last = pieces.last().cloned().ok_or(Errno(libc::EFAULT))?;
        if flags & MREMAP_FIXED != 0 {
            // Linux's mremap_to: the target is page-aligned, within the user space, apart from
            // the old range; whatever was there goes.
            let target_end = new_addr.checked_add(new_len).ok_or(Errno(libc::EINVAL))?;
            if !new_addr.is_multiple_of(PAGE) || new_addr < MMAP_BOTTOM || target_end > STACK_TOP {
                return err(libc::EINVAL);
            }
            if new_addr < old_end && target_end > old {
                return err(libc::EINVAL);
            }
            if new_len > old_len {
                self.check_budget(m, new_len - old_len)?;
            }
            m.unmap(new_addr, target_end);
            let keep = old_len.min(new_len);
            let to = self.move_mapping(m, &pieces, old, keep, new_len, new_addr)?;
            m.unmap(old + keep, old_end);
            moved_no_write(&mut self.mm, to, keep);
            return Ok(to);
        }
        if new_len <= old_len {
            m.unmap(old + new_len, old_end);
            moved_no_write(&mut self.mm, old, new_len);
            return Ok(old);
        }
        let grow = new_len - old_len;
        self.check_budget(m, grow)?;
        let can_extend = !m.mem.overlaps(old_end, old_end + grow) && old_end + grow <= MMAP_TOP;
        let past_object = is_past_end(&last) && self.shared_backing_at(&last, old_end).is_none();
        if can_extend && (is_shared_anon(&last) || past_object) {
            map_sigbus_pages(m, old_end, old_end + grow, last.perm)?;
            moved_no_write(&mut self.mm, old, old_len);
            return Ok(old);
        }
        if can_extend && matches!(last.backing, Backing::Anon { .. }) && !is_past_end(&last) {
            let block = HostBlock::anon(grow as usize).map_err(|_| Errno(libc::ENOMEM))?;
            let ext = Region {
                start: old_end,
                end: old_end + grow,
                perm: last.perm,
                block,
                block_off: 0,
                backing: last.backing.clone(),
                on_fork: last.on_fork,
            };
            m.map(ext).map_err(|_| Errno(libc::ENOMEM))?;
            return Ok(old);
        }
        if let (true, Some(backing)) = (can_extend, self.shared_backing_at(&last, old_end)) {
            self.map_file_pages(m, old_end, grow, last.perm, backing)?;
            moved_no_write(&mut self.mm, old, old_len);
            return Ok(old);
        }
        if flags & MREMAP_MAYMOVE == 0 {
            return err(libc::ENOMEM);
        }
        let start = m.mem.find_free(new_len, 0, MMAP_BOTTOM, MMAP_TOP).ok_or(Errno(libc::ENOMEM))?;
        let to = self.move_mapping(m, &pieces, old, old_len, new_len, start)?;
        moved_no_write(&mut self.mm, to, old_len);
        Ok(to)
    }

    /// The shared file mapping (PM or not) that address `at`, just past region `r`, continues,
    /// if `r` is one: its own pages or those past its file's end.
    fn shared_backing_at(&self, r: &Region, at: u64) -> Option<Backing> {
        match &r.backing {
            Backing::Pm { .. } | Backing::SharedFile { .. } => Some(backing_at(&r.backing, at - r.start)),
            _ if is_past_end(r) => self
                .mm
                .past_end
                .iter()
                .find(|e| e.start <= r.start && r.start < e.end)
                .map(|e| backing_at(&e.backing, at - e.start)),
            _ => None,
        }
    }

    /// Moves `[old, old + keep)`, made of the regions `pieces`, to `to`, with `new_len - keep`
    /// more bytes after it: anonymous memory is copied; a shared file mapping keeps its host
    /// memory (a PM mapping its device lines) and its pages past the file's end, and maps the
    /// file further on for the pages it grows by.
    fn move_mapping(
        &mut self,
        m: &mut Machine,
        pieces: &[Region],
        old: u64,
        keep: u64,
        new_len: u64,
        to: u64,
    ) -> SysResult {
        let first = &pieces[0];
        let last = &pieces[pieces.len() - 1];
        // Shared anonymous memory and System V attachments move with their host memory too, so
        // the processes sharing it still share it; the pages they grow by are past the
        // object's end, as on Linux.
        let shared_file = pieces.iter().all(|r| {
            matches!(r.backing, Backing::Pm { .. } | Backing::SharedFile { .. }) || is_past_end(r) || is_shared_anon(r)
        });
        if shared_file {
            let grow_backing = self.shared_backing_at(last, old + keep);
            for r in pieces {
                let (a, b) = (r.start.max(old), r.end.min(old + keep));
                if a >= b {
                    continue;
                }
                let dst = to + (a - old);
                let moved = Region {
                    start: dst,
                    end: dst + (b - a),
                    perm: r.perm,
                    block: r.block.clone(),
                    block_off: r.block_off + (a - r.start) as usize,
                    backing: backing_at(&r.backing, a - r.start),
                    on_fork: r.on_fork,
                };
                let entry = self.mm.past_end.iter().find(|e| e.start <= a && a < e.end).cloned();
                m.unmap(a, b);
                m.map(moved).map_err(|_| Errno(libc::ENOMEM))?;
                if is_past_end(r) {
                    m.add_sigbus_range(dst, dst + (b - a));
                    if let Some(e) = entry {
                        let backing = backing_at(&e.backing, a - e.start);
                        self.note_past_end(PastEnd { start: dst, end: dst + (b - a), backing, host: e.host });
                    }
                }
            }
            if let (true, Some(backing)) = (new_len > keep, grow_backing) {
                self.map_file_pages(m, to + keep, new_len - keep, last.perm, backing)?;
            } else if new_len > keep {
                map_sigbus_pages(m, to + keep, to + new_len, last.perm)?;
            }
        } else {
            let backing = backing_at(&first.backing, old - first.start);
            let block = HostBlock::anon(new_len as usize).map_err(|_| Errno(libc::ENOMEM))?;
            // Copy the old contents host-side: the old range may not be readable by the guest.
            let mut data = vec![0u8; keep as usize];
            m.mem.read_unchecked(old, &mut data);
            // SAFETY: the new block is `new_len >= keep` bytes of fresh host memory owned here.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), block.as_ptr(), data.len()) };
            if let (Backing::File { path, .. }, true) = (&backing, new_len > keep) {
                // A private file mapping grows by the file's next bytes.
                if let Ok(crate::vfs::Target::Host { host, .. }) = self.resolve(path) {
                    if let Ok(f) = std::fs::File::open(host) {
                        // SAFETY: the block is `new_len` bytes of fresh host memory owned here.
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(block.as_ptr().add(keep as usize), (new_len - keep) as usize)
                        };
                        let from = backing_offset(&backing) + keep;
                        let mut at = 0;
                        while at < dst.len() {
                            match std::os::unix::fs::FileExt::read_at(&f, &mut dst[at..], from + at as u64) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => at += n,
                            }
                        }
                    }
                }
            }
            let region = Region {
                start: to,
                end: to + new_len,
                perm: first.perm,
                block,
                block_off: 0,
                backing,
                on_fork: first.on_fork,
            };
            m.unmap(old, old + keep);
            m.map(region).map_err(|_| Errno(libc::ENOMEM))?;
        }
        if pieces.iter().any(|r| r.perm.exec()) {
            m.code_changed(to, to + new_len);
        }
        Ok(to)
    }

    /// Maps `len` bytes at `start` of the shared file mapping `backing` (of a region being grown
    /// or moved): the pages the file covers are the file's, the rest raise SIGBUS until it grows.
    fn map_file_pages(
        &mut self,
        m: &mut Machine,
        start: u64,
        len: u64,
        perm: Perm,
        backing: Backing,
    ) -> Result<(), Errno> {
        let path = match &backing {
            Backing::Pm { path, .. } | Backing::SharedFile { path, .. } => path.clone(),
            _ => return err(libc::EINVAL),
        };
        let crate::vfs::Target::Host { host, .. } = self.resolve(&path)? else { return err(libc::ENOMEM) };
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&host).map_err(|_| Errno(libc::ENOMEM))?;
        let size = file.metadata()?.len();
        let off = backing_offset(&backing);
        if let Backing::Pm { .. } = &backing {
            if off.checked_add(len).is_none_or(|e| e > 1 << emu::pm::FILE_SHIFT) {
                self.note_refused(m, 25, "mremap of a PM file past its first TiB", "EOVERFLOW");
                return err(libc::EOVERFLOW);
            }
        }
        let file_part = page_up(size.saturating_sub(off)).unwrap_or(0).min(len);
        if file_part > 0 {
            let block =
                HostBlock::file_shared(file.as_raw_fd(), off, file_part as usize).map_err(|_| Errno(libc::ENOMEM))?;
            let region = Region {
                start,
                end: start + file_part,
                perm,
                block,
                block_off: 0,
                backing: backing.clone(),
                on_fork: Default::default(),
            };
            m.map(region).map_err(|_| Errno(libc::ENOMEM))?;
        }
        if file_part < len {
            let (a, b) = (start + file_part, start + len);
            map_sigbus_pages(m, a, b, perm)?;
            self.note_past_end(PastEnd { start: a, end: b, backing: backing_at(&backing, file_part), host });
        }
        Ok(())
    }

    pub(crate) fn madvise(&mut self, m: &mut Machine, addr: u64, len: u64, advice: i32) -> SysResult {
        // Linux's `madvise_behavior_valid`: advice it does not know is EINVAL, whatever the range.
        const KNOWN: &[i32] =
            &[0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 100, 101, 102, 103];
        if !addr.is_multiple_of(PAGE) || !KNOWN.contains(&advice) {
            return err(libc::EINVAL);
        }
        match advice {
            // MADV_HWPOISON, MADV_SOFT_OFFLINE: CAP_SYS_ADMIN's.
            100 | 101 => return err(libc::EPERM),
            // MADV_GUARD_INSTALL/REMOVE (guard pages that fault): not modelled, said.
            102 | 103 => {
                self.note_refused(m, 28, "madvise(MADV_GUARD_INSTALL/REMOVE)", "EINVAL");
                return err(libc::EINVAL);
            }
            _ => {}
        }
        let end = page_up(len).and_then(|l| addr.checked_add(l)).ok_or(Errno(libc::EINVAL))?;
        if m.mem.first_hole(addr, end).is_some() {
            return err(libc::ENOMEM);
        }
        // What fork does with the range (Linux's VM_DONTCOPY and VM_WIPEONFORK, which
        // `emu::memory::Memory::fork_copy` honours): MADV_DONTFORK, MADV_DOFORK,
        // MADV_WIPEONFORK (private anonymous memory only, else EINVAL), MADV_KEEPONFORK.
        const DONTFORK: i32 = 10;
        const DOFORK: i32 = 11;
        const WIPEONFORK: i32 = 18;
        const KEEPONFORK: i32 = 19;
        if advice == WIPEONFORK {
            let private_anon = |r: &Region| {
                matches!(r.backing, Backing::Anon { label } if label.is_none_or(|l| {
                    l != emu::memory::SHARED_ANON && l != emu::memory::SYSV_SHM && l != PAST_END
                }))
            };
            if m.mem.regions().any(|r| r.start < end && r.end > addr && !private_anon(r)) {
                return err(libc::EINVAL);
            }
        }
        match advice {
            DONTFORK => m.set_on_fork(addr, end, |f| f.dont_copy = true),
            DOFORK => m.set_on_fork(addr, end, |f| f.dont_copy = false),
            WIPEONFORK => m.set_on_fork(addr, end, |f| f.wipe = true),
            KEEPONFORK => m.set_on_fork(addr, end, |f| f.wipe = false),
            _ => {}
        }
        if advice == libc::MADV_REMOVE {
            // Linux's madvise_remove: a hole punched in the file behind a shared mapping; the
            // pages read zeros afterwards, through every mapping.
            let parts: Vec<(u64, u64, Backing)> = m
                .mem
                .regions()
                .filter(|r| r.start < end && r.end > addr)
                .map(|r| (r.start.max(addr), r.end.min(end), backing_at(&r.backing, r.start.max(addr) - r.start)))
                .collect();
            for (_, _, b) in &parts {
                match b {
                    Backing::Pm { .. } | Backing::SharedFile { .. } => {}
                    Backing::File { .. } => return err(libc::EACCES),
                    Backing::Anon { .. } => return err(libc::EINVAL),
                }
            }
            for (a, z, b) in parts {
                let (Backing::Pm { path, offset, .. } | Backing::SharedFile { path, offset, .. }) = &b else {
                    continue;
                };
                let Ok(crate::vfs::Target::Host { host, pm, .. }) = self.resolve(path) else {
                    return err(libc::EINVAL);
                };
                let file = std::fs::OpenOptions::new().read(true).write(true).open(&host)?;
                let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
                self.fallocate_host(m, &file, &host, pm, mode, *offset, z - a)?;
            }
            return Ok(0);
        }
        if advice == libc::MADV_DONTNEED {
            // Private anonymous pages read back as zeros afterwards; file copies likewise lose
            // their changes (approximated as zeros); shared file pages (PM or not) keep their
            // contents (they are the file's).
            let parts: Vec<(u64, u64)> = m
                .mem
                .regions()
                .filter(|r| {
                    r.start < end
                        && r.end > addr
                        && !matches!(r.backing, Backing::Pm { .. } | Backing::SharedFile { .. })
                })
                .map(|r| (r.start.max(addr), r.end.min(end)))
                .collect();
            for (a, b) in parts {
                let _ = m.mem.zero(a, b - a);
            }
        }
        Ok(0)
    }

    /// `mincore`: every page of a mapped range is resident (nothing is ever swapped out, and
    /// guest memory is the host's); ENOMEM where the range is not all mapped, as Linux.
    pub(crate) fn mincore(&mut self, m: &mut Machine, addr: u64, len: u64, vec: u64) -> SysResult {
        if !addr.is_multiple_of(PAGE) {
            return err(libc::EINVAL);
        }
        let end = page_up(len).and_then(|l| addr.checked_add(l)).ok_or(Errno(libc::ENOMEM))?;
        if end > STACK_TOP || m.mem.first_hole(addr, end).is_some() {
            return err(libc::ENOMEM);
        }
        let pages = ((end - addr) / PAGE) as usize;
        let ones = [1u8; 256];
        let mut done = 0;
        while done < pages {
            let n = (pages - done).min(ones.len());
            m.write(vec + done as u64, &ones[..n], false)?;
            done += n;
        }
        Ok(0)
    }

    pub(crate) fn msync(&mut self, m: &mut Machine, addr: u64, len: u64, flags: i32) -> SysResult {
        if !addr.is_multiple_of(PAGE)
            || flags & !(libc::MS_ASYNC | libc::MS_SYNC | libc::MS_INVALIDATE) != 0
            || flags & (libc::MS_ASYNC | libc::MS_SYNC) == libc::MS_ASYNC | libc::MS_SYNC
        {
            // Linux's msync: MS_SYNC and MS_ASYNC together are EINVAL.
            return err(libc::EINVAL);
        }
        let end = page_up(len).and_then(|l| addr.checked_add(l)).ok_or(Errno(libc::ENOMEM))?;
        if m.mem.first_hole(addr, end).is_some() {
            return err(libc::ENOMEM);
        }
        // On a DAX file system msync(MS_SYNC) writes back the CPU caches of the range: durable.
        // MS_ASYNC promises nothing (Linux makes it a no-op), so it persists nothing here.
        if flags & libc::MS_SYNC != 0 {
            m.pm_persist_mapped(addr, end);
            // An ordinary file's mapped writes become what a crash keeps of it, as at fsync.
            let files: Vec<String> = m
                .mem
                .regions()
                .filter(|r| r.start < end && r.end > addr)
                .filter_map(|r| match &r.backing {
                    Backing::SharedFile { path, .. } => Some(path.clone()),
                    _ => None,
                })
                .collect();
            for path in files {
                self.synced(m, &path);
            }
        }
        Ok(0)
    }
}
