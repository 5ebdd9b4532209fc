//! The device's table of tracked lines: a compact record for the common undurable line, a full
//! [`Line`] for the rest, and host memory that grows with the lines tracked, never with the
//! size of the PM files.
//!
//! Most undurable lines hold exactly one small cached store above their floor (a store the
//! program has not flushed and fenced yet). Such a line is a [`Compact`]: the store's bytes and
//! the bytes it overwrote, its id and writer, and the floor — 40 bytes, no heap vectors. The
//! rest of the line is durable and the PM file holds it (`files.rs`), so its durable contents
//! are the file's bytes with the overwritten ones put back. A line of a file the device cannot
//! read (events made up by a test or a tool) keeps its 64-byte base in a side map instead.
//! Anything else (a second version, NT chunks, rep-string stores, a store durable by one rule
//! only, kernel writes wider than a word) needs the version history of a [`Line`], which the
//! device gets with [`LineTable::full`]: it converts a compact record losslessly. A full line
//! that falls back to one small version is converted back by [`LineTable::settle`], so a line
//! that is persisted regularly never keeps its history.
//!
//! Layout, chosen for memory per tracked line: the hash map holds only `line → handle` (16-byte
//! buckets); compact records live in fixed-size chunks (no reallocation that would copy them all
//! and briefly double the memory), full lines in boxes. Freed slots are reused, and a freed full
//! line keeps its vectors for the next one, so the steady state of a program that persists what
//! it stores allocates nothing. Chunks are kept at their high-water mark.

use super::fx::FxHashMap;
use super::line::{push_small, range_mask, Entry, EntryKind, Line, Live, LINE};
use super::Tid;

/// Largest store a compact record holds (one hooked guest store is at most 8 bytes).
pub(crate) const COMPACT_BYTES: usize = 8;

/// A line whose only undurable state is one cached store of at most 8 contiguous bytes, by one
/// thread, durable by neither rule, with no pending NT chunk. With the line's durable base it is
/// equivalent to the [`Line`] that [`Compact::expand`] builds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Compact {
    /// The line's floor (0 until something on it was persisted while tracked).
    pub floor: u64,
    /// The store's id: the line's only version above the floor.
    pub id: u64,
    /// The store's bytes (`len` of them, at byte `lo` of the line).
    pub new: [u8; COMPACT_BYTES],
    /// The bytes the store overwrote: the durable base's, there.
    pub old: [u8; COMPACT_BYTES],
    pub tid: Tid,
    pub lo: u8,
    pub len: u8,
}

impl Compact {
    #[inline]
    pub fn mask(&self) -> u64 {
        range_mask(usize::from(self.lo), usize::from(self.len))
    }

    fn range(&self) -> std::ops::Range<usize> {
        usize::from(self.lo)..usize::from(self.lo) + usize::from(self.len)
    }

    /// The durable base, from the line's present bytes (which may or may not hold the store yet:
    /// its hook may come before the engine writes).
    pub fn base_from(&self, mut present: [u8; LINE]) -> [u8; LINE] {
        let r = self.range();
        present[r.clone()].copy_from_slice(&self.old[..r.len()]);
        present
    }

    /// The line as the program sees it now, from its durable base.
    pub fn current(&self, base: [u8; LINE]) -> [u8; LINE] {
        let mut c = base;
        let r = self.range();
        c[r.clone()].copy_from_slice(&self.new[..r.len()]);
        c
    }

    /// The latest-store record of the store.
    pub fn live(&self) -> Live {
        Live { id: self.id, tid: self.tid, nt: false, mask: self.mask(), hw: None, own: None }
    }

    /// Writes the equivalent full line, of durable contents `base`, into `l` (reusing its
    /// vectors).
    pub fn expand_into(&self, l: &mut Line, base: [u8; LINE]) {
        l.reuse(base);
        l.floor = self.floor;
        l.current = self.id;
        let mask = self.mask();
        // Room for the second version that usually follows.
        let e = Entry::new(self.id, EntryKind::Cached, mask, &self.current(base));
        push_small(&mut l.log, e, 2);
        push_small(&mut l.lives, self.live(), 1);
        l.hw_open = mask;
        l.own_open = mask;
    }

    /// The equivalent full line, of durable contents `base`.
    pub fn expand(&self, base: [u8; LINE]) -> Line {
        let mut l = Line::new(base);
        self.expand_into(&mut l, base);
        l
    }

    /// The compact form of `l`, if it has one (see the type's doc).
    pub fn of(l: &Line) -> Option<Compact> {
        let ([e], [live], []) = (&l.log[..], &l.lives[..], &l.pending[..]) else {
            return None;
        };
        let lo = e.mask.trailing_zeros() as usize;
        let len = e.mask.count_ones() as usize;
        let compactable = e.kind == EntryKind::Cached
            && e.id == e.last
            && e.id == l.current
            && e.id > l.floor
            && !l.merged
            && len <= COMPACT_BYTES
            && e.mask == range_mask(lo, len)
            && live.id == e.id
            && !live.nt
            && live.mask == e.mask
            && live.hw.is_none()
            && live.own.is_none();
        if !compactable {
            return None;
        }
        debug_assert_eq!((l.hw_open, l.own_open), (e.mask, e.mask));
        let (mut new, mut old) = ([0u8; COMPACT_BYTES], [0u8; COMPACT_BYTES]);
        let mut values = [0u8; LINE];
        e.apply_to(&mut values, u64::MAX);
        new[..len].copy_from_slice(&values[lo..lo + len]);
        old[..len].copy_from_slice(&l.base[lo..lo + len]);
        Some(Compact { floor: l.floor, id: e.id, new, old, tid: live.tid, lo: lo as u8, len: len as u8 })
    }
}

/// A tracked line, as stored.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Slot<'a> {
    Compact(&'a Compact),
    Full(&'a Line),
}

/// Handles with this bit name a full line; the others a compact record.
const FULL: u32 = 1 << 31;
/// Compact records per chunk (48 bytes each with their line: 192 KiB).
const CHUNK: usize = 4096;

/// A compact record with the line it is of (the index finds records by their line).
#[derive(Clone, Copy, Debug)]
struct Keyed {
    line: u64,
    c: Compact,
}

#[inline]
fn hash(line: u64) -> u64 {
    use std::hash::Hasher;
    let mut h = super::fx::FxHasher::default();
    h.write_u64(line);
    h.finish()
}

#[derive(Clone, Debug, Default)]
pub(crate) struct LineTable {
    /// The handle of each tracked line, hashed by the line its record names: 4 bytes a bucket
    /// (plus hashbrown's control byte), where a `line → handle` map needs 16.
    index: hashbrown::HashTable<u32>,
    compact: Vec<Vec<Keyed>>,
    compact_free: Vec<u32>,
    // Boxed: a full line is large and the vector grows by copying its elements; a box moves
    // as one pointer, and a freed one is kept with its own vectors for the next full line.
    #[allow(clippy::vec_box)]
    full: Vec<Box<Line>>,
    /// The line of each full slot.
    full_lines: Vec<u64>,
    full_free: Vec<u32>,
    /// Durable bases of the compact lines the device cannot read from their file (see the
    /// module's doc): empty in emulation.
    pub(super) bases: FxHashMap<u64, [u8; LINE]>,
}

/// The line a handle's record is of.
#[inline]
fn line_at(compact: &[Vec<Keyed>], full_lines: &[u64], h: u32) -> u64 {
    if h & FULL != 0 {
        full_lines[(h & !FULL) as usize]
    } else {
        compact[h as usize / CHUNK][h as usize % CHUNK].line
    }
}

impl LineTable {
    pub fn len(&self) -> usize {
        self.index.len()
    }

    #[inline]
    fn find(&self, line: u64) -> Option<u32> {
        let (compact, full_lines) = (&self.compact, &self.full_lines);
        self.index.find(hash(line), |&h| line_at(compact, full_lines, h) == line).copied()
    }

    /// Points `line` (whose record already names it) at handle `h`, new or replacing its old one.
    fn set(&mut self, line: u64, h: u32) {
        let (compact, full_lines) = (&self.compact, &self.full_lines);
        match self.index.find_mut(hash(line), |&x| line_at(compact, full_lines, x) == line) {
            Some(x) => *x = h,
            None => {
                self.index.insert_unique(hash(line), h, |&x| hash(line_at(compact, full_lines, x)));
            }
        }
    }

    /// Drops `line` from the index, returning its handle.
    fn unindex(&mut self, line: u64) -> Option<u32> {
        let (compact, full_lines) = (&self.compact, &self.full_lines);
        match self.index.find_entry(hash(line), |&h| line_at(compact, full_lines, h) == line) {
            Ok(e) => Some(e.remove().0),
            Err(_) => None,
        }
    }

    pub fn contains(&self, line: u64) -> bool {
        self.find(line).is_some()
    }

    /// Tracked lines, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.index.iter().map(|&h| line_at(&self.compact, &self.full_lines, h))
    }

    #[inline]
    fn compact_at(&self, h: u32) -> &Compact {
        &self.compact[h as usize / CHUNK][h as usize % CHUNK].c
    }

    #[inline]
    fn slot(&self, h: u32) -> Slot<'_> {
        if h & FULL != 0 {
            Slot::Full(&self.full[(h & !FULL) as usize])
        } else {
            Slot::Compact(self.compact_at(h))
        }
    }

    #[inline]
    pub fn get(&self, line: u64) -> Option<Slot<'_>> {
        self.find(line).map(|h| self.slot(h))
    }

    /// The compact record of `line`, if it is tracked as one.
    #[inline]
    pub fn compact(&self, line: u64) -> Option<&Compact> {
        match self.find(line) {
            Some(h) if h & FULL == 0 => Some(self.compact_at(h)),
            _ => None,
        }
    }

    /// The durable base of the compact line `line`, from its present bytes.
    pub fn compact_base(&self, line: u64, c: &Compact, present: impl FnOnce() -> Option<[u8; LINE]>) -> [u8; LINE] {
        match self.bases.get(&line) {
            Some(b) => *b,
            None => c.base_from(present().unwrap_or([0; LINE])),
        }
    }

    /// Tracks the untracked `line` as `c`; `base` is its durable base when the device cannot
    /// read the line from its file.
    pub fn insert_compact(&mut self, line: u64, c: Compact, base: Option<[u8; LINE]>) {
        debug_assert!(!self.contains(line));
        if let Some(b) = base {
            self.bases.insert(line, b);
        }
        let k = Keyed { line, c };
        let h = match self.compact_free.pop() {
            Some(h) => {
                self.compact[h as usize / CHUNK][h as usize % CHUNK] = k;
                h
            }
            None => {
                if self.compact.last().is_none_or(|v| v.len() == CHUNK) {
                    self.compact.push(Vec::with_capacity(CHUNK));
                }
                let n = self.compact.len() - 1;
                self.compact[n].push(k);
                let h = (n * CHUNK + self.compact[n].len() - 1) as u32;
                assert!(h & FULL == 0, "PM device: too many tracked lines");
                h
            }
        };
        self.set(line, h);
    }

    /// A free full line (its vectors kept from an earlier one) for `line`, not yet in the index.
    fn new_full(&mut self, line: u64) -> u32 {
        match self.full_free.pop() {
            Some(i) => {
                self.full_lines[i as usize] = line;
                i
            }
            None => {
                self.full.push(Box::new(Line::new([0; LINE])));
                self.full_lines.push(line);
                let i = (self.full.len() - 1) as u32;
                assert!(i & FULL == 0, "PM device: too many tracked lines");
                i
            }
        }
    }

    /// The full line of a tracked `line`, converting a compact record; `present()` gives the
    /// line's present bytes (before the event being handled, if it is a store).
    pub fn full(&mut self, line: u64, present: impl FnOnce() -> Option<[u8; LINE]>) -> Option<&mut Line> {
        let h = self.find(line)?;
        let i = if h & FULL != 0 {
            h & !FULL
        } else {
            let c = *self.compact_at(h);
            let base = self.compact_base(line, &c, present);
            self.bases.remove(&line);
            let i = self.new_full(line);
            c.expand_into(&mut self.full[i as usize], base);
            self.set(line, i | FULL);
            // Freed only now: the index found the line through this record until `set`.
            self.compact_free.push(h);
            i
        };
        Some(&mut self.full[i as usize])
    }

    /// The full line of `line`, tracking it with durable content `present()` if it is not
    /// tracked (`present` as for [`full`](Self::full)).
    pub fn full_or_insert(&mut self, line: u64, present: impl FnOnce() -> [u8; LINE]) -> &mut Line {
        if !self.contains(line) {
            let i = self.new_full(line);
            self.full[i as usize].reuse(present());
            self.set(line, i | FULL);
            return &mut self.full[i as usize];
        }
        self.full(line, || Some(present())).expect("tracked")
    }

    /// Stops tracking `line` (it became durable, or its file shrank).
    pub fn remove(&mut self, line: u64) {
        match self.unindex(line) {
            Some(h) if h & FULL != 0 => self.full_free.push(h & !FULL),
            Some(h) => {
                self.compact_free.push(h);
                self.bases.remove(&line);
            }
            None => {}
        }
    }

    /// After an event changed the full line `line`: forgets it if idle, stores it compactly if
    /// it fell back to one small version (keeping its base aside unless `readable`: the device
    /// can read the line from its file).
    pub fn settle(&mut self, line: u64, readable: bool) {
        let Some(h) = self.find(line) else { return };
        if h & FULL == 0 {
            return;
        }
        let l = &self.full[(h & !FULL) as usize];
        if l.is_idle() {
            self.remove(line);
        } else if let Some(c) = Compact::of(l) {
            let base = (!readable).then_some(l.base);
            self.remove(line);
            self.insert_compact(line, c, base);
        }
    }
}
