//! Guest memory: host mappings owned by ferrite, and ferrite's table of them, which is the truth.
//!
//! Every guest mapping is backed by host memory that ferrite maps itself (anonymous memory, or a
//! shared mapping of a PM file) and hands to Unicorn with `mem_map_ptr`. Unicorn never owns guest
//! memory: its own region split on a partial `munmap`/`mprotect` copies the whole region, and glibc
//! splits regions constantly (arenas, guard pages). Here a split only re-registers pieces of the same
//! host memory, so nothing is copied and a PM mapping keeps writing into its file.
//!
//! The table keeps one [`Region`] per contiguous range with one protection and one backing;
//! neighbours that could be one region are merged, so the number of Unicorn regions stays small.
//! Reads and writes on behalf of the kernel go straight to the host pointers, checked against the
//! table's protections the way `copy_from_user`/`copy_to_user` check them.
//!
//! Unicorn holds a bounded working set of the table's regions ([`uc_regions`], 64 by default):
//! its cost of mapping one more region grows with the regions it holds (its search for a RAM
//! offset walks every block, and the flat view is rebuilt), so a program with thousands of
//! mappings or thread stacks would pay that on every `mmap`. A region Unicorn does not hold is
//! mapped into it by the machine's unmapped-access hook on the first access that reaches it
//! ([`Memory::fault_in`]), and the access goes on as if it had always been there; above the bound,
//! the least recently faulted-in regions are taken out at the next stop ([`Memory::trim`]). Which
//! regions are held is decided by the guest's execution alone (a counter of faults and mappings),
//! and what the guest sees does not depend on it: docs/architecture.md, "Memory", has the design.

use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::OnceLock;

use unicorn_engine::{Prot, Unicorn};

/// The guest page size: mappings and protections are handled in whole pages, as on x86-64 Linux.
pub const PAGE: u64 = 4096;

/// `a` rounded down to a page boundary.
pub fn page_down(a: u64) -> u64 {
    a & !(PAGE - 1)
}

/// `a` rounded up to a page boundary, or `None` if that overflows the address space.
pub fn page_up(a: u64) -> Option<u64> {
    a.checked_add(PAGE - 1).map(page_down)
}

/// Access permissions of a guest mapping, as in `PROT_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Perm(pub u8);

impl Perm {
    /// `PROT_NONE`: no access (guard pages, reservations); such regions are never given to Unicorn.
    pub const NONE: Perm = Perm(0);
    /// `PROT_READ`.
    pub const R: Perm = Perm(1);
    /// `PROT_WRITE` (the engine also makes it readable, as x86-64 does).
    pub const W: Perm = Perm(2);
    /// `PROT_EXEC` (the engine also makes it readable, as x86-64 does).
    pub const X: Perm = Perm(4);
    /// `PROT_READ | PROT_WRITE`.
    pub const RW: Perm = Perm(3);
    /// `PROT_READ | PROT_EXEC`.
    pub const RX: Perm = Perm(5);
    /// `PROT_READ | PROT_WRITE | PROT_EXEC`.
    pub const RWX: Perm = Perm(7);

    /// From the guest's `PROT_*` bits (PROT_READ=1, PROT_WRITE=2, PROT_EXEC=4 as in Linux).
    pub fn from_prot(prot: u64) -> Perm {
        Perm((prot & 7) as u8)
    }
    /// Whether the guest asked for reading (`PROT_READ`).
    pub fn read(self) -> bool {
        self.0 & 1 != 0
    }
    /// Whether the guest asked for writing (`PROT_WRITE`).
    pub fn write(self) -> bool {
        self.0 & 2 != 0
    }
    /// Whether the guest asked for execution (`PROT_EXEC`).
    pub fn exec(self) -> bool {
        self.0 & 4 != 0
    }
    fn to_uc(self) -> Prot {
        // Linux on x86-64 makes every writable or executable page readable as well.
        let mut p = Prot::NONE;
        if self.0 != 0 {
            p |= Prot::READ;
        }
        if self.write() {
            p |= Prot::WRITE;
        }
        if self.exec() {
            p |= Prot::EXEC;
        }
        p
    }
}

/// Snapshots taken so far, in this process: a block touched at epoch `e` may differ from every
/// snapshot whose epoch is at most `e`. Only compared, never part of a run.
static EPOCH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Host memory behind one or more guest regions. Unmapped from the host when the last region
/// (or snapshot) holding it goes.
#[derive(Debug)]
pub struct HostBlock {
    ptr: NonNull<u8>,
    len: usize,
    /// The [`EPOCH`] when it was last made writable or written by force: its contents may differ
    /// from those of every snapshot taken before then, even though no region of it is writable
    /// now. An epoch rather than a flag, because a machine may hold many snapshots at once.
    touched: std::cell::Cell<u64>,
    /// Which pages were written since each snapshot, where the host kernel tracks it.
    written: crate::dirty::Pages,
}

impl HostBlock {
    /// Zeroed anonymous memory. `MAP_NORESERVE`: a guest that reserves a large range and touches
    /// little costs little, as on Linux.
    pub fn anon(len: usize) -> std::io::Result<Rc<HostBlock>> {
        // SAFETY: a fresh private anonymous mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        Self::from_mmap(p, len, true)
    }

    /// A shared mapping of a host file, so that stores reach the file (PM pools).
    pub fn file_shared(fd: i32, offset: u64, len: usize) -> std::io::Result<Rc<HostBlock>> {
        // SAFETY: maps a file the caller opened read-write; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                offset as libc::off_t,
            )
        };
        Self::from_mmap(p, len, false)
    }

    fn from_mmap(p: *mut libc::c_void, len: usize, anonymous: bool) -> std::io::Result<Rc<HostBlock>> {
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| std::io::Error::other("mmap returned null"))?;
        Ok(Rc::new(HostBlock {
            ptr,
            len,
            touched: std::cell::Cell::new(0),
            written: crate::dirty::Pages::new(anonymous),
        }))
    }

    fn touch(&self) {
        self.touched.set(EPOCH.load(std::sync::atomic::Ordering::Relaxed));
    }

    /// Length of the host mapping in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the block is zero bytes long (the host mapping is still one byte, as mmap needs).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The block's first byte in host memory; valid for [`len`](Self::len) bytes while the block
    /// lives.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// A copy of the block's touched pages, for memory that no region maps and so no
    /// [`MemorySnapshot`] holds (a System V segment nobody has attached), which its owner keeps
    /// with its own snapshot and puts back with [`HostBlock::put_back`].
    pub fn copy_out(&self) -> BlockCopy {
        let pages = resident_pages(self)
            .iter()
            .enumerate()
            .filter(|(_, t)| **t)
            .map(|(i, _)| {
                let off = i * PAGE as usize;
                let n = (PAGE as usize).min(self.len - off);
                // SAFETY: `off..off+n` lies inside the block's mapping.
                (i as u32, Box::from(unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off), n) }))
            })
            .collect();
        BlockCopy { pages }
    }

    /// Puts the block's bytes back as they were at [`HostBlock::copy_out`]: the pages that
    /// differ are rewritten (a page the copy lacks read as zero), and the block counts as
    /// touched for the snapshots taken since, as a [`Memory::restore`] that rewrites it does.
    /// Nothing may refer to the bytes meanwhile (the engine is stopped).
    pub fn put_back(&self, copy: &BlockCopy) {
        let mut saved = copy.pages.iter().peekable();
        let mut changed = false;
        for (i, in_use) in resident_pages(self).iter().enumerate() {
            let off = i * PAGE as usize;
            let n = (PAGE as usize).min(self.len - off);
            let old = match saved.peek() {
                Some((p, data)) if *p as usize == i => {
                    saved.next();
                    Some(&data[..])
                }
                _ => None,
            };
            // SAFETY: `off..off+n` lies inside the block's mapping, and nothing else refers to it
            // while the engine is stopped.
            let page = unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(off), n) };
            match old {
                Some(old) if page != old => page.copy_from_slice(old),
                None if *in_use && page.iter().any(|&x| x != 0) => page.fill(0),
                _ => continue,
            }
            changed = true;
        }
        if changed {
            self.touch();
        }
    }
}

/// A host block's touched pages ([`HostBlock::copy_out`]), by page index.
#[derive(Debug)]
pub struct BlockCopy {
    pages: Vec<(u32, Box<[u8]>)>,
}

impl BlockCopy {
    /// Bytes of page contents it holds.
    pub fn bytes(&self) -> usize {
        self.pages.iter().map(|(_, p)| p.len()).sum()
    }
}

impl Drop for HostBlock {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from a successful mmap and nothing refers to it any more.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len.max(1));
        }
    }
}

/// What a region holds, for `/proc/self/maps`, for the PM device, and for merging.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Anonymous memory; the label names special ones (`[stack]`, `[heap]`).
    Anon {
        /// `[stack]`, `[heap]` and the like, or `None` for an unnamed anonymous mapping.
        label: Option<&'static str>,
    },
    /// A (private copy of a) file, at `offset` into it at the region's start.
    File {
        /// The file's guest path, as `/proc/self/maps` shows it.
        path: String,
        /// Offset in the file of the region's first byte.
        offset: u64,
    },
    /// A shared mapping of a file on the PM mount: device addresses are `file_id << 40 | offset`.
    Pm {
        /// The file's guest path.
        path: String,
        /// The file's PM device id: the high bits of its device addresses.
        file_id: u32,
        /// Offset in the file of the region's first byte.
        offset: u64,
    },
    /// A shared mapping of an ordinary file: the host file itself, so stores reach it and
    /// `read`/`write` through a descriptor see them (the host's page cache keeps both coherent).
    SharedFile {
        /// The file's guest path.
        path: String,
        /// Offset in the file of the region's first byte.
        offset: u64,
        /// The file's identity, the same for every mapping of it whatever name it was opened
        /// by (the guest's inode number): what its shared futexes are keyed by.
        ino: u64,
    },
}

impl Backing {
    /// The backing of the part of a region that starts `delta` bytes further in.
    fn advanced(&self, delta: u64) -> Backing {
        match self {
            Backing::Anon { label } => Backing::Anon { label: *label },
            Backing::File { path, offset } => Backing::File { path: path.clone(), offset: offset + delta },
            Backing::SharedFile { path, offset, ino } => {
                Backing::SharedFile { path: path.clone(), offset: offset + delta, ino: *ino }
            }
            Backing::Pm { path, file_id, offset } => {
                Backing::Pm { path: path.clone(), file_id: *file_id, offset: offset + delta }
            }
        }
    }
}

/// One contiguous guest range with a single protection and backing, and the host memory behind it.
#[derive(Clone, Debug)]
pub struct Region {
    /// First guest address (page-aligned).
    pub start: u64,
    /// One past the last guest address (page-aligned).
    pub end: u64,
    /// What the guest may do there (the table's truth; Unicorn holds the same, or nothing for
    /// `PROT_NONE`).
    pub perm: Perm,
    /// The host memory behind the range, shared with neighbours split from the same mapping.
    pub block: Rc<HostBlock>,
    /// Offset of `start` within `block`.
    pub block_off: usize,
    /// What the range holds: anonymous memory, a private file copy, a PM file or a shared file.
    pub backing: Backing,
    /// What `fork` does with it (`madvise`'s fork advice); the default copies it.
    pub on_fork: OnFork,
}

/// What `fork` does with a region, as `madvise` set it (Linux's `VM_DONTCOPY` and
/// `VM_WIPEONFORK`, both inherited by a child that gets the region).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OnFork {
    /// `MADV_DONTFORK`: a child does not have the region at all.
    pub dont_copy: bool,
    /// `MADV_WIPEONFORK` (private anonymous memory only): a child's copy reads zeros.
    pub wipe: bool,
}

impl Region {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the region is empty (never true of a region in the table).
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    fn host(&self, addr: u64) -> *mut u8 {
        debug_assert!(addr >= self.start && addr <= self.end);
        // SAFETY: in bounds of the block by the table's invariant (block_off + len <= block.len).
        unsafe { self.block.as_ptr().add(self.block_off + (addr - self.start) as usize) }
    }

    fn piece(&self, start: u64, end: u64) -> Region {
        Region {
            start,
            end,
            perm: self.perm,
            block: self.block.clone(),
            block_off: self.block_off + (start - self.start) as usize,
            backing: self.backing.advanced(start - self.start),
            on_fork: self.on_fork,
        }
    }

    /// Whether `next` continues this region exactly (same host memory, protection and backing).
    fn continues_into(&self, next: &Region) -> bool {
        self.end == next.start
            && self.perm == next.perm
            && Rc::ptr_eq(&self.block, &next.block)
            && self.block_off + self.len() as usize == next.block_off
            && self.backing.advanced(self.len()) == next.backing
            && self.on_fork == next.on_fork
    }
}

/// Why a change to the address space, or a kernel-side access, failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemError {
    /// The range overlaps an existing mapping.
    Overlap,
    /// Part of the range is not mapped.
    Unmapped(u64),
    /// Part of the range does not allow the access.
    Protection(u64),
    /// The engine refused (alignment or an internal limit).
    Engine,
}

/// Regions of one address space Unicorn holds at most by default, before the least recently
/// faulted-in are taken out of it ([`Memory::trim`]). Measured (docs/performance.md, "Many
/// mappings"): Unicorn's cost of a map grows with what it holds, and programs below this many
/// regions (nearly all: a dynamic program has a few dozen) never fault one in. 128 rather than
/// the cheapest bound per map (64): evictions cost translations (`thr_yield_many` with 64 live
/// threads translated 1,581 blocks at 64, 1,373 at 128, 1,361 with 4 threads), and a program
/// with a stack per thread for 64 threads stays below 128.
pub const UC_REGIONS: usize = 128;

/// The bound in force: `FERRITE_UC_REGIONS` (a testing knob: a number, at least 1) or
/// [`UC_REGIONS`]. Which regions Unicorn holds never changes what the guest sees, so a run gives
/// the same trace whatever the bound; tests run programs with a small one to show it.
pub fn uc_regions() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("FERRITE_UC_REGIONS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|&n| n >= 1)
            .unwrap_or(UC_REGIONS)
    })
}

/// How an address space's working set in Unicorn went (for `--host-stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Residency {
    /// Most regions Unicorn held at once.
    pub peak: usize,
    /// Regions mapped into Unicorn by an access that reached them ([`Memory::fault_in`]).
    pub faulted_in: u64,
    /// Regions taken out of Unicorn above the bound ([`Memory::trim`]).
    pub evicted: u64,
}

/// The guest address space.
#[derive(Default)]
pub struct Memory {
    regions: BTreeMap<u64, Region>,
    /// Bytes mapped in total, for `--max-memory`.
    mapped: u64,
    /// Where the regions are registered in Unicorn's physical space ([`Memory::base`]).
    base: u64,
    /// The regions Unicorn holds while the table is registered, by start, each with the tick at
    /// which it was last mapped in: never a `PROT_NONE` region, and always one of `regions` with
    /// the same bounds. A registered table that is not running keeps its set, and a table
    /// registered again ([`Memory::register`]) maps that set.
    resident: BTreeMap<u64, u64>,
    /// Counts mappings into Unicorn: the ticks of `resident`, decided by the guest alone.
    tick: u64,
    /// What the working set did.
    residency: Residency,
}

/// Hands a region to Unicorn (through [`Memory::enter`] or [`Memory::fault_in`], which keep
/// the resident set). A region the guest may not touch at all (`PROT_NONE`: thread-stack
/// guard pages, reservations) is not given to Unicorn: an access there faults as unmapped, which
/// the machine reports as the access fault it is (the table knows the page). Each region Unicorn
/// holds costs it a RAM block, and once any block has been freed Unicorn's search for room for a
/// new one is quadratic in the number of blocks: guard pages would double that number, and the
/// usual way threads get their stacks (a `PROT_NONE` mapping, then `mprotect` of all but the
/// guard) would free a block per thread.
fn uc_map<D>(uc: &mut Unicorn<'_, D>, base: u64, r: &Region) -> Result<(), MemError> {
    if r.perm == Perm::NONE {
        return Ok(());
    }
    // SAFETY: the host memory stays mapped while the region is in the table (the table holds an Rc
    // to the block), and the region is unmapped from Unicorn before it leaves the table.
    unsafe { uc.mem_map_ptr(r.start + base, r.len(), r.perm.to_uc(), r.host(r.start).cast()) }
        .map_err(|_| MemError::Engine)
}

/// Takes a region away from Unicorn (see [`uc_map`] for the ones it never had).
fn uc_unmap<D>(uc: &mut Unicorn<'_, D>, base: u64, r: &Region) {
    if r.perm != Perm::NONE {
        let _ = uc.mem_unmap(r.start + base, r.len());
    }
}

/// The working set in Unicorn.
impl Memory {
    /// Maps `r` (in the table, or about to be) into Unicorn: always with a `stamp` (a region
    /// that was held, or one the guest maps now), otherwise only while Unicorn holds fewer than
    /// the bound, so that below it every region is held, as before there was a bound.
    fn enter<D>(&mut self, uc: &mut Unicorn<'_, D>, r: &Region, stamp: Option<u64>) -> Result<(), MemError> {
        if r.perm == Perm::NONE || (stamp.is_none() && self.resident.len() >= uc_regions()) {
            return Ok(());
        }
        uc_map(uc, self.base, r)?;
        let stamp = stamp.unwrap_or_else(|| self.next_tick());
        self.hold(r.start, stamp);
        Ok(())
    }

    /// Takes `r` out of Unicorn if it holds it; its stamp, for the pieces or the merge that
    /// replace it.
    fn leave<D>(&mut self, uc: &mut Unicorn<'_, D>, r: &Region) -> Option<u64> {
        let stamp = self.resident.remove(&r.start)?;
        uc_unmap(uc, self.base, r);
        Some(stamp)
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn hold(&mut self, start: u64, stamp: u64) {
        self.resident.insert(start, stamp);
        self.residency.peak = self.residency.peak.max(self.resident.len());
    }

    /// Maps the region holding guest address `va` into Unicorn if the table maps it and Unicorn
    /// does not hold it: called from the unmapped-access hook, whose access then goes on (a
    /// protection the access lacks still faults, as it would have had the region been held).
    /// False for an address the table does not map, a `PROT_NONE` page, or one Unicorn holds
    /// already: a real fault.
    pub fn fault_in<D>(&mut self, uc: &mut Unicorn<'_, D>, va: u64) -> bool {
        let Some(r) = self.find(va) else { return false };
        if r.perm == Perm::NONE || self.resident.contains_key(&r.start) {
            return false;
        }
        let start = r.start;
        if uc_map(uc, self.base, r).is_err() {
            return false;
        }
        let stamp = self.next_tick();
        self.hold(start, stamp);
        self.residency.faulted_in += 1;
        true
    }

    /// Whether Unicorn holds more regions than the bound: [`Memory::trim`] is due at the next stop.
    pub fn over_bound(&self) -> bool {
        self.resident.len() > uc_regions()
    }

    /// Whether Unicorn holds so many more than the bound that the machine should stop at the next
    /// block to trim (a loop that touches many regions without a system call): a quarter more,
    /// since every map costs in proportion to what Unicorn holds.
    pub fn far_over_bound(&self) -> bool {
        let bound = uc_regions();
        self.resident.len() > bound + bound / 4
    }

    /// Above the bound, takes the least recently mapped-in regions out of Unicorn until a quarter
    /// of the bound is free: data before code (taking code out throws its translations away),
    /// and never the region of `pc`, where the next block runs from. Called only while the
    /// engine is stopped (the machine's run loop, before it starts the engine again).
    pub fn trim<D>(&mut self, uc: &mut Unicorn<'_, D>, pc: u64) {
        let bound = uc_regions();
        if self.resident.len() <= bound {
            return;
        }
        let target = bound - bound / 4;
        let keep = self.find(pc).map(|r| r.start);
        let mut order: Vec<(bool, u64, u64)> = self
            .resident
            .iter()
            .filter(|(s, _)| Some(**s) != keep)
            .map(|(&s, &t)| (self.regions.get(&s).is_some_and(|r| r.perm.exec()), t, s))
            .collect();
        order.sort_unstable();
        let excess = self.resident.len() - target;
        for (_, _, s) in order.into_iter().take(excess) {
            self.resident.remove(&s);
            if let Some(r) = self.regions.get(&s) {
                uc_unmap(uc, self.base, r);
            }
            self.residency.evicted += 1;
        }
    }

    /// Regions Unicorn holds of this table now (while it is registered).
    pub fn held(&self) -> usize {
        self.resident.len()
    }

    /// What the working set did so far.
    pub fn residency(&self) -> Residency {
        self.residency
    }

    /// Copies guest memory into `buf` as Unicorn's own read of the engine would if it held every
    /// region: every byte must be mapped, in a region that is not `PROT_NONE`. What the hooks
    /// read of a region Unicorn does not hold now.
    pub fn read_held(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemError> {
        let end = addr.checked_add(buf.len() as u64).ok_or(MemError::Unmapped(addr))?;
        let mut at = addr;
        while at < end {
            let r = self.find(at).ok_or(MemError::Unmapped(at))?;
            if r.perm == Perm::NONE {
                return Err(MemError::Protection(at));
            }
            at = r.end;
        }
        self.read_unchecked(addr, buf);
        Ok(())
    }
}

impl Memory {
    /// Every region, in address order.
    pub fn regions(&self) -> impl Iterator<Item = &Region> {
        self.regions.values()
    }

    /// Bytes mapped in total (what `--max-memory` limits).
    pub fn mapped_bytes(&self) -> u64 {
        self.mapped
    }

    /// The region containing `addr`.
    pub fn find(&self, addr: u64) -> Option<&Region> {
        self.regions.range(..=addr).next_back().map(|(_, r)| r).filter(|r| addr < r.end)
    }

    /// Whether any byte of `[start, end)` is mapped.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        if let Some(r) = self.regions.range(..end).next_back().map(|(_, r)| r) {
            return r.end > start;
        }
        false
    }

    /// Maps a new region into a free range.
    pub fn map<D>(&mut self, uc: &mut Unicorn<'_, D>, region: Region) -> Result<(), MemError> {
        if !region.start.is_multiple_of(PAGE) || !region.end.is_multiple_of(PAGE) || region.end <= region.start {
            return Err(MemError::Engine);
        }
        if self.overlaps(region.start, region.end) {
            return Err(MemError::Overlap);
        }
        // The guest is about to use it: held, however many Unicorn holds (trimmed at the next stop).
        let stamp = self.next_tick();
        self.enter(uc, &region, Some(stamp))?;
        self.mapped += region.len();
        let (s0, e0) = (region.start, region.end);
        self.regions.insert(region.start, region);
        self.merge_range(uc, s0, e0);
        Ok(())
    }

    /// Removes `[start, end)` from the address space, splitting regions that straddle its ends.
    pub fn unmap<D>(&mut self, uc: &mut Unicorn<'_, D>, start: u64, end: u64) -> Vec<Region> {
        self.carve(uc, start, end, None)
    }

    /// Changes the protection of `[start, end)`; every page of it must be mapped.
    pub fn protect<D>(&mut self, uc: &mut Unicorn<'_, D>, start: u64, end: u64, perm: Perm) -> Result<(), MemError> {
        if let Some(hole) = self.first_hole(start, end) {
            return Err(MemError::Unmapped(hole));
        }
        self.carve(
            uc,
            start,
            end,
            Some(&|middle: &mut Region| {
                if perm.write() {
                    middle.block.touch();
                }
                middle.perm = perm;
            }),
        );
        Ok(())
    }

    /// The first unmapped address in `[start, end)`.
    pub fn first_hole(&self, start: u64, end: u64) -> Option<u64> {
        let mut at = start;
        while at < end {
            match self.find(at) {
                Some(r) => at = r.end,
                None => return Some(at),
            }
        }
        None
    }

    /// Takes `[start, end)` out of the engine; with `change`, puts it back changed so (mprotect's
    /// protection, madvise's fork advice), otherwise returns the removed pieces (munmap).
    fn carve<D>(
        &mut self,
        uc: &mut Unicorn<'_, D>,
        start: u64,
        end: u64,
        change: Option<&dyn Fn(&mut Region)>,
    ) -> Vec<Region> {
        let keys: Vec<u64> =
            self.regions.range(..end).rev().take_while(|(_, r)| r.end > start).map(|(k, _)| *k).collect();
        let mut removed = Vec::new();
        for k in keys.into_iter().rev() {
            let r = self.regions.remove(&k).expect("key from the table");
            // The pieces are held if the region was (or while Unicorn holds fewer than the bound).
            let stamp = self.leave(uc, &r);
            self.mapped -= r.len();
            let (lo, hi) = (r.start.max(start), r.end.min(end));
            let mut pieces = Vec::new();
            if r.start < lo {
                pieces.push(r.piece(r.start, lo));
            }
            let mut middle = r.piece(lo, hi);
            if let Some(change) = change {
                change(&mut middle);
                pieces.push(middle);
            } else {
                removed.push(middle);
            }
            if hi < r.end {
                pieces.push(r.piece(hi, r.end));
            }
            for p in pieces {
                // Re-registering memory that was registered a moment ago cannot overlap.
                let _ = self.enter(uc, &p, stamp);
                self.mapped += p.len();
                self.regions.insert(p.start, p);
            }
        }
        if change.is_some() {
            self.merge_range(uc, start, end);
        }
        removed
    }

    /// Merges the regions of `[start, end)` and its two neighbours that continue each other.
    fn merge_range<D>(&mut self, uc: &mut Unicorn<'_, D>, start: u64, end: u64) {
        let mut cursor = self.regions.range(..start).next_back().map(|(k, _)| *k).unwrap_or(start);
        while let Some(cur) = self.regions.range(cursor..).next().map(|(_, r)| r.clone()) {
            if cur.start > end {
                break;
            }
            match self.regions.get(&cur.end).cloned() {
                Some(next) if cur.continues_into(&next) => {
                    let stamp = self.leave(uc, &cur).max(self.leave(uc, &next));
                    self.regions.remove(&next.start);
                    let mut merged = cur;
                    merged.end = next.end;
                    let _ = self.enter(uc, &merged, stamp);
                    self.regions.insert(merged.start, merged);
                }
                _ => cursor = cur.start + 1,
            }
        }
    }

    /// A free range of `len` bytes: at `hint` if that is free, else the highest free range below
    /// `top` (Linux's top-down allocator, without randomisation).
    pub fn find_free(&self, len: u64, hint: u64, bottom: u64, top: u64) -> Option<u64> {
        if hint != 0 && hint.is_multiple_of(PAGE) {
            if let Some(end) = hint.checked_add(len) {
                if hint >= bottom && end <= top && !self.overlaps(hint, end) {
                    return Some(hint);
                }
            }
        }
        let mut ceiling = top;
        for r in self.regions.range(..top).rev().map(|(_, r)| r) {
            if r.end <= ceiling && ceiling - r.end >= len {
                return Some(ceiling - len).filter(|s| *s >= bottom);
            }
            ceiling = ceiling.min(r.start);
            if ceiling < bottom.saturating_add(len) {
                return None;
            }
        }
        ceiling.checked_sub(len).filter(|s| *s >= bottom)
    }

    /// Copies guest memory into `buf`, requiring read permission (as the kernel's copy_from_user).
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemError> {
        self.access(addr, buf.len() as u64, Perm::R, |r, a, off, n| {
            // SAFETY: `a..a+n` lies inside region `r`, whose host memory is mapped.
            unsafe { std::ptr::copy_nonoverlapping(r.host(a), buf.as_mut_ptr().add(off), n) }
        })
    }

    /// Copies guest memory into `buf` whatever its protection (ferrite's own use: moving a
    /// mapping, snapshots). Unmapped bytes read as zero.
    pub fn read_unchecked(&self, addr: u64, buf: &mut [u8]) {
        let end = addr.saturating_add(buf.len() as u64);
        let mut at = addr;
        while at < end {
            let off = (at - addr) as usize;
            match self.find(at) {
                Some(r) => {
                    let n = (r.end.min(end) - at) as usize;
                    // SAFETY: `at..at+n` lies inside region `r`, whose host memory is mapped.
                    unsafe { std::ptr::copy_nonoverlapping(r.host(at), buf.as_mut_ptr().add(off), n) };
                    at += n as u64;
                }
                None => {
                    let next = self.regions.range(at..).next().map(|(k, _)| *k).unwrap_or(end).min(end);
                    buf[off..(next - addr) as usize].fill(0);
                    at = next;
                }
            }
        }
    }

    /// Copies `data` into guest memory, requiring write permission unless `force` (the loader and
    /// the kernel writing to read-only pages they own). Returns whether executable memory changed.
    pub fn write(&mut self, addr: u64, data: &[u8], force: bool) -> Result<bool, MemError> {
        let mut exec = false;
        let need = if force { Perm::NONE } else { Perm::W };
        self.access(addr, data.len() as u64, need, |r, a, off, n| {
            exec |= r.perm.exec();
            if !r.perm.write() {
                r.block.touch();
            }
            // SAFETY: as in `read`.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().add(off), r.host(a), n) }
        })?;
        Ok(exec)
    }

    /// Fills guest memory with zeros without a permission check.
    pub fn zero(&mut self, addr: u64, len: u64) -> Result<(), MemError> {
        self.access(addr, len, Perm::NONE, |r, a, _, n| {
            if !r.perm.write() {
                r.block.touch();
            }
            // SAFETY: as in `read`.
            unsafe { std::ptr::write_bytes(r.host(a), 0, n) }
        })
    }

    fn access(
        &self,
        addr: u64,
        len: u64,
        need: Perm,
        mut f: impl FnMut(&Region, u64, usize, usize),
    ) -> Result<(), MemError> {
        let end = addr.checked_add(len).ok_or(MemError::Unmapped(addr))?;
        // Check the whole range first: a failing copy must not have written half of it.
        let mut at = addr;
        while at < end {
            let r = self.find(at).ok_or(MemError::Unmapped(at))?;
            if r.perm.0 & need.0 != need.0 || (need.0 != 0 && r.perm == Perm::NONE) {
                return Err(MemError::Protection(at));
            }
            at = r.end;
        }
        let mut at = addr;
        while at < end {
            let r = self.find(at).expect("checked above");
            let n = (r.end.min(end) - at) as usize;
            f(r, at, (at - addr) as usize, n);
            at += n as u64;
        }
        Ok(())
    }
}

/// The host pages of `block` that have been touched (are resident): untouched pages of ferrite's
/// private mappings still read as zero.
fn resident_pages(block: &HostBlock) -> Vec<bool> {
    let pages = block.len.div_ceil(PAGE as usize);
    if pages == 0 {
        return Vec::new();
    }
    let mut vec = vec![0u8; pages];
    // SAFETY: `ptr` is the page-aligned start of a live mapping of `len` bytes and `vec` has one
    // byte per page of it.
    let ok = unsafe { libc::mincore(block.ptr.as_ptr().cast(), block.len, vec.as_mut_ptr()) } == 0;
    // Without the answer every page counts as touched: slower, never wrong.
    vec.iter().map(|b| !ok || b & 1 == 1).collect()
}

/// One host block's contents at a snapshot: the pages touched by then, in order, those not
/// written since the previous snapshot shared with it.
struct SavedBlock {
    block: Rc<HostBlock>,
    saved: Rc<crate::dirty::SavedPages>,
    /// Bytes of pages this snapshot copied (the others it shares with an earlier one).
    copied: usize,
    /// Some region of it was writable at the snapshot.
    writable: bool,
    /// A shared mapping of a host file: only the saved pages may be touched (the others may lie
    /// past the end of the file, where the host raises SIGBUS), and an unsaved page is not
    /// zero but the file's.
    file: bool,
    /// The snapshot stamped the block's written pages ([`crate::dirty`]): a restore copies back
    /// only those written since, instead of comparing every page.
    stamped: bool,
}

/// Guest memory as plain data: the table and the touched pages of every host block it uses
/// (of a block the kernel tracks, the pages not written since the previous live snapshot are
/// that snapshot's copies, shared: [`crate::dirty::SavedPages`]). Restoring puts the table back, re-registers with Unicorn only the regions that changed (so
/// translated code of unchanged regions survives), and copies back the pages of blocks that may
/// have been written.
pub struct MemorySnapshot {
    regions: BTreeMap<u64, Region>,
    mapped: u64,
    blocks: Vec<SavedBlock>,
    /// Its [`EPOCH`]: blocks touched at or after it may differ from it.
    epoch: u64,
    /// The [`crate::dirty::generation`] after its blocks were stamped.
    generation: u64,
}

impl MemorySnapshot {
    /// Bytes of page contents it copied: the pages it shares with the snapshot before it (those
    /// not written between the two) are counted there. While snapshots are dropped newest
    /// first (an exploration's stack), the sum over the live ones is what they hold.
    pub fn saved_bytes(&self) -> usize {
        self.blocks.iter().map(|b| b.copied).sum()
    }

    /// Bytes of page contents no other snapshot shares: what dropping it frees, whichever
    /// snapshots are dropped before it (a snapshot dropped from the middle of a series leaves
    /// the pages it shares with the next one to that one).
    pub fn unshared_bytes(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| Rc::strong_count(&b.saved) == 1)
            .flat_map(|b| b.saved.data.iter())
            .filter(|page| Rc::strong_count(page) == 1)
            .map(|page| page.len())
            .sum()
    }
}

fn same_region(a: &Region, b: &Region) -> bool {
    a.start == b.start
        && a.end == b.end
        && a.perm == b.perm
        && Rc::ptr_eq(&a.block, &b.block)
        && a.block_off == b.block_off
        && a.backing == b.backing
}

/// Whether a region maps a host file shared (its block is the file's pages).
fn file_backed(r: &Region) -> bool {
    matches!(r.backing, Backing::Pm { .. } | Backing::SharedFile { .. })
}

impl Memory {
    /// The table and its blocks' touched pages. Of a shared file mapping, every page some region
    /// maps is saved but those in `past_eof` (guest ranges past the end of their file, which the
    /// host would answer with SIGBUS): the file's contents are the caller's to keep.
    pub fn snapshot(&self, past_eof: &[(u64, u64)]) -> MemorySnapshot {
        let epoch = EPOCH.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut blocks: Vec<SavedBlock> = Vec::new();
        for r in self.regions.values() {
            if let Some(b) = blocks.iter_mut().find(|b| Rc::ptr_eq(&b.block, &r.block)) {
                b.writable |= r.perm.write();
                continue;
            }
            let file = file_backed(r);
            let stamped = !file && r.block.written.stamp(r.block.as_ptr(), r.block.len);
            let saved = if file { self.file_pages(&r.block, past_eof) } else { resident_pages(&r.block) };
            // Copies of the last snapshot that stamped the block, and the pages written since it:
            // the others are the same bytes, shared instead of copied.
            let previous = if stamped { r.block.written.previous(r.block.as_ptr(), r.block.len) } else { None };
            let count = saved.iter().filter(|t| **t).count();
            let mut pages = Vec::with_capacity(count);
            let mut data = Vec::with_capacity(count);
            let mut copied = 0;
            for (i, _) in saved.iter().enumerate().filter(|(_, t)| **t) {
                let shared = previous.as_ref().and_then(|(p, written)| {
                    let k = p.pages.binary_search(&(i as u32)).ok()?;
                    written.binary_search(&(i as u32)).is_err().then(|| p.data[k].clone())
                });
                let page = shared.unwrap_or_else(|| {
                    let off = i * PAGE as usize;
                    let n = (PAGE as usize).min(r.block.len - off);
                    copied += n;
                    // SAFETY: `off..off+n` lies inside the block's mapping (and, of a file, inside
                    // the file).
                    Rc::from(unsafe { std::slice::from_raw_parts(r.block.as_ptr().add(off), n) })
                });
                pages.push(i as u32);
                data.push(page);
            }
            let saved = Rc::new(crate::dirty::SavedPages { pages, data });
            blocks.push(SavedBlock { block: r.block.clone(), saved, copied, writable: r.perm.write(), file, stamped });
        }
        let generation = crate::dirty::generation();
        for b in blocks.iter().filter(|b| b.stamped) {
            b.block.written.remember(&b.saved, generation);
        }
        MemorySnapshot { regions: self.regions.clone(), mapped: self.mapped, blocks, epoch, generation }
    }

    /// The pages of a file's block that some region maps, outside `past_eof`.
    fn file_pages(&self, block: &Rc<HostBlock>, past_eof: &[(u64, u64)]) -> Vec<bool> {
        let mut pages = vec![false; block.len.div_ceil(PAGE as usize)];
        for r in self.regions.values().filter(|r| Rc::ptr_eq(&r.block, block)) {
            for (i, a) in (r.start..r.end).step_by(PAGE as usize).enumerate() {
                if !past_eof.iter().any(|&(s, e)| a >= s && a < e) {
                    if let Some(p) = pages.get_mut(r.block_off / PAGE as usize + i) {
                        *p = true;
                    }
                }
            }
        }
        pages
    }

    /// Puts memory back as it was at `snap`. Returns the executable ranges Unicorn had to map
    /// again (translations of them are gone; the caller forgets what it decoded there). The
    /// files behind shared mappings must be as long as they were at the snapshot.
    pub fn restore<D>(&mut self, uc: &mut Unicorn<'_, D>, snap: &MemorySnapshot) -> Vec<(u64, u64)> {
        let mut changed = Vec::new();
        let current = std::mem::take(&mut self.regions);
        let kept = |r: &Region, other: &BTreeMap<u64, Region>| other.get(&r.start).is_some_and(|o| same_region(o, r));
        // Regions kept stay held or not; the others leave Unicorn, and the snapshot's own enter
        // it while it holds fewer than the bound (the rest are faulted in when reached).
        for r in current.values().filter(|r| !kept(r, &snap.regions)) {
            self.leave(uc, r);
            if r.perm.exec() {
                changed.push((r.start, r.end));
            }
        }
        for r in snap.regions.values().filter(|r| !kept(r, &current)) {
            // The snapshot's table was consistent, and what overlapped it is unmapped above.
            let _ = self.enter(uc, r, None);
            if r.perm.exec() {
                changed.push((r.start, r.end));
            }
        }
        for b in &snap.blocks {
            if b.stamped {
                if let Some(written) = b.block.written.written_since(b.block.as_ptr(), b.block.len, snap.generation) {
                    self.restore_written(b, &written, &snap.regions, &mut changed);
                    continue;
                }
            }
            let touched = b.block.touched.get() >= snap.epoch;
            let writable_now = current.values().any(|r| Rc::ptr_eq(&r.block, &b.block) && r.perm.write());
            if !b.writable && !writable_now && !touched {
                continue;
            }
            // Per page of the block: writable in either table (its contents may have changed),
            // executable in either (a changed page drops its translations).
            let pages = b.block.len.div_ceil(PAGE as usize);
            let mut writable = vec![touched; pages];
            let mut exec = vec![false; pages];
            for r in snap.regions.values().chain(current.values()).filter(|r| Rc::ptr_eq(&r.block, &b.block)) {
                let first = r.block_off / PAGE as usize;
                let last = (r.block_off + r.len() as usize).div_ceil(PAGE as usize).min(pages);
                for i in first..last {
                    writable[i] |= r.perm.write();
                    exec[i] |= r.perm.exec();
                }
            }
            let resident = if b.file { vec![false; pages] } else { resident_pages(&b.block) };
            let mut saved = b.saved.pages.iter().zip(&b.saved.data).peekable();
            for (i, in_use) in resident.iter().enumerate() {
                let off = i * PAGE as usize;
                let n = (PAGE as usize).min(b.block.len - off);
                let old = match saved.peek() {
                    Some((p, data)) if **p as usize == i => {
                        let data: &[u8] = data;
                        saved.next();
                        Some(data)
                    }
                    _ => None,
                };
                if !writable[i] || (old.is_none() && b.file) {
                    continue;
                }
                // SAFETY: `off..off+n` lies inside the block's mapping, and nothing else refers
                // to it while the engine is stopped.
                let page = unsafe { std::slice::from_raw_parts_mut(b.block.as_ptr().add(off), n) };
                let differs = match old {
                    Some(old) => page != old,
                    None => *in_use && page.iter().any(|&x| x != 0),
                };
                if !differs {
                    continue;
                }
                match old {
                    Some(old) => page.copy_from_slice(old),
                    None => page.fill(0),
                }
                // The block now differs from the snapshots taken since this one's, which must
                // compare it when they are restored although no region of it may be writable.
                b.block.touch();
                if exec[i] {
                    // Code written since the snapshot (a JIT): where it is mapped, its
                    // translations are stale.
                    for r in snap.regions.values().filter(|r| Rc::ptr_eq(&r.block, &b.block)) {
                        if off >= r.block_off && off < r.block_off + r.len() as usize {
                            let start = r.start + (off - r.block_off) as u64;
                            changed.push((start, start + n as u64));
                        }
                    }
                }
            }
        }
        // Blocks only the current table used go away with it (unmapped from the host on drop).
        drop(current);
        self.regions = snap.regions.clone();
        self.mapped = snap.mapped;
        changed
    }

    /// Puts back the pages of `b` in `written` (sorted indices, the only ones that may have
    /// changed since the snapshot): its copy, or zeros for a page it had not touched (given back
    /// to the host, which is quicker than zeroing it and leaves a hole, as it was). Executable
    /// ranges whose bytes changed are added to `changed`.
    fn restore_written(
        &self,
        b: &SavedBlock,
        written: &[u32],
        regions: &BTreeMap<u64, Region>,
        changed: &mut Vec<(u64, u64)>,
    ) {
        let page_len = PAGE as usize;
        // The block's executable pieces in the snapshot's table: (start and end in the block,
        // guest address).
        let exec: Vec<(usize, usize, u64)> = regions
            .values()
            .filter(|r| Rc::ptr_eq(&r.block, &b.block) && r.perm.exec())
            .map(|r| (r.block_off, r.block_off + r.len() as usize, r.start))
            .collect();
        let give_back = |(from, to): (usize, usize)| {
            // SAFETY: `from..to` lies inside the block's private anonymous mapping, which reads
            // as zeros afterwards; nothing else refers to it while the engine is stopped.
            unsafe {
                let p = b.block.as_ptr().add(from);
                if libc::madvise(p.cast(), to - from, libc::MADV_DONTNEED) != 0 {
                    std::ptr::write_bytes(p, 0, to - from);
                }
            }
            // A hole has no bits to say it differs from later snapshots.
            b.block.written.mark_written(from / page_len, to.div_ceil(page_len));
        };
        let mut holes: Option<(usize, usize)> = None;
        for &i in written {
            let off = i as usize * page_len;
            if off >= b.block.len {
                continue;
            }
            let n = page_len.min(b.block.len - off);
            let code = exec.iter().any(|&(s, e, _)| off >= s && off < e);
            let saved = b.saved.pages.binary_search(&i).ok();
            if saved.is_none() && !code {
                match &mut holes {
                    Some((_, end)) if *end == off => *end = off + n,
                    _ => {
                        if let Some(h) = holes.replace((off, off + n)) {
                            give_back(h);
                        }
                    }
                }
                continue;
            }
            // SAFETY: `off..off+n` lies inside the block's mapping, and nothing else refers to it
            // while the engine is stopped.
            let page = unsafe { std::slice::from_raw_parts_mut(b.block.as_ptr().add(off), n) };
            match saved {
                // Code is compared first: an unchanged page keeps its translations.
                Some(k) => {
                    let old = &b.saved.data[k][..n];
                    if code && page == old {
                        continue;
                    }
                    page.copy_from_slice(old);
                }
                None if page.iter().any(|&x| x != 0) => page.fill(0),
                None => continue,
            }
            for &(s, e, guest) in exec.iter().filter(|&&(s, e, _)| off >= s && off < e) {
                let start = guest + (off - s) as u64;
                changed.push((start, start + n.min(e - off) as u64));
            }
        }
        if let Some(h) = holes {
            give_back(h);
        }
    }
}

/// Label of a `MAP_SHARED | MAP_ANONYMOUS` mapping, as `/proc/self/maps` shows it: the one
/// anonymous memory a `fork` shares instead of copying.
pub const SHARED_ANON: &str = "/dev/zero (deleted)";

/// The label of a System V shared memory segment's attachment (`shmat`): shared anonymous
/// memory that a fork shares, as [`SHARED_ANON`]. Linux names it `/SYSV` and the key in hex.
pub const SYSV_SHM: &str = "/SYSV (deleted)";

/// Whether a region is shared between the processes of a `fork` (a shared file or PM mapping,
/// shared anonymous memory) rather than private to each.
fn shared_mapping(r: &Region) -> bool {
    file_backed(r) || matches!(r.backing, Backing::Anon { label: Some(l) } if l == SHARED_ANON || l == SYSV_SHM)
}

/// A private copy of `r`'s bytes in a fresh host block, copying only the pages the source has
/// touched (untouched pages of an anonymous block read as zero in both).
fn private_copy(r: &Region) -> std::io::Result<Region> {
    let len = r.len() as usize;
    let block = HostBlock::anon(len)?;
    let resident = resident_pages(&r.block);
    let first = r.block_off / PAGE as usize;
    for i in 0..len.div_ceil(PAGE as usize) {
        if !resident.get(first + i).copied().unwrap_or(true) {
            continue;
        }
        let off = i * PAGE as usize;
        let n = (PAGE as usize).min(len - off);
        // SAFETY: both ranges lie inside live mappings of at least `off + n` bytes (the region's
        // bytes in its block, and the new block of the region's length).
        unsafe { std::ptr::copy_nonoverlapping(r.host(r.start + off as u64), block.as_ptr().add(off), n) };
    }
    block.touch();
    Ok(Region {
        start: r.start,
        end: r.end,
        perm: r.perm,
        block,
        block_off: 0,
        backing: r.backing.clone(),
        on_fork: r.on_fork,
    })
}

/// Processes: several address spaces over one engine, each registered at its own base.
impl Memory {
    /// `fork`'s copy of this address space, not yet registered ([`Memory::register`]), to be
    /// registered at `base`: shared mappings keep their host memory; private writable regions get
    /// a copy of their touched pages; private regions that cannot be written (code, read-only
    /// data, guard pages) keep their host memory too (no copy to make).
    /// [`Memory::unshare`] gives a process its own copy before such a region becomes writable.
    pub fn fork_copy(&self, base: u64) -> std::io::Result<Memory> {
        let mut regions = BTreeMap::new();
        let mut mapped = self.mapped;
        for r in self.regions.values() {
            let copy = if r.on_fork.dont_copy {
                // MADV_DONTFORK: the child has a hole there.
                mapped -= r.len();
                continue;
            } else if r.on_fork.wipe {
                // MADV_WIPEONFORK: fresh zeros (private anonymous memory, as madvise checked).
                Region { block: HostBlock::anon(r.len() as usize)?, block_off: 0, ..r.clone() }
            } else if shared_mapping(r) || !r.perm.write() {
                r.clone()
            } else {
                private_copy(r)?
            };
            regions.insert(copy.start, copy);
        }
        // The child's working set is the parent's: registered at the child's slot, it holds
        // the same starts, which the copy keeps (but those of regions it does not get).
        let mut resident = self.resident.clone();
        resident.retain(|s, _| regions.contains_key(s));
        Ok(Memory { regions, mapped, base, resident, tick: self.tick, residency: Residency::default() })
    }

    /// Sets what `fork` does with `[start, end)` (which must be mapped): `set` changes each
    /// region's [`OnFork`] there, splitting regions at the bounds.
    pub fn set_on_fork<D>(&mut self, uc: &mut Unicorn<'_, D>, start: u64, end: u64, set: impl Fn(&mut OnFork)) {
        self.carve(uc, start, end, Some(&|middle: &mut Region| set(&mut middle.on_fork)));
    }

    /// Gives the private regions of `[start, end)` that cannot be written now host memory of
    /// their own (a copy), so that making them writable cannot change another process's
    /// memory. Returns whether anything was copied (Unicorn then holds the copies).
    pub fn unshare<D>(&mut self, uc: &mut Unicorn<'_, D>, start: u64, end: u64) -> std::io::Result<bool> {
        let keys: Vec<u64> = self
            .regions
            .range(..end)
            .rev()
            .take_while(|(_, r)| r.end > start)
            .filter(|(_, r)| !r.perm.write() && !shared_mapping(r))
            .map(|(k, _)| *k)
            .collect();
        for k in &keys {
            let copy = private_copy(&self.regions[k])?;
            let old = self.regions.insert(*k, copy.clone()).expect("key from the table");
            let stamp = self.leave(uc, &old);
            // The same range and protection as a moment ago: it cannot overlap.
            let _ = self.enter(uc, &copy, stamp);
        }
        Ok(!keys.is_empty())
    }

    /// Hands the working set to Unicorn (a forked child's new table, at its own slot, or one
    /// registered again); the other regions are faulted in when reached.
    pub fn register<D>(&self, uc: &mut Unicorn<'_, D>) -> Result<(), MemError> {
        self.resident.keys().try_for_each(|s| uc_map(uc, self.base, &self.regions[s]))
    }

    /// Takes every region away from Unicorn (a process that ends or `execve`s); the host
    /// memory goes when the table does.
    pub fn unregister<D>(&self, uc: &mut Unicorn<'_, D>) {
        for s in self.resident.keys() {
            uc_unmap(uc, self.base, &self.regions[s]);
        }
    }

    /// Where this table's regions are registered in Unicorn's physical space: the guest address
    /// plus this (0 for the first process, see `machine/state.rs`, `Phys`).
    pub fn base(&self) -> u64 {
        self.base
    }

    /// An empty table whose regions will be registered at `base`.
    pub fn at_base(base: u64) -> Memory {
        Memory { base, ..Memory::default() }
    }

    /// The DRAM mappings a `fork` leaves shared between parent and child, as (start, length) in
    /// address order: shared mappings of ordinary files, shared anonymous memory, System V
    /// segments (PM windows are not DRAM).
    pub fn shared_dram_ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.regions
            .values()
            .filter(|r| shared_mapping(r) && !matches!(r.backing, Backing::Pm { .. }))
            .map(|r| (r.start, r.len()))
    }

    /// The host address of `addr` if it lies in a mapping processes share after a `fork` (a
    /// shared file or PM mapping, shared anonymous memory): what a shared futex there is keyed
    /// by, the same in every process that maps it.
    pub fn shared_host_addr(&self, addr: u64) -> Option<u64> {
        self.find(addr).filter(|r| shared_mapping(r)).map(|r| r.host(addr) as u64)
    }

    /// The file (its identity, [`Backing::SharedFile`]'s `ino`) and offset `addr` maps if it
    /// lies in a shared mapping of an ordinary file: what a shared futex there is keyed by
    /// (Linux keys it by inode and page), so that processes that map the file each with its
    /// own `mmap` meet, as well as those that inherited one mapping (a POSIX semaphore of
    /// `sem_open`, which Python's multiprocessing locks are: glibc makes it under a temporary
    /// name and links it to its own, and other processes map it by that name).
    pub fn shared_file_offset(&self, addr: u64) -> Option<(u64, u64)> {
        self.find(addr).and_then(|r| match &r.backing {
            Backing::SharedFile { offset, ino, .. } => Some((*ino, offset + (addr - r.start))),
            _ => None,
        })
    }
}

/// A [`Memory`] at a fixed heap address: the machine's running table, which its hooks reach
/// through a raw pointer while the engine runs (to map a region Unicorn does not hold, or read
/// from one). Not a `Box`, whose uniqueness a pointer kept beside it would contradict; swapping
/// another process's table in exchanges the contents, not the address.
pub struct FixedMemory(NonNull<Memory>);

impl FixedMemory {
    /// `mem` moved to the heap.
    pub fn new(mem: Memory) -> FixedMemory {
        FixedMemory(NonNull::from(Box::leak(Box::new(mem))))
    }

    /// The table's address, valid while this lives.
    pub fn as_ptr(&self) -> *mut Memory {
        self.0.as_ptr()
    }
}

impl std::ops::Deref for FixedMemory {
    type Target = Memory;
    fn deref(&self) -> &Memory {
        // SAFETY: allocated in `new` and freed only in `drop`.
        unsafe { self.0.as_ref() }
    }
}

impl std::ops::DerefMut for FixedMemory {
    fn deref_mut(&mut self) -> &mut Memory {
        // SAFETY: as in `deref`; the hooks use their pointer only while the engine runs, when the
        // machine holds no reference made here.
        unsafe { self.0.as_mut() }
    }
}

impl Drop for FixedMemory {
    fn drop(&mut self) {
        // SAFETY: made by `Box::leak` in `new`, dropped once.
        unsafe { drop(Box::from_raw(self.0.as_ptr())) }
    }
}
