//! The persistence state of one 64-byte PM line: its durable base, the versions above the floor,
//! the pending non-temporal chunks, and who wrote each byte last.
//!
//! A line exists in the device only while something about it is not durable by every rule (a
//! version above the floor, a pending NT chunk, or a latest store its writer has not persisted
//! itself). Everything here is private to `pm`; `mod.rs` states the model and the public API.
//!
//! Representation (all invariants are checked by the property test against the reference model):
//! - `base` is what PM holds for sure: every cached store up to the floor and every completed NT
//!   chunk that is older than every entry of `log`, applied in program order.
//! - `log` holds, in program order (ascending ids), the cached versions above the floor and the
//!   completed NT chunks that sit between them. After `fold`, a non-empty log starts with a cached
//!   entry. Entries keep only the bytes their store wrote (`mask`; 8 inline, a whole line only
//!   for wider entries), so a version is `base` plus a prefix of the log: no per-version
//!   snapshots, and a line stored many times before a persist costs 48 bytes a store.
//! - `pending` holds NT chunks whose issuer has not fenced yet, in program order. They are not in
//!   `log` because a crash may or may not contain them, independently of the version chosen.
//! - `lives` records, for every byte, the latest store to it (masks are disjoint) until that store
//!   is durable by both rules; `durable_own`, `persist_info` and `unpersisted` read it.
//!
//! Limits of the representation: a merged entry (version limit) is one version, so the states
//! between its stores are gone and a capture that falls inside it persists all of it; a store that
//! no longer owns any byte is forgotten, so an overwritten store is never reported as unpersisted.

use super::{FenceOutcome, Persisted, Persister, StoreId, Tid};

/// Bytes in a line.
pub(crate) const LINE: usize = 64;
/// Bytes in a power-fail-atomic word (`--atomicity word8`) and in an NT chunk.
pub(crate) const WORD: usize = 8;

/// Mask of `len` bytes starting at byte `off` of a line (`off + len <= 64`).
#[inline]
pub(crate) fn range_mask(off: usize, len: usize) -> u64 {
    debug_assert!(off + len <= LINE);
    if len == 0 {
        0
    } else if len == LINE {
        u64::MAX
    } else {
        ((1u64 << len) - 1) << off
    }
}

/// Copies the bytes selected by `mask` from `src` into `dst`.
#[inline]
pub(crate) fn apply(dst: &mut [u8; LINE], mut mask: u64, src: &[u8; LINE]) {
    if mask == u64::MAX {
        *dst = *src;
        return;
    }
    while mask != 0 {
        let i = mask.trailing_zeros() as usize;
        dst[i] = src[i];
        mask &= mask - 1;
    }
}

/// Pushes `x`, giving a vector without memory room for exactly `first` elements (a `Vec`'s
/// first push reserves four, and most lines never hold more than one or two versions and one
/// latest store: a full line's memory is dominated by these first allocations).
#[inline]
pub(crate) fn push_small<T>(v: &mut Vec<T>, x: T, first: usize) {
    if v.capacity() == 0 {
        v.reserve_exact(first);
    }
    v.push(x);
}

/// The mask of the 8 bytes of word `w`.
#[inline]
pub(crate) fn word_mask(w: usize) -> u64 {
    0xffu64 << (w * WORD)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EntryKind {
    /// One cached store (or several merged by the version limit): one version of the line.
    Cached,
    /// The part of one `rep movs`/`rep stos` instruction that fell in this line: its 8-byte words
    /// may persist in any subset before the whole instruction does.
    Rep,
    /// A completed NT chunk: durable, applied in program order between the versions around it.
    Nt,
}

/// One write in the log above the floor.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    /// Store id (for a merged entry, the first merged store's id): the version's name for
    /// captures and floors.
    pub id: u64,
    /// The last store id merged into this entry (= `id` unless the version limit merged entries).
    pub last: u64,
    pub kind: EntryKind,
    /// Bytes written.
    pub mask: u64,
    /// New values of the bytes in `mask`.
    bytes: Bytes,
}

/// The values an [`Entry`] wrote. A hooked store writes at most 8 contiguous bytes, so most
/// entries keep 8 bytes inline (an entry is 48 bytes, where a whole line of values made it 96,
/// and a line that is stored many times before a persist holds one entry per store); rep-string
/// entries, merged versions and NT chunks that widen past 8 bytes keep the whole line.
#[derive(Clone, Debug)]
enum Bytes {
    /// Bytes `lo..lo + 8` of the line; the entry's mask lies within them.
    Near { lo: u8, data: [u8; WORD] },
    /// Bytes of the whole line (those outside the mask are meaningless).
    Wide(Box<[u8; LINE]>),
}

impl Entry {
    /// An entry writing the bytes `mask` of `src` (`mask` not empty).
    pub fn new(id: u64, kind: EntryKind, mask: u64, src: &[u8; LINE]) -> Entry {
        let lo = (mask.trailing_zeros() as usize).min(LINE - WORD);
        let bytes = if mask >> lo >> WORD == 0 {
            let mut data = [0u8; WORD];
            data.copy_from_slice(&src[lo..lo + WORD]);
            Bytes::Near { lo: lo as u8, data }
        } else {
            Bytes::Wide(Box::new(*src))
        };
        Entry { id, last: id, kind, mask, bytes }
    }

    /// The value this entry wrote at byte `i` (one of its mask's).
    #[inline]
    fn byte(&self, i: usize) -> u8 {
        match &self.bytes {
            Bytes::Near { lo, data } => data[i - usize::from(*lo)],
            Bytes::Wide(d) => d[i],
        }
    }

    /// Writes this entry's values of the bytes in `mask` (and in its own mask) into `dst`.
    #[inline]
    pub fn apply_to(&self, dst: &mut [u8; LINE], mask: u64) {
        let mut m = mask & self.mask;
        if let (Bytes::Wide(d), u64::MAX) = (&self.bytes, m) {
            *dst = **d;
            return;
        }
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            dst[i] = self.byte(i);
            m &= m - 1;
        }
    }

    /// Adds the bytes `mask` of `src` to what this entry wrote (a later store of the same
    /// version: the next element of a rep instruction, or a merged version).
    pub fn write(&mut self, mask: u64, src: &[u8; LINE]) {
        let all = self.mask | mask;
        if let Bytes::Near { lo, data } = &self.bytes {
            if all >> lo >> WORD != 0 || all & ((1u64 << lo) - 1) != 0 {
                let mut wide = Box::new([0u8; LINE]);
                let lo = usize::from(*lo);
                wide[lo..lo + WORD].copy_from_slice(data);
                self.bytes = Bytes::Wide(wide);
            }
        }
        match &mut self.bytes {
            Bytes::Near { lo, data } => {
                let lo = usize::from(*lo);
                let mut m = mask;
                while m != 0 {
                    let i = m.trailing_zeros() as usize;
                    data[i - lo] = src[i];
                    m &= m - 1;
                }
            }
            Bytes::Wide(d) => apply(d, mask, src),
        }
        self.mask = all;
    }
}

/// A pending NT chunk: the part of one NT store that falls in one aligned 8-byte word.
#[derive(Clone, Debug)]
pub(crate) struct Chunk {
    pub id: u64,
    pub tid: Tid,
    /// Word index in the line (0..8).
    pub word: u8,
    /// Bytes of the word written.
    pub mask: u8,
    /// New values (indexed by byte within the word).
    pub data: [u8; WORD],
    /// Bytes of the word overwritten by stores that are younger than this chunk but were already
    /// folded into `base`: when the chunk completes, it lands in program order, so it must not
    /// overwrite them there. (While pending, a crash image overlays the whole chunk: it may land
    /// after younger writebacks.)
    pub shadow: u8,
}

impl Chunk {
    #[inline]
    pub fn line_mask(&self) -> u64 {
        u64::from(self.mask) << (usize::from(self.word) * WORD)
    }

    /// Writes the chunk's bytes, except those in `exclude`, into `dst`.
    #[inline]
    pub fn apply(&self, dst: &mut [u8; LINE], exclude: u8) {
        let m = self.mask & !exclude;
        let base = usize::from(self.word) * WORD;
        for b in 0..WORD {
            if m >> b & 1 == 1 {
                dst[base + b] = self.data[b];
            }
        }
    }
}

/// The latest store to some bytes of the line, kept until it is durable by both rules.
#[derive(Clone, Debug)]
pub(crate) struct Live {
    pub id: u64,
    pub tid: Tid,
    pub nt: bool,
    /// Bytes whose latest store this is (disjoint from every other live's mask).
    pub mask: u64,
    /// Who made it durable under the hardware rule, once someone has.
    pub hw: Option<Persister>,
    /// The writer's own flush+fence (or clflush, persist_range, eADR) that made it durable.
    pub own: Option<Persister>,
}

#[derive(Clone, Debug)]
pub(crate) struct Line {
    pub base: [u8; LINE],
    /// Id of the newest cached store known persisted (0: only what `base` held when the line
    /// started being tracked).
    pub floor: u64,
    /// Id of the newest cached store to the line (0 if none since tracking started). Flushes
    /// capture this.
    pub current: u64,
    pub log: Vec<Entry>,
    pub pending: Vec<Chunk>,
    pub lives: Vec<Live>,
    /// Bytes that are not `durable_hw`: the latest log writer is a cached version above the
    /// floor, or a pending chunk covers them.
    pub hw_open: u64,
    /// Bytes whose latest store is not yet durable by its writer's own persist.
    pub own_open: u64,
    /// Set when the version limit merged two versions since the line was last idle.
    pub merged: bool,
}

impl Line {
    pub fn new(base: [u8; LINE]) -> Self {
        Line {
            base,
            floor: 0,
            current: 0,
            log: Vec::new(),
            pending: Vec::new(),
            lives: Vec::new(),
            hw_open: 0,
            own_open: 0,
            merged: false,
        }
    }

    /// The state of a new line with durable content `base`, keeping the vectors' memory.
    pub fn reuse(&mut self, base: [u8; LINE]) {
        self.base = base;
        self.floor = 0;
        self.current = 0;
        self.log.clear();
        self.pending.clear();
        self.lives.clear();
        self.hw_open = 0;
        self.own_open = 0;
        self.merged = false;
    }

    /// Nothing to remember: the line can be forgotten (guest memory then holds its durable
    /// content).
    pub fn is_idle(&self) -> bool {
        self.log.is_empty() && self.pending.is_empty() && self.lives.is_empty()
    }

    /// A cached version above the floor exists (what a writeback would write).
    pub fn has_cached_above_floor(&self) -> bool {
        self.log.iter().any(|e| e.kind != EntryKind::Nt)
    }

    /// Records `id` as the latest store to `mask`; a `durable` store (eADR) is not recorded.
    fn set_live(&mut self, id: u64, tid: Tid, nt: bool, mask: u64, durable: bool) {
        self.lives.retain_mut(|l| {
            if l.id != id {
                l.mask &= !mask;
            }
            l.mask != 0
        });
        if durable {
            return;
        }
        // The elements of one rep instruction share an id: extend rather than push.
        if let Some(l) = self.lives.last_mut() {
            if l.id == id {
                l.mask |= mask;
                return;
            }
        }
        push_small(&mut self.lives, Live { id, tid, nt, mask, hw: None, own: None }, 1);
    }

    /// A cached (or rep-string) store under ADR: a new version above the floor, or, for the next
    /// element of the same rep instruction, a larger last version.
    pub fn store_cached(&mut self, id: u64, tid: Tid, rep: bool, mask: u64, data: &[u8; LINE]) {
        let extend = rep && matches!(self.log.last(), Some(e) if e.kind == EntryKind::Rep && e.id == id);
        if extend {
            let e = self.log.last_mut().expect("checked above");
            e.write(mask, data);
        } else {
            let kind = if rep { EntryKind::Rep } else { EntryKind::Cached };
            push_small(&mut self.log, Entry::new(id, kind, mask, data), 2);
        }
        self.current = id;
        self.hw_open |= mask;
        self.own_open |= mask;
        self.set_live(id, tid, false, mask, false);
    }

    /// A cached store under eADR: durable at once (the cache is in the persistence domain).
    pub fn store_durable(&mut self, id: u64, tid: Tid, mask: u64, data: &[u8; LINE]) {
        // Under eADR the floor always equals `current`, so every cached entry is folded at once
        // and completed NT chunks fold too: the log stays empty.
        debug_assert!(self.log.is_empty());
        apply(&mut self.base, mask, data);
        for c in &mut self.pending {
            c.shadow |= (mask >> (usize::from(c.word) * WORD)) as u8;
        }
        self.current = id;
        self.floor = id;
        self.set_live(id, tid, false, mask, true);
        self.recompute();
    }

    /// An NT store of `bytes` at byte `off`: one pending chunk per 8-byte word touched.
    pub fn store_nt(&mut self, id: u64, tid: Tid, off: usize, bytes: &[u8]) {
        let mut i = 0;
        while i < bytes.len() {
            let pos = off + i;
            let word = pos / WORD;
            let end = ((word + 1) * WORD).min(off + bytes.len());
            let mut data = [0u8; WORD];
            let mut mask = 0u8;
            for p in pos..end {
                data[p % WORD] = bytes[p - off];
                mask |= 1 << (p % WORD);
            }
            self.pending.push(Chunk { id, tid, word: word as u8, mask, data, shadow: 0 });
            i = end - off;
        }
        let mask = range_mask(off, bytes.len());
        self.hw_open |= mask;
        self.own_open |= mask;
        self.set_live(id, tid, true, mask, false);
    }

    /// Raises the floor to version `target` (clamped to the current version: a stale capture
    /// from before the line was last forgotten names no version of it). Returns whether it rose.
    pub fn raise_floor(&mut self, target: u64) -> bool {
        let t = target.min(self.current);
        if t <= self.floor {
            return false;
        }
        self.floor = t;
        self.fold();
        true
    }

    /// Moves the durable prefix of the log into `base`: cached entries up to the floor and the
    /// completed NT chunks among or right after them.
    pub fn fold(&mut self) {
        let mut k = 0;
        while k < self.log.len() {
            let e = &self.log[k];
            if e.kind != EntryKind::Nt && e.id > self.floor {
                break;
            }
            e.apply_to(&mut self.base, u64::MAX);
            for c in &mut self.pending {
                if c.id < e.id {
                    c.shadow |= (e.mask >> (usize::from(c.word) * WORD)) as u8;
                }
            }
            if e.kind != EntryKind::Nt {
                // A merged entry holds stores up to `last`: once it is durable, so are they.
                self.floor = self.floor.max(e.last);
            }
            k += 1;
        }
        if k > 0 {
            self.log.drain(..k);
        }
    }

    /// Completes (makes durable) every pending chunk of `tid`: it lands at its program-order
    /// position. Returns how many chunks completed.
    ///
    /// A chunk younger than the log's first entry becomes an `Nt` log entry. Under the current
    /// rules that state is transient: the NT store captured every older version for `tid`, and the
    /// same fence (or persist_range) raises the floor over them right after, folding the chunk
    /// into `base`. The log, `recompute` and the crash space still handle `Nt` entries in general,
    /// so the rules can change without breaking the representation.
    pub fn complete_nt(&mut self, tid: Tid) -> u32 {
        let mut n = 0;
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].tid != tid {
                i += 1;
                continue;
            }
            let c = self.pending.remove(i);
            n += 1;
            let before_log = self.log.first().is_none_or(|f| c.id < f.id);
            if before_log {
                // Older than every log entry: it belongs in `base`, under the younger stores
                // already folded there.
                c.apply(&mut self.base, c.shadow);
                for q in &mut self.pending {
                    if q.id < c.id && q.word == c.word {
                        q.shadow |= c.mask;
                    }
                }
            } else {
                // Younger than everything folded, so nothing in `base` shadows it.
                debug_assert_eq!(c.shadow, 0);
                let mut data = [0u8; LINE];
                let w = usize::from(c.word) * WORD;
                data[w..w + WORD].copy_from_slice(&c.data);
                let pos = self.log.partition_point(|e| e.id < c.id);
                self.log.insert(pos, Entry::new(c.id, EntryKind::Nt, c.line_mask(), &data));
            }
        }
        n
    }

    /// After a persistence event `p` on this line: records which latest stores became durable
    /// (hardware rule: covered by the floor, or an NT store none of whose chunks is pending;
    /// own rule: additionally written by `p.tid`, and for cached stores no younger than
    /// `own_cap`, the version `p.tid` itself had captured), reports them, forgets stores durable
    /// by both rules and recomputes the byte masks.
    pub fn mark<S: FnMut(&Persisted)>(
        &mut self,
        line: u64,
        p: Persister,
        own_cap: u64,
        out: &mut FenceOutcome,
        sink: &mut S,
    ) {
        for l in &mut self.lives {
            let done = if l.nt { !self.pending.iter().any(|c| c.id == l.id) } else { l.id <= self.floor };
            let hw_now = done && l.hw.is_none();
            let own_now = done && l.own.is_none() && l.tid == p.tid && (l.nt || l.id <= own_cap);
            if hw_now {
                l.hw = Some(p);
                out.stores_hw += 1;
            }
            if own_now {
                l.own = Some(p);
                out.stores_own += 1;
            }
            if hw_now || own_now {
                sink(&Persisted { store: StoreId(l.id), writer: l.tid, line, mask: l.mask, hw: hw_now, own: own_now });
            }
        }
        self.lives.retain(|l| l.hw.is_none() || l.own.is_none());
        self.recompute();
    }

    /// Recomputes `hw_open` and `own_open` from the log, the pending chunks and the lives.
    pub fn recompute(&mut self) {
        let mut seen = 0u64;
        let mut hw = 0u64;
        for e in self.log.iter().rev() {
            if e.kind != EntryKind::Nt {
                hw |= e.mask & !seen;
            }
            seen |= e.mask;
        }
        for c in &self.pending {
            hw |= c.line_mask();
        }
        self.hw_open = hw;
        self.own_open = self.lives.iter().filter(|l| l.own.is_none()).fold(0, |m, l| m | l.mask);
        if self.is_idle() {
            self.merged = false;
        }
    }

    /// Keeps the log within `limit` entries by merging adjacent versions in its older half (each
    /// merge removes one intermediate crash state of this line; see `set_version_limit`).
    /// Returns how many merges happened. Amortised O(1) per store.
    pub fn enforce_limit(&mut self, limit: usize) -> u64 {
        if limit == 0 || self.log.len() <= limit {
            return 0;
        }
        let n = self.log.len();
        let half = n / 2;
        let (mut r, mut w, mut merged) = (0usize, 0usize, 0u64);
        while r < n {
            // Never merge across a pending chunk's program-order position: when the chunk
            // completes it must land between the two, which one entry cannot express.
            let pair = r < half
                && r + 1 < n
                && self.log[r].kind != EntryKind::Nt
                && self.log[r + 1].kind != EntryKind::Nt
                && !self.pending.iter().any(|c| c.id > self.log[r].last && c.id < self.log[r + 1].id);
            if pair {
                let next = self.log[r + 1].clone();
                let mut e = self.log[r].clone();
                let mut values = [0u8; LINE];
                next.apply_to(&mut values, u64::MAX);
                e.write(next.mask, &values);
                e.last = next.last;
                e.kind = EntryKind::Cached;
                self.log[w] = e;
                r += 2;
                merged += 1;
            } else {
                if w != r {
                    self.log[w] = self.log[r].clone();
                }
                r += 1;
            }
            w += 1;
        }
        self.log.truncate(w);
        if merged > 0 {
            self.merged = true;
        }
        merged
    }

    /// The line as the program sees it now: everything applied in program order.
    pub fn current_content(&self) -> [u8; LINE] {
        let mut out = self.base;
        let mut pi = 0;
        for e in &self.log {
            while pi < self.pending.len() && self.pending[pi].id < e.id {
                let c = &self.pending[pi];
                c.apply(&mut out, c.shadow);
                pi += 1;
            }
            e.apply_to(&mut out, u64::MAX);
        }
        for c in &self.pending[pi..] {
            c.apply(&mut out, c.shadow);
        }
        out
    }

    /// The live store covering byte `b`, if any.
    pub fn live_at(&self, b: usize) -> Option<&Live> {
        self.lives.iter().find(|l| l.mask >> b & 1 == 1)
    }
}
