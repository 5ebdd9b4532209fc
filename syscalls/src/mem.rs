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
        let (block, block_off, backing) = if flags & MAP_ANONYMOUS != 0 {
            // Shared anonymous memory is named as Linux names it, and a fork shares it.
            let label = (kind != MAP_PRIVATE).then_some(emu::memory::SHARED_ANON);
            (HostBlock::anon(len as usize).map_err(|_| Errno(libc::ENOMEM))?, 0, Backing::Anon { label })
        } else {
            self.file_block(fd, off, len, kind, perm, flags)?
        };
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
        if file_part > 0 {
            let region = Region { start, end: start + file_part, perm, block, block_off, backing };
            m.map(region).map_err(|_| Errno(libc::ENOMEM))?;
        }
        if file_part < len {
            let tail = HostBlock::anon((len - file_part) as usize).map_err(|_| Errno(libc::ENOMEM))?;
            let region = Region {
                start: start + file_part,
                end: start + len,
                perm,
                block: tail,
                block_off: 0,
                backing: Backing::Anon { label: Some("[past end of file]") },
            };
            m.map(region).map_err(|_| Errno(libc::ENOMEM))?;
            m.add_sigbus_range(start + file_part, start + len);
        }
        if perm.exec() {
            m.code_changed(start, start + len);
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
                    let file_id = self.pm_file_id(host);
                    let block =
                        HostBlock::file_shared(file.as_raw_fd(), off, len as usize).map_err(|_| Errno(libc::ENOMEM))?;
                    return Ok((block, 0, Backing::Pm { path: d.guest_path.clone(), file_id, offset: off }));
                }
                if flags & MAP_SYNC != 0 && kind == MAP_SHARED_VALIDATE {
                    // MAP_SYNC needs a DAX file: only the PM mount is one.
                    return err(libc::EOPNOTSUPP);
                }
                if shared && perm.write() {
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
        self.unmap_past_end(m, guest, file_id, len);
        // The other processes' address spaces too (a fork's share of the mapping, or a mapping
        // of their own): each is the machine's for a moment, as a fork's child's is for its
        // CLONE_CHILD_SETTID. Left as they were, their pages past the end raised SIGBUS in
        // ferrite itself when those processes next touched them (SQLite's WAL index, whose
        // `-shm` file a process truncates while others map it, killed ferrite).
        let holders: Vec<u32> = self
            .procs
            .iter()
            .filter(|(_, p)| p.ended.is_none() && p.saved.as_ref().is_some_and(|s| s.space.is_some()))
            .map(|(&pid, _)| pid)
            .collect();
        for pid in holders {
            let held = self.procs.get_mut(&pid).and_then(|p| p.saved.as_mut()).and_then(|s| s.space.take());
            let Some((mut space, mm)) = held else { continue };
            m.swap_address_space(&mut space);
            self.unmap_past_end(m, guest, file_id, len);
            m.swap_address_space(&mut space);
            if let Some(s) = self.procs.get_mut(&pid).and_then(|p| p.saved.as_mut()) {
                s.space = Some((space, mm));
            }
        }
        if let Some(id) = file_id {
            m.pm_discard_device(emu::pm::device_addr(id, len), old - len);
        }
    }

    /// The pages of the shared mappings of `guest` (PM file `file_id`) past byte `len` of the
    /// file become anonymous memory that raises SIGBUS in the guest.
    fn unmap_past_end(&mut self, m: &mut Machine, guest: &str, file_id: Option<u32>, len: u64) {
        let Some(keep) = page_up(len) else { return };
        let cuts: Vec<(u64, u64, Perm)> = m
            .mem
            .regions()
            .filter_map(|r| {
                let off = match &r.backing {
                    Backing::Pm { file_id: id, offset, .. } if Some(*id) == file_id => *offset,
                    Backing::SharedFile { path, offset, .. } if path == guest => *offset,
                    _ => return None,
                };
                let from = r.start + keep.saturating_sub(off);
                (from < r.end).then_some((from, r.end, r.perm))
            })
            .collect();
        for (a, b, perm) in cuts {
            m.unmap(a, b);
            let Ok(block) = HostBlock::anon((b - a) as usize) else { continue };
            let label = Some("[past end of file]");
            let region = Region { start: a, end: b, perm, block, block_off: 0, backing: Backing::Anon { label } };
            if m.map(region).is_ok() {
                m.add_sigbus_range(a, b);
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
        match m.protect(addr, end, Perm::from_prot(prot)) {
            Ok(()) => Ok(0),
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
        _new_addr: u64,
    ) -> SysResult {
        if !old.is_multiple_of(PAGE) || new_len == 0 || flags & !(MREMAP_MAYMOVE | MREMAP_FIXED | 4) != 0 {
            return err(libc::EINVAL);
        }
        if flags & MREMAP_FIXED != 0 {
            // Moving to a chosen address: rare outside allocators that ferrite's guests use.
            return err(libc::EINVAL);
        }
        let old_len = page_up(old_len).ok_or(Errno(libc::EINVAL))?;
        let new_len = page_up(new_len).ok_or(Errno(libc::EINVAL))?;
        let old_end = old.checked_add(old_len).ok_or(Errno(libc::EFAULT))?;
        let r = m.mem.find(old).cloned().ok_or(Errno(libc::EFAULT))?;
        if r.end < old_end {
            return err(libc::EFAULT);
        }
        if new_len <= old_len {
            m.unmap(old + new_len, old_end);
            return Ok(old);
        }
        let grow = new_len - old_len;
        self.check_budget(m, grow)?;
        let can_extend = r.end == old_end && !m.mem.overlaps(old_end, old_end + grow) && old_end + grow <= MMAP_TOP;
        if can_extend && matches!(r.backing, Backing::Anon { .. }) {
            let block = HostBlock::anon(grow as usize).map_err(|_| Errno(libc::ENOMEM))?;
            let ext = Region {
                start: old_end,
                end: old_end + grow,
                perm: r.perm,
                block,
                block_off: 0,
                backing: r.backing.clone(),
            };
            m.map(ext).map_err(|_| Errno(libc::ENOMEM))?;
            return Ok(old);
        }
        if flags & MREMAP_MAYMOVE == 0 {
            return err(libc::ENOMEM);
        }
        if !matches!(r.backing, Backing::Anon { .. }) {
            return err(libc::EINVAL);
        }
        let start = m.mem.find_free(new_len, 0, MMAP_BOTTOM, MMAP_TOP).ok_or(Errno(libc::ENOMEM))?;
        let block = HostBlock::anon(new_len as usize).map_err(|_| Errno(libc::ENOMEM))?;
        // Copy the old contents host-side: the old range may not be readable by the guest.
        let mut data = vec![0u8; old_len as usize];
        m.mem.read_unchecked(old, &mut data);
        // SAFETY: the new block is `new_len >= old_len` bytes of fresh host memory owned here.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), block.as_ptr(), data.len()) };
        let region =
            Region { start, end: start + new_len, perm: r.perm, block, block_off: 0, backing: r.backing.clone() };
        m.map(region).map_err(|_| Errno(libc::ENOMEM))?;
        m.unmap(old, old_end);
        Ok(start)
    }

    pub(crate) fn madvise(&mut self, m: &mut Machine, addr: u64, len: u64, advice: i32) -> SysResult {
        if !addr.is_multiple_of(PAGE) {
            return err(libc::EINVAL);
        }
        let end = page_up(len).and_then(|l| addr.checked_add(l)).ok_or(Errno(libc::EINVAL))?;
        if m.mem.first_hole(addr, end).is_some() {
            return err(libc::ENOMEM);
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

    pub(crate) fn msync(&mut self, m: &mut Machine, addr: u64, len: u64, flags: i32) -> SysResult {
        if !addr.is_multiple_of(PAGE) || flags & !(libc::MS_ASYNC | libc::MS_SYNC | libc::MS_INVALIDATE) != 0 {
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
