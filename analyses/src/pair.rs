//! Findings about two accesses of two threads, as `hmtrace` (data races) and `oscs`
//! (order-sensitive critical sections) report them: the earlier access and the later one, each
//! named by its site and whether it wrote.

use emu::callstack::StackId;

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

/// A finding of `analysis` about the accesses `first` (of thread `first_tid`) and `second`, with
/// the locations `earlier-read`/`earlier-write` and `later-read`/`later-write`.
pub(crate) fn pair_finding(
    analysis: &'static str,
    kind: &'static str,
    message: String,
    occurrences: u64,
    (first, first_tid): (&Side, u32),
    (second, second_tid): (&Side, u32),
) -> RawFinding {
    let role = |s: &Side, earlier: bool| match (earlier, s.write) {
        (true, true) => "earlier-write",
        (true, false) => "earlier-read",
        (false, true) => "later-write",
        (false, false) => "later-read",
    };
    RawFinding {
        validation: None,
        group: None,
        analysis,
        kind,
        message,
        occurrences,
        locations: vec![
            RawLocation { role: role(first, true), pc: first.pc, stack: first.stack, tid: first_tid },
            RawLocation { role: role(second, false), pc: second.pc, stack: second.stack, tid: second_tid },
        ],
    }
}
