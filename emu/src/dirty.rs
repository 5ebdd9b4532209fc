//! Which host pages of guest memory were written since a snapshot, from the kernel's
//! write-protect bits, so that a restore copies back only those instead of comparing every page.
//!
//! Linux 6.7+ keeps the bits for us: anonymous memory registered with a userfaultfd in
//! write-protect mode, with `UFFD_FEATURE_WP_ASYNC`, has each write to a protected page clear its
//! protection in the fault path itself (no handler thread, no signal), and the `PAGEMAP_SCAN`
//! ioctl on `/proc/self/pagemap` lists the unprotected ("written") pages of a range and protects
//! them again in the same walk. Every write counts: the guest's own stores made by Unicorn's
//! generated code, ferrite's writes on the kernel's behalf through the host pointers, and the host
//! kernel's (a `read()` into guest memory).
//!
//! The bits are one set for the whole process, but a run keeps several live snapshots (the
//! debugger's timeline, an exploration's stack), so each block folds the scans into page
//! generations: a scan at a snapshot ([`Pages::stamp`]) stamps every page written since the
//! block's last scan with a new value of a process-wide counter and protects it again; a
//! snapshot remembers the counter after its scans ([`generation`]). A page differs from snapshot
//! S only if its stamp is newer than S's, or it has been written since its last stamp: a
//! restore reads those bits without protecting anything ([`Pages::written_since`]), so its own
//! copies do not fault, and they are stamped at the next snapshot like any write.
//!
//! The same bits make taking a snapshot incremental: each block remembers the copies the last
//! snapshot that stamped it made ([`SavedPages`], while that snapshot lives), and the next one
//! copies only the pages written since it and shares the others' copies ([`Pages::previous`]).
//! A page unwritten since was not changed by anyone, a restore included (its copies are writes
//! like any other), so the shared bytes are its bytes now.
//!
//! Only the pages present (or swapped) are scanned: a hole is never protected, so its first
//! write makes an unprotected page the next scan finds, and a large reservation that the guest
//! barely touched costs neither a page-table walk of its holes nor page tables for markers.
//!
//! Shared file mappings (PM pools, `MAP_SHARED` files) are not tracked, although the kernel
//! supports it: their pages also change through descriptors (the guest's `write()`, a snapshot's
//! own restore of the file's contents), which no page-table bit sees. They, and every block
//! where the kernel lacks the feature (older kernels, a user who may not use userfaultfd), are
//! compared page by page as before ([`crate::memory::Memory::restore`]). [`mode`] says which.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

const PAGE: usize = crate::memory::PAGE as usize;

// <linux/userfaultfd.h> and <linux/fs.h> (newer than the libc crate's constants).
const UFFD_API: u64 = 0xAA;
const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFDIO_API: libc::c_ulong = 0xC018_AA3F;
const UFFDIO_REGISTER: libc::c_ulong = 0xC020_AA00;
const UFFDIO_REGISTER_MODE_WP: u64 = 2;
const PAGEMAP_SCAN: libc::c_ulong = 0xC060_6610;
const PM_SCAN_WP_MATCHING: u64 = 1;
const PM_SCAN_CHECK_WPASYNC: u64 = 2;
const PAGE_IS_WRITTEN: u64 = 1 << 1;
const PAGE_IS_PRESENT: u64 = 1 << 3;
const PAGE_IS_SWAPPED: u64 = 1 << 4;

// Read and written by the kernel.
#[allow(dead_code)]
#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

// Read and written by the kernel.
#[allow(dead_code)]
#[repr(C)]
struct UffdioRegister {
    start: u64,
    len: u64,
    mode: u64,
    ioctls: u64,
}

// Read and written by the kernel.
#[allow(dead_code)]
#[repr(C)]
#[derive(Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

// Read and written by the kernel.
#[allow(dead_code)]
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// The process's userfaultfd and its pagemap, once the kernel has shown it does what is needed.
struct Tracker {
    uffd: OwnedFd,
    pagemap: OwnedFd,
}

static TRACKER: OnceLock<Option<Tracker>> = OnceLock::new();

/// Scans so far, in this process: the stamps of [`Pages`]. Only compared, never part of a run.
static GENERATION: AtomicU64 = AtomicU64::new(0);

fn tracker() -> Option<&'static Tracker> {
    TRACKER.get_or_init(Tracker::detect).as_ref()
}

/// How restores find what changed: `"uffd-wp"` (the kernel's write-protect bits for anonymous
/// memory) or `"compare"` (every page compared with the snapshot's copy: the kernel lacks
/// asynchronous write-protection or `PAGEMAP_SCAN`, or `FERRITE_NO_DIRTY_TRACKING=1`). Decided
/// once per process.
pub fn mode() -> &'static str {
    if tracker().is_some() {
        "uffd-wp"
    } else {
        "compare"
    }
}

/// The stamp counter now: every page stamped so far has a stamp at most this, every later stamp
/// is greater. A snapshot takes it after stamping its blocks.
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

impl Tracker {
    fn detect() -> Option<Tracker> {
        if std::env::var_os("FERRITE_NO_DIRTY_TRACKING").is_some_and(|v| v == "1") {
            return None;
        }
        // Root (or `vm.unprivileged_userfaultfd=1`) may have faults in kernel mode handled too;
        // anyone else only user-mode ones, which is all asynchronous write-protection needs (the
        // fault is resolved before a handler would be asked).
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: plain system calls; the descriptor is owned below.
        let mut fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        if fd < 0 {
            // SAFETY: as above.
            fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY) };
        }
        if fd < 0 {
            return None;
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let uffd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let mut api = UffdioApi { api: UFFD_API, features: UFFD_FEATURE_WP_ASYNC, ioctls: 0 };
        // SAFETY: `api` is the structure UFFDIO_API reads and writes.
        if unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_API, &mut api) } != 0 {
            return None;
        }
        let pagemap = std::fs::File::open("/proc/self/pagemap").ok()?;
        let t = Tracker { uffd, pagemap: pagemap.into() };
        t.self_test().then_some(t)
    }

    /// Whether the bits tell exactly what was written, by a store and by the host kernel, on a
    /// scratch mapping: a kernel with the calls but not the behaviour falls back to comparing.
    fn self_test(&self) -> bool {
        let len = 4 * PAGE;
        // SAFETY: a fresh private anonymous mapping, unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return false;
        }
        let base = p as u64;
        let ok = (|| {
            let mem = p.cast::<u8>();
            // SAFETY: inside the mapping.
            unsafe {
                for i in 0..3 {
                    *mem.add(i * PAGE) = 1;
                }
            }
            self.register(base, len).ok()?;
            self.scan(base, base + len as u64, true, &mut |_, _| {}).ok()?;
            // One page written by a store, one by the host kernel (a pipe read into it), one
            // left alone, one a hole.
            // SAFETY: inside the mapping.
            unsafe { *mem = 2 };
            let mut pipe = [0i32; 2];
            // SAFETY: plain system calls on descriptors created and closed here.
            let read = unsafe {
                if libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                    return None;
                }
                let wrote = libc::write(pipe[1], b"x".as_ptr().cast(), 1);
                let read = libc::read(pipe[0], mem.add(PAGE).cast(), 1);
                libc::close(pipe[0]);
                libc::close(pipe[1]);
                (wrote == 1).then_some(read)?
            };
            if read != 1 {
                return None;
            }
            let mut seen = Vec::new();
            self.scan(base, base + len as u64, false, &mut |s, e| seen.push((s - base, e - base))).ok()?;
            Some(seen == [(0, 2 * PAGE as u64)])
        })();
        // SAFETY: the mapping made above; nothing refers to it any more.
        unsafe { libc::munmap(p, len) };
        ok == Some(true)
    }

    fn register(&self, start: u64, len: usize) -> std::io::Result<()> {
        let mut reg = UffdioRegister {
            start,
            len: len.div_ceil(PAGE) as u64 * PAGE as u64,
            mode: UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        // SAFETY: `reg` is the structure UFFDIO_REGISTER reads and writes; the range is a live
        // mapping of ours.
        if unsafe { libc::ioctl(self.uffd.as_raw_fd(), UFFDIO_REGISTER, &mut reg) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Calls `found` with each written range (host addresses) of `[start, end)`, present or
    /// swapped pages only, and protects them again if `protect`.
    fn scan(&self, start: u64, end: u64, protect: bool, found: &mut dyn FnMut(u64, u64)) -> std::io::Result<()> {
        let mut regions = [PageRegion::default(); 128];
        let mut at = start;
        while at < end {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                flags: if protect { PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC } else { 0 },
                start: at,
                end,
                vec: regions.as_mut_ptr() as u64,
                vec_len: regions.len() as u64,
                category_mask: PAGE_IS_WRITTEN,
                category_anyof_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
                return_mask: PAGE_IS_WRITTEN,
                ..Default::default()
            };
            // SAFETY: `arg` is the structure PAGEMAP_SCAN reads and writes, and `regions` has
            // room for `vec_len` entries.
            let n = unsafe { libc::ioctl(self.pagemap.as_raw_fd(), PAGEMAP_SCAN, &mut arg) };
            if n < 0 {
                return Err(std::io::Error::last_os_error());
            }
            for r in &regions[..n as usize] {
                found(r.start, r.end);
            }
            if arg.walk_end <= at {
                return Err(std::io::Error::other("PAGEMAP_SCAN made no progress"));
            }
            at = arg.walk_end;
        }
        Ok(())
    }
}

/// Pages per chunk of stamps: 2 MiB of guest memory.
const CHUNK: usize = 512;

/// The stamps of 2 MiB of a block, allocated when one of its pages is first stamped.
struct Chunk {
    newest: u64,
    stamps: [u64; CHUNK],
}

impl Chunk {
    fn new() -> Box<Chunk> {
        Box::new(Chunk { newest: 0, stamps: [0; CHUNK] })
    }
}

enum State {
    /// A shared file mapping, or registration failed: compared page by page.
    Untracked,
    /// Not yet registered (no snapshot has held the block).
    Fresh,
    /// Registered; `chunks[i]` holds the stamps of pages `i * CHUNK..`.
    Tracked(Vec<Option<Box<Chunk>>>),
}

/// The page copies a snapshot holds of one block: the saved pages' indices, sorted, and each
/// one's bytes (a whole page, or what the block has of its last). A page's bytes are shared
/// with every later snapshot that finds it unwritten since ([`Pages::previous`]).
pub(crate) struct SavedPages {
    pub(crate) pages: Vec<u32>,
    pub(crate) data: Vec<Rc<[u8]>>,
}

/// The write stamps of one host block (see the module's doc), and the copies of its pages the
/// last snapshot that stamped it made, while that snapshot lives.
pub(crate) struct Pages {
    state: RefCell<State>,
    /// The last snapshot's copies, and the generation it stamped the block at.
    last: RefCell<Option<(Weak<SavedPages>, u64)>>,
}

impl std::fmt::Debug for Pages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match &*self.state.borrow() {
            State::Untracked => "untracked",
            State::Fresh => "fresh",
            State::Tracked(_) => "tracked",
        };
        f.write_str(s)
    }
}

impl Pages {
    /// Stamps of a new block: tracked from its first snapshot on if `anonymous` and the kernel
    /// can.
    pub(crate) fn new(anonymous: bool) -> Pages {
        let state = RefCell::new(if anonymous { State::Fresh } else { State::Untracked });
        Pages { state, last: RefCell::new(None) }
    }

    /// The copies of the last snapshot that stamped the block, if it still lives, and the pages
    /// (sorted) written since it: a snapshot stamping the block now shares the copies of the
    /// others instead of copying them again. Call after [`Pages::stamp`].
    pub(crate) fn previous(&self, ptr: *mut u8, len: usize) -> Option<(Rc<SavedPages>, Vec<u32>)> {
        let (saved, generation) = self.last.borrow().as_ref().and_then(|(w, g)| Some((w.upgrade()?, *g)))?;
        let written = self.written_since(ptr, len, generation)?;
        Some((saved, written))
    }

    /// `saved` is the newest snapshot's copy of the block, which it stamped at `generation`.
    pub(crate) fn remember(&self, saved: &Rc<SavedPages>, generation: u64) {
        *self.last.borrow_mut() = Some((Rc::downgrade(saved), generation));
    }

    /// At a snapshot: stamps the pages of the block at `ptr` (`len` bytes) written since its last
    /// stamp and protects them again, registering the block first if no snapshot held it yet
    /// (every page it has counts as written then). False if the block is not tracked.
    pub(crate) fn stamp(&self, ptr: *mut u8, len: usize) -> bool {
        let Some(t) = tracker() else { return false };
        let mut state = self.state.borrow_mut();
        if matches!(*state, State::Fresh) {
            *state = match t.register(ptr as u64, len) {
                Ok(()) => State::Tracked((0..len.div_ceil(PAGE * CHUNK)).map(|_| None).collect()),
                Err(_) => State::Untracked,
            };
        }
        let State::Tracked(chunks) = &mut *state else { return false };
        let stamp = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
        let base = ptr as u64;
        let end = base + (len.div_ceil(PAGE) * PAGE) as u64;
        let scanned = t.scan(base, end, true, &mut |s, e| {
            for page in ((s - base) as usize / PAGE)..((e - base) as usize / PAGE) {
                let chunk =
                    chunks[page / CHUNK].get_or_insert_with(|| Box::new(Chunk { newest: 0, stamps: [0; CHUNK] }));
                chunk.stamps[page % CHUNK] = stamp;
                chunk.newest = stamp;
            }
        });
        if scanned.is_err() {
            // Pages may have lost their protection unstamped: never trust the bits again.
            *state = State::Untracked;
            return false;
        }
        true
    }

    /// Counts pages `from..to` as written now (they were given back to the host, so their
    /// page-table bits no longer say it).
    pub(crate) fn mark_written(&self, from: usize, to: usize) {
        if let State::Tracked(chunks) = &mut *self.state.borrow_mut() {
            let stamp = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
            for page in from..to {
                let chunk = chunks[page / CHUNK].get_or_insert_with(Chunk::new);
                chunk.stamps[page % CHUNK] = stamp;
                chunk.newest = stamp;
            }
        }
    }

    /// The pages (indices into the block) that may differ from a snapshot taken at generation
    /// `since` that stamped the block, sorted: stamped after it, or written since their last
    /// stamp. `None` if the block is no longer tracked (a scan failed): it must be compared.
    pub(crate) fn written_since(&self, ptr: *mut u8, len: usize, since: u64) -> Option<Vec<u32>> {
        let t = tracker()?;
        let state = self.state.borrow();
        let State::Tracked(chunks) = &*state else { return None };
        let mut pages = Vec::new();
        for (c, chunk) in chunks.iter().enumerate() {
            if let Some(chunk) = chunk.as_ref().filter(|k| k.newest > since) {
                for (i, &s) in chunk.stamps.iter().enumerate() {
                    if s > since {
                        pages.push((c * CHUNK + i) as u32);
                    }
                }
            }
        }
        let stamped = pages.len();
        let base = ptr as u64;
        let end = base + (len.div_ceil(PAGE) * PAGE) as u64;
        t.scan(base, end, false, &mut |s, e| {
            pages.extend(((s - base) as usize / PAGE) as u32..((e - base) as usize / PAGE) as u32)
        })
        .ok()?;
        if pages.len() > stamped {
            pages.sort_unstable();
            pages.dedup();
        }
        Some(pages)
    }
}
