//! Findings about two accesses of two threads, as `hmtrace` (data races) and `oscs`
//! (order-sensitive critical sections) report them: the earlier access and the later one, each
//! named by its site and whether it wrote.

use emu::callstack::StackId;

use crate::group::{Described, Grouper};
use crate::{RawFinding, RawLocation};

/// One side of a reported pair: where the access was and whether it wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Side {
    pub(crate) pc: u64,
    pub(crate) stack: StackId,
    pub(crate) write: bool,
}

/// `write` or `read`, for messages.
pub(crate) fn what(write: bool) -> &'static str {
    if write {
        "write"
    } else {
        "read"
    }
}

/// The findings of one pass about pairs of accesses, one per *unordered* pair of sites (an
/// instruction and whether it wrote), whatever the call stacks, threads, addresses and order of
/// the occurrences: a data race between a write at line 22 and a read at line 20 is one finding
/// whether the read or the write came first in a given occurrence, and a race inside a helper
/// called from six places is one finding with six stack combinations ([`crate::group`]), as the
/// PM race passes group theirs. P-ART's shared deletion list gave 96 `hmtrace` findings keyed by
/// stack and order, 17 pairs of source lines. The finding's locations and message are those of
/// the first occurrence added under its key; each stack combination keeps its own first
/// occurrence's message ([`crate::group::RawVariant::message`]) for a finding the driver splits.
pub(crate) struct PairFindings {
    analysis: &'static str,
    groups: Grouper<PairKey>,
}

/// (kind, the lesser side, the greater side), each side its (PC, write).
type PairKey = (&'static str, (u64, bool), (u64, bool));

impl PairFindings {
    /// No findings yet, of `analysis`.
    pub(crate) fn new(analysis: &'static str) -> PairFindings {
        PairFindings { analysis, groups: Grouper::new(0) }
    }

    /// `occurrences` of accesses `first` (by `first_tid`) then `second`, described by `message`
    /// if they are the first of their pair of sites; the locations are `earlier-read`/
    /// `earlier-write` and `later-read`/`later-write`.
    pub(crate) fn add(
        &mut self,
        kind: &'static str,
        message: impl FnOnce() -> String,
        occurrences: u64,
        (first, first_tid): (&Side, u32),
        (second, second_tid): (&Side, u32),
    ) {
        let role = |s: &Side, earlier: bool| match (earlier, s.write) {
            (true, true) => "earlier-write",
            (true, false) => "earlier-read",
            (false, true) => "later-write",
            (false, false) => "later-read",
        };
        let (a, b) = ((first.pc, first.write), (second.pc, second.write));
        let key = (kind, a.min(b), a.max(b));
        let locations = [
            RawLocation { role: role(first, true), pc: first.pc, stack: first.stack, tid: first_tid },
            RawLocation { role: role(second, false), pc: second.pc, stack: second.stack, tid: second_tid },
        ];
        self.groups.add_described(key, &locations, 2, occurrences, || Some(message()));
    }

    /// One finding per pair of sites, in the order of their keys, with its first occurrence's
    /// message (that of the stack combination its locations have).
    pub(crate) fn finish(self) -> Vec<RawFinding> {
        let analysis = self.analysis;
        let mut out = self.groups.finish(|key, _, _| Described {
            analysis,
            kind: key.0,
            message: String::new(),
            class: "",
            stored: None,
        });
        for f in &mut out {
            let same = |a: &RawLocation, b: &RawLocation| (a.role, a.pc, a.stack) == (b.role, b.pc, b.stack);
            let first = f.group.as_ref().and_then(|g| {
                g.variants.iter().find(|v| v.locations.iter().zip(&f.locations).all(|(a, b)| same(a, b)))
            });
            if let Some(m) = first.and_then(|v| v.message.clone()) {
                f.message = m;
            }
        }
        out
    }
}
