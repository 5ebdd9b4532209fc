//! Findings grouped by program sites, not by call stacks: one finding per (store site, site
//! that ended its window, class) for a race pass, with the number of occurrences and every
//! distinct combination of call stacks kept in the finding ([`RawGroup`]) rather than reported
//! as findings of their own.
//!
//! A race pass sees the same racing instructions reached through many call paths (a hash
//! table's insert called from each YCSB operation, a B-tree's split from three callers): keyed
//! by stack, one published bug became four findings and 147 findings were 78 distinct (store,
//! end) instruction pairs. HawkSet groups its reports by (store, window end, flushed); so do
//! `hawkset` and `vardalith` here, through [`Grouper`], which any pass may use: it takes each
//! occurrence with its locations, and gives one [`RawFinding`] per key with
//! - the *key locations* (their PCs make the key, with the pass's class),
//! - the *listed locations* (hawkset's racing loads), each distinct PC once,
//! - every distinct combination of (role, PC, stack) of the occurrences, with its count.
//!
//! The driver symbolises each combination ([`crate::Finding::group`]); findings with a group are
//! merged across runs by their key locations' source lines and class ([`crate::Finding::key`]).

use std::collections::BTreeMap;

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
    /// occurrence) the occurrences had, with how many occurrences had it, in a stable order.
    pub variants: Vec<(Vec<RawLocation>, u64)>,
}

/// The (role, PC, stack) of each location of an occurrence: one stack combination.
type Variant = Vec<(&'static str, u64, u32)>;

/// One group under construction.
#[derive(Debug)]
struct Acc {
    /// Key locations of the first occurrence, then each listed PC's first location.
    locations: Vec<RawLocation>,
    key_locations: usize,
    /// (role, PC, stack) of each location → (occurrences, the first threads seen).
    variants: BTreeMap<Variant, (u64, Vec<u32>)>,
    occurrences: u64,
}

/// Groups occurrences by a key of the pass's choosing (which should be made of PCs, never of
/// stacks).
#[derive(Debug)]
pub struct Grouper<K: Ord> {
    groups: BTreeMap<K, Acc>,
    /// Most listed locations per finding (all are counted in the variants).
    max_listed: usize,
}

impl<K: Ord> Grouper<K> {
    /// An empty grouper listing at most `max_listed` non-key locations per finding.
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
        let acc = self.groups.entry(key).or_insert_with(|| Acc {
            locations: locations[..key_locations.min(locations.len())].to_vec(),
            key_locations: key_locations.min(locations.len()),
            variants: BTreeMap::new(),
            occurrences: 0,
        });
        acc.occurrences += n;
        for l in &locations[acc.key_locations..] {
            let listed = &acc.locations[acc.key_locations..];
            if listed.len() < self.max_listed && !listed.iter().any(|m| m.role == l.role && m.pc == l.pc) {
                acc.locations.push(l.clone());
            }
        }
        let variant: Variant = locations.iter().map(|l| (l.role, l.pc, l.stack.0)).collect();
        acc.variants.entry(variant).or_insert_with(|| (0, locations.iter().map(|l| l.tid).collect())).0 += n;
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
                    .map(|(v, (n, tids))| {
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
                        (locations, n)
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

    #[test]
    fn one_finding_per_key_with_every_stack_combination() {
        let mut g: Grouper<(u64, u64)> = Grouper::new(2);
        g.add((0xa, 0xf), &[loc("store", 0xa, 1), loc("fence", 0xf, 1), loc("load", 0xb, 7)], 2, 1);
        g.add((0xa, 0xf), &[loc("store", 0xa, 2), loc("fence", 0xf, 2), loc("load", 0xb, 7)], 2, 3);
        g.add((0xa, 0xf), &[loc("store", 0xa, 1), loc("fence", 0xf, 1), loc("load", 0xc, 8)], 2, 1);
        g.add((0xa, 0xf), &[loc("store", 0xa, 1), loc("fence", 0xf, 1), loc("load", 0xd, 8)], 2, 1);
        g.add((0xe, 0xf), &[loc("store", 0xe, 1), loc("fence", 0xf, 1), loc("load", 0xb, 7)], 2, 1);
        let out = g.finish(|_, _, _| Described {
            analysis: "hawkset",
            kind: "k",
            message: String::new(),
            class: "c",
            stored: None,
        });
        assert_eq!(out.len(), 2);
        let f = &out[0];
        assert_eq!(f.occurrences, 6);
        // The key locations, then at most two listed load PCs.
        let pcs: Vec<u64> = f.locations.iter().map(|l| l.pc).collect();
        assert_eq!(pcs, vec![0xa, 0xf, 0xb, 0xc]);
        let g = f.group.as_ref().unwrap();
        assert_eq!(g.key_locations, 2);
        assert_eq!(g.variants.len(), 4);
        assert_eq!(g.variants.iter().map(|v| v.1).sum::<u64>(), 6);
    }
}

/// Entries of [`StoreShapes`]' cache.
const SHAPE_CACHE: usize = 256;

/// What the stores of each site wrote ([`crate::StoredCounts`]), counted at every PM store of a
/// race pass and read for its findings: a direct-mapped cache of store PCs in front of the
/// table, so that the few PCs of a program's hot loops cost a compare, not a hash-map entry.
#[derive(Clone, Debug)]
pub(crate) struct StoreShapes {
    /// (PC, index in `counts`), `u64::MAX` for an empty entry.
    cache: Box<[(u64, u32)]>,
    index: rustc_hash::FxHashMap<u64, u32>,
    counts: Vec<crate::StoredCounts>,
    /// The lowest and highest guest addresses of PM accesses so far: where PM pointers point.
    pm_lo: u64,
    pm_hi: u64,
}

impl Default for StoreShapes {
    fn default() -> StoreShapes {
        StoreShapes {
            cache: vec![(u64::MAX, 0); SHAPE_CACHE].into_boxed_slice(),
            index: rustc_hash::FxHashMap::default(),
            counts: Vec::new(),
            pm_lo: u64::MAX,
            pm_hi: 0,
        }
    }
}

impl StoreShapes {
    /// Notes a PM access (where PM lies in the guest's address space, for telling pointers).
    #[inline]
    pub(crate) fn access(&mut self, addr: u64, size: u32) {
        self.pm_lo = self.pm_lo.min(addr);
        self.pm_hi = self.pm_hi.max(addr + u64::from(size));
    }

    /// A PM store at `pc` of `size` bytes replacing `old` with `new`.
    #[inline]
    pub(crate) fn store(&mut self, pc: u64, size: u32, old: u64, new: u64) {
        let shape = Stored::of(size, old, new, self.pm_lo, self.pm_hi);
        let e = &mut self.cache[((pc ^ (pc >> 8)) as usize) & (SHAPE_CACHE - 1)];
        if e.0 != pc {
            let next = self.counts.len() as u32;
            let i = *self.index.entry(pc).or_insert(next);
            if i == next {
                self.counts.push(crate::StoredCounts::default());
            }
            *e = (pc, i);
        }
        self.counts[e.1 as usize].add(shape);
    }

    /// What most stores at `pc` wrote.
    pub(crate) fn shape(&self, pc: u64) -> Option<Stored> {
        self.index.get(&pc).and_then(|&i| self.counts[i as usize].shape())
    }
}
