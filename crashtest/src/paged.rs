//! A file's contents as a persistent, sparse tree of 4 KiB pages: what crash testing keeps of a
//! PM file at every crash point and in every image.
//!
//! PM pools are big and sparse (PMDK programs create pools of 1–8 GiB and touch a few MiB), and
//! a workload has thousands of crash points, each with its images. Keeping a copy of the file
//! per point, or even a flat table of its pages, costs the pool's size (or a pointer per page)
//! every time. Here a file is a radix tree with 64 slots per node: all-zero pages are never
//! stored (a hole reads as zeros, as in a sparse file), and two versions share every node and
//! page they have in common, so a point costs the pages written since the point before it plus
//! the few nodes on their paths, and an image the pages its lines land in. Writing a page copies
//! only the nodes it is shared through ([`Arc::make_mut`]).
//!
//! A file's contents are summarised by a [`Sum`] of hashes, one term per non-zero 64-byte line
//! (within its page) and one per non-zero page (of its index and its lines' sum), so that
//! equal contents have equal sums whatever their history, each page's sum is computed once
//! however many points and images share it, and an image that changes a few lines of a point's
//! files gets its sum from the point's by subtracting and adding those lines' terms
//! ([`crate::files::image_key`]) instead of copying and hashing pages.

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, OnceLock};

/// Bytes per page.
pub const PAGE: usize = 4096;
const FANOUT_BITS: u32 = 6;
const FANOUT: usize = 1 << FANOUT_BITS;

/// Bytes per line: the unit of the crash space's versions.
pub const LINE: usize = 64;

/// A sum of hashes: four 64-bit lanes of blake3 output, added lane by lane with wrap-around.
/// Addition makes it incremental: an image's sum is its point's with the changed lines' terms
/// exchanged. Terms are hashes of distinct (position, content) pairs, so unequal contents
/// collide only by chance (2^-256 for random terms; the inputs here are a program's data, not
/// chosen to attack the sum).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sum([u64; 4]);

impl Sum {
    /// The sum with no terms.
    pub const ZERO: Sum = Sum([0; 4]);

    /// The term hashing `parts` (domain `tag` first).
    fn term(tag: &[u8], parts: &[&[u8]]) -> Sum {
        let mut h = blake3::Hasher::new();
        h.update(tag);
        for p in parts {
            h.update(p);
        }
        let b = h.finalize();
        let b = b.as_bytes();
        Sum(std::array::from_fn(|i| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"))))
    }

    /// Adds `t`.
    pub fn add(&mut self, t: Sum) {
        for (a, b) in self.0.iter_mut().zip(t.0) {
            *a = a.wrapping_add(b);
        }
    }

    /// Takes `t` away.
    pub fn sub(&mut self, t: Sum) {
        for (a, b) in self.0.iter_mut().zip(t.0) {
            *a = a.wrapping_sub(b);
        }
    }

    /// Its bytes, for a hash over it.
    pub fn to_bytes(self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (i, lane) in self.0.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&lane.to_le_bytes());
        }
        out
    }
}

/// The term of line `index` (within its page) holding `bytes` in its page's sum: none for a
/// line of zeros, so that a hole and zeros written into a page sum alike.
pub fn line_term(index: usize, bytes: &[u8; LINE]) -> Sum {
    if driver::dir_image::all_zero(bytes) {
        return Sum::ZERO;
    }
    Sum::term(b"line", &[&(index as u16).to_le_bytes(), bytes])
}

/// The term of page `index` whose lines sum to `lines` in its file's sum: none for a page of
/// zeros (whose lines have no terms).
pub fn page_term(index: u64, lines: Sum) -> Sum {
    if lines == Sum::ZERO {
        return Sum::ZERO;
    }
    Sum::term(b"page", &[&index.to_le_bytes(), &lines.to_bytes()])
}

/// One page of a file that is not all zeros, with its lines' sum once someone asked for it.
pub struct Page {
    bytes: Box<[u8; PAGE]>,
    sum: OnceLock<Sum>,
}

impl Page {
    /// A page holding `bytes` (zero-filled past their end), or `None` if they are all zeros.
    fn of(bytes: &[u8]) -> Option<Arc<Page>> {
        if driver::dir_image::all_zero(bytes) {
            return None;
        }
        let mut page = Box::new([0u8; PAGE]);
        page[..bytes.len()].copy_from_slice(bytes);
        Some(Arc::new(Page { bytes: page, sum: OnceLock::new() }))
    }

    /// The page's bytes.
    pub fn bytes(&self) -> &[u8; PAGE] {
        &self.bytes
    }

    /// The sum of its lines' terms ([`line_term`]).
    pub fn sum(&self) -> Sum {
        *self.sum.get_or_init(|| {
            let mut s = Sum::ZERO;
            for (i, line) in self.bytes.chunks_exact(LINE).enumerate() {
                s.add(line_term(i, line.try_into().expect("a line")));
            }
            s
        })
    }
}

#[derive(Clone, Default)]
enum Slot {
    #[default]
    Empty,
    Node(Arc<Node>),
    Page(Arc<Page>),
}

#[derive(Clone)]
struct Node {
    slots: [Slot; FANOUT],
}

impl Default for Node {
    fn default() -> Node {
        Node { slots: std::array::from_fn(|_| Slot::Empty) }
    }
}

/// A file's bytes: its length and its non-zero pages, shared with other versions of it.
#[derive(Clone, Default)]
pub struct PagedFile {
    len: u64,
    /// Levels of nodes above the pages: the root covers `FANOUT^levels` pages.
    levels: u32,
    root: Slot,
}

impl std::fmt::Debug for PagedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PagedFile({} bytes, {} pages stored)", self.len, self.stored_pages())
    }
}

impl PartialEq for PagedFile {
    fn eq(&self, other: &PagedFile) -> bool {
        if self.len != other.len {
            return false;
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        self.each_page(|i, p| a.push((i, p.clone())));
        other.each_page(|i, p| b.push((i, p.clone())));
        a.len() == b.len() && a.iter().zip(&b).all(|((i, p), (j, q))| i == j && p.bytes == q.bytes)
    }
}

impl Eq for PagedFile {}

fn levels_for(pages: u64) -> u32 {
    let mut levels = 0;
    while (FANOUT as u64).saturating_pow(levels) < pages {
        levels += 1;
    }
    levels
}

impl PagedFile {
    /// A file of `len` bytes, all zeros.
    pub fn zeros(len: u64) -> PagedFile {
        PagedFile { len, levels: levels_for(len.div_ceil(PAGE as u64)), root: Slot::Empty }
    }

    /// `bytes` as a file.
    pub fn from_bytes(bytes: &[u8]) -> PagedFile {
        let mut f = PagedFile::zeros(bytes.len() as u64);
        for (i, chunk) in bytes.chunks(PAGE).enumerate() {
            f.set(i as u64, Page::of(chunk));
        }
        f
    }

    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pages in the file (the last one possibly partial).
    pub fn pages(&self) -> u64 {
        self.len.div_ceil(PAGE as u64)
    }

    /// Whether `other` is this very version (then they are equal; unequal pointers say nothing).
    pub fn same(&self, other: &PagedFile) -> bool {
        self.len == other.len
            && match (&self.root, &other.root) {
                (Slot::Empty, Slot::Empty) => true,
                (Slot::Node(a), Slot::Node(b)) => Arc::ptr_eq(a, b),
                (Slot::Page(a), Slot::Page(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }

    /// Whether both have the same length and the very same pages (then they are equal).
    pub fn shares_pages(&self, other: &PagedFile) -> bool {
        if self.same(other) {
            return true;
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        self.each_page(|i, p| a.push((i, Arc::as_ptr(p))));
        other.each_page(|i, p| b.push((i, Arc::as_ptr(p))));
        self.len == other.len && a == b
    }

    /// Page `index`, unless it is all zeros.
    pub fn page(&self, index: u64) -> Option<&Arc<Page>> {
        if index >= self.pages() {
            return None;
        }
        let mut slot = &self.root;
        for level in (0..self.levels).rev() {
            match slot {
                Slot::Node(n) => slot = &n.slots[((index >> (level * FANOUT_BITS)) as usize) & (FANOUT - 1)],
                _ => return None,
            }
        }
        match slot {
            Slot::Page(p) => Some(p),
            _ => None,
        }
    }

    /// Makes page `index` (inside the file) `page`, copying the nodes shared with other versions
    /// on its way.
    fn set(&mut self, index: u64, page: Option<Arc<Page>>) {
        debug_assert!(index < self.pages());
        let mut slot = &mut self.root;
        for level in (0..self.levels).rev() {
            if !matches!(slot, Slot::Node(_)) {
                if page.is_none() {
                    return;
                }
                *slot = Slot::Node(Arc::new(Node::default()));
            }
            let Slot::Node(n) = slot else { unreachable!("made a node above") };
            slot = &mut Arc::make_mut(n).slots[((index >> (level * FANOUT_BITS)) as usize) & (FANOUT - 1)];
        }
        *slot = match page {
            Some(p) => Slot::Page(p),
            None => Slot::Empty,
        };
    }

    /// Calls `f` with every stored (not all-zero) page and its index, in order.
    pub fn each_page(&self, mut f: impl FnMut(u64, &Arc<Page>)) {
        fn walk(slot: &Slot, base: u64, level: u32, f: &mut dyn FnMut(u64, &Arc<Page>)) {
            match slot {
                Slot::Empty => {}
                Slot::Page(p) => f(base, p),
                Slot::Node(n) => {
                    let span = (FANOUT as u64).pow(level - 1);
                    for (i, s) in n.slots.iter().enumerate() {
                        walk(s, base + i as u64 * span, level - 1, f);
                    }
                }
            }
        }
        walk(&self.root, 0, self.levels, &mut f);
    }

    /// Pages stored (those not all zeros).
    pub fn stored_pages(&self) -> u64 {
        let mut n = 0;
        self.each_page(|_, _| n += 1);
        n
    }

    /// Writes `bytes` at `offset` (inside the file; bytes past its end are dropped).
    pub fn write_at(&mut self, offset: u64, bytes: &[u8]) {
        let end = (offset + bytes.len() as u64).min(self.len);
        let mut at = offset;
        while at < end {
            let index = at / PAGE as u64;
            let in_page = (at % PAGE as u64) as usize;
            let n = ((end - at) as usize).min(PAGE - in_page);
            let mut buf = match self.page(index) {
                Some(p) => *p.bytes(),
                None => [0u8; PAGE],
            };
            let from = (at - offset) as usize;
            buf[in_page..in_page + n].copy_from_slice(&bytes[from..from + n]);
            self.set(index, Page::of(&buf));
            at += n as u64;
        }
    }

    /// The whole file as bytes (for small files and tests: this is what the tree avoids).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len as usize];
        self.each_page(|i, p| {
            let at = i as usize * PAGE;
            let n = (out.len() - at).min(PAGE);
            out[at..at + n].copy_from_slice(&p.bytes[..n]);
        });
        out
    }

    /// The sum of its pages' terms ([`page_term`]): equal for equal contents (the length is
    /// not in it).
    pub fn sum(&self) -> Sum {
        let mut s = Sum::ZERO;
        self.each_page(|i, p| s.add(page_term(i, p.sum())));
        s
    }

    /// The lines' sum of page `index` (none for a hole).
    pub fn page_sum(&self, index: u64) -> Sum {
        self.page(index).map_or(Sum::ZERO, |p| p.sum())
    }

    /// The line at `offset` (a multiple of [`LINE`]) as the file holds it: zeros in a hole and
    /// past the end.
    pub fn line(&self, offset: u64) -> [u8; LINE] {
        let mut out = [0u8; LINE];
        if let Some(p) = self.page(offset / PAGE as u64) {
            let at = (offset % PAGE as u64) as usize;
            out.copy_from_slice(&p.bytes[at..at + LINE]);
        }
        out
    }

    /// Writes the file at `path` as a sparse file: only its stored pages take space.
    pub fn write_sparse(&self, path: &std::path::Path) -> io::Result<()> {
        let f = std::fs::File::create(path)?;
        f.set_len(self.len)?;
        let mut err = None;
        self.each_page(|i, p| {
            let at = i * PAGE as u64;
            let n = ((self.len - at) as usize).min(PAGE);
            if err.is_none() {
                err = f.write_all_at(&p.bytes[..n], at).err();
            }
        });
        err.map_or(Ok(()), Err)
    }

    /// The file at `path` as it is now, sharing the pages equal to `prev`'s. Only the file's
    /// data is read (`SEEK_DATA`/`SEEK_HOLE`): holes are zeros without reading them.
    pub fn read(path: &std::path::Path, prev: Option<&PagedFile>) -> io::Result<PagedFile> {
        let f = std::fs::File::open(path)?;
        let len = f.metadata()?.len();
        let mut out = PagedFile::zeros(len);
        let mut buf = vec![0u8; PAGE];
        for (lo, hi) in data_extents(&f, len) {
            let mut index = lo / PAGE as u64;
            while index * (PAGE as u64) < hi {
                out.reread(&f, index, prev, &mut buf)?;
                index += 1;
            }
        }
        Ok(out)
    }

    /// Reads page `index` of `f` again into this version, sharing `prev`'s page if equal.
    fn reread(&mut self, f: &std::fs::File, index: u64, prev: Option<&PagedFile>, buf: &mut [u8]) -> io::Result<()> {
        let at = index * PAGE as u64;
        let n = ((self.len - at) as usize).min(PAGE);
        let got = read_full_at(f, &mut buf[..n], at)?;
        buf[got..n].fill(0);
        let bytes = &buf[..n];
        let old = prev.and_then(|p| p.page(index));
        let page = match old {
            // A file that shrank leaves bytes past its new end in the old page: not shared then,
            // so that equal contents keep equal sums.
            Some(p) if p.bytes[..n] == *bytes && driver::dir_image::all_zero(&p.bytes[n..]) => Some(p.clone()),
            None if driver::dir_image::all_zero(bytes) => None,
            _ => Page::of(bytes),
        };
        // Unchanged pages are already this version's (shared with `prev`): no copy.
        let current = self.page(index);
        let unchanged = match (current, &page) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !unchanged {
            self.set(index, page);
        }
        Ok(())
    }

    /// This file with the pages `indices` (sorted or not) read again from `path`, whose length
    /// must be unchanged; others are kept as they are.
    pub fn reread_pages(&self, path: &std::path::Path, indices: &[u64]) -> io::Result<PagedFile> {
        let f = std::fs::File::open(path)?;
        let mut out = self.clone();
        let mut buf = vec![0u8; PAGE];
        for &i in indices.iter().filter(|i| **i < self.pages()) {
            out.reread(&f, i, Some(self), &mut buf)?;
        }
        Ok(out)
    }
}

/// Reads as much of `buf` as the file has at `at`.
fn read_full_at(f: &std::fs::File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The ranges of `f` that hold data, by `SEEK_DATA`/`SEEK_HOLE`; the whole file where the file
/// system cannot say.
fn data_extents(f: &std::fs::File, len: u64) -> Vec<(u64, u64)> {
    use std::os::fd::AsRawFd;
    let fd = f.as_raw_fd();
    let mut out = Vec::new();
    let mut at = 0u64;
    while at < len {
        // SAFETY: lseek on a descriptor this function borrows; it changes only the file offset,
        // which nothing here relies on (reads are positional).
        let data = unsafe { libc::lseek(fd, at as libc::off_t, libc::SEEK_DATA) };
        if data < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENXIO) {
                break; // no data past `at`
            }
            return vec![(0, len)];
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        if hole < 0 {
            return vec![(0, len)];
        }
        let (lo, hi) = (data as u64, (hole as u64).min(len));
        if hi <= lo {
            break;
        }
        out.push((lo, hi));
        at = hi;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_pages_share_and_read_back() {
        let mut bytes = vec![0u8; 300 * PAGE + 100];
        bytes[5] = 1;
        bytes[200 * PAGE + 7] = 2;
        bytes[300 * PAGE + 99] = 3;
        let f = PagedFile::from_bytes(&bytes);
        assert_eq!(f.stored_pages(), 3);
        assert_eq!(f.to_vec(), bytes);
        let mut g = f.clone();
        g.write_at(200 * PAGE as u64 + 7, &[0]);
        assert_eq!(g.stored_pages(), 2, "a page written back to zeros is a hole again");
        assert!(f.page(0).is_some_and(|p| Arc::ptr_eq(p, g.page(0).unwrap())), "untouched pages are shared");
        let mut h = g.clone();
        h.write_at(200 * PAGE as u64 + 7, &[2]);
        assert_eq!(h, f);
        assert_eq!(h.sum(), f.sum(), "equal contents sum alike whatever their history");
        assert_ne!(g.sum(), f.sum());
        assert_eq!(PagedFile::zeros(f.len()).sum(), Sum::ZERO);
        // Past the end: dropped.
        h.write_at(h.len() - 1, &[9, 9, 9]);
        assert_eq!(h.len(), f.len());
        assert_eq!(h.to_vec()[h.len() as usize - 1], 9);
    }

    #[test]
    fn files_are_read_by_their_data_and_written_sparse() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pool");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(64 << 20).unwrap();
        file.write_all_at(b"head", 0).unwrap();
        file.write_all_at(b"tail", (64 << 20) - 4).unwrap();
        let f = PagedFile::read(&path, None).unwrap();
        assert_eq!(f.len(), 64 << 20);
        assert_eq!(f.stored_pages(), 2);
        file.write_all_at(b"mid", 32 << 20).unwrap();
        let g = f.reread_pages(&path, &[(32 << 20) / PAGE as u64, 0]).unwrap();
        assert_eq!(g.stored_pages(), 3);
        assert!(Arc::ptr_eq(f.page(0).unwrap(), g.page(0).unwrap()), "an unchanged page is shared");
        let copy = dir.path().join("copy");
        g.write_sparse(&copy).unwrap();
        assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&path).unwrap());
        use std::os::unix::fs::MetadataExt;
        assert!(std::fs::metadata(&copy).unwrap().blocks() * 512 < 1 << 20, "holes take no space");
    }
}
