//! The device's table of tracked lines: a compact record for the common undurable line, a full
//! [`Line`] for the rest, and host memory that grows with the lines tracked, never with the
//! size of the PM files.
//!
//! Most undurable lines hold exactly one small cached store above their floor (a store the
//! program has not flushed and fenced yet). Such a line is a [`Compact`]: its durable base, the
//! store's bytes, id and writer, and the floor — 96 bytes, no heap vectors. Anything else (a
//! second version, NT chunks, rep-string stores, a store durable by one rule only, kernel writes
//! wider than a word) needs the version history of a [`Line`], which the device gets with
//! [`LineTable::full`]: it converts a compact record losslessly. A full line that falls back to
//! one small version is converted back by [`LineTable::settle`], so a line that is persisted
//! regularly never keeps its history.
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
/// thread, durable by neither rule, with no pending NT chunk. Equivalent to the [`Line`] that
/// [`Compact::expand`] builds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Compact {
    pub base: [u8; LINE],
    /// The line's floor (0 until something on it was persisted while tracked).
    pub floor: u64,
    /// The store's id: the line's only version above the floor.
    pub id: u64,
    /// The store's bytes (`len` of them, at byte `lo` of the line).
    pub new: [u8; COMPACT_BYTES],
    pub tid: Tid,
    pub lo: u8,
    pub len: u8,
}

impl Compact {
    #[inline]
    pub fn mask(&self) -> u64 {
        range_mask(usize::from(self.lo), usize::from(self.len))
    }

    /// The line as the program sees it now.
    pub fn current(&self) -> [u8; LINE] {
        let mut c = self.base;
        let (lo, n) = (usize::from(self.lo), usize::from(self.len));
        c[lo..lo + n].copy_from_slice(&self.new[..n]);
        c
    }

    /// The latest-store record of the store.
    pub fn live(&self) -> Live {
        Live { id: self.id, tid: self.tid, nt: false, mask: self.mask(), hw: None, own: None }
    }

    /// Writes the equivalent full line into `l` (reusing its vectors).
    pub fn expand_into(&self, l: &mut Line) {
        l.reuse(self.base);
        l.floor = self.floor;
        l.current = self.id;
        let mask = self.mask();
        // Room for the second version that usually follows.
        let e = Entry { id: self.id, last: self.id, kind: EntryKind::Cached, mask, data: self.current() };
        push_small(&mut l.log, e, 2);
        push_small(&mut l.lives, self.live(), 1);
        l.hw_open = mask;
        l.own_open = mask;
    }

    /// The equivalent full line.
    pub fn expand(&self) -> Line {
        let mut l = Line::new(self.base);
        self.expand_into(&mut l);
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
        let mut new = [0u8; COMPACT_BYTES];
        new[..len].copy_from_slice(&e.data[lo..lo + len]);
        Some(Compact { base: l.base, floor: l.floor, id: e.id, new, tid: live.tid, lo: lo as u8, len: len as u8 })
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
/// Compact records per chunk (96 bytes each: 384 KiB).
const CHUNK: usize = 4096;

#[derive(Clone, Debug, Default)]
pub(crate) struct LineTable {
    index: FxHashMap<u64, u32>,
    compact: Vec<Vec<Compact>>,
    compact_free: Vec<u32>,
    // Boxed: a full line is large and the vector grows by copying its elements; a box moves
    // as one pointer, and a freed one is kept with its own vectors for the next full line.
    #[allow(clippy::vec_box)]
    full: Vec<Box<Line>>,
    full_free: Vec<u32>,
}

impl LineTable {
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn contains(&self, line: u64) -> bool {
        self.index.contains_key(&line)
    }

    /// Tracked lines, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.index.keys().copied()
    }

    #[inline]
    fn compact_at(&self, h: u32) -> &Compact {
        &self.compact[h as usize / CHUNK][h as usize % CHUNK]
    }

    #[inline]
    fn compact_at_mut(&mut self, h: u32) -> &mut Compact {
        &mut self.compact[h as usize / CHUNK][h as usize % CHUNK]
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
        self.index.get(&line).map(|&h| self.slot(h))
    }

    /// The compact record of `line`, if it is tracked as one.
    #[inline]
    pub fn compact(&self, line: u64) -> Option<&Compact> {
        match self.index.get(&line) {
            Some(&h) if h & FULL == 0 => Some(self.compact_at(h)),
            _ => None,
        }
    }

    /// Tracks the untracked `line` as `c`.
    pub fn insert_compact(&mut self, line: u64, c: Compact) {
        debug_assert!(!self.index.contains_key(&line));
        let h = match self.compact_free.pop() {
            Some(h) => {
                *self.compact_at_mut(h) = c;
                h
            }
            None => {
                if self.compact.last().is_none_or(|v| v.len() == CHUNK) {
                    self.compact.push(Vec::with_capacity(CHUNK));
                }
                let n = self.compact.len() - 1;
                self.compact[n].push(c);
                let h = (n * CHUNK + self.compact[n].len() - 1) as u32;
                assert!(h & FULL == 0, "PM device: too many tracked lines");
                h
            }
        };
        self.index.insert(line, h);
    }

    /// A free full line (its vectors kept from an earlier one), not yet in the index.
    fn new_full(&mut self) -> u32 {
        match self.full_free.pop() {
            Some(i) => i,
            None => {
                self.full.push(Box::new(Line::new([0; LINE])));
                let i = (self.full.len() - 1) as u32;
                assert!(i & FULL == 0, "PM device: too many tracked lines");
                i
            }
        }
    }

    /// The full line of a tracked `line`, converting a compact record.
    pub fn full(&mut self, line: u64) -> Option<&mut Line> {
        let h = *self.index.get(&line)?;
        let i = if h & FULL != 0 {
            h & !FULL
        } else {
            let c = *self.compact_at(h);
            self.compact_free.push(h);
            let i = self.new_full();
            c.expand_into(&mut self.full[i as usize]);
            self.index.insert(line, i | FULL);
            i
        };
        Some(&mut self.full[i as usize])
    }

    /// The full line of `line`, tracking it with durable content `base()` if it is not tracked.
    pub fn full_or_insert(&mut self, line: u64, base: impl FnOnce() -> [u8; LINE]) -> &mut Line {
        if !self.index.contains_key(&line) {
            let i = self.new_full();
            self.full[i as usize].reuse(base());
            self.index.insert(line, i | FULL);
        }
        self.full(line).expect("tracked")
    }

    /// Stops tracking `line` (it became durable, or its file shrank).
    pub fn remove(&mut self, line: u64) {
        match self.index.remove(&line) {
            Some(h) if h & FULL != 0 => self.full_free.push(h & !FULL),
            Some(h) => self.compact_free.push(h),
            None => {}
        }
    }

    /// After an event changed the full line `line`: forgets it if idle, stores it compactly if
    /// it fell back to one small version.
    pub fn settle(&mut self, line: u64) {
        let Some(&h) = self.index.get(&line) else { return };
        if h & FULL == 0 {
            return;
        }
        let l = &self.full[(h & !FULL) as usize];
        if l.is_idle() {
            self.remove(line);
        } else if let Some(c) = Compact::of(l) {
            self.remove(line);
            self.insert_compact(line, c);
        }
    }
}
