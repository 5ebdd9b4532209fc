//! Unit tests of the device's internals: representation invariants under random event sequences,
//! and the states the public API only passes through (completed NT chunks inside the log, merged
//! versions next to pending chunks). Behaviour against the model is tested in `tests/pm_model.rs`.

use super::crash::CrashSpace;
use super::line::{range_mask, EntryKind, Line};
use super::table::{Compact, Slot};
use super::*;

impl PmDevice {
    /// The full form of a tracked line (a compact record expanded).
    fn full_line(&self, n: u64) -> Line {
        match self.lines.get(n).expect("tracked") {
            Slot::Compact(c) => c.expand(self.lines.compact_base(n, c, || self.files.read(n))),
            Slot::Full(l) => l.clone(),
        }
    }

    /// Checks every documented invariant of every line.
    fn assert_invariants(&self) {
        for n in self.lines.keys() {
            let l = &self.full_line(n);
            match self.lines.get(n).expect("tracked") {
                Slot::Compact(c) => {
                    let back = Compact::of(l).expect("an expanded compact record compacts again");
                    assert_eq!((back.old, back.floor, back.id, back.tid), (c.old, c.floor, c.id, c.tid));
                    assert_eq!((back.lo, back.len, back.new), (c.lo, c.len, c.new), "line {n}");
                }
                Slot::Full(_) => {
                    assert!(Compact::of(l).is_none(), "line {n}: a full line that fits a compact record");
                }
            }
            assert!(!l.is_idle(), "line {n}: idle lines are forgotten");
            assert!(l.floor <= l.current || l.current == 0, "line {n}: floor above current");
            assert!(l.log.windows(2).all(|w| w[0].id <= w[1].id), "line {n}: log out of order");
            if let Some(f) = l.log.first() {
                assert_ne!(f.kind, EntryKind::Nt, "line {n}: completed chunk left at the front");
                assert!(f.id > l.floor, "line {n}: durable entry not folded");
            }
            assert!(
                !l.log.iter().any(|e| e.kind == EntryKind::Nt),
                "line {n}: a fence leaves no completed chunk in the log"
            );
            assert!(l.pending.windows(2).all(|w| w[0].id <= w[1].id), "line {n}: pending out of order");
            let mut seen = 0u64;
            for lv in &l.lives {
                assert_eq!(lv.mask & seen, 0, "line {n}: live masks overlap");
                assert_ne!(lv.mask, 0, "line {n}: empty live kept");
                assert!(lv.hw.is_none() || lv.own.is_none(), "line {n}: durable live kept");
                seen |= lv.mask;
            }
            let own: u64 = l.lives.iter().filter(|x| x.own.is_none()).fold(0, |m, x| m | x.mask);
            assert_eq!(own, l.own_open, "line {n}: own_open stale");
            let mut copy = l.clone();
            copy.recompute();
            assert_eq!(copy.hw_open, l.hw_open, "line {n}: hw_open stale");
        }
    }
}

/// A tiny deterministic generator (no dependency on proptest for the invariant walk).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn invariants_hold_under_random_events() {
    for seed in 0..300u64 {
        let mut r = Lcg(seed);
        let cfg = PmConfig {
            atomicity: if r.next(2) == 0 { Atomicity::Line } else { Atomicity::Word8 },
            flush_model: if r.next(2) == 0 { FlushModel::Intel } else { FlushModel::Strict },
            persistency: if r.next(4) == 0 { Persistency::Eadr } else { Persistency::Adr },
        };
        let mut d = PmDevice::new(cfg);
        d.set_version_limit(if seed % 3 == 0 { 3 } else { 0 });
        for step in 0..60 {
            let tid = r.next(3) as Tid;
            let addr = r.next(4 * 64);
            match r.next(10) {
                0..=3 => {
                    let len = [1, 2, 4, 8, 16][r.next(5) as usize];
                    let v = vec![step as u8; len];
                    d.store(tid, addr, &v, &v, StoreKind::Cached, |_| [0; 64]);
                }
                4 => {
                    let v = vec![step as u8; 8];
                    d.store(tid, addr & !3, &v, &v, StoreKind::NonTemporal, |_| [0; 64]);
                }
                5 => {
                    let seq = step;
                    for i in 0..r.next(20) {
                        d.store(tid, addr + i, &[1], &[1], StoreKind::RepString { seq }, |_| [0; 64]);
                    }
                }
                6 | 7 => {
                    let k = [FlushKind::Clflush, FlushKind::Clflushopt, FlushKind::Clwb][r.next(3) as usize];
                    d.flush(tid, addr, k);
                }
                8 => {
                    d.fence(tid, FenceKind::Sfence);
                }
                _ => {
                    d.persist_range(tid, addr, r.next(200));
                }
            }
            d.assert_invariants();
            // The per-line search answers as a per-byte scan of `persist_info` does.
            let mut q = Lcg(seed * 1000 + step);
            let (lo, len, durable) = (q.next(5 * 64), q.next(80), q.next(2) == 0);
            let scan = (lo..lo + len)
                .find_map(|a| d.persist_info(a).filter(|i| i.durable_hw == durable).map(|i| (a, i.store, i.writer)));
            let found =
                d.find_persist_info(lo, len, |_, i| i.durable_hw == durable).map(|(a, i)| (a, i.store, i.writer));
            assert_eq!(found, scan, "seed {seed} step {step}");
            let space = d.crash_space();
            assert_eq!(space.image(&space.oldest_choice()).unwrap().len(), space.lines().len());
        }
        // Everything persisted by everyone: nothing is left.
        for t in 0..3 {
            d.persist_range(t, 0, 5 * 64);
        }
        assert_eq!(d.stats().lines, 0, "seed {seed}");
        assert!(d.crash_space().is_empty());
    }
}

#[test]
fn completed_chunk_inside_the_log_lands_between_versions() {
    // Build the transient state directly: v1 (x=1), NT chunk c (word 1 = 9), v2 (word 1 byte 0 =
    // 5), then c completes without the floor moving.
    let mut l = Line::new([0; 64]);
    let mut d1 = [0u8; 64];
    d1[0] = 1;
    l.store_cached(1, 0, false, range_mask(0, 1), &d1);
    l.store_nt(2, 0, 8, &[9; 8]);
    let mut d2 = [0u8; 64];
    d2[8] = 5;
    l.store_cached(3, 0, false, range_mask(8, 1), &d2);
    assert_eq!(l.complete_nt(0), 1);
    assert_eq!(l.log.len(), 3);
    assert_eq!(l.log[1].kind, EntryKind::Nt);
    l.recompute();
    // Bytes 9..16 are the completed chunk's and durable; byte 8 is v2's; byte 0 is v1's.
    assert_eq!(l.hw_open, range_mask(0, 1) | range_mask(8, 1));
    let cur = l.current_content();
    assert_eq!((cur[0], cur[8], cur[9]), (1, 5, 9));
    let space = CrashSpace::build(Atomicity::Line, [(0u64, &l)].into_iter());
    let v: Vec<(u8, u8, u8)> =
        space.lines()[0].versions.iter().map(|v| (v.content[0], v.content[8], v.content[9])).collect();
    // Floor: chunk applied on top; after v1: same; after v2: v2 over the chunk.
    assert_eq!(v, vec![(0, 9, 9), (1, 9, 9), (1, 5, 9)]);
    // Raising the floor over v1 folds v1 and the chunk.
    assert!(l.raise_floor(1));
    assert_eq!(l.log.len(), 1);
    assert_eq!((l.base[0], l.base[8], l.base[9]), (1, 9, 9));
}

#[test]
fn version_limit_does_not_merge_across_a_pending_chunk() {
    let mut d = PmDevice::new(PmConfig::default());
    d.set_version_limit(2);
    let st = |d: &mut PmDevice, a: u64, v: u8| {
        d.store(0, a, &[0], &[v], StoreKind::Cached, |_| [0; 64]);
    };
    st(&mut d, 0, 1);
    d.store(1, 8, &[0; 8], &[7; 8], StoreKind::NonTemporal, |_| [0; 64]);
    st(&mut d, 8, 2);
    st(&mut d, 1, 3);
    st(&mut d, 2, 4);
    let l = &d.full_line(0);
    // The pair around the chunk (ids 1 and 3) stayed apart.
    assert!(l.log.iter().any(|e| e.id == 1 && e.last == 1));
    // Persist the first version only (thread 1's NT capture), then complete the chunk: it lands
    // under the younger store of byte 8.
    d.fence(1, FenceKind::Sfence);
    assert_eq!(d.full_line(0).base[8], 7);
    let space = d.crash_space();
    assert!(space.enumerate().all(|(_, img)| img[0].1[9] == 7 && img[0].1[0] == 1));
    assert!(space.enumerate().any(|(_, img)| img[0].1[8] == 2));
}

#[test]
fn masks_and_hasher() {
    assert_eq!(range_mask(0, 64), u64::MAX);
    assert_eq!(range_mask(60, 4), 0xf << 60);
    assert_eq!(range_mask(3, 0), 0);
    use std::hash::{BuildHasher, BuildHasherDefault};
    let h = BuildHasherDefault::<super::fx::FxHasher>::default();
    assert_eq!(h.hash_one(42u64), h.hash_one(42u64));
    assert_ne!(h.hash_one(1u64), h.hash_one(2u64));
}

/// The device that reads unpersisted lines' durable bytes back from the PM file (as in
/// emulation) answers exactly as one that keeps copies of them (as for made-up events), whether
/// the store's hook sees guest memory before or after the engine writes it.
#[test]
fn reading_the_file_back_equals_keeping_copies() {
    use std::os::unix::fs::FileExt;
    const FILE: u32 = 3;
    const SIZE: u64 = 6 * 64;
    let path = std::env::temp_dir().join(format!("ferrite-pm-files-{}", std::process::id()));
    for seed in 0..200u64 {
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        let mut mem = vec![0u8; SIZE as usize];
        for (i, b) in mem.iter_mut().enumerate() {
            *b = (i as u64 * 7 + seed) as u8;
        }
        file.write_all_at(&mem, 0).unwrap();
        let mut r = Lcg(seed);
        let cfg = PmConfig {
            atomicity: if r.next(2) == 0 { Atomicity::Line } else { Atomicity::Word8 },
            flush_model: if r.next(2) == 0 { FlushModel::Intel } else { FlushModel::Strict },
            persistency: if r.next(5) == 0 { Persistency::Eadr } else { Persistency::Adr },
        };
        let (mut copies, mut reads) = (PmDevice::new(cfg), PmDevice::new(cfg));
        reads.attach_file(FILE, &file).unwrap();
        let base = device_addr(FILE, 0);
        let after = seed % 2 == 1;
        for step in 0..80u64 {
            let tid = r.next(3) as Tid;
            let off = r.next(SIZE - 16);
            match r.next(10) {
                0..=4 => {
                    let len = [1, 2, 4, 8, 16][r.next(5) as usize];
                    let old = mem[off as usize..(off + len) as usize].to_vec();
                    let new: Vec<u8> = (0..len).map(|i| (step * 31 + i + 1) as u8).collect();
                    let kind = if r.next(6) == 0 { StoreKind::NonTemporal } else { StoreKind::Cached };
                    if after {
                        mem[off as usize..(off + len) as usize].copy_from_slice(&new);
                        file.write_all_at(&new, off).unwrap();
                    }
                    let line = |l: u64| {
                        let o = (l * 64 - base) as usize;
                        let mut b = [0u8; 64];
                        b.copy_from_slice(&mem[o..o + 64]);
                        b
                    };
                    copies.store(tid, base + off, &old, &new, kind, line);
                    reads.store(tid, base + off, &old, &new, kind, line);
                    if !after {
                        mem[off as usize..(off + len) as usize].copy_from_slice(&new);
                        file.write_all_at(&new, off).unwrap();
                    }
                }
                5 | 6 => {
                    let k = [FlushKind::Clflush, FlushKind::Clflushopt, FlushKind::Clwb][r.next(3) as usize];
                    copies.flush(tid, base + off, k);
                    reads.flush(tid, base + off, k);
                }
                7 | 8 => {
                    copies.fence(tid, FenceKind::Sfence);
                    reads.fence(tid, FenceKind::Sfence);
                }
                _ => {
                    let len = r.next(200);
                    copies.persist_range(tid, base + off, len);
                    reads.persist_range(tid, base + off, len);
                }
            }
            reads.assert_invariants();
            assert!(copies.crash_space() == reads.crash_space(), "seed {seed} step {step}: crash spaces differ");
            assert_eq!(copies.tracked_lines(), reads.tracked_lines(), "seed {seed} step {step}");
            for l in reads.tracked_lines() {
                assert_eq!(copies.current_line(l), reads.current_line(l), "seed {seed} step {step} line {l}");
            }
            assert_eq!(reads.lines.bases.len(), 0, "a readable file keeps no copies");
        }
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn unpersisted_stores_are_one_entry_each_in_program_order() {
    let mut d = PmDevice::new(PmConfig::default());
    let zero = |_| [0u8; 64];
    // A 16-byte store across a line boundary, then an 8-byte one before it in the same lines,
    // then one persisted by its writer.
    let a = d.store(1, 60, &[0; 16], &[1; 16], StoreKind::Cached, zero);
    let b = d.store(2, 8, &[0; 8], &[2; 8], StoreKind::Cached, zero);
    let c = d.store(1, 200, &[0; 8], &[3; 8], StoreKind::Cached, zero);
    d.flush(1, 192, FlushKind::Clwb);
    d.fence(1, FenceKind::Sfence);
    for rule in [DurabilityRule::Hw, DurabilityRule::Own] {
        let u = d.unpersisted(rule);
        let got: Vec<(u64, Tid, u64, u64, u64)> =
            u.iter().map(|u| (u.store.0, u.tid, u.addr, u.len, u.bytes)).collect();
        assert_eq!(got, vec![(a.0, 1, 60, 16, 16), (b.0, 2, 8, 8, 8)], "{rule:?}");
        assert_eq!(d.unpersisted_ids(rule), vec![a.0, b.0]);
        assert!(!d.unpersisted_ids(rule).contains(&c.0));
    }
}
