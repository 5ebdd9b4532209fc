//! A small, fast, deterministic hasher for the device's maps (the rustc "Fx" hash).
//!
//! The device's maps are keyed by line numbers and thread ids, which are small integers chosen by
//! the emulator, not by an adversary, so SipHash's DoS resistance buys nothing and costs a lot on
//! the store path. Iteration order of these maps is never allowed to reach an output: every report
//! and the crash space sort their keys first.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The multiplier of rustc's FxHasher (an odd constant close to 2^64 / golden ratio). Multiplying by
/// an odd constant is a bijection on the low bits, so consecutive line numbers land in distinct
/// buckets, and it spreads entropy into the high bits that hashbrown uses for its control bytes.
const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8-byte chunk")));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A `HashMap` with the Fx hasher. Never iterate one where the order could reach an output.
pub(crate) type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
