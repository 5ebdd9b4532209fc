//! Shadow memory: a pass's record per byte or per granule of guest memory, allocated per touched
//! page in a two-level table, as TSan and Valgrind keep theirs.
//!
//! Passes that watch every memory access (`hmtrace`, `oscs`) keep something per address. In a
//! hash map keyed by address every access pays a hash and a probe, every record pays a bucket,
//! and nothing is ever given back when memory goes away. Here the address space is cut into
//! 4 KiB pages and 16 MiB chunks: the first level is the directory of the chunks a program
//! touches (a handful: the program, its heap, its libraries, each thread's stack, each mapping),
//! sorted, with the last one used remembered; the second level is each chunk's table of 4096
//! page slots; a page's records (one per granule of `1 << granule_shift` bytes) are allocated the
//! first time the page is written to, and freed whole ([`Shadow::clear`]) when the memory goes
//! away (munmap, a freed heap block, an exited thread's stack). A lookup is a compare (the
//! remembered chunk), an index and a pointer; memory follows the pages a program touches.
//!
//! Generic over the record `T`: its `Default` is the state of memory never accessed, which is
//! also what [`Shadow::clear`] resets a partly cleared page's records to.

/// Bytes per shadow page.
pub const PAGE_SHIFT: u32 = 12;
/// Pages per chunk (second-level table).
const CHUNK_BITS: u32 = 12;
const CHUNK_PAGES: usize = 1 << CHUNK_BITS;

#[derive(Clone)]
struct Chunk<T> {
    /// The chunk's number (address >> (PAGE_SHIFT + CHUNK_BITS)).
    number: u64,
    pages: Box<[Option<Box<[T]>>]>,
    /// Pages allocated in it.
    live: usize,
}

/// Per-granule records of type `T` for the pages of guest memory that have any.
#[derive(Clone)]
pub struct Shadow<T> {
    granule_shift: u32,
    /// The chunks with pages, sorted by number.
    chunks: Vec<Chunk<T>>,
    /// Index in `chunks` of the one used last.
    last: std::cell::Cell<usize>,
    pages: usize,
}

impl<T: Default> Shadow<T> {
    /// An empty shadow with one record per `1 << granule_shift` bytes (at most a page).
    pub fn new(granule_shift: u32) -> Shadow<T> {
        assert!(granule_shift <= PAGE_SHIFT);
        Shadow { granule_shift, chunks: Vec::new(), last: std::cell::Cell::new(0), pages: 0 }
    }

    fn per_page(&self) -> usize {
        1 << (PAGE_SHIFT - self.granule_shift)
    }

    /// The index in `chunks` of chunk `number`, or where it would go.
    fn find(&self, number: u64) -> Result<usize, usize> {
        let last = self.last.get();
        if self.chunks.get(last).is_some_and(|c| c.number == number) {
            return Ok(last);
        }
        let r = self.chunks.binary_search_by_key(&number, |c| c.number);
        if let Ok(i) = r {
            self.last.set(i);
        }
        r
    }

    fn split(&self, addr: u64) -> (u64, usize, usize) {
        let page = addr >> PAGE_SHIFT;
        let index = ((addr & ((1 << PAGE_SHIFT) - 1)) >> self.granule_shift) as usize;
        (page >> CHUNK_BITS, (page as usize) & (CHUNK_PAGES - 1), index)
    }

    /// The record of the granule holding `addr`, if its page has records.
    #[inline]
    pub fn get(&self, addr: u64) -> Option<&T> {
        let (chunk, slot, index) = self.split(addr);
        let c = &self.chunks[self.find(chunk).ok()?];
        c.pages[slot].as_ref().map(|p| &p[index])
    }

    /// The record of the granule holding `addr`, if its page has records, to change.
    #[inline]
    pub fn get_mut(&mut self, addr: u64) -> Option<&mut T> {
        let (chunk, slot, index) = self.split(addr);
        let i = self.find(chunk).ok()?;
        self.chunks[i].pages[slot].as_mut().map(|p| &mut p[index])
    }

    /// The record of the granule holding `addr`, its page's records allocated if it had none.
    #[inline]
    pub fn get_or_insert(&mut self, addr: u64) -> &mut T {
        let (chunk, slot, index) = self.split(addr);
        let i = match self.find(chunk) {
            Ok(i) => i,
            Err(i) => {
                let pages = (0..CHUNK_PAGES).map(|_| None).collect();
                self.chunks.insert(i, Chunk { number: chunk, pages, live: 0 });
                self.last.set(i);
                i
            }
        };
        let per_page = self.per_page();
        let c = &mut self.chunks[i];
        let page = c.pages[slot].get_or_insert_with(|| {
            c.live += 1;
            self.pages += 1;
            (0..per_page).map(|_| T::default()).collect()
        });
        &mut page[index]
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
                    c.pages[slot as usize] = None;
                    c.live -= 1;
                    freed += 1;
                } else {
                    let g0 = ((a.max(page_lo) - page_lo) >> self.granule_shift) as usize;
                    let g1 = ((b.min(page_hi) - page_lo).div_ceil(1 << self.granule_shift) as usize).min(per_page);
                    for r in &mut page[g0..g1] {
                        *r = T::default();
                    }
                }
            }
        }
        self.pages -= freed;
        if freed > 0 {
            self.chunks.retain(|c| c.live > 0);
            self.last.set(0);
        }
    }

    /// Pages with records.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// Host bytes the tables and records take (not what the records own besides).
    pub fn bytes(&self) -> usize {
        self.chunks.len() * (CHUNK_PAGES * std::mem::size_of::<Option<Box<[T]>>>() + std::mem::size_of::<Chunk<T>>())
            + self.pages * self.per_page() * std::mem::size_of::<T>()
    }

    /// Calls `f` with the address of every granule of every page with records, and its record.
    pub fn each(&self, mut f: impl FnMut(u64, &T)) {
        let span = 1u64 << (PAGE_SHIFT + CHUNK_BITS);
        for c in &self.chunks {
            for (slot, page) in c.pages.iter().enumerate() {
                let Some(page) = page else { continue };
                let base = c.number * span + ((slot as u64) << PAGE_SHIFT);
                for (i, r) in page.iter().enumerate() {
                    f(base + ((i as u64) << self.granule_shift), r);
                }
            }
        }
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
