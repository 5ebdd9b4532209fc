//! A request from outside the run (ferrite's signal watcher, on the user's SIGINT, SIGTERM or
//! SIGHUP) that the running machine stop at its next block start, as if its instruction budget
//! had ended there, so that the run still ends with its report: the findings so far and the
//! instruction count it stopped at, from which `ferrite replay` re-runs it to the same point.
//!
//! The request is process-wide: every machine of the process stops (the parallel schedules of
//! an `--explore`, which then starts no more of them). The block hook reads it with one relaxed load per block, which costs nothing
//! measurable next to the hook itself.

use std::sync::atomic::{AtomicI32, Ordering};

/// The signal that asked for the stop, 0 while none has.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Asks every running machine to stop at its next block start, on behalf of signal `sig`
/// (positive). Safe to call from any thread; only the first request's signal is kept.
pub fn request(sig: i32) {
    let _ = SIGNAL.compare_exchange(0, sig.max(1), Ordering::SeqCst, Ordering::SeqCst);
}

/// The signal of the pending request, if any.
pub fn requested() -> Option<i32> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// Whether a stop has been requested: the block hook's test.
#[inline]
pub(crate) fn pending() -> bool {
    SIGNAL.load(Ordering::Relaxed) != 0
}
