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

/// Interns values as dense ids.
#[derive(Debug)]
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

/// The line pieces of an access: `(line, byte mask within the line)`.
pub(crate) fn pieces(dev: u64, size: u32) -> impl Iterator<Item = (u64, u64)> {
    let end = dev + u64::from(size.max(1));
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

/// Which operations are releases for a pass's `unlock_fence` option: the unlock-like calls.
pub(crate) fn is_release_call(kind: SyncKind) -> bool {
    matches!(kind, SyncKind::MutexUnlock | SyncKind::RwUnlock | SyncKind::SpinUnlock)
        || matches!(kind, SyncKind::Custom(c) if c.op == CustomOp::Release)
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
