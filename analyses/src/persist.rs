//! Persistence helpers shared by the passes that follow store windows (`hawkset`, `vardalith`):
//! the line pieces of an access, which of a writer's bytes are durable now, which calls release
//! a lock, and the interner their records use for locksets and clocks.
//!
//! They ask the device ([`PmDevice`]) rather than re-simulate the cache: both passes see the
//! same durability as crash testing and `unpersisted`, under every `--flush-model` and
//! `--persistency`.

use emu::callstack::StackId;
use emu::pm::{DurabilityRule, PmDevice, LINE_SIZE};
use emu::sync::{CustomOp, SyncKind};
use rustc_hash::FxHashMap;

/// A program point: PC and interned call stack.
pub(crate) type Site = (u64, StackId);

/// The PCs of locked read-modify-writes that stored to PM: their loads are the read halves,
/// which `rmw_loads=off` does not count as racing loads. The last one added is remembered, so
/// a hot loop's atomic costs a compare.
#[derive(Clone, Debug)]
pub(crate) struct RmwSites {
    pcs: rustc_hash::FxHashSet<u64>,
    last: u64,
}

impl Default for RmwSites {
    fn default() -> Self {
        RmwSites { pcs: rustc_hash::FxHashSet::default(), last: u64::MAX }
    }
}

impl RmwSites {
    /// A PM store at `pc`, of a locked read-modify-write if `rmw`.
    #[inline]
    pub(crate) fn store(&mut self, pc: u64, rmw: bool) {
        if rmw && pc != self.last {
            self.last = pc;
            self.pcs.insert(pc);
        }
    }

    /// Whether a load at `pc` is the read half of a locked read-modify-write.
    pub(crate) fn contains(&self, pc: u64) -> bool {
        self.pcs.contains(&pc)
    }
}

/// Interns values as dense ids.
#[derive(Clone, Debug)]
pub(crate) struct Interner<T: std::hash::Hash + Eq + Clone> {
    ids: FxHashMap<T, u32>,
    pub(crate) values: Vec<T>,
}

impl<T: std::hash::Hash + Eq + Clone> Default for Interner<T> {
    fn default() -> Self {
        Interner { ids: FxHashMap::default(), values: Vec::new() }
    }
}

impl<T: std::hash::Hash + Eq + Clone> Interner<T> {
    /// The id of `v`, a new one the first time.
    pub(crate) fn id(&mut self, v: T) -> u32 {
        if let Some(&id) = self.ids.get(&v) {
            return id;
        }
        let id = self.values.len() as u32;
        self.values.push(v.clone());
        self.ids.insert(v, id);
        id
    }

    /// The value of an id.
    pub(crate) fn get(&self, id: u32) -> &T {
        &self.values[id as usize]
    }
}

/// Program points interned as 4-byte ids, for the per-line records of the passes that keep one
/// per pending store or window; consecutive accesses mostly share a site, so the last one is
/// remembered and most look-ups hash nothing.
#[derive(Clone, Debug)]
pub(crate) struct SiteIds {
    sites: Interner<Site>,
    last: (Site, u32),
}

impl Default for SiteIds {
    fn default() -> Self {
        SiteIds { sites: Interner::default(), last: ((u64::MAX, StackId(u32::MAX)), 0) }
    }
}

impl SiteIds {
    /// The id of `site`, a new one the first time.
    #[inline]
    pub(crate) fn id(&mut self, site: Site) -> u32 {
        if self.last.0 == site {
            return self.last.1;
        }
        let id = self.sites.id(site);
        self.last = (site, id);
        id
    }

    /// The site of an id.
    pub(crate) fn get(&self, id: u32) -> Site {
        *self.sites.get(id)
    }
}

/// The line pieces of an access: `(line, byte mask within the line)`.
pub(crate) fn pieces(dev: u64, size: u32) -> impl Iterator<Item = (u64, u64)> {
    range_pieces(dev, dev + u64::from(size.max(1)))
}

/// The line pieces of the bytes `dev..end`: `(line, byte mask within the line)`.
pub(crate) fn range_pieces(dev: u64, end: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut a = dev;
    std::iter::from_fn(move || {
        if a >= end {
            return None;
        }
        let line = a / LINE_SIZE;
        let lo = a % LINE_SIZE;
        let n = (LINE_SIZE - lo).min(end - a);
        a += n;
        let mask = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << lo };
        Some((line, mask))
    })
}

/// Of the bytes `mask` of `line` that thread `writer` stored, those that are durable now: durable
/// by `rule` on the device, or (when the writer has flushed them and is fencing now,
/// `owner_fenced`) bytes whose latest store is another thread's, which the writer's flush and
/// fence covered.
pub(crate) fn durable_bytes(
    device: &PmDevice,
    rule: DurabilityRule,
    line: u64,
    mask: u64,
    writer: u32,
    owner_fenced: bool,
) -> u64 {
    if mask == 0 {
        // No bytes (a window whose bytes were all freed): nothing to be durable.
        return 0;
    }
    let base = line * LINE_SIZE;
    // Fast path: one contiguous run, all durable.
    let lo = mask.trailing_zeros() as u64;
    let hi = 64 - mask.leading_zeros() as u64;
    if device.durable(rule, base + lo, hi - lo) {
        return mask;
    }
    let mut out = 0;
    let mut m = mask;
    while m != 0 {
        let b = m.trailing_zeros() as u64;
        m &= m - 1;
        let a = base + b;
        let ok =
            device.durable(rule, a, 1) || (owner_fenced && device.persist_info(a).is_some_and(|i| i.writer != writer));
        if ok {
            out |= 1 << b;
        }
    }
    out
}

/// Which operations are releases for a pass's `unlock_fence` option: the unlock-like calls, and
/// the calls that release by a locked read-modify-write, which is also a fence: a barrier's
/// arrival (glibc's `pthread_barrier_wait`, libgomp's barriers: an atomic add to the count of
/// arrivals) and `sem_post` (an atomic add to the value). A `clwb` just before
/// `#pragma omp for`'s implicit barrier is persisted by the arrival itself, before any thread
/// can leave the barrier.
pub(crate) fn is_release_call(kind: SyncKind) -> bool {
    matches!(
        kind,
        SyncKind::MutexUnlock
            | SyncKind::RwUnlock
            | SyncKind::SpinUnlock
            | SyncKind::BarrierWait
            | SyncKind::OmpBarrier
            | SyncKind::SemPost
    ) || matches!(kind, SyncKind::Custom(c) if c.op == CustomOp::Release)
        || kind.is_cond_wait()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_split_at_lines() {
        let v: Vec<(u64, u64)> = pieces(60, 8).collect();
        assert_eq!(v, vec![(0, 0xf << 60), (1, 0xf)]);
        let v: Vec<(u64, u64)> = pieces(64 + 4, 4).collect();
        assert_eq!(v, vec![(1, 0xf0)]);
    }
}

/// A record a pass keeps per PM line and bytes until the end of the run (hawkset's store windows
/// and loads), split into its line and bytes and the rest (thread, site, lockset, clocks).
pub(crate) trait LineKeyed: Clone + Eq + std::hash::Hash {
    /// The record's line and byte mask.
    fn line_mask(&self) -> (u64, u64);
    /// The record with another line and byte mask.
    fn at(&self, line: u64, mask: u64) -> Self;
}

/// A deduplicated set of [`LineKeyed`] records. What a record holds besides its line repeats
/// from line to line (one site and thread touch many lines under the same lockset and clock), so
/// it is interned, and a record costs a `(mask, context)` entry in its line's list of a
/// [`ShadowLines`] table (one inline), not the whole record (an 80-byte store record with its
/// count was the pass's largest cost per touched line). A hash set of `(line, mask, context)`
/// cost as much memory, and every access probed a table larger than the caches.
#[derive(Clone)]
pub(crate) struct LineRecords<R: LineKeyed> {
    contexts: Interner<R>,
    lines: ShadowLines<RecordList>,
    /// The records of lines that have more than one, after the first.
    more: Vec<Vec<(u64, u32)>>,
    /// Records kept (for `--host-stats`-like counters in the report's `stats`).
    len: u64,
}

/// A line's `(mask, context)` records in 16 bytes: the first inline, the rest in
/// [`LineRecords::more`] (most lines hold one record; an inline list of one cost 24).
#[derive(Clone, Copy, Debug)]
struct RecordList {
    mask: u64,
    /// The first record's context, or [`NO_RECORD`].
    ctx: u32,
    /// Index + 1 of the line's further records in [`LineRecords::more`] (0: none).
    more: u32,
}

const NO_RECORD: u32 = u32::MAX;

impl Default for RecordList {
    fn default() -> Self {
        RecordList { mask: 0, ctx: NO_RECORD, more: 0 }
    }
}

impl<R: LineKeyed> Default for LineRecords<R> {
    fn default() -> Self {
        LineRecords { contexts: Interner::default(), lines: ShadowLines::default(), more: Vec::new(), len: 0 }
    }
}

impl<R: LineKeyed> LineRecords<R> {
    /// Adds `r` (once).
    pub(crate) fn insert(&mut self, r: R) {
        let (line, mask) = r.line_mask();
        let ctx = self.contexts.id(r.at(0, 0));
        let list = self.lines.get_mut(line);
        if list.ctx == NO_RECORD {
            *list = RecordList { mask, ctx, more: 0 };
            self.len += 1;
        } else if (list.mask, list.ctx) != (mask, ctx) {
            if list.more == 0 {
                self.more.push(Vec::new());
                list.more = self.more.len() as u32;
            }
            let more = &mut self.more[list.more as usize - 1];
            if !more.contains(&(mask, ctx)) {
                more.push((mask, ctx));
                self.len += 1;
            }
        }
    }

    /// How many records are kept, and how many distinct contexts they (and the contexts kept
    /// elsewhere through [`LineRecords::context_of`]) have.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.len, self.contexts.values.len() as u64)
    }

    /// Takes the bytes `mask` of `line` out of its records: each record on some of them is
    /// appended to `out` as `(its bytes among them, context)` and keeps only its other bytes
    /// (memory freed: its records belong to the object's ended life, see hawkset's `free`).
    pub(crate) fn take_bytes(&mut self, line: u64, mask: u64, out: &mut Vec<(u64, u32)>) {
        let Some(list) = self.lines.get_mut_if(line) else { return };
        if list.ctx == NO_RECORD || mask == 0 {
            return;
        }
        if list.more == 0 {
            // One record, inline.
            if list.mask & mask != 0 {
                out.push((list.mask & mask, list.ctx));
                list.mask &= !mask;
                if list.mask == 0 {
                    list.ctx = NO_RECORD;
                    self.len -= 1;
                }
            }
            return;
        }
        let more = &mut self.more[list.more as usize - 1];
        // The line's records in one list, split, and the first one put back inline.
        more.insert(0, (list.mask, list.ctx));
        let mut keep = 0;
        for i in 0..more.len() {
            let (m, c) = more[i];
            if m & mask != 0 {
                out.push((m & mask, c));
            }
            if m & !mask != 0 && !more[..keep].contains(&(m & !mask, c)) {
                more[keep] = (m & !mask, c);
                keep += 1;
            }
        }
        self.len -= (more.len() - keep) as u64;
        more.truncate(keep);
        if more.is_empty() {
            (list.mask, list.ctx) = (0, NO_RECORD);
        } else {
            (list.mask, list.ctx) = more.remove(0);
        }
    }

    /// The id of `r`'s context (all but its line and bytes), for keeping it elsewhere.
    pub(crate) fn context_of(&mut self, r: &R) -> u32 {
        self.contexts.id(r.at(0, 0))
    }

    /// The record with context `ctx` at bytes `mask` of `line`.
    pub(crate) fn record(&self, ctx: u32, line: u64, mask: u64) -> R {
        self.contexts.get(ctx).at(line, mask)
    }

    /// The lines holding records, in order.
    pub(crate) fn lines(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.lines.iter().filter(|(_, l)| l.ctx != NO_RECORD).map(|(line, _)| line).collect();
        v.sort_unstable();
        v
    }

    /// The records of `line`.
    pub(crate) fn at_line(&self, line: u64) -> impl Iterator<Item = R> + '_ {
        let list = self.lines.get(line).copied().unwrap_or_default();
        let first = (list.ctx != NO_RECORD).then_some((list.mask, list.ctx));
        let more: &[(u64, u32)] = if list.more == 0 { &[] } else { &self.more[list.more as usize - 1] };
        first.into_iter().chain(more.iter().copied()).map(move |(mask, ctx)| self.contexts.get(ctx).at(line, mask))
    }
}

/// Lines per shadow block: one 4 KiB page of 64-byte lines.
const SHADOW_LINES: u64 = 64;

/// Per-line state of PM in a two-level table (TSan and Valgrind style): a block of
/// [`SHADOW_LINES`] entries for each page touched, found through a map of pages with a one-entry
/// cache of the last page used. Accesses are local, so most lookups hash nothing; a page's block
/// is allocated when it is first touched and never per access.
#[derive(Clone, Debug)]
pub(crate) struct ShadowLines<T> {
    pages: FxHashMap<u64, u32>,
    blocks: Vec<Box<[T]>>,
    /// The last page looked up and its block.
    last: (u64, u32),
}

impl<T: Default> Default for ShadowLines<T> {
    fn default() -> Self {
        ShadowLines { pages: FxHashMap::default(), blocks: Vec::new(), last: (u64::MAX, 0) }
    }
}

impl<T: Default> ShadowLines<T> {
    /// The state of `line` (a device line number), created at its default.
    pub(crate) fn get_mut(&mut self, line: u64) -> &mut T {
        let page = line / SHADOW_LINES;
        let i = if self.last.0 == page {
            self.last.1
        } else {
            let ShadowLines { pages, blocks, .. } = self;
            let i = *pages.entry(page).or_insert_with(|| {
                blocks.push((0..SHADOW_LINES).map(|_| T::default()).collect());
                (blocks.len() - 1) as u32
            });
            self.last = (page, i);
            i
        };
        &mut self.blocks[i as usize][(line % SHADOW_LINES) as usize]
    }

    /// Calls `f` with every line's state (of the pages ever touched), in no particular order.
    pub(crate) fn each_mut(&mut self, mut f: impl FnMut(&mut T)) {
        for block in &mut self.blocks {
            block.iter_mut().for_each(&mut f);
        }
    }

    /// The state of `line` if its page was ever touched, for changing it (no page is allocated).
    pub(crate) fn get_mut_if(&mut self, line: u64) -> Option<&mut T> {
        let page = line / SHADOW_LINES;
        let i = if self.last.0 == page { self.last.1 } else { *self.pages.get(&page)? };
        Some(&mut self.blocks[i as usize][(line % SHADOW_LINES) as usize])
    }

    /// Every line of the pages ever touched with its state, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        self.pages.iter().flat_map(move |(&page, &i)| {
            self.blocks[i as usize].iter().enumerate().map(move |(k, t)| (page * SHADOW_LINES + k as u64, t))
        })
    }

    /// The state of `line`, if its page was ever touched.
    pub(crate) fn get(&self, line: u64) -> Option<&T> {
        let page = line / SHADOW_LINES;
        let i = if self.last.0 == page { self.last.1 } else { *self.pages.get(&page)? };
        Some(&self.blocks[i as usize][(line % SHADOW_LINES) as usize])
    }
}

/// A vector that grows by fixed chunks of `N` elements: it is never moved or doubled, so it
/// costs its elements and at most one partly used chunk (a doubling `Vec` of a million windows
/// briefly held a million and a half more while it grew, and up to as many unused).
#[derive(Clone, Debug)]
pub(crate) struct ChunkVec<T, const N: usize> {
    chunks: Vec<Box<[T]>>,
    len: usize,
}

impl<T, const N: usize> Default for ChunkVec<T, N> {
    fn default() -> Self {
        ChunkVec { chunks: Vec::new(), len: 0 }
    }
}

impl<T: Default, const N: usize> ChunkVec<T, N> {
    /// Appends `x`; returns its index.
    pub(crate) fn push(&mut self, x: T) -> usize {
        let i = self.len;
        if i / N == self.chunks.len() {
            self.chunks.push((0..N).map(|_| T::default()).collect());
        }
        self.chunks[i / N][i % N] = x;
        self.len += 1;
        i
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The elements, in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.chunks.iter().flat_map(|c| c.iter()).take(self.len)
    }
}

impl<T, const N: usize> std::ops::Index<usize> for ChunkVec<T, N> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        debug_assert!(i < self.len);
        &self.chunks[i / N][i % N]
    }
}

impl<T, const N: usize> std::ops::IndexMut<usize> for ChunkVec<T, N> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        debug_assert!(i < self.len);
        &mut self.chunks[i / N][i % N]
    }
}

/// Entries of a [`ShadowSlab`]'s slab per chunk.
const SLAB_CHUNK: usize = 256;

/// Per-line (or per-granule) state that most touched entries do not hold at a given time — a
/// line's pending stores, which a persist empties; a granule's windows — in a [`ShadowLines`]
/// table of 4-byte indices into a slab (0: none). A touched page costs 256 bytes of indices,
/// and a state its slab entry only while it is held; [`ShadowSlab::release`] gives an emptied
/// entry back.
#[derive(Clone)]
pub(crate) struct ShadowSlab<L> {
    slots: ShadowLines<u32>,
    /// Index 0 is never used.
    slab: ChunkVec<L, SLAB_CHUNK>,
    free: Vec<u32>,
}

impl<L: Default> Default for ShadowSlab<L> {
    fn default() -> Self {
        let mut slab = ChunkVec::default();
        slab.push(L::default());
        ShadowSlab { slots: ShadowLines::default(), slab, free: Vec::new() }
    }
}

impl<L: Default> ShadowSlab<L> {
    /// The state of `key`, made (at its default) the first time.
    pub(crate) fn get_mut(&mut self, key: u64) -> &mut L {
        let ShadowSlab { slots, slab, free } = self;
        let slot = slots.get_mut(key);
        if *slot == 0 {
            *slot = free.pop().unwrap_or_else(|| slab.push(L::default()) as u32);
            debug_assert!(*slot & INLINE == 0, "a slab of 2^31 lists");
        }
        &mut slab[*slot as usize]
    }

    /// The state of `key`, if it has one, for changing it.
    pub(crate) fn get_mut_if(&mut self, key: u64) -> Option<&mut L> {
        match self.slots.get(key) {
            Some(&slot) if slot != 0 => Some(&mut self.slab[slot as usize]),
            _ => None,
        }
    }

    /// Gives the state of `key` back to the slab (reset to its default).
    pub(crate) fn release(&mut self, key: u64) {
        if let Some(slot) = self.slots.get_mut_if(key) {
            if *slot != 0 {
                self.slab[*slot as usize] = L::default();
                self.free.push(*slot);
                *slot = 0;
            }
        }
    }
}

/// A list of entries per entry of a [`ShadowLines`] table (vardalith's windows per line: a window
/// id with the line's 8-byte granules it covers, see `vardalith::by_line`), for tables whose
/// entries are mostly empty or hold one entry. A list of one small entry (an id below 2²³ and
/// granule bits below 2⁸, [`ShadowLists::inline`]) lives in the 4-byte slot itself; longer lists
/// take a slab entry ([`ShadowSlab`], up to two entries without an allocation of their own).
/// Emptied lists give their slab entries back.
#[derive(Clone, Default)]
pub(crate) struct ShadowLists {
    slab: ShadowSlab<List>,
}

/// A list of [`ShadowLists`] in the slab.
pub(crate) type List = smallvec::SmallVec<[u64; 2]>;

/// A [`ShadowLists`] slot holding its one entry: the flag, the entry's high bits from bit 23, its
/// id below.
const INLINE: u32 = 1 << 31;
const INLINE_ID_BITS: u32 = 23;

impl ShadowLists {
    /// `entry` packed into a slot, if it fits.
    fn inline(entry: u64) -> Option<u32> {
        let (id, high) = (entry as u32, entry >> 32);
        (id < 1 << INLINE_ID_BITS && high < 1 << (31 - INLINE_ID_BITS))
            .then_some(INLINE | (high as u32) << INLINE_ID_BITS | id)
    }

    /// The entry packed in an inline slot.
    fn unpack(slot: u32) -> u64 {
        let slot = slot & !INLINE;
        u64::from(slot & ((1 << INLINE_ID_BITS) - 1)) | u64::from(slot >> INLINE_ID_BITS) << 32
    }

    /// Appends `entry` to the list of `key`.
    pub(crate) fn push(&mut self, key: u64, entry: u64) {
        let slot = *self.slab.slots.get_mut(key);
        if slot == 0 {
            if let Some(s) = Self::inline(entry) {
                *self.slab.slots.get_mut(key) = s;
                return;
            }
        }
        if slot & INLINE != 0 {
            *self.slab.slots.get_mut(key) = 0;
            let list = self.slab.get_mut(key);
            list.push(Self::unpack(slot));
            list.push(entry);
            return;
        }
        self.slab.get_mut(key).push(entry);
    }

    /// Takes the list of `key` (empty if it has none), to be put back with [`ShadowLists::put`].
    pub(crate) fn take(&mut self, key: u64) -> List {
        match self.slab.slots.get_mut_if(key) {
            Some(slot) if *slot & INLINE != 0 => {
                let e = Self::unpack(*slot);
                *slot = 0;
                smallvec::smallvec![e]
            }
            _ => self.slab.get_mut_if(key).map(std::mem::take).unwrap_or_default(),
        }
    }

    /// Puts back a list taken from `key` (changed or not).
    pub(crate) fn put(&mut self, key: u64, ids: List) {
        let one = match ids.as_slice() {
            [] => {
                self.slab.release(key);
                return;
            }
            [e] => Self::inline(*e),
            _ => None,
        };
        match one {
            Some(s) => {
                self.slab.release(key);
                *self.slab.slots.get_mut(key) = s;
            }
            None => *self.slab.get_mut(key) = ids,
        }
    }

    /// Replaces the entry of `key` for which `is` holds by `by`.
    pub(crate) fn replace(&mut self, key: u64, is: impl Fn(u64) -> bool, by: u64) {
        let mut ids = self.take(key);
        if let Some(e) = ids.iter_mut().find(|e| is(**e)) {
            *e = by;
        }
        self.put(key, ids);
    }

    /// Keeps the entries for which `keep` holds, in every list.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(u64) -> bool) {
        let ShadowSlab { slots, slab, free } = &mut self.slab;
        slots.each_mut(|slot| {
            if *slot == 0 {
                return;
            }
            if *slot & INLINE != 0 {
                if !keep(Self::unpack(*slot)) {
                    *slot = 0;
                }
                return;
            }
            let l = &mut slab[*slot as usize];
            l.retain(|id| keep(*id));
            let one = match l.as_slice() {
                [] => Some(0),
                [e] => Self::inline(*e),
                _ => None,
            };
            if let Some(s) = one {
                *l = List::new();
                free.push(*slot);
                *slot = s;
            }
        });
    }
}

#[cfg(test)]
mod shadow_tests {
    use super::{ShadowLines, ShadowLists};

    #[test]
    fn lists_of_one_small_entry_live_in_their_slot() {
        let mut l = ShadowLists::default();
        let big = 1 << 30 | 3 << 32;
        l.push(7, 5 | 0xff << 32);
        assert_eq!(l.slab.slab.len(), 1, "inline: no slab entry");
        l.push(7, big);
        l.push(9, big);
        assert_eq!(l.take(7).as_slice(), &[5 | 0xff << 32, big]);
        l.put(7, smallvec::smallvec![big]);
        assert_eq!(l.take(9).as_slice(), &[big]);
        l.put(9, smallvec::smallvec![big]);
        l.replace(9, |e| e == big, 4);
        assert_eq!(l.take(9).as_slice(), &[4]);
        l.put(9, smallvec::smallvec![4, 6]);
        l.retain(|e| e != 4 && e != big);
        assert_eq!((l.take(7).as_slice(), l.take(9).as_slice()), (&[][..], &[6][..]));
        assert_eq!(l.slab.free.len(), 2, "emptied and inlined lists gave their entries back");
    }

    #[test]
    fn lines_keep_their_state_across_pages() {
        let mut s: ShadowLines<u64> = ShadowLines::default();
        assert_eq!(s.get(5), None);
        *s.get_mut(5) = 7;
        *s.get_mut(64 * 9 + 1) = 8;
        *s.get_mut(6) += 1;
        assert_eq!((s.get(5), s.get(6), s.get(64 * 9 + 1), s.get(64 * 9)), (Some(&7), Some(&1), Some(&8), Some(&0)));
        assert_eq!(s.get(64 * 3), None);
    }
}
