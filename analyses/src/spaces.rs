//! The address spaces of forked processes, for passes that keep per-address DRAM state
//! (hmtrace, oscs): after a `fork` the same address in parent and child names two locations,
//! and [`Spaces::key`] says where a thread's access is recorded so they stay two, while the
//! memory both still share (PM, inherited `MAP_SHARED` and System V mappings) keeps one key.

use rustc_hash::FxHashMap;

/// Where a forked process's private memory goes in the shadow: its guest address with the
/// process's tag in bits 48 to 62 (guest addresses are below 2^47; bit 63 is left to the
/// passes' own keys, such as hmtrace's synchronisation locations).
pub(crate) const SPACE_SHIFT: u32 = 48;
/// Tags go from 1 to this, then around again (a run with more forked processes than that
/// alive at once is not one these passes are run on).
pub(crate) const MAX_SPACE: u64 = 0x7fff;
/// The bits of a shadow address that are a tag.
pub(crate) const SPACE_BITS: u64 = MAX_SPACE << SPACE_SHIFT;

/// The address spaces of forked processes. After a `fork` the child's private memory (its
/// stack, globals, heap) is a copy: the same address in parent and child names two locations,
/// which two accesses by the two processes never share. Keyed by address alone they looked like
/// one, and a parent's stack slot written while its child wrote its copy was a race. Each
/// forked process gets a tag, its threads (and `CLONE_VM` children) inherit it, and an access
/// to private DRAM by a tagged thread is recorded at the tagged address. What parent and child
/// do share keeps its address: PM (accesses with a device address) and the shared DRAM
/// mappings the child inherited ([`EventKind::SharedMemory`]).
#[derive(Clone, Default)]
pub(crate) struct Spaces {
    /// Tags of the threads outside the first process (absent: 0, the first process's).
    of: FxHashMap<u32, u64>,
    /// The last tag given; 0 until the first fork (nothing to do until then).
    last: u64,
    /// DRAM shared across a fork, as sorted, disjoint (start, end).
    shared: Vec<(u64, u64)>,
}

impl Spaces {
    /// Thread `child` was created by `parent`, in an address space of its own if `forked`.
    pub(crate) fn created(&mut self, parent: u32, child: u32, forked: bool) {
        let tag = if forked {
            self.last = self.last % MAX_SPACE + 1;
            self.last
        } else {
            self.tag(parent)
        };
        if tag != 0 {
            self.of.insert(child, tag);
        } else {
            self.of.remove(&child);
        }
    }

    /// DRAM `[start, start + len)` is shared by a process and its forked child.
    pub(crate) fn share(&mut self, start: u64, len: u64) {
        self.shared.push((start, start.saturating_add(len)));
        self.shared.sort_unstable();
        // Merged, so that a lookup is one search.
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.shared.len());
        for &(a, b) in &self.shared {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        self.shared = merged;
    }

    fn tag(&self, tid: u32) -> u64 {
        if self.last == 0 {
            return 0;
        }
        self.of.get(&tid).copied().unwrap_or(0)
    }

    /// Where thread `tid`'s access to `addr` (device address `dev`, 0 outside PM) is recorded.
    #[inline]
    pub(crate) fn key(&self, tid: u32, addr: u64, dev: u64) -> u64 {
        if self.last == 0 || dev != 0 {
            return addr;
        }
        let tag = self.tag(tid);
        if tag == 0 || addr == 0 || addr & SPACE_BITS != 0 {
            return addr;
        }
        let i = self.shared.partition_point(|r| r.1 <= addr);
        if self.shared.get(i).is_some_and(|r| r.0 <= addr) {
            return addr;
        }
        addr | tag << SPACE_SHIFT
    }
}
