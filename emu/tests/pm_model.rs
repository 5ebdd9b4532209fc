//! Tests of the PM device model (`emu::pm`).
//!
//! Two kinds: Px86-style litmus tests (short event sequences with the exact set of crash images
//! and durability answers the model must give, written from docs/pm-model.md), and a property test
//! against an independent reference model. The reference keeps no incremental state at all: it
//! stores the whole event history and answers every question by replaying it declaratively
//! ("the floor is the newest version some thread captured with a flush that the same thread later
//! fenced", "an NT chunk is complete if its thread fenced after it", ...), so it shares no
//! mechanism with the device (captures, folding, shadows, live stores).
//!
//! What these tests cannot show: that the model matches real hardware. They check the device
//! against the model as docs/pm-model.md states it.

use std::collections::{BTreeMap, BTreeSet};

use emu::pm::*;
use proptest::prelude::*;

const A: Tid = 1;
const B: Tid = 2;

// ---------------------------------------------------------------------------------------------
// A small machine: the device plus the guest memory behind it.
// ---------------------------------------------------------------------------------------------

/// Initial contents of line `l` in the property test (zeros in the litmus tests).
fn pattern(l: u64) -> [u8; 64] {
    let mut c = [0u8; 64];
    for (i, b) in c.iter_mut().enumerate() {
        *b = (l as u8).wrapping_mul(64).wrapping_add(i as u8) | 0x80;
    }
    c
}

struct Sim {
    dev: PmDevice,
    mem: BTreeMap<u64, [u8; 64]>,
    init: fn(u64) -> [u8; 64],
    /// Apply stores to guest memory before calling the device (as from a post-write hook).
    write_first: bool,
    next_seq: u64,
}

impl Sim {
    fn new(config: PmConfig) -> Sim {
        Sim { dev: PmDevice::new(config), mem: BTreeMap::new(), init: |_| [0; 64], write_first: false, next_seq: 1 }
    }

    fn adr() -> Sim {
        Sim::new(PmConfig::default())
    }

    fn line(&self, l: u64) -> [u8; 64] {
        self.mem.get(&l).copied().unwrap_or_else(|| (self.init)(l))
    }

    fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        (0..len as u64).map(|i| self.line((addr + i) / 64)[((addr + i) % 64) as usize]).collect()
    }

    fn write(&mut self, addr: u64, bytes: &[u8]) {
        for (i, &b) in bytes.iter().enumerate() {
            let a = addr + i as u64;
            let mut l = self.line(a / 64);
            l[(a % 64) as usize] = b;
            self.mem.insert(a / 64, l);
        }
    }

    fn store(&mut self, tid: Tid, addr: u64, bytes: &[u8], kind: StoreKind) -> StoreId {
        let old = self.read(addr, bytes.len());
        if self.write_first {
            self.write(addr, bytes);
        }
        let (mem, init) = (&self.mem, self.init);
        let id = self.dev.store(tid, addr, &old, bytes, kind, |l| mem.get(&l).copied().unwrap_or_else(|| init(l)));
        if !self.write_first {
            self.write(addr, bytes);
        }
        id
    }

    fn st(&mut self, tid: Tid, addr: u64, v: u8) -> StoreId {
        self.store(tid, addr, &[v], StoreKind::Cached)
    }

    fn nt(&mut self, tid: Tid, addr: u64, bytes: &[u8]) -> StoreId {
        self.store(tid, addr, bytes, StoreKind::NonTemporal)
    }

    /// A rep string instruction writing `bytes` at `addr`, `elem` bytes per element.
    fn rep(&mut self, tid: Tid, addr: u64, bytes: &[u8], elem: usize) -> Vec<StoreId> {
        let seq = self.next_seq;
        self.next_seq += 1;
        bytes
            .chunks(elem)
            .enumerate()
            .map(|(i, c)| self.store(tid, addr + (i * elem) as u64, c, StoreKind::RepString { seq }))
            .collect()
    }

    fn clwb(&mut self, tid: Tid, addr: u64) -> FlushOutcome {
        self.dev.flush(tid, addr, FlushKind::Clwb)
    }

    fn sfence(&mut self, tid: Tid) -> FenceOutcome {
        self.dev.fence(tid, FenceKind::Sfence)
    }

    /// Every distinct tuple of the bytes at `addrs` over all crash images.
    fn values(&self, addrs: &[u64]) -> BTreeSet<Vec<u8>> {
        let space = self.dev.crash_space();
        assert!(space.count().unwrap() <= 1 << 16, "space too big for a litmus test");
        space
            .enumerate()
            .map(|(_, image)| {
                let lines: BTreeMap<u64, [u8; 64]> = image.into_iter().collect();
                addrs
                    .iter()
                    .map(|&a| lines.get(&(a / 64)).copied().unwrap_or_else(|| self.line(a / 64))[(a % 64) as usize])
                    .collect()
            })
            .collect()
    }
}

fn set(v: &[&[u8]]) -> BTreeSet<Vec<u8>> {
    v.iter().map(|s| s.to_vec()).collect()
}

// Addresses: X and Y on different lines, X2 in X's line (another word).
const X: u64 = 0;
const X2: u64 = 8;
const Y: u64 = 64;

// ---------------------------------------------------------------------------------------------
// Litmus tests.
// ---------------------------------------------------------------------------------------------

#[test]
fn flushed_and_fenced_store_is_durable_the_next_is_not() {
    // store x; clwb x; sfence; store y  →  x = new in every image, y either.
    let mut s = Sim::adr();
    s.st(A, X, 1);
    assert!(s.clwb(A, X).dirty);
    let f = s.sfence(A);
    assert!(!f.redundant);
    assert_eq!(f.lines_persisted, 1);
    s.st(A, Y, 1);
    assert_eq!(s.values(&[X, Y]), set(&[&[1, 0], &[1, 1]]));
    assert!(s.dev.durable_hw(X, 1) && s.dev.durable_own(X, 1));
    assert!(!s.dev.durable_hw(Y, 1));
}

#[test]
fn same_line_stores_persist_in_order() {
    // store x; store y (same line)  →  {old, x only, x+y}, never y without x.
    let mut s = Sim::adr();
    s.st(A, X, 1);
    s.st(A, X2, 2);
    assert_eq!(s.values(&[X, X2]), set(&[&[0, 0], &[1, 0], &[1, 2]]));
}

#[test]
fn different_lines_persist_independently() {
    let mut s = Sim::adr();
    s.st(A, X, 1);
    s.st(A, Y, 2);
    assert_eq!(s.values(&[X, Y]), set(&[&[0, 0], &[1, 0], &[0, 2], &[1, 2]]));
    assert_eq!(s.dev.crash_space().count(), Some(4));
}

#[test]
fn flush_without_fence_persists_nothing() {
    let mut s = Sim::adr();
    s.st(A, X, 1);
    s.clwb(A, X);
    assert_eq!(s.values(&[X]), set(&[&[0], &[1]]));
    assert!(!s.dev.durable_hw(X, 1));
    let u = s.dev.unfenced_flushes(A);
    assert_eq!(u.len(), 1);
    assert_eq!(u[0].line, 0);
    assert_eq!(s.dev.threads_with_pending(), vec![A]);
    s.sfence(A);
    assert!(s.dev.unfenced_flushes(A).is_empty());
    assert_eq!(s.values(&[X]), set(&[&[1]]));
}

#[test]
fn another_threads_flush_and_fence_is_durable_hw_not_own() {
    let mut s = Sim::adr();
    let id = s.st(A, X, 1);
    s.clwb(B, X);
    let mut reported = Vec::new();
    s.dev.fence_with(B, FenceKind::Sfence, |p| reported.push(*p));
    assert!(s.dev.durable_hw(X, 1));
    assert!(!s.dev.durable_own(X, 1));
    assert_eq!(s.values(&[X]), set(&[&[1]]));
    assert_eq!(reported.len(), 1);
    assert_eq!((reported[0].store, reported[0].hw, reported[0].own), (id, true, false));
    let info = s.dev.persist_info(X).unwrap();
    assert_eq!(info.writer, A);
    assert_eq!(info.hw.unwrap().tid, B);
    assert!(info.own.is_none() && info.durable_hw && !info.durable_own);
    assert!(s.dev.unpersisted(DurabilityRule::Hw).is_empty());
    assert_eq!(s.dev.unpersisted(DurabilityRule::Own)[0].store, id);
    // The writer's own flush of the (hardware-clean) line, then its fence: durable_own.
    assert!(!s.clwb(A, X).dirty);
    s.sfence(A);
    assert!(s.dev.durable_own(X, 1));
    assert!(s.dev.persist_info(X).is_none());
    assert_eq!(s.dev.stats().lines, 0);
}

#[test]
fn another_threads_fence_does_not_complete_my_flush() {
    let mut s = Sim::adr();
    s.st(A, X, 1);
    s.clwb(A, X);
    assert!(s.sfence(B).redundant);
    assert!(!s.dev.durable_hw(X, 1));
    assert_eq!(s.values(&[X]), set(&[&[0], &[1]]));
    s.sfence(A);
    assert!(s.dev.durable_own(X, 1));
}

#[test]
fn clflush_persists_at_once_under_intel_but_needs_a_fence_under_strict() {
    let mut s = Sim::adr();
    s.st(A, X, 1);
    let f = s.dev.flush(A, X, FlushKind::Clflush);
    assert!(f.dirty && f.persisted);
    assert!(s.dev.durable_own(X, 1));
    assert_eq!(s.values(&[X]), set(&[&[1]]));

    let mut s = Sim::new(PmConfig { flush_model: FlushModel::Strict, ..PmConfig::default() });
    s.st(A, X, 1);
    let f = s.dev.flush(A, X, FlushKind::Clflush);
    assert!(f.dirty && !f.persisted);
    assert_eq!(s.values(&[X]), set(&[&[0], &[1]]));
    s.sfence(A);
    assert!(s.dev.durable_own(X, 1));
}

#[test]
fn flush_captures_only_what_was_there() {
    // store x; clwb; store x2 (same line); sfence → x durable, x2 either.
    let mut s = Sim::adr();
    s.st(A, X, 1);
    s.clwb(A, X);
    s.st(A, X2, 2);
    s.sfence(A);
    assert_eq!(s.values(&[X, X2]), set(&[&[1, 0], &[1, 2]]));
    assert!(s.dev.durable_own(X, 1));
    assert!(!s.dev.durable_hw(X2, 1));
}

#[test]
fn locked_instruction_is_a_fence_lfence_is_not_modelled() {
    let mut s = Sim::adr();
    s.st(A, X, 1);
    s.clwb(A, X);
    let f = s.dev.fence(A, FenceKind::Locked);
    assert!(!f.redundant && f.lines_persisted == 1);
    assert!(s.dev.durable_own(X, 1));
}

#[test]
fn clean_flush_and_redundant_fence_are_reported() {
    let mut s = Sim::adr();
    assert!(!s.clwb(A, X).dirty);
    assert!(s.sfence(A).redundant);
    s.st(A, X, 1);
    let f1 = s.clwb(A, X);
    let f2 = s.clwb(A, X);
    assert!(f1.dirty && !f1.already_captured);
    assert!(f2.dirty && f2.already_captured);
    s.sfence(A);
    assert!(!s.clwb(A, X).dirty);
}

#[test]
fn nt_store_is_pending_until_its_threads_fence() {
    let mut s = Sim::adr();
    s.nt(A, X, &[1; 8]);
    assert_eq!(s.values(&[X, X + 7]), set(&[&[0, 0], &[1, 1]]));
    assert!(!s.dev.durable_hw(X, 8));
    assert_eq!(s.dev.pending_nt(A).len(), 1);
    assert!(s.sfence(B).redundant);
    assert!(!s.dev.durable_hw(X, 8));
    let f = s.sfence(A);
    assert_eq!(f.nt_completed, 1);
    assert!(s.dev.durable_own(X, 8));
    assert_eq!(s.values(&[X]), set(&[&[1]]));
    assert!(s.dev.pending_nt(A).is_empty());
}

#[test]
fn nt_chunks_are_independent_8_byte_pieces() {
    // A 16-byte movntdq arrives as two 8-byte accesses; a 16-byte NT store in one call splits too.
    let mut s = Sim::adr();
    s.nt(A, X, &[1; 16]);
    assert_eq!(s.values(&[X, X + 8]), set(&[&[0, 0], &[1, 0], &[0, 1], &[1, 1]]));
}

#[test]
fn nt_store_acts_as_clflushopt_of_earlier_stores() {
    let mut s = Sim::adr();
    s.st(A, X, 5);
    s.nt(A, X2, &[1; 8]);
    s.sfence(A);
    assert!(s.dev.durable_own(X, 1) && s.dev.durable_own(X2, 8));
    assert_eq!(s.values(&[X, X2]), set(&[&[5, 1]]));
}

#[test]
fn pending_nt_chunk_is_not_ordered_with_later_cached_stores() {
    // NT x=1, then cached x=2 (same bytes) before the fence: the chunk may land before or after
    // the cached version's writeback, or not at all: x ∈ {0, 1, 2}.
    let mut s = Sim::adr();
    s.nt(A, X, &[1; 8]);
    s.st(A, X, 2);
    assert_eq!(s.values(&[X]), set(&[&[0], &[1], &[2]]));
    // Different bytes of the same line: every combination.
    let mut s = Sim::adr();
    s.nt(A, X, &[1; 8]);
    s.st(A, X2, 2);
    assert_eq!(s.values(&[X, X2]), set(&[&[0, 0], &[1, 0], &[0, 2], &[1, 2]]));
    // After the fence the chunk is durable at its program-order position: under the (still
    // unflushed) cached store, over the floor.
    let mut s = Sim::adr();
    s.nt(A, X, &[1; 8]);
    s.st(A, X, 2);
    s.sfence(A);
    assert_eq!(s.values(&[X]), set(&[&[1], &[2]]));
    assert!(!s.dev.durable_hw(X, 1));
    s.clwb(A, X);
    s.sfence(A);
    assert_eq!(s.values(&[X]), set(&[&[2]]));
    assert_eq!(s.dev.stats().lines, 0);
}

#[test]
fn pending_nt_chunk_may_land_over_a_persisted_younger_store() {
    // NT x=1 by A; B stores x=2, flushes and fences. A's chunk is still in A's write-combining
    // buffer and may land later: x ∈ {1, 2}; durable_hw is false until A fences.
    let mut s = Sim::adr();
    s.nt(A, X, &[1; 8]);
    s.st(B, X, 2);
    s.clwb(B, X);
    s.sfence(B);
    assert_eq!(s.values(&[X]), set(&[&[1], &[2]]));
    assert!(!s.dev.durable_hw(X, 1));
    // B's store is durable by both rules, so the device has forgotten it; the older chunk is
    // what keeps the byte open.
    assert_eq!(s.dev.persist_info(X), None);
    assert_eq!(s.dev.pending_nt(A).len(), 1);
    s.sfence(A);
    // Landed in program order: under B's store.
    assert_eq!(s.values(&[X, X + 1]), set(&[&[2, 1]]));
    assert!(s.dev.durable_hw(X, 8));
}

#[test]
fn eadr_cached_stores_are_durable_nt_stores_are_not() {
    let mut s = Sim::new(PmConfig { persistency: Persistency::Eadr, ..PmConfig::default() });
    s.st(A, X, 1);
    assert!(s.dev.durable_own(X, 1));
    assert!(s.dev.crash_space().is_empty());
    assert_eq!(s.dev.stats().lines, 0);
    assert!(!s.clwb(A, X).dirty);
    s.nt(A, Y, &[2; 8]);
    assert!(!s.dev.durable_hw(Y, 8));
    assert_eq!(s.values(&[X, Y]), set(&[&[1, 0], &[1, 2]]));
    // A cached store over a pending chunk: durable at once, but the chunk may still land.
    s.st(A, Y, 3);
    assert_eq!(s.values(&[Y, Y + 1]), set(&[&[3, 0], &[2, 2]]));
    s.sfence(A);
    assert_eq!(s.values(&[Y, Y + 1]), set(&[&[3, 2]]));
    assert!(s.dev.durable_own(Y, 8));
}

#[test]
fn word8_atomicity_lets_words_of_a_line_persist_independently() {
    let cfg = PmConfig { atomicity: Atomicity::Word8, ..PmConfig::default() };
    let mut s = Sim::new(cfg);
    s.st(A, X, 1);
    s.st(A, X2, 2);
    assert_eq!(s.values(&[X, X2]), set(&[&[0, 0], &[1, 0], &[0, 2], &[1, 2]]));
    // Within one word, bytes stay ordered (a word does not tear).
    let mut s = Sim::new(cfg);
    s.st(A, X, 1);
    s.st(A, X + 1, 2);
    assert_eq!(s.values(&[X, X + 1]), set(&[&[0, 0], &[1, 0], &[1, 2]]));
}

#[test]
fn persist_range_makes_a_range_durable() {
    let mut s = Sim::adr();
    s.st(A, X, 1);
    s.st(B, Y, 2);
    s.st(A, 200, 3);
    s.nt(A, X2, &[4; 8]);
    let o = s.dev.persist_range(A, 0, 128);
    assert_eq!(o.lines_persisted, 2);
    assert_eq!(o.nt_completed, 1);
    assert!(s.dev.durable_own(X, 1) && s.dev.durable_own(X2, 8));
    assert!(s.dev.durable_hw(Y, 1) && !s.dev.durable_own(Y, 1));
    assert!(!s.dev.durable_hw(200, 1));
    assert_eq!(s.values(&[X, Y, 200]), set(&[&[1, 2, 0], &[1, 2, 3]]));
    assert!(s.dev.persist_range(A, 1 << 40, 4096).redundant);
}

#[test]
fn a_store_crossing_lines_is_split() {
    let mut s = Sim::adr();
    s.store(A, 60, &[9; 8], StoreKind::Cached);
    assert_eq!(s.values(&[60, 64]), set(&[&[0, 0], &[9, 0], &[0, 9], &[9, 9]]));
    let u = s.dev.unpersisted(DurabilityRule::Hw);
    assert_eq!(u.len(), 1);
    assert_eq!((u[0].addr, u[0].len, u[0].bytes), (60, 8, 8));
}

#[test]
fn rep_string_words_in_a_line_persist_as_an_unordered_set() {
    let mut s = Sim::adr();
    let ids = s.rep(A, X, &[7; 32], 1);
    assert!(ids.iter().all(|&i| i == ids[0]), "one id per instruction");
    let addrs = [X, X + 8, X + 16, X + 24];
    assert_eq!(s.values(&addrs).len(), 16);
    // A later store to the line orders after the whole instruction.
    s.st(A, X + 40, 1);
    let v = s.values(&[X, X + 8, X + 16, X + 24, X + 40]);
    assert_eq!(v.len(), 17);
    assert!(v.iter().all(|t| t[4] == 0 || t[..4] == [7, 7, 7, 7]));
    // Two rep instructions get different ids.
    let ids2 = s.rep(A, Y, &[1; 16], 8);
    assert_ne!(ids2[0], ids[0]);
    assert_eq!(ids2[0], ids2[1]);
}

#[test]
fn rep_string_across_a_flush_splits() {
    // A flush between elements (emulator preempted mid-instruction) ends the unordered set.
    let mut s = Sim::adr();
    let seq = 99;
    let a = s.store(A, X, &[1; 8], StoreKind::RepString { seq });
    s.clwb(A, X);
    let b = s.store(A, X2, &[2; 8], StoreKind::RepString { seq });
    assert_ne!(a, b);
    s.sfence(A);
    assert_eq!(s.values(&[X, X2]), set(&[&[1, 0], &[1, 2]]));
}

#[test]
fn unpersisted_lists_only_latest_stores_once_each() {
    let mut s = Sim::adr();
    let _overwritten = s.store(A, X, &[1; 8], StoreKind::Cached);
    let a = s.store(A, X, &[2; 4], StoreKind::Cached);
    let b = s.store(B, Y, &[3; 2], StoreKind::Cached);
    let u = s.dev.unpersisted(DurabilityRule::Hw);
    let ids: Vec<StoreId> = u.iter().map(|u| u.store).collect();
    assert_eq!(ids.len(), 3, "the first store still owns bytes 4..8");
    assert_eq!(ids[1..], [a, b]);
    assert_eq!((u[0].addr, u[0].len, u[0].bytes), (4, 4, 4));
    assert_eq!((u[2].tid, u[2].addr, u[2].len), (B, Y, 2));
}

#[test]
fn fence_reports_persisted_stores_in_line_order() {
    let mut s = Sim::adr();
    let y = s.st(A, Y, 1);
    let x = s.st(A, X, 1);
    s.clwb(A, Y);
    s.clwb(A, X);
    let mut r = Vec::new();
    let o = s.dev.fence_with(A, FenceKind::Mfence, |p| r.push((p.line, p.store, p.hw, p.own)));
    assert_eq!(r, vec![(0, x, true, true), (1, y, true, true)]);
    assert_eq!((o.lines_persisted, o.stores_hw, o.stores_own), (2, 2, 2));
    assert_eq!(s.dev.persist_info(X), None);
}

#[test]
fn device_memory_follows_unpersisted_data_not_store_count() {
    let mut s = Sim::adr();
    for i in 0..10_000u64 {
        let a = (i % 512) * 8;
        s.st(A, a, i as u8);
        if i % 8 == 7 {
            s.clwb(A, a);
            s.sfence(A);
        }
    }
    let st = s.dev.stats();
    assert!(st.lines <= 1 && st.versions <= 8, "{st:?}");
}

#[test]
fn version_limit_merges_old_versions_and_never_invents_images() {
    let mut exact = Sim::adr();
    let mut capped = Sim::adr();
    capped.dev.set_version_limit(4);
    for i in 0..12u8 {
        let a = u64::from(i % 8);
        exact.st(A, a, i + 1);
        capped.st(A, a, i + 1);
    }
    let all: Vec<u64> = (0..8).collect();
    let e = exact.values(&all);
    let c = capped.values(&all);
    assert!(c.is_subset(&e));
    assert!(c.len() < e.len() && c.len() >= 3);
    assert!(capped.dev.stats().merged_versions > 0);
    assert!(capped.dev.crash_space().lines()[0].merged);
    // The current and the floor contents are always there.
    assert!(c.contains(&vec![0; 8]) && c.contains(&capped.read(0, 8)));
}

#[test]
fn snapshot_is_independent() {
    let mut s = Sim::adr();
    s.st(A, X, 1);
    let snap = s.dev.snapshot();
    s.clwb(A, X);
    s.sfence(A);
    assert!(s.dev.durable_hw(X, 1));
    assert!(!snap.durable_hw(X, 1));
    assert_eq!(snap.crash_space().count(), Some(2));
}

#[test]
fn read_line_may_see_memory_before_or_after_the_store() {
    for write_first in [false, true] {
        let mut s = Sim::adr();
        s.write_first = write_first;
        s.write(X, &[5; 64]);
        s.st(A, X + 3, 9);
        let sp = s.dev.crash_space();
        let floor = sp.lines()[0].versions[0].content;
        assert_eq!(floor, [5; 64]);
        assert_eq!(s.dev.current_line(0).unwrap(), s.line(0));
    }
}

#[test]
fn crash_choice_errors_and_options_parse() {
    let mut s = Sim::adr();
    s.st(A, X, 1);
    let sp = s.dev.crash_space();
    assert!(sp.image(&[]).is_err());
    assert!(sp.image(&[2]).is_err());
    assert_eq!(sp.image(&[1]).unwrap()[0].1[0], 1);
    assert_eq!(sp.count_log2(), 1.0);
    assert_eq!("word8".parse::<Atomicity>().unwrap(), Atomicity::Word8);
    assert_eq!("strict".parse::<FlushModel>().unwrap(), FlushModel::Strict);
    assert_eq!("eadr".parse::<Persistency>().unwrap(), Persistency::Eadr);
    assert!("bogus".parse::<Persistency>().is_err());
    assert_eq!(Persistency::Eadr.to_string(), "eadr");
    assert_eq!(device_addr(3, 0x40), (3 << 40) | 0x40);
    assert_eq!(line_of(device_addr(3, 0x40)), (3 << 34) | 1);
}

// ---------------------------------------------------------------------------------------------
// The reference model: the whole history, replayed declaratively for every question.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum RKind {
    Cached,
    Nt,
    Rep(u64),
}

#[derive(Clone, Debug)]
enum REv {
    Store { tid: Tid, addr: u64, data: Vec<u8>, kind: RKind },
    Flush { tid: Tid, line: u64, kind: FlushKind },
    Fence { tid: Tid },
    Persist { tid: Tid, start: u64, len: u64 },
}

/// One write to one line: a cached unit (a plain store, or all of one rep instruction's elements
/// in the line) or one NT chunk (one NT store ∩ one aligned word).
#[derive(Clone, Debug)]
struct RWrite {
    /// Event index (for a rep unit: its first element).
    ev: usize,
    /// Event index of the last element (rep) or `ev`.
    last_ev: usize,
    tid: Tid,
    nt: bool,
    /// Byte offset → value (a rep unit: last element wins).
    bytes: BTreeMap<usize, u8>,
    /// Byte offset → event of the element that wrote it last (rep), or `ev`.
    byte_ev: BTreeMap<usize, usize>,
}

struct Reference {
    cfg: PmConfig,
    init: fn(u64) -> [u8; 64],
    evs: Vec<REv>,
}

impl Reference {
    fn line_range(start: u64, len: u64) -> std::ops::RangeInclusive<u64> {
        start / 64..=(start + len - 1) / 64
    }

    /// First event of the rep instruction run event `i` belongs to.
    fn run_start(&self, i: usize) -> usize {
        let key = |j: usize| match &self.evs[j] {
            REv::Store { tid, kind: RKind::Rep(s), .. } => Some((*tid, *s)),
            _ => None,
        };
        let k = key(i);
        let mut j = i;
        while j > 0 && k.is_some() && key(j - 1) == k {
            j -= 1;
        }
        j
    }

    /// All writes to `line` in program order.
    fn writes(&self, line: u64) -> Vec<RWrite> {
        let mut out: Vec<RWrite> = Vec::new();
        for (i, ev) in self.evs.iter().enumerate() {
            let REv::Store { tid, addr, data, kind } = ev else {
                continue;
            };
            let mine: Vec<(usize, u8)> = data
                .iter()
                .enumerate()
                .filter(|(k, _)| (addr + *k as u64) / 64 == line)
                .map(|(k, &v)| (((addr + k as u64) % 64) as usize, v))
                .collect();
            if mine.is_empty() {
                continue;
            }
            match kind {
                RKind::Cached => out.push(RWrite {
                    ev: i,
                    last_ev: i,
                    tid: *tid,
                    nt: false,
                    bytes: mine.iter().copied().collect(),
                    byte_ev: mine.iter().map(|&(o, _)| (o, i)).collect(),
                }),
                RKind::Nt => {
                    for w in 0..8 {
                        let part: Vec<(usize, u8)> = mine.iter().copied().filter(|(o, _)| o / 8 == w).collect();
                        if !part.is_empty() {
                            out.push(RWrite {
                                ev: i,
                                last_ev: i,
                                tid: *tid,
                                nt: true,
                                bytes: part.iter().copied().collect(),
                                byte_ev: part.iter().map(|&(o, _)| (o, i)).collect(),
                            });
                        }
                    }
                }
                RKind::Rep(_) => {
                    let start = self.run_start(i);
                    let same_unit = out.last().is_some_and(|w| !w.nt && w.ev == start && start != i);
                    if same_unit {
                        let w = out.last_mut().unwrap();
                        w.last_ev = i;
                        for (o, v) in mine {
                            w.bytes.insert(o, v);
                            w.byte_ev.insert(o, i);
                        }
                    } else {
                        out.push(RWrite {
                            ev: start,
                            last_ev: i,
                            tid: *tid,
                            nt: false,
                            bytes: mine.iter().copied().collect(),
                            byte_ev: mine.iter().map(|&(o, _)| (o, i)).collect(),
                        });
                    }
                }
            }
        }
        out
    }

    fn is_rep(&self, w: &RWrite) -> bool {
        matches!(&self.evs[w.ev], REv::Store { kind: RKind::Rep(_), .. })
    }

    /// Does a flush-like event of `tid` on `line` at index `e` count as persisted by a fence?
    fn fenced_after(&self, tid: Tid, e: usize) -> bool {
        self.evs[e + 1..].iter().any(|ev| matches!(ev, REv::Fence { tid: t } if *t == tid))
    }

    fn persist_covers(&self, ev: &REv, tid: Option<Tid>, line: u64) -> bool {
        matches!(ev, REv::Persist { tid: t, start, len }
            if tid.is_none_or(|x| x == *t) && *len > 0 && Self::line_range(*start, *len).contains(&line))
    }

    /// Event indices at which some thread's persist of `line` takes effect, with the thread
    /// (the hardware floor's witnesses): flush+fence pairs (at the flush), clflush (Intel),
    /// persist_range, and NT stores' implicit clflushopt.
    fn persist_points(&self, line: u64) -> Vec<(usize, Tid)> {
        let mut v = Vec::new();
        for (i, ev) in self.evs.iter().enumerate() {
            match ev {
                REv::Flush { tid, line: l, kind } if *l == line => {
                    let immediate = *kind == FlushKind::Clflush && self.cfg.flush_model == FlushModel::Intel;
                    if immediate || self.fenced_after(*tid, i) {
                        v.push((i, *tid));
                    }
                }
                REv::Store { tid, addr, data, kind: RKind::Nt }
                    if Self::line_range(*addr, data.len() as u64).contains(&line) && self.fenced_after(*tid, i) =>
                {
                    v.push((i, *tid));
                }
                _ if self.persist_covers(ev, None, line) => {
                    let REv::Persist { tid, .. } = ev else { unreachable!() };
                    v.push((i, *tid));
                }
                _ => {}
            }
        }
        v
    }

    /// Number of cached units of `line` (in `writes`) known persisted.
    fn floor(&self, writes: &[RWrite], line: u64) -> usize {
        let units: Vec<&RWrite> = writes.iter().filter(|w| !w.nt).collect();
        if self.cfg.persistency == Persistency::Eadr {
            return units.len();
        }
        self.persist_points(line).iter().map(|&(e, _)| units.iter().filter(|u| u.ev < e).count()).max().unwrap_or(0)
    }

    fn nt_complete(&self, w: &RWrite, line: u64) -> bool {
        self.evs[w.ev + 1..]
            .iter()
            .any(|ev| matches!(ev, REv::Fence { tid } if *tid == w.tid) || self.persist_covers(ev, Some(w.tid), line))
    }

    fn current(&self, line: u64) -> [u8; 64] {
        let mut c = (self.init)(line);
        for w in self.writes(line) {
            for (&o, &v) in &w.bytes {
                c[o] = v;
            }
        }
        c
    }

    /// Line contents for a cut: cached units `< cut` fully, unit `cut - 1` restricted to `words`
    /// (if given), completed chunks always, in program order; no pending chunk.
    fn cut_content(&self, line: u64, writes: &[RWrite], cut: usize, words: Option<u8>) -> [u8; 64] {
        let mut c = (self.init)(line);
        let mut unit = 0;
        for w in writes {
            if w.nt {
                if self.nt_complete(w, line) {
                    for (&o, &v) in &w.bytes {
                        c[o] = v;
                    }
                }
                continue;
            }
            unit += 1;
            if unit > cut {
                continue;
            }
            for (&o, &v) in &w.bytes {
                let in_words = words.is_none_or(|m| m >> (o / 8) & 1 == 1);
                if unit < cut || in_words {
                    c[o] = v;
                }
            }
        }
        c
    }

    fn pending(&self, line: u64, writes: &[RWrite]) -> Vec<RWrite> {
        writes.iter().filter(|w| w.nt && !self.nt_complete(w, line)).cloned().collect()
    }

    /// The cached-version contents allowed for `line` (Line atomicity), before pending chunks.
    fn line_versions(&self, line: u64) -> BTreeSet<[u8; 64]> {
        let writes = self.writes(line);
        let f = self.floor(&writes, line);
        let units: Vec<&RWrite> = writes.iter().filter(|w| !w.nt).collect();
        let mut out = BTreeSet::new();
        for cut in f..=units.len() {
            out.insert(self.cut_content(line, &writes, cut, None));
            if cut > f && self.is_rep(units[cut - 1]) {
                let words = units[cut - 1].bytes.keys().fold(0u8, |m, o| m | 1 << (o / 8));
                for sub in 1..=255u8 {
                    if sub & !words == 0 {
                        out.insert(self.cut_content(line, &writes, cut, Some(sub)));
                    }
                }
            }
        }
        out
    }

    /// Word8: for each word, the values it may take (before pending chunks).
    fn word_values(&self, line: u64) -> [BTreeSet<[u8; 8]>; 8] {
        let writes = self.writes(line);
        let f = self.floor(&writes, line);
        let n = writes.iter().filter(|w| !w.nt).count();
        let mut out: [BTreeSet<[u8; 8]>; 8] = Default::default();
        for cut in f..=n {
            let c = self.cut_content(line, &writes, cut, None);
            for (w, set) in out.iter_mut().enumerate() {
                set.insert(c[w * 8..w * 8 + 8].try_into().unwrap());
            }
        }
        out
    }

    /// Every image of `line`: a version (per word under Word8), then any subset of the pending
    /// chunks overlaid in program order. `None` if there are more than `limit`.
    fn line_images(&self, line: u64, limit: usize) -> Option<BTreeSet<[u8; 64]>> {
        let writes = self.writes(line);
        let pending = self.pending(line, &writes);
        let bases: Vec<[u8; 64]> = match self.cfg.atomicity {
            Atomicity::Line => self.line_versions(line).into_iter().collect(),
            Atomicity::Word8 => {
                let wv = self.word_values(line);
                let total: usize = wv.iter().map(|s| s.len()).product();
                if total > limit {
                    return None;
                }
                let mut acc = vec![[0u8; 64]];
                for (w, vals) in wv.iter().enumerate() {
                    let mut next = Vec::new();
                    for a in &acc {
                        for v in vals {
                            let mut c = *a;
                            c[w * 8..w * 8 + 8].copy_from_slice(v);
                            next.push(c);
                        }
                    }
                    acc = next;
                }
                acc
            }
        };
        if bases.len() << pending.len() > limit {
            return None;
        }
        let mut out = BTreeSet::new();
        for b in &bases {
            for s in 0u32..1 << pending.len() {
                let mut c = *b;
                for (k, p) in pending.iter().enumerate() {
                    if s >> k & 1 == 1 {
                        for (&o, &v) in &p.bytes {
                            c[o] = v;
                        }
                    }
                }
                out.insert(c);
            }
        }
        Some(out)
    }

    /// The latest write to byte `o` of `line`, with the event of its element.
    fn latest(&self, writes: &[RWrite], o: usize) -> Option<(usize, RWrite, usize)> {
        writes
            .iter()
            .enumerate()
            .filter(|(_, w)| w.bytes.contains_key(&o))
            .max_by_key(|(_, w)| w.byte_ev[&o])
            .map(|(k, w)| (k, w.clone(), w.byte_ev[&o]))
    }

    /// Is the latest write to the byte durable by the hardware rule (ignoring older pending
    /// chunks)?
    fn latest_hw(&self, line: u64, writes: &[RWrite], k: usize, w: &RWrite) -> bool {
        if w.nt {
            return self.nt_complete(w, line);
        }
        let unit = writes[..=k].iter().filter(|x| !x.nt).count();
        unit <= self.floor(writes, line)
    }

    /// Did the writer itself persist its (cached) write at element event `e`?
    fn latest_own(&self, line: u64, w: &RWrite, e: usize) -> bool {
        if w.nt {
            return self.nt_complete(w, line);
        }
        if self.cfg.persistency == Persistency::Eadr {
            return true;
        }
        self.persist_points(line).iter().any(|&(p, t)| t == w.tid && p > e)
    }

    /// (durable_hw, durable_own) of every byte of `line`.
    fn durable(&self, line: u64) -> Vec<(bool, bool)> {
        let writes = self.writes(line);
        let pending = self.pending(line, &writes);
        (0..64)
            .map(|o| {
                let covered = pending.iter().any(|p| p.bytes.contains_key(&o));
                let Some((k, w, e)) = self.latest(&writes, o) else {
                    return (true, true);
                };
                let hw = !covered && self.latest_hw(line, &writes, k, &w);
                (hw, hw && self.latest_own(line, &w, e))
            })
            .collect()
    }

    /// (event of the store, undurable byte count) of every latest write not durable by `rule`.
    fn unpersisted(&self, lines: &BTreeSet<u64>, own: bool) -> BTreeMap<usize, u64> {
        let mut out = BTreeMap::new();
        for &line in lines {
            let writes = self.writes(line);
            for o in 0..64 {
                if let Some((k, w, e)) = self.latest(&writes, o) {
                    let hw = self.latest_hw(line, &writes, k, &w);
                    let ok = if own { hw && self.latest_own(line, &w, e) } else { hw };
                    if !ok {
                        *out.entry(w.ev).or_insert(0) += 1;
                    }
                }
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// The property test.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    Store { tid: u8, line: u8, off: u8, size: u8 },
    Nt { tid: u8, line: u8, off: u8, size: u8 },
    Rep { tid: u8, line: u8, off: u8, len: u8, elem: u8 },
    Flush { tid: u8, line: u8, kind: u8 },
    Fence { tid: u8, kind: u8 },
    Persist { tid: u8, line: u8, lines: u8 },
}

fn op(threads: u8, lines: u8) -> impl Strategy<Value = Op> {
    let t = 0..threads;
    let l = 0..lines;
    prop_oneof![
        5 => (t.clone(), l.clone(), 0u8..64, prop::sample::select(vec![1u8, 2, 4, 8]))
            .prop_map(|(tid, line, off, size)| Op::Store { tid, line, off, size }),
        2 => (t.clone(), l.clone(), 0u8..16, prop::sample::select(vec![4u8, 8, 16]))
            .prop_map(|(tid, line, off, size)| Op::Nt { tid, line, off: off * 4, size }),
        1 => (t.clone(), l.clone(), 0u8..64, 1u8..24, prop::sample::select(vec![1u8, 8]))
            .prop_map(|(tid, line, off, len, elem)| Op::Rep { tid, line, off, len, elem }),
        4 => (t.clone(), l.clone(), 0u8..3)
            .prop_map(|(tid, line, kind)| Op::Flush { tid, line, kind }),
        3 => (t.clone(), 0u8..3).prop_map(|(tid, kind)| Op::Fence { tid, kind }),
        1 => (t, l, 1u8..3).prop_map(|(tid, line, lines)| Op::Persist { tid, line, lines }),
    ]
}

fn config() -> impl Strategy<Value = PmConfig> {
    (any::<bool>(), any::<bool>(), 0u8..4).prop_map(|(w8, strict, p)| PmConfig {
        atomicity: if w8 { Atomicity::Word8 } else { Atomicity::Line },
        flush_model: if strict { FlushModel::Strict } else { FlushModel::Intel },
        // eADR a quarter of the time.
        persistency: if p == 0 { Persistency::Eadr } else { Persistency::Adr },
    })
}

/// Runs `ops` on the device and the reference; checks durability after every op and the crash
/// space at the end.
fn check(cfg: PmConfig, ops: &[Op], write_first: bool, limit_images: usize) {
    let mut sim = Sim::new(cfg);
    sim.init = pattern;
    sim.write_first = write_first;
    let mut r = Reference { cfg, init: pattern, evs: Vec::new() };
    // Device store id of each reference event (stores only).
    let mut ids: BTreeMap<usize, StoreId> = BTreeMap::new();
    let mut val: u8 = 0;
    let mut vals = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                val = val.wrapping_add(1);
                val
            })
            .collect()
    };
    let mut touched: BTreeSet<u64> = BTreeSet::new();
    let tid = |t: u8| Tid::from(t) + 1;
    for op in ops {
        match *op {
            Op::Store { tid: t, line, off, size } | Op::Nt { tid: t, line, off, size } => {
                let nt = matches!(op, Op::Nt { .. });
                let addr = u64::from(line) * 64 + u64::from(off);
                let data = vals(usize::from(size));
                let kind = if nt { StoreKind::NonTemporal } else { StoreKind::Cached };
                ids.insert(r.evs.len(), sim.store(tid(t), addr, &data, kind));
                touched.extend(Reference::line_range(addr, data.len() as u64));
                r.evs.push(REv::Store { tid: tid(t), addr, data, kind: if nt { RKind::Nt } else { RKind::Cached } });
            }
            Op::Rep { tid: t, line, off, len, elem } => {
                let addr = u64::from(line) * 64 + u64::from(off);
                let data = vals(usize::from(len));
                let seq = sim.next_seq;
                let got = sim.rep(tid(t), addr, &data, usize::from(elem));
                for (i, c) in data.chunks(usize::from(elem)).enumerate() {
                    let a = addr + (i * usize::from(elem)) as u64;
                    ids.insert(r.evs.len(), got[i]);
                    touched.extend(Reference::line_range(a, c.len() as u64));
                    r.evs.push(REv::Store { tid: tid(t), addr: a, data: c.to_vec(), kind: RKind::Rep(seq) });
                }
            }
            Op::Flush { tid: t, line, kind } => {
                let kind = [FlushKind::Clflush, FlushKind::Clflushopt, FlushKind::Clwb][usize::from(kind)];
                let l = u64::from(line);
                sim.dev.flush(tid(t), l * 64 + 5, kind);
                r.evs.push(REv::Flush { tid: tid(t), line: l, kind });
            }
            Op::Fence { tid: t, kind } => {
                let kind = [FenceKind::Sfence, FenceKind::Mfence, FenceKind::Locked][usize::from(kind)];
                sim.dev.fence(tid(t), kind);
                r.evs.push(REv::Fence { tid: tid(t) });
            }
            Op::Persist { tid: t, line, lines } => {
                let (start, len) = (u64::from(line) * 64 + 3, u64::from(lines) * 64 - 10);
                sim.dev.persist_range(tid(t), start, len);
                r.evs.push(REv::Persist { tid: tid(t), start, len });
            }
        }
        // Durability of every byte of every touched line, after every event.
        for &l in &touched {
            for (o, (hw, own)) in r.durable(l).into_iter().enumerate() {
                let a = l * 64 + o as u64;
                assert_eq!(sim.dev.durable_hw(a, 1), hw, "durable_hw({a}) after {op:?}");
                assert_eq!(sim.dev.durable_own(a, 1), own, "durable_own({a}) after {op:?}");
            }
        }
    }
    // Contents.
    for &l in &touched {
        assert_eq!(sim.line(l), r.current(l), "guest memory of line {l}");
        if let Some(c) = sim.dev.current_line(l) {
            assert_eq!(c, r.current(l), "device's current line {l}");
        }
    }
    // Exit-check lists.
    for (own, rule) in [(false, DurabilityRule::Hw), (true, DurabilityRule::Own)] {
        let want: BTreeMap<StoreId, u64> =
            r.unpersisted(&touched, own).into_iter().map(|(ev, n)| (ids[&ev], n)).collect();
        let got: BTreeMap<StoreId, u64> = sim.dev.unpersisted(rule).into_iter().map(|u| (u.store, u.bytes)).collect();
        assert_eq!(got, want, "unpersisted({rule:?})");
    }
    // Crash images, line by line.
    let space = sim.dev.crash_space();
    let mut per_line: BTreeMap<u64, BTreeSet<[u8; 64]>> = BTreeMap::new();
    for &l in &touched {
        let Some(want) = r.line_images(l, limit_images) else {
            continue;
        };
        let got = device_line_images(&space, l, sim.line(l));
        assert_eq!(got, want, "crash images of line {l} ({cfg:?})");
        per_line.insert(l, want);
    }
    // The whole space through `enumerate`, when small: exactly the product of the lines' sets.
    if per_line.len() == touched.len() {
        let product: usize = per_line.values().map(|s| s.len()).product();
        if product <= 2000 && space.count().unwrap() <= 20_000 {
            let got: BTreeSet<Vec<[u8; 64]>> = space
                .enumerate()
                .map(|(_, img)| {
                    let m: BTreeMap<u64, [u8; 64]> = img.into_iter().collect();
                    touched.iter().map(|l| m.get(l).copied().unwrap_or(sim.line(*l))).collect()
                })
                .collect();
            let mut want: BTreeSet<Vec<[u8; 64]>> = [Vec::new()].into_iter().collect();
            for s in per_line.values() {
                want = want
                    .iter()
                    .flat_map(|prefix| {
                        s.iter().map(move |c| {
                            let mut v = prefix.clone();
                            v.push(*c);
                            v
                        })
                    })
                    .collect();
            }
            assert_eq!(got, want, "whole crash space");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2500, ..ProptestConfig::default() })]

    #[test]
    fn device_matches_reference(
        cfg in config(),
        (threads, lines) in (2u8..4, 2u8..5),
        seed_ops in prop::collection::vec(op(3, 4), 1..16),
        write_first in any::<bool>(),
    ) {
        // Keep threads and lines within the drawn bounds.
        let ops: Vec<Op> = seed_ops
            .into_iter()
            .map(|o| clamp(o, threads, lines))
            .collect();
        check(cfg, &ops, write_first, 4096);
    }
}

fn clamp(o: Op, threads: u8, lines: u8) -> Op {
    let t = |x: u8| x % threads;
    let l = |x: u8| x % lines;
    match o {
        Op::Store { tid, line, off, size } => Op::Store { tid: t(tid), line: l(line), off, size },
        Op::Nt { tid, line, off, size } => Op::Nt { tid: t(tid), line: l(line), off, size },
        Op::Rep { tid, line, off, len, elem } => Op::Rep { tid: t(tid), line: l(line), off, len, elem },
        Op::Flush { tid, line, kind } => Op::Flush { tid: t(tid), line: l(line), kind },
        Op::Fence { tid, kind } => Op::Fence { tid: t(tid), kind },
        Op::Persist { tid, line, lines: n } => Op::Persist { tid: t(tid), line: l(line), lines: n },
    }
}

/// The images of one line the device's crash space allows (`current` if the line is not in it),
/// enumerating only that line's dimensions.
fn device_line_images(space: &CrashSpace, l: u64, current: [u8; 64]) -> BTreeSet<[u8; 64]> {
    let Some(ls) = space.lines().iter().find(|ls| ls.line == l) else {
        return [current].into_iter().collect();
    };
    assert!(ls.versions.len() > 1 || !ls.chunks.is_empty());
    let dims: Vec<usize> = (0..space.dims().len()).filter(|&i| space.dims()[i].line == l).collect();
    let total: usize = dims.iter().map(|&i| space.dims()[i].size as usize).product();
    let mut set = BTreeSet::new();
    for mut k in 0..total {
        let mut choice = vec![0u32; space.dims().len()];
        for &i in &dims {
            let size = space.dims()[i].size as usize;
            choice[i] = (k % size) as u32;
            k /= size;
        }
        let img = space.image(&choice).unwrap();
        set.insert(img.iter().find(|(x, _)| *x == l).unwrap().1);
    }
    set
}

/// Runs `op` on `sim` (values from `val`); returns the lines it stored to.
fn run_op(sim: &mut Sim, op: &Op, val: &mut u8) -> Vec<u64> {
    let mut vals = |n: u8| -> Vec<u8> {
        (0..n)
            .map(|_| {
                *val = val.wrapping_add(1);
                *val
            })
            .collect()
    };
    let tid = |t: u8| Tid::from(t) + 1;
    match *op {
        Op::Store { tid: t, line, off, size } | Op::Nt { tid: t, line, off, size } => {
            let addr = u64::from(line) * 64 + u64::from(off);
            let kind = if matches!(op, Op::Nt { .. }) { StoreKind::NonTemporal } else { StoreKind::Cached };
            sim.store(tid(t), addr, &vals(size), kind);
            Reference::line_range(addr, u64::from(size)).collect()
        }
        Op::Rep { tid: t, line, off, len, elem } => {
            let addr = u64::from(line) * 64 + u64::from(off);
            sim.rep(tid(t), addr, &vals(len), usize::from(elem));
            Reference::line_range(addr, u64::from(len)).collect()
        }
        Op::Flush { tid: t, line, kind } => {
            let kind = [FlushKind::Clflush, FlushKind::Clflushopt, FlushKind::Clwb][usize::from(kind)];
            sim.dev.flush(tid(t), u64::from(line) * 64, kind);
            Vec::new()
        }
        Op::Fence { tid: t, .. } => {
            sim.dev.fence(tid(t), FenceKind::Sfence);
            Vec::new()
        }
        Op::Persist { tid: t, line, lines } => {
            sim.dev.persist_range(tid(t), u64::from(line) * 64, u64::from(lines) * 64);
            Vec::new()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The version limit may drop crash images of a line stored to many times, never add one.
    #[test]
    fn version_limit_only_removes_images(
        cfg in config(),
        ops in prop::collection::vec(op(2, 2), 1..40),
    ) {
        let mut exact = Sim::new(cfg);
        let mut capped = Sim::new(cfg);
        capped.dev.set_version_limit(2);
        let (mut v1, mut v2) = (0u8, 0u8);
        let mut touched = BTreeSet::new();
        for o in &ops {
            touched.extend(run_op(&mut exact, o, &mut v1));
            run_op(&mut capped, o, &mut v2);
        }
        let (se, sc) = (exact.dev.crash_space(), capped.dev.crash_space());
        for &l in &touched {
            if se.lines().iter().any(|ls| ls.line == l && ls.versions.len() << ls.chunks.len() > 1 << 14) {
                continue;
            }
            let e = device_line_images(&se, l, exact.line(l));
            let c = device_line_images(&sc, l, capped.line(l));
            prop_assert!(!c.is_empty() && c.is_subset(&e), "line {}", l);
        }
    }
}

/// Hand-picked sequences that the random generator reaches only rarely.
#[test]
fn reference_agrees_on_tricky_sequences() {
    use Op::*;
    let cases: Vec<Vec<Op>> = vec![
        // NT, younger cached store over it, another thread persists the line, then the fence.
        vec![
            Nt { tid: 0, line: 0, off: 0, size: 8 },
            Store { tid: 1, line: 0, off: 2, size: 2 },
            Flush { tid: 1, line: 0, kind: 2 },
            Fence { tid: 1, kind: 0 },
            Store { tid: 0, line: 0, off: 4, size: 4 },
            Fence { tid: 0, kind: 0 },
        ],
        // Two pending chunks on one word, completed in different orders.
        vec![
            Nt { tid: 0, line: 0, off: 0, size: 8 },
            Nt { tid: 1, line: 0, off: 0, size: 8 },
            Store { tid: 0, line: 0, off: 1, size: 1 },
            Fence { tid: 1, kind: 0 },
            Flush { tid: 0, line: 0, kind: 0 },
            Fence { tid: 0, kind: 1 },
        ],
        // Rep over two lines, flushed by another thread midway through the lines.
        vec![
            Rep { tid: 0, line: 0, off: 50, len: 23, elem: 1 },
            Flush { tid: 1, line: 0, kind: 1 },
            Store { tid: 0, line: 1, off: 0, size: 8 },
            Fence { tid: 1, kind: 2 },
            Persist { tid: 0, line: 1, lines: 1 },
        ],
        // Stale capture after the line was forgotten and re-created.
        vec![
            Store { tid: 0, line: 0, off: 0, size: 8 },
            Flush { tid: 1, line: 0, kind: 2 },
            Flush { tid: 0, line: 0, kind: 0 },
            Nt { tid: 0, line: 0, off: 8, size: 8 },
            Fence { tid: 1, kind: 0 },
            Store { tid: 1, line: 0, off: 3, size: 4 },
        ],
    ];
    for ops in &cases {
        for cfg in [
            PmConfig::default(),
            PmConfig { atomicity: Atomicity::Word8, ..PmConfig::default() },
            PmConfig { flush_model: FlushModel::Strict, ..PmConfig::default() },
            PmConfig { persistency: Persistency::Eadr, ..PmConfig::default() },
        ] {
            for write_first in [false, true] {
                check(cfg, ops, write_first, 1 << 16);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The compact representation (one small unpersisted store per line, no history).
// ---------------------------------------------------------------------------------------------

#[test]
fn compact_line_grows_a_history_and_shrinks_back() {
    let mut s = Sim::adr();
    let compact = |s: &Sim| {
        let st = s.dev.stats();
        (st.lines, st.compact_lines, st.versions)
    };
    let v1 = s.st(A, X, 1);
    assert_eq!(compact(&s), (1, 1, 1));
    assert_eq!(s.values(&[X]), set(&[&[0], &[1]]));
    // A second unpersisted version: the line needs its history.
    s.clwb(A, X);
    let v2 = s.st(A, X + 1, 2);
    assert_eq!(compact(&s), (1, 0, 2));
    assert_eq!(s.values(&[X, X + 1]), set(&[&[0, 0], &[1, 0], &[1, 2]]));
    // The fence persists v1 only: one version is left above the floor, held compactly again.
    let out = s.sfence(A);
    assert_eq!((out.lines_persisted, out.stores_hw), (1, 1));
    assert_eq!(compact(&s), (1, 1, 1));
    assert_eq!(s.values(&[X, X + 1]), set(&[&[1, 0], &[1, 2]]));
    assert_eq!(s.dev.persist_info(X), None);
    assert_eq!(s.dev.persist_info(X + 1).map(|i| i.store), Some(v2));
    assert_ne!(v1, v2);
    // Persisted by its writer: forgotten.
    s.clwb(A, X);
    s.sfence(A);
    assert_eq!(compact(&s), (0, 0, 0));
    // Another thread's flush and fence: durable by the hardware rule only, which a compact
    // record cannot say.
    s.st(A, X, 3);
    s.clwb(B, X);
    s.sfence(B);
    assert_eq!(compact(&s), (1, 0, 0));
    assert!(s.dev.durable_hw(X, 1) && !s.dev.durable_own(X, 1));
    assert!(s.dev.crash_space().is_empty());
    // Its writer's store replaces that record: compact again.
    s.st(A, X, 4);
    assert_eq!(compact(&s), (1, 1, 1));
    // Stores a compact record cannot hold: wider than 8 bytes, non-temporal, rep-string.
    s.store(A, 128, &[5; 16], StoreKind::Cached);
    s.nt(A, 192, &[6; 8]);
    s.rep(A, 256, &[7; 8], 8);
    assert_eq!(compact(&s).1, 1);
}

/// Whether the device may hold line `l` as a compact record, from the public API alone: exactly
/// one version above the floor (not merged, no pending chunk), made by one cached store (not a
/// rep-string one) of at most 8 contiguous bytes that is the latest store of every byte still
/// tracked, durable by neither rule.
fn compactable(dev: &PmDevice, space: &CrashSpace, rep_ids: &BTreeSet<StoreId>, l: u64) -> bool {
    let Some(ls) = space.lines().iter().find(|ls| ls.line == l) else {
        return false;
    };
    let Some(upto) = ls.versions.last().and_then(|v| v.upto) else {
        return false;
    };
    if ls.versions.len() != 2 || !ls.chunks.is_empty() || ls.merged || rep_ids.contains(&upto) {
        return false;
    }
    let infos: Vec<(u64, PersistInfo)> = (0..64).filter_map(|b| dev.persist_info(l * 64 + b).map(|i| (b, i))).collect();
    let (Some(first), Some(last)) = (infos.first(), infos.last()) else {
        return false;
    };
    infos.len() <= 8
        && last.0 - first.0 + 1 == infos.len() as u64
        && infos.iter().all(|(_, i)| i.store == upto && !i.nt && i.hw.is_none() && i.own.is_none())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// After every event, a line is held compactly exactly when its state fits a compact
    /// record: a second version turns it into a full history, and persisting back to one small
    /// version turns it back (`device_matches_reference` checks both forms give the model's
    /// answers).
    #[test]
    fn compact_exactly_when_one_small_unpersisted_store(
        cfg in config(),
        ops in prop::collection::vec(op(2, 3), 1..40),
    ) {
        let mut sim = Sim::new(cfg);
        sim.init = pattern;
        let mut val = 0u8;
        let mut rep_ids = BTreeSet::new();
        for o in &ops {
            if let Op::Rep { tid, line, off, len, elem } = *o {
                let data = vec![1u8; usize::from(len)];
                let addr = u64::from(line) * 64 + u64::from(off);
                rep_ids.extend(sim.rep(Tid::from(tid) + 1, addr, &data, usize::from(elem)));
            } else {
                run_op(&mut sim, o, &mut val);
            }
            let space = sim.dev.crash_space();
            let fits = sim.dev.tracked_lines().into_iter().filter(|&l| compactable(&sim.dev, &space, &rep_ids, l));
            prop_assert_eq!(sim.dev.stats().compact_lines, fits.count(), "after {:?}", o);
        }
    }
}
