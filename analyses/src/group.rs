//! Findings grouped by program sites, not by call stacks: one finding per store site for the
//! race passes (`hawkset` listing the sites that ended the store's windows), with the number of
//! occurrences and every distinct combination of call stacks kept in the finding ([`RawGroup`])
//! rather than reported as findings of their own.
//!
//! A race pass sees the same racing instructions reached through many call paths (a hash
//! table's insert called from each YCSB operation, a B-tree's split from three callers): keyed
//! by stack, one published bug became four findings and 147 findings were 78 distinct (store,
//! end) instruction pairs. HawkSet prints its reports by (store, window end, flushed), and counts
//! them by store site (its artifact's `count_unique_races`); `hawkset` and `vardalith` here key
//! by store site, through [`Grouper`], which any pass may use: it takes each occurrence with its
//! locations, and gives one [`RawFinding`] per key with
//! - the *key locations* (their PCs make the key, with the pass's class),
//! - the *listed locations* (hawkset's window ends and racing loads), each distinct PC once, at
//!   most so many of each role,
//! - every distinct combination of (role, PC, stack) of the occurrences, with its count.
//!
//! The driver symbolises each combination ([`crate::Finding::group`]); findings with a group are
//! merged across runs by their key locations' source lines and class ([`crate::Finding::key`]).

use std::collections::BTreeMap;

use emu::pm::FILE_SHIFT;

use crate::{RawFinding, RawLocation, Stored};

/// What a pass says of one group ([`Grouper::finish`]).
#[derive(Clone, Debug)]
pub struct Described {
    /// The pass's name.
    pub analysis: &'static str,
    /// The finding's kind.
    pub kind: &'static str,
    /// Its one-line message.
    pub message: String,
    /// The group's class ([`RawGroup::class`]).
    pub class: &'static str,
    /// What the racing store wrote.
    pub stored: Option<Stored>,
}

/// What a grouped raw finding keeps besides its representative locations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawGroup {
    /// The pass's class of the group, part of its key (`hawkset`: whether the store had been
    /// flushed; empty when the pass has none).
    pub class: &'static str,
    /// How many leading locations identify the finding; the rest are listed.
    pub key_locations: usize,
    /// What the racing store wrote, if the pass could tell.
    pub stored: Option<Stored>,
    /// Every distinct combination of locations (PCs and stacks; the threads of its first
    /// occurrence) the occurrences had, in a stable order.
    pub variants: Vec<RawVariant>,
}

/// One combination of locations of a group's occurrences.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawVariant {
    /// The locations, with the threads of the first occurrence that had them.
    pub locations: Vec<RawLocation>,
    /// How many occurrences had them.
    pub occurrences: u64,
    /// The message of the first occurrence that had them, for a pass whose messages name an
    /// occurrence's particulars (threads, address): the driver gives it to a finding it splits
    /// off ([`RawVariant`]s whose key locations the symbolizer attributes to different lines of
    /// the program: `std::atomic<T>::load` at `-O0`, called from several places).
    pub message: Option<String>,
}

/// The (role, PC, stack) of each location of an occurrence: one stack combination.
type Variant = Vec<(&'static str, u64, u32)>;

/// One group under construction.
#[derive(Debug)]
struct Acc {
    /// Key locations of the first occurrence, then each listed PC's first location.
    locations: Vec<RawLocation>,
    key_locations: usize,
    /// (role, PC, stack) of each location → (occurrences, the first threads seen, the first
    /// message).
    variants: BTreeMap<Variant, (u64, Vec<u32>, Option<String>)>,
    occurrences: u64,
}

/// Groups occurrences by a key of the pass's choosing (which should be made of PCs, never of
/// stacks).
#[derive(Debug)]
pub struct Grouper<K: Ord> {
    groups: BTreeMap<K, Acc>,
    /// Most listed locations of one role per finding (all are counted in the variants).
    max_listed: usize,
}

impl<K: Ord> Grouper<K> {
    /// An empty grouper listing at most `max_listed` non-key locations of each role per finding.
    pub fn new(max_listed: usize) -> Grouper<K> {
        Grouper { groups: BTreeMap::new(), max_listed }
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// How many groups there are.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// `n` occurrences under `key`, whose first `key_locations` locations identify it and whose
    /// other locations are listed.
    pub fn add(&mut self, key: K, locations: &[RawLocation], key_locations: usize, n: u64) {
        self.add_described(key, locations, key_locations, n, || None);
    }

    /// [`Grouper::add`], with the message of the occurrences if they are the first of their
    /// stack combination ([`RawVariant::message`]).
    pub fn add_described(
        &mut self,
        key: K,
        locations: &[RawLocation],
        key_locations: usize,
        n: u64,
        message: impl FnOnce() -> Option<String>,
    ) {
        let acc = self.groups.entry(key).or_insert_with(|| Acc {
            locations: locations[..key_locations.min(locations.len())].to_vec(),
            key_locations: key_locations.min(locations.len()),
            variants: BTreeMap::new(),
            occurrences: 0,
        });
        acc.occurrences += n;
        for l in &locations[acc.key_locations..] {
            let listed = &acc.locations[acc.key_locations..];
            let same_role = listed.iter().filter(|m| m.role == l.role).count();
            if same_role < self.max_listed && !listed.iter().any(|m| m.role == l.role && m.pc == l.pc) {
                acc.locations.push(l.clone());
            }
        }
        let variant: Variant = locations.iter().map(|l| (l.role, l.pc, l.stack.0)).collect();
        acc.variants.entry(variant).or_insert_with(|| (0, locations.iter().map(|l| l.tid).collect(), message())).0 += n;
    }

    /// One finding per group, in key order: `make(key, locations, occurrences)` describes it.
    pub fn finish(self, mut make: impl FnMut(&K, &[RawLocation], u64) -> Described) -> Vec<RawFinding> {
        self.groups
            .into_iter()
            .map(|(key, acc)| {
                let d = make(&key, &acc.locations, acc.occurrences);
                let variants = acc
                    .variants
                    .into_iter()
                    .map(|(v, (n, tids, message))| {
                        let locations = v
                            .into_iter()
                            .zip(tids)
                            .map(|((role, pc, stack), tid)| RawLocation {
                                role,
                                pc,
                                stack: emu::callstack::StackId(stack),
                                tid,
                            })
                            .collect();
                        RawVariant { locations, occurrences: n, message }
                    })
                    .collect();
                RawFinding {
                    analysis: d.analysis,
                    kind: d.kind,
                    message: d.message,
                    occurrences: acc.occurrences,
                    locations: acc.locations,
                    validation: None,
                    group: Some(RawGroup {
                        class: d.class,
                        key_locations: acc.key_locations,
                        stored: d.stored,
                        variants,
                    }),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emu::callstack::StackId;

    fn loc(role: &'static str, pc: u64, stack: u32) -> RawLocation {
        RawLocation { role, pc, stack: StackId(stack), tid: 1 }
    }

    fn described<K>(_: &K, _: &[RawLocation], _: u64) -> Described {
        Described { analysis: "hawkset", kind: "k", message: String::new(), class: "c", stored: None }
    }

    #[test]
    fn one_finding_per_key_with_every_stack_combination() {
        let mut g: Grouper<(u64, u64)> = Grouper::new(2);
        g.add((0xa, 0xf), &[loc("store", 0xa, 1), loc("fence", 0xf, 1), loc("load", 0xb, 7)], 2, 1);
        g.add((0xa, 0xf), &[loc("store", 0xa, 2), loc("fence", 0xf, 2), loc("load", 0xb, 7)], 2, 3);
        g.add((0xa, 0xf), &[loc("store", 0xa, 1), loc("fence", 0xf, 1), loc("load", 0xc, 8)], 2, 1);
        g.add((0xa, 0xf), &[loc("store", 0xa, 1), loc("fence", 0xf, 1), loc("load", 0xd, 8)], 2, 1);
        g.add((0xe, 0xf), &[loc("store", 0xe, 1), loc("fence", 0xf, 1), loc("load", 0xb, 7)], 2, 1);
        let out = g.finish(described);
        assert_eq!(out.len(), 2);
        let f = &out[0];
        assert_eq!(f.occurrences, 6);
        // The key locations, then at most two listed load PCs.
        let pcs: Vec<u64> = f.locations.iter().map(|l| l.pc).collect();
        assert_eq!(pcs, vec![0xa, 0xf, 0xb, 0xc]);
        let g = f.group.as_ref().unwrap();
        assert_eq!(g.key_locations, 2);
        assert_eq!(g.variants.len(), 4);
        assert_eq!(g.variants.iter().map(|v| v.occurrences).sum::<u64>(), 6);
    }

    #[test]
    fn the_listing_cap_is_per_role() {
        let mut g: Grouper<u64> = Grouper::new(1);
        g.add(0xa, &[loc("store", 0xa, 1), loc("fence", 0xf, 1), loc("load", 0xb, 1)], 1, 1);
        g.add(0xa, &[loc("store", 0xa, 1), loc("overwrite", 0xe, 1), loc("load", 0xc, 1)], 1, 1);
        let out = g.finish(described);
        // One of each role: a second window end does not crowd out the loads, nor the reverse.
        let pcs: Vec<u64> = out[0].locations.iter().map(|l| l.pc).collect();
        assert_eq!(pcs, vec![0xa, 0xf, 0xb, 0xe]);
    }

    /// A PM file (id 1) mapped at guest address `BASE`, accessed up to 1 MiB.
    const BASE: u64 = 0x7000_0000_0000;
    const FILE: u64 = 1 << 40;

    fn shapes() -> StoreShapes {
        let mut s = StoreShapes::default();
        s.access(BASE, FILE, 8);
        s.access(BASE + (1 << 20) - 8, FILE + (1 << 20) - 8, 8);
        s
    }

    #[test]
    fn the_lines_accessed_are_kept_when_asked() {
        let mut s = StoreShapes::default();
        s.access(0x1000, 0x8_2040, 8);
        assert!(!s.accessed(0x8_2040), "kept only on request");
        s.keep_lines();
        s.access(0x1000, 0x8_207c, 8); // straddles two lines
        assert!(s.accessed(0x8_2040) && s.accessed(0x8_2080) && !s.accessed(0x8_20c0));
        assert!(!s.accessed(0x9_2040));
    }

    #[test]
    fn pool_offsets_are_told_when_they_lead_to_accessed_pm() {
        let mut s = shapes();
        // A helper's store instruction (0x10) storing values and, once, an offset into the file.
        for k in 0..20u64 {
            s.store(0x10, FILE + 64, 8, 0, 0x5555_0000_0000_0000 + k * 977);
        }
        s.store(0x10, FILE + 64, 8, 0, 0x8_2040);
        assert_eq!(s.shape(0x10, |dev| dev == FILE + 0x8_2040), Some(Stored::Offset));
        // Unconfirmed (nothing was accessed there), it was a value.
        assert_eq!(s.shape(0x10, |_| false), Some(Stored::Value));
        // A pointer wins over everything; small, unaligned and out-of-file values are no offsets.
        s.store(0x10, FILE, 8, 0, BASE + 4096);
        assert_eq!(s.shape(0x10, |_| true), Some(Stored::Pointer));
        for (pc, v) in [(0x20, 24u64), (0x30, 0x8_2041), (0x40, 1 << 30)] {
            s.store(pc, FILE, 8, 0, v);
            assert_eq!(s.shape(pc, |_| true), Some(Stored::Value), "{v:#x}");
        }
        // A value in another file's extent is no offset into this one.
        s.store(0x50, 2 << 40, 8, 0, 0x8_2040);
        assert_eq!(s.shape(0x50, |_| true), Some(Stored::Value));
        // Counters stay counters.
        s.store(0x60, FILE, 8, 0x8_2040, 0x8_2041);
        assert_eq!(s.shape(0x60, |_| true), Some(Stored::Counter));
    }
}

/// Entries of [`StoreShapes`]' cache.
const SHAPE_CACHE: usize = 256;

/// PM files whose extent [`StoreShapes`] follows (a program maps one pool or a few).
const SHAPE_FILES: usize = 4;

/// The lowest value taken for an offset into a PM file: below it lie the file's headers (a
/// libpmemobj pool's header and lanes), and small values are far more often counts and sizes.
const MIN_OFFSET: u64 = 4096;

/// What the stores of each site wrote ([`crate::StoredCounts`]), counted at every PM store of a
/// race pass and read for its findings: a direct-mapped cache of store PCs in front of the
/// table, so that the few PCs of a program's hot loops cost a compare, not a hash-map entry.
///
/// A store is an *offset* candidate when it wrote 8 bytes, 8-aligned, at least [`MIN_OFFSET`]
/// and below the highest offset of its own PM file the program has accessed (a pool offset, the
/// `off` of a PMEMoid, P-CLHT's `ht_off`): the site's first such value is kept, and the pass
/// confirms it at the end ([`StoreShapes::shape`]) by whether the program accessed PM at that
/// offset of the file, that is, whether the value leads anywhere the program went.
#[derive(Clone, Debug)]
pub(crate) struct StoreShapes {
    /// (PC, index in `counts`), `u64::MAX` for an empty entry.
    cache: Box<[(u64, u32)]>,
    index: rustc_hash::FxHashMap<u64, u32>,
    /// Per site: its counts, and the device address its first offset candidate leads to.
    counts: Vec<(crate::StoredCounts, u64)>,
    /// The lowest and highest guest addresses of PM accesses so far: where PM pointers point.
    pm_lo: u64,
    pm_hi: u64,
    /// (file id, one past the highest offset accessed) of the PM files seen, `u64::MAX` ids
    /// for free entries.
    files: [(u64, u64); SHAPE_FILES],
    /// The PM lines accessed, by 4 KiB device page (a bit per line), when the pass keeps no
    /// such record of its own to confirm offsets with ([`StoreShapes::keep_lines`]).
    lines: Option<rustc_hash::FxHashMap<u64, u64>>,
}

impl Default for StoreShapes {
    fn default() -> StoreShapes {
        StoreShapes {
            cache: vec![(u64::MAX, 0); SHAPE_CACHE].into_boxed_slice(),
            index: rustc_hash::FxHashMap::default(),
            counts: Vec::new(),
            pm_lo: u64::MAX,
            pm_hi: 0,
            files: [(u64::MAX, 0); SHAPE_FILES],
            lines: None,
        }
    }
}

impl StoreShapes {
    /// Notes a PM access at guest address `addr`, device address `dev` (where PM lies in the
    /// guest's address space, for telling pointers; how far into its file, for offsets).
    #[inline]
    pub(crate) fn access(&mut self, addr: u64, dev: u64, size: u32) {
        self.pm_lo = self.pm_lo.min(addr);
        self.pm_hi = self.pm_hi.max(addr + u64::from(size));
        if let Some(lines) = &mut self.lines {
            let last = (dev + u64::from(size.max(1)) - 1) >> 6;
            for line in dev >> 6..=last {
                *lines.entry(line >> 6).or_insert(0) |= 1 << (line & 63);
            }
        }
        let (fid, end) = (dev >> FILE_SHIFT, (dev & OFFSET_MASK) + u64::from(size));
        for f in self.files.iter_mut() {
            if f.0 == fid || f.0 == u64::MAX {
                *f = (fid, f.1.max(end));
                return;
            }
        }
    }

    /// A PM store at `pc` to device address `dev` of `size` bytes replacing `old` with `new`.
    #[inline]
    pub(crate) fn store(&mut self, pc: u64, dev: u64, size: u32, old: u64, new: u64) {
        let mut shape = Stored::of(size, old, new, self.pm_lo, self.pm_hi);
        let fid = dev >> FILE_SHIFT;
        let offset = shape == Stored::Value
            && size == 8
            && new.is_multiple_of(8)
            && new >= MIN_OFFSET
            && self.files.iter().any(|&(f, hi)| f == fid && new < hi);
        if offset {
            shape = Stored::Offset;
        }
        let e = &mut self.cache[((pc ^ (pc >> 8)) as usize) & (SHAPE_CACHE - 1)];
        if e.0 != pc {
            let next = self.counts.len() as u32;
            let i = *self.index.entry(pc).or_insert(next);
            if i == next {
                self.counts.push((crate::StoredCounts::default(), 0));
            }
            *e = (pc, i);
        }
        let c = &mut self.counts[e.1 as usize];
        c.0.add(shape);
        if offset && c.1 == 0 {
            c.1 = (fid << FILE_SHIFT) | new;
        }
    }

    /// Keeps a record of the PM lines accessed, so that [`StoreShapes::accessed`] can confirm
    /// offsets for a pass that keeps none of its own (vardalith with its IRH off).
    pub(crate) fn keep_lines(&mut self) {
        self.lines.get_or_insert_with(Default::default);
    }

    /// Whether the program accessed the PM line of device address `dev` (false without
    /// [`StoreShapes::keep_lines`]).
    pub(crate) fn accessed(&self, dev: u64) -> bool {
        let line = dev >> 6;
        self.lines.as_ref().is_some_and(|l| l.get(&(line >> 6)).is_some_and(|b| b >> (line & 63) & 1 == 1))
    }

    /// The worst shape the stores at `pc` wrote ([`crate::StoredCounts::shape`]); its offset
    /// candidates count only if `accessed(dev)` says the program accessed PM at the device
    /// address the first of them leads to (else they were values).
    pub(crate) fn shape(&self, pc: u64, accessed: impl Fn(u64) -> bool) -> Option<Stored> {
        self.index.get(&pc).and_then(|&i| {
            let (mut c, target) = self.counts[i as usize];
            let o = Stored::Offset as usize;
            if c.0[o] > 0 && !accessed(target) {
                c.0[Stored::Value as usize] += c.0[o];
                c.0[o] = 0;
            }
            c.shape()
        })
    }
}

/// The offset within its file of a device address ([`emu::pm::device_addr`]).
const OFFSET_MASK: u64 = (1 << FILE_SHIFT) - 1;
