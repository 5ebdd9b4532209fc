//! Shadow memory: a pass's record per byte or per granule of guest memory, allocated per touched
//! page in a two-level table, as TSan and Valgrind keep theirs.
//!
//! Passes that watch every memory access (`hmtrace`, `oscs`) keep something per address. In a
//! hash map keyed by address every access pays a hash and a probe, every record pays a bucket,
//! and nothing is ever given back when memory goes away. Here the address space is cut into
//! 4 KiB pages and 16 MiB chunks: the first level is the directory of the chunks a program
//! touches (a handful: the program, its heap, its libraries, each thread's stack, each mapping),
//! sorted, with the last few used remembered; the second level is each chunk's table of 4096
//! page slots; a page's records (one per granule of `1 << granule_shift` bytes) are allocated the
//! first time the page is written to, and freed whole ([`Shadow::clear`]) when the memory goes
//! away (munmap, a freed heap block, an exited thread's stack). A lookup is a compare (the
//! remembered chunk), an index and a pointer; memory follows the pages a program touches.
//!
//! A page's records are kept one of two ways ([`Page`]): [`Dense`], a record for every granule,
//! allocated with the page (oscs's per-byte ids: critical sections touch most bytes of their
//! pages), or [`Packed`], a record only for the granules accessed, found through a bit and a
//! byte per granule (hmtrace's 16-byte granules: a program that stores once into each 64-byte
//! line of a big PM mapping touches one granule in four, and a dense page cost four records per
//! touched line). A partly cleared packed page keeps its records' room, reset.
//!
//! Generic over the record `T`: its `Default` is the state of memory never accessed, which is
//! also what [`Shadow::clear`] resets a partly cleared page's records to. A record that keeps a
//! short list (hmtrace's access records of a granule) keeps it in a [`Small`]: a few elements
//! inline, more in a list of a [`Spill`] pool shared by the pass, so that no record owns a heap
//! vector and, once the pool has grown to the run's need, no access allocates.

use emu::callstack::StackId;

use crate::persist::{Interner, Site};

/// Bytes per shadow page.
pub const PAGE_SHIFT: u32 = 12;
/// Pages per chunk (second-level table).
const CHUNK_BITS: u32 = 12;
const CHUNK_PAGES: usize = 1 << CHUNK_BITS;

/// How a page's records are kept: [`Dense`] (every granule's record, allocated with the page)
/// or [`Packed`] (only the granules accessed).
pub trait Page<T: Default>: Clone {
    /// A page of `per_page` granules none of which has a record yet.
    fn new(per_page: usize) -> Self;
    /// The record of granule `i`, if it has one.
    fn get(&self, i: usize) -> Option<&T>;
    /// The record of granule `i`, if it has one, to change.
    fn get_mut(&mut self, i: usize) -> Option<&mut T>;
    /// The record of granule `i`, made (default) if it had none.
    fn get_or_insert(&mut self, i: usize) -> &mut T;
    /// Calls `f` with the records of granules `[g0, g1)` that have one.
    fn range_mut(&mut self, g0: usize, g1: usize, f: impl FnMut(&mut T));
    /// Calls `f` with every granule that has a record, in address order.
    fn each(&self, f: impl FnMut(usize, &T));
    /// Host bytes the page takes (not what its records own besides).
    fn bytes(&self) -> usize;
}

/// Every granule of a page has its record, allocated with the page: the shadow of code that
/// touches most of the bytes of its pages (a per-byte shadow, `oscs`'s), one index to a record.
pub type Dense<T> = Box<[T]>;

impl<T: Default + Clone> Page<T> for Box<[T]> {
    fn new(per_page: usize) -> Self {
        (0..per_page).map(|_| T::default()).collect()
    }
    #[inline]
    fn get(&self, i: usize) -> Option<&T> {
        Some(&self[i])
    }
    #[inline]
    fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        Some(&mut self[i])
    }
    #[inline]
    fn get_or_insert(&mut self, i: usize) -> &mut T {
        &mut self[i]
    }
    fn range_mut(&mut self, g0: usize, g1: usize, f: impl FnMut(&mut T)) {
        self[g0..g1].iter_mut().for_each(f)
    }
    fn each(&self, mut f: impl FnMut(usize, &T)) {
        self.iter().enumerate().for_each(|(i, r)| f(i, r))
    }
    fn bytes(&self) -> usize {
        std::mem::size_of_val::<[T]>(self)
    }
}

/// Only the granules of a page that were accessed have a record: a bit per granule says which,
/// a byte per granule where its record is in the page's list of records (in the order the
/// granules were first accessed). A page of 256 granules costs 288 bytes besides its records,
/// so a program that touches one granule of each 64-byte line (a store per PM line) pays for
/// the records it made, not for four times as many. A lookup is a bit test, a byte and an index.
/// At most 256 granules a page (a granule of 16 bytes or more).
#[derive(Clone)]
pub struct Packed<T> {
    present: [u64; 4],
    index: [u8; 256],
    records: Vec<T>,
}

impl<T: Default + Clone> Page<T> for Box<Packed<T>> {
    fn new(per_page: usize) -> Self {
        assert!(per_page <= 256, "a packed page holds at most 256 granules");
        Box::new(Packed { present: [0; 4], index: [0; 256], records: Vec::new() })
    }
    #[inline]
    fn get(&self, i: usize) -> Option<&T> {
        if self.present[i >> 6] & (1 << (i & 63)) == 0 {
            return None;
        }
        Some(&self.records[self.index[i] as usize])
    }
    #[inline]
    fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if self.present[i >> 6] & (1 << (i & 63)) == 0 {
            return None;
        }
        Some(&mut self.records[self.index[i] as usize])
    }
    #[inline]
    fn get_or_insert(&mut self, i: usize) -> &mut T {
        if self.present[i >> 6] & (1 << (i & 63)) == 0 {
            self.present[i >> 6] |= 1 << (i & 63);
            self.index[i] = self.records.len() as u8;
            self.records.push(T::default());
        }
        &mut self.records[self.index[i] as usize]
    }
    fn range_mut(&mut self, g0: usize, g1: usize, mut f: impl FnMut(&mut T)) {
        for i in g0..g1 {
            if let Some(r) = self.get_mut(i) {
                f(r);
            }
        }
    }
    fn each(&self, mut f: impl FnMut(usize, &T)) {
        for i in 0..256 {
            if let Some(r) = self.get(i) {
                f(i, r);
            }
        }
    }
    fn bytes(&self) -> usize {
        std::mem::size_of::<Packed<T>>() + self.records.capacity() * std::mem::size_of::<T>()
    }
}

#[derive(Clone)]
struct Chunk<P> {
    /// The chunk's number (address >> (PAGE_SHIFT + CHUNK_BITS)).
    number: u64,
    pages: Box<[Option<P>]>,
    /// Pages allocated in it.
    live: usize,
}

/// Per-granule records of type `T` for the pages of guest memory that have any, each page's
/// kept as `P` says ([`Dense`] or [`Packed`]).
#[derive(Clone)]
pub struct Shadow<T, P = Dense<T>> {
    granule_shift: u32,
    /// The chunks with pages, sorted by number.
    chunks: Vec<Chunk<P>>,
    /// The chunks used last, direct-mapped by chunk number: `(number, index in chunks)`. A
    /// program's accesses alternate between a few chunks (a loop's stack frame and the array it
    /// walks, a global): one remembered chunk missed at every other access.
    recent: [std::cell::Cell<(u64, usize)>; RECENT],
    pages: usize,
    _records: std::marker::PhantomData<T>,
}

/// Chunks remembered by [`Shadow`] in front of its binary search.
const RECENT: usize = 4;
/// A chunk number no chunk has (addresses have at most 64 - 24 bits of chunk number).
const NO_CHUNK: u64 = u64::MAX;

impl<T: Default, P: Page<T>> Shadow<T, P> {
    /// An empty shadow with one record per `1 << granule_shift` bytes (at most a page).
    pub fn new(granule_shift: u32) -> Shadow<T, P> {
        assert!(granule_shift <= PAGE_SHIFT);
        let recent = std::array::from_fn(|_| std::cell::Cell::new((NO_CHUNK, 0)));
        Shadow { granule_shift, chunks: Vec::new(), recent, pages: 0, _records: std::marker::PhantomData }
    }

    /// Forgets the remembered chunks (their indices moved).
    fn forget_recent(&self) {
        for r in &self.recent {
            r.set((NO_CHUNK, 0));
        }
    }

    fn per_page(&self) -> usize {
        1 << (PAGE_SHIFT - self.granule_shift)
    }

    /// The index in `chunks` of chunk `number`, or where it would go.
    #[inline]
    fn find(&self, number: u64) -> Result<usize, usize> {
        let recent = &self.recent[(number as usize) & (RECENT - 1)];
        let (n, i) = recent.get();
        if n == number {
            return Ok(i);
        }
        let r = self.chunks.binary_search_by_key(&number, |c| c.number);
        if let Ok(i) = r {
            recent.set((number, i));
        }
        r
    }

    fn split(&self, addr: u64) -> (u64, usize, usize) {
        let page = addr >> PAGE_SHIFT;
        let index = ((addr & ((1 << PAGE_SHIFT) - 1)) >> self.granule_shift) as usize;
        (page >> CHUNK_BITS, (page as usize) & (CHUNK_PAGES - 1), index)
    }

    /// The record of the granule holding `addr`, if it has one ([`Dense`]: if its page has
    /// records).
    #[inline]
    pub fn get(&self, addr: u64) -> Option<&T> {
        let (chunk, slot, index) = self.split(addr);
        let c = &self.chunks[self.find(chunk).ok()?];
        c.pages[slot].as_ref().and_then(|p| p.get(index))
    }

    /// The record of the granule holding `addr`, if it has one, to change.
    #[inline]
    pub fn get_mut(&mut self, addr: u64) -> Option<&mut T> {
        let (chunk, slot, index) = self.split(addr);
        let i = self.find(chunk).ok()?;
        self.chunks[i].pages[slot].as_mut().and_then(|p| p.get_mut(index))
    }

    /// The record of the granule holding `addr`, made (with its page) if it had none.
    #[inline]
    pub fn get_or_insert(&mut self, addr: u64) -> &mut T {
        let (chunk, slot, index) = self.split(addr);
        let i = match self.find(chunk) {
            Ok(i) => i,
            Err(i) => {
                let pages = (0..CHUNK_PAGES).map(|_| None).collect();
                self.chunks.insert(i, Chunk { number: chunk, pages, live: 0 });
                self.forget_recent();
                i
            }
        };
        let per_page = self.per_page();
        let c = &mut self.chunks[i];
        let page = c.pages[slot].get_or_insert_with(|| {
            c.live += 1;
            self.pages += 1;
            P::new(per_page)
        });
        page.get_or_insert(index)
    }

    /// Whether the page holding `addr` has records.
    #[inline]
    pub fn has_page(&self, addr: u64) -> bool {
        let (chunk, slot, _) = self.split(addr);
        self.find(chunk).is_ok_and(|i| self.chunks[i].pages[slot].is_some())
    }

    /// Forgets `[lo, hi)`: pages wholly inside are freed, the records of the granules of the
    /// others that the range overlaps are reset. Only the chunks with pages are visited.
    pub fn clear(&mut self, lo: u64, hi: u64) {
        self.clear_with(lo, hi, |_| {})
    }

    /// [`Shadow::clear`], calling `release` first with each record it frees or resets (to give
    /// back what the record holds elsewhere, such as a [`Spill`] list).
    pub fn clear_with(&mut self, lo: u64, hi: u64, mut release: impl FnMut(&mut T)) {
        if hi <= lo {
            return;
        }
        let per_page = self.per_page();
        let span = 1u64 << (PAGE_SHIFT + CHUNK_BITS);
        let (first, last) = (lo / span, (hi - 1) / span);
        let from = self.chunks.partition_point(|c| c.number < first);
        let mut freed = 0;
        for c in self.chunks[from..].iter_mut().take_while(|c| c.number <= last) {
            let base = c.number * span;
            let (a, b) = (lo.max(base), hi.min(base + span));
            for slot in ((a - base) >> PAGE_SHIFT)..=((b - 1 - base) >> PAGE_SHIFT) {
                let page_lo = base + (slot << PAGE_SHIFT);
                let page_hi = page_lo + (1 << PAGE_SHIFT);
                let Some(page) = c.pages[slot as usize].as_mut() else { continue };
                if a <= page_lo && b >= page_hi {
                    page.range_mut(0, per_page, &mut release);
                    c.pages[slot as usize] = None;
                    c.live -= 1;
                    freed += 1;
                } else {
                    let g0 = ((a.max(page_lo) - page_lo) >> self.granule_shift) as usize;
                    let g1 = ((b.min(page_hi) - page_lo).div_ceil(1 << self.granule_shift) as usize).min(per_page);
                    // A packed page keeps the reset records' room: the granules of a page
                    // partly cleared are likely to be used again.
                    page.range_mut(g0, g1, |r| {
                        release(r);
                        *r = T::default();
                    });
                }
            }
        }
        self.pages -= freed;
        if freed > 0 {
            self.chunks.retain(|c| c.live > 0);
            self.forget_recent();
        }
    }

    /// Pages with records.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// Host bytes the tables and records take (not what the records own besides).
    pub fn bytes(&self) -> usize {
        let pages: usize = self.chunks.iter().flat_map(|c| c.pages.iter().flatten()).map(|p| p.bytes()).sum();
        self.chunks.len() * (CHUNK_PAGES * std::mem::size_of::<Option<P>>() + std::mem::size_of::<Chunk<P>>()) + pages
    }

    /// Calls `f` with the address of every granule with a record ([`Dense`]: every granule of
    /// every page with records), and its record, in address order.
    pub fn each(&self, mut f: impl FnMut(u64, &T)) {
        let span = 1u64 << (PAGE_SHIFT + CHUNK_BITS);
        for c in &self.chunks {
            for (slot, page) in c.pages.iter().enumerate() {
                let Some(page) = page else { continue };
                let base = c.number * span + ((slot as u64) << PAGE_SHIFT);
                page.each(|i, r| f(base + ((i as u64) << self.granule_shift), r));
            }
        }
    }
}

/// Lists that outgrew the inline room of a shadow record ([`Small`]), by id, kept for reuse:
/// a list given back keeps its capacity, so once a run has as many spilled records as it will
/// have at once, spilling allocates nothing. (A `Vec` per record cost an allocation when each
/// granule got its first record, and a pointer to follow at every access.)
#[derive(Clone, Default)]
pub struct Spill<T> {
    lists: Vec<Vec<T>>,
    free: Vec<u32>,
}

impl<T> Spill<T> {
    /// The id (never 0) of an empty list.
    fn take(&mut self) -> u32 {
        match self.free.pop() {
            Some(id) => id,
            None => {
                self.lists.push(Vec::new());
                self.lists.len() as u32
            }
        }
    }

    fn give_back(&mut self, id: u32) {
        self.lists[id as usize - 1].clear();
        self.free.push(id);
    }

    /// Lists in use.
    pub fn in_use(&self) -> usize {
        self.lists.len() - self.free.len()
    }
}

/// A short list of `T` inside a shadow record: up to `N` inline, more in a [`Spill`] list (the
/// whole list then, so that it is always one slice, in order). Back inline when it shrinks to `N`.
/// Four bytes besides the inline elements: the inline length, or the spilled list's id.
#[derive(Clone, Copy, Debug)]
pub struct Small<T: Copy + Default, const N: usize> {
    /// `0..=N`: the elements are inline, this many; above `N`: they are in the [`Spill`] list
    /// with id `state - N` (ids start at 1).
    state: u32,
    inline: [T; N],
}

impl<T: Copy + Default, const N: usize> Default for Small<T, N> {
    fn default() -> Self {
        Small { state: 0, inline: [T::default(); N] }
    }
}

impl<T: Copy + Default, const N: usize> Small<T, N> {
    /// The index in [`Spill::lists`] of the spilled list, if the elements are not inline.
    #[inline]
    fn spilled(&self) -> Option<usize> {
        (self.state as usize > N).then(|| self.state as usize - N - 1)
    }

    /// The elements.
    #[inline]
    pub fn as_slice<'a>(&'a self, spill: &'a Spill<T>) -> &'a [T] {
        match self.spilled() {
            None => &self.inline[..self.state as usize],
            Some(l) => &spill.lists[l],
        }
    }

    /// The elements, to change in place.
    #[inline]
    pub fn as_mut_slice<'a>(&'a mut self, spill: &'a mut Spill<T>) -> &'a mut [T] {
        match self.spilled() {
            None => &mut self.inline[..self.state as usize],
            Some(l) => &mut spill.lists[l],
        }
    }

    /// How many elements.
    #[inline]
    pub fn len(&self, spill: &Spill<T>) -> usize {
        match self.spilled() {
            None => self.state as usize,
            Some(l) => spill.lists[l].len(),
        }
    }

    /// Whether the list is empty.
    #[inline]
    pub fn is_empty(&self, spill: &Spill<T>) -> bool {
        self.len(spill) == 0
    }

    /// Moves the `N` inline elements to a spilled list, which it returns.
    fn spill_out<'a>(&mut self, spill: &'a mut Spill<T>) -> &'a mut Vec<T> {
        let id = spill.take();
        self.state = N as u32 + id;
        let list = &mut spill.lists[id as usize - 1];
        list.extend_from_slice(&self.inline);
        list
    }

    /// Appends `v`.
    #[inline]
    pub fn push(&mut self, spill: &mut Spill<T>, v: T) {
        match self.spilled() {
            Some(l) => spill.lists[l].push(v),
            None if (self.state as usize) < N => {
                self.inline[self.state as usize] = v;
                self.state += 1;
            }
            None => self.spill_out(spill).push(v),
        }
    }

    /// Keeps the elements `keep` accepts, in order.
    #[inline]
    pub fn retain(&mut self, spill: &mut Spill<T>, mut keep: impl FnMut(&T) -> bool) {
        match self.spilled() {
            None => {
                let mut n = 0;
                for i in 0..self.state as usize {
                    if keep(&self.inline[i]) {
                        self.inline[n] = self.inline[i];
                        n += 1;
                    }
                }
                self.state = n as u32;
            }
            Some(l) => {
                spill.lists[l].retain(keep);
                self.unspill(spill);
            }
        }
    }

    /// Inserts `v` at `i`, after the elements before it.
    #[inline]
    pub fn insert(&mut self, spill: &mut Spill<T>, i: usize, v: T) {
        match self.spilled() {
            Some(l) => spill.lists[l].insert(i, v),
            None if (self.state as usize) < N => {
                self.inline.copy_within(i..self.state as usize, i + 1);
                self.inline[i] = v;
                self.state += 1;
            }
            None => self.spill_out(spill).insert(i, v),
        }
    }

    /// Keeps the first `n` elements.
    #[inline]
    pub fn truncate(&mut self, spill: &mut Spill<T>, n: usize) {
        match self.spilled() {
            None => self.state = self.state.min(n as u32),
            Some(l) => {
                spill.lists[l].truncate(n);
                self.unspill(spill);
            }
        }
    }

    /// Removes the element at `i`, keeping the order of the others.
    #[inline]
    pub fn remove(&mut self, spill: &mut Spill<T>, i: usize) {
        match self.spilled() {
            None => {
                self.inline.copy_within(i + 1..self.state as usize, i);
                self.state -= 1;
            }
            Some(l) => {
                spill.lists[l].remove(i);
                self.unspill(spill);
            }
        }
    }

    /// Back inline if the elements fit.
    fn unspill(&mut self, spill: &mut Spill<T>) {
        let Some(l) = self.spilled() else { return };
        let list = &spill.lists[l];
        if list.len() <= N {
            self.inline[..list.len()].copy_from_slice(list);
            let n = list.len() as u32;
            spill.give_back(l as u32 + 1);
            self.state = n;
        }
    }

    /// Empties the list, giving its spilled elements' list back.
    pub fn release(&mut self, spill: &mut Spill<T>) {
        if let Some(l) = self.spilled() {
            spill.give_back(l as u32 + 1);
        }
        *self = Small::default();
    }
}

/// An interned access site: `(pc, call stack)`.
pub type SiteId = u32;

/// Entries of the direct-mapped cache in front of [`Sites`].
const SITE_CACHE: usize = 1024;

/// The sites of access records (`hmtrace`'s, `oscs`'s), interned, so that a record holds 4 bytes
/// instead of 12 and "the same site" is one compare. A direct-mapped cache answers a loop's few
/// sites without hashing, and can keep a yes/no answer about the PC beside the id ([`Sites::lookup`]:
/// is this library code?), so that an access pays one cache probe for both.
#[derive(Clone)]
pub struct Sites {
    interned: Interner<Site>,
    cache: Box<[SiteEntry]>,
}

#[derive(Clone, Copy)]
struct SiteEntry {
    pc: u64,
    stack: StackId,
    id: SiteId,
    flag: bool,
}

const NO_SITE: SiteEntry = SiteEntry { pc: u64::MAX, stack: StackId(0), id: 0, flag: false };

impl Default for Sites {
    fn default() -> Sites {
        Sites { interned: Interner::default(), cache: vec![NO_SITE; SITE_CACHE].into_boxed_slice() }
    }
}

impl Sites {
    /// The id of the site `(pc, stack)`.
    #[inline]
    pub fn id(&mut self, pc: u64, stack: StackId) -> SiteId {
        self.lookup(pc, stack, |_| false).0
    }

    /// The id of the site `(pc, stack)` and the answer of `ask` for `pc` (asked when the site
    /// is not in the cache). One `Sites` is used with one question.
    #[inline]
    pub fn lookup(&mut self, pc: u64, stack: StackId, ask: impl FnOnce(u64) -> bool) -> (SiteId, bool) {
        let h = (pc ^ (pc >> 10) ^ u64::from(stack.0).wrapping_mul(0x9e37_79b9)) as usize & (SITE_CACHE - 1);
        let e = &mut self.cache[h];
        if e.pc != pc || e.stack != stack {
            *e = SiteEntry { pc, stack, id: self.interned.id((pc, stack)), flag: ask(pc) };
        }
        (e.id, e.flag)
    }

    /// Forgets the cached answers (the question's answers changed); ids stay.
    pub fn forget_answers(&mut self) {
        self.cache.fill(NO_SITE);
    }

    /// The site of an id.
    pub fn get(&self, id: SiteId) -> Site {
        *self.interned.get(id)
    }
}

/// Entries of a [`PcCache`].
const PC_CACHE: usize = 1024;

/// A direct-mapped cache of a yes/no question about code addresses (is this PC library code?),
/// for the passes that ask it at every memory access: a loop's few PCs hit it every time,
/// instead of a binary search over every function range of libc.
#[derive(Clone)]
pub struct PcCache {
    entries: Box<[(u64, bool)]>,
}

impl Default for PcCache {
    fn default() -> PcCache {
        PcCache { entries: vec![(u64::MAX, false); PC_CACHE].into_boxed_slice() }
    }
}

impl PcCache {
    /// The answer for `pc`, from `ask` the first time (and whenever another PC took its entry).
    #[inline]
    pub fn get(&mut self, pc: u64, ask: impl FnOnce(u64) -> bool) -> bool {
        let e = &mut self.entries[((pc ^ (pc >> 10)) as usize) & (PC_CACHE - 1)];
        if e.0 != pc {
            *e = (pc, ask(pc));
        }
        e.1
    }

    /// Forgets every answer (the code information changed).
    pub fn clear(&mut self) {
        self.entries.fill((u64::MAX, false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_per_granule_and_pages_allocated_on_first_write() {
        let mut s: Shadow<u32> = Shadow::new(4);
        assert!(s.get(0x1000).is_none());
        *s.get_or_insert(0x7fff_ffff_e008) = 7;
        *s.get_or_insert(0x1000) = 1;
        *s.get_or_insert(0x100f) += 1;
        assert_eq!(s.get(0x1000), Some(&2), "one record per 16-byte granule");
        assert_eq!(s.get(0x1010), Some(&0), "the page's other granules exist, at their default");
        assert_eq!(s.get(0x7fff_ffff_e000), Some(&7));
        assert!(s.get(0x2000).is_none());
        assert_eq!(s.pages(), 2);
        assert!(s.has_page(0x1fff) && !s.has_page(0x2000));
    }

    #[test]
    fn small_lists_spill_in_order_and_come_back_inline() {
        let mut sp: Spill<u32> = Spill::default();
        let mut a: Small<u32, 2> = Small::default();
        let mut b: Small<u32, 2> = Small::default();
        for v in 1..=5 {
            a.push(&mut sp, v);
        }
        b.push(&mut sp, 9);
        assert_eq!(a.as_slice(&sp), &[1, 2, 3, 4, 5]);
        assert_eq!((b.as_slice(&sp), sp.in_use()), (&[9][..], 1));
        a.remove(&mut sp, 1);
        a.as_mut_slice(&mut sp)[0] = 7;
        assert_eq!(a.as_slice(&sp), &[7, 3, 4, 5]);
        a.retain(&mut sp, |v| v % 2 == 1);
        assert_eq!((a.as_slice(&sp), sp.in_use()), (&[7, 3, 5][..], 1));
        a.remove(&mut sp, 0);
        assert_eq!((a.as_slice(&sp), sp.in_use()), (&[3, 5][..], 0), "back inline, its list given back");
        a.push(&mut sp, 6);
        b.push(&mut sp, 8);
        b.push(&mut sp, 10);
        assert_eq!((a.as_slice(&sp), b.as_slice(&sp)), (&[3, 5, 6][..], &[9, 8, 10][..]));
        assert_eq!(sp.lists.len(), 2, "the given-back list is reused");
        a.insert(&mut sp, 1, 4);
        assert_eq!(a.as_slice(&sp), &[3, 4, 5, 6]);
        a.truncate(&mut sp, 2);
        assert_eq!((a.as_slice(&sp), sp.in_use()), (&[3, 4][..], 1));
        a.insert(&mut sp, 0, 1);
        assert_eq!((a.as_slice(&sp), sp.in_use()), (&[1, 3, 4][..], 2));
        a.release(&mut sp);
        assert!(a.is_empty(&sp) && sp.in_use() == 1);
        let mut c: Small<u32, 2> = Small::default();
        c.insert(&mut sp, 0, 2);
        c.insert(&mut sp, 0, 1);
        c.truncate(&mut sp, 1);
        assert_eq!(c.as_slice(&sp), &[1]);
        b.retain(&mut sp, |v| *v > 8);
        assert_eq!((b.as_slice(&sp), b.len(&sp), sp.in_use()), (&[9, 10][..], 2, 0));
    }

    #[test]
    fn packed_pages_hold_the_granules_accessed_only() {
        let mut s: Shadow<u32, Box<Packed<u32>>> = Shadow::new(4);
        // One granule in four, in descending order: the records follow first access, the
        // lookups and `each` the address.
        for a in (0x100u64..0x180).rev().map(|l| l << 6) {
            *s.get_or_insert(a + 8) = (a >> 6) as u32;
        }
        assert_eq!(s.pages(), 2);
        assert_eq!(s.get(0x4008), Some(&0x100));
        assert_eq!(s.get(0x4010), None, "a granule never accessed has no record");
        assert_eq!(s.get_mut(0x5fc0).map(|r| *r), Some(0x17f));
        let mut seen = Vec::new();
        s.each(|a, r| seen.push((a, *r)));
        let want: Vec<(u64, u32)> = (0x4000u64..0x6000).step_by(64).map(|a| (a, (a >> 6) as u32)).collect();
        assert_eq!(seen, want, "in address order");
        // 128 records of 4 bytes and two pages' tables, not 512 granules' records.
        assert!(s.bytes() < CHUNK_PAGES * 8 + 64 + 2 * (288 + 128 * 4 + 64), "{}", s.bytes());
        // A partial clear resets the records (keeping their room), a whole page's frees it; a
        // page allocated again starts empty.
        let mut released = 0;
        s.clear_with(0x4000, 0x4080, |r| released += *r);
        assert_eq!(released, 0x100 + 0x101);
        assert_eq!((s.get(0x4000), s.get(0x4040), s.get(0x4080)), (Some(&0), Some(&0), Some(&0x102)));
        s.clear(0x5000, 0x6000);
        assert_eq!((s.pages(), s.get(0x5000)), (1, None));
        *s.get_or_insert(0x5ff0) += 5;
        assert_eq!((s.pages(), s.get(0x5ff0), s.get(0x5fc0)), (2, Some(&5), None));
        // Every granule of a page, the 256th too.
        for a in (0x8000u64..0x9000).step_by(16) {
            *s.get_or_insert(a) = a as u32;
        }
        assert!((0x8000u64..0x9000).step_by(16).all(|a| s.get(a) == Some(&(a as u32))));
    }

    #[test]
    fn a_small_list_of_one_spills_its_second_element() {
        let mut sp: Spill<u64> = Spill::default();
        let mut a: Small<u64, 1> = Small::default();
        assert_eq!(std::mem::size_of::<Small<u32, 2>>(), 12, "four bytes besides the elements");
        a.push(&mut sp, 1);
        assert_eq!((a.as_slice(&sp), sp.in_use()), (&[1][..], 0));
        a.insert(&mut sp, 0, 0);
        assert_eq!((a.as_slice(&sp), sp.in_use()), (&[0, 1][..], 1));
        a.truncate(&mut sp, 1);
        assert_eq!((a.as_slice(&sp), sp.in_use()), (&[0][..], 0));
        a.remove(&mut sp, 0);
        assert!(a.is_empty(&sp));
    }

    #[test]
    fn clearing_frees_whole_pages_and_resets_partial_ones() {
        let mut s: Shadow<u8> = Shadow::new(0);
        for a in (0x10_0000u64..0x10_3000).step_by(0x100) {
            *s.get_or_insert(a) = 1;
            *s.get_or_insert(a + 1) = 1;
        }
        *s.get_or_insert(0x9000_0000) = 3;
        assert_eq!(s.pages(), 4);
        // From the middle of the first page to the middle of the third.
        s.clear(0x10_0801, 0x10_2101);
        assert_eq!(s.pages(), 3, "the second page is freed");
        assert_eq!(s.get(0x10_0800), Some(&1));
        assert_eq!(s.get(0x10_0801), Some(&0));
        assert!(s.get(0x10_1000).is_none());
        assert_eq!(s.get(0x10_2100), Some(&0));
        assert_eq!(s.get(0x10_2101), Some(&1));
        s.clear(0x8000_0000, 0xa000_0000);
        assert!(s.get(0x9000_0000).is_none() && s.pages() == 2);
        assert_eq!(s.get(0x10_2101), Some(&1), "the remembered chunk is forgotten with it");
        let mut n = 0;
        s.each(|_, r| n += usize::from(*r));
        // The first page keeps its bytes up to 0x10_0800 (17), the third those past 0x10_2100 (29).
        assert_eq!(n, 17 + 29);
    }
}
