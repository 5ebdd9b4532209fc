//! Runs restored from a snapshot in a warm engine.
//!
//! Crash testing runs the same recovery command on many crash images, which differ only in the
//! contents of the PM files. Each worker thread keeps, per recovery command, one machine that ran
//! the command once up to its first system call that depends on the PM files or changes a host
//! file ([`syscalls::Kernel::snapshot_boundary`]), and a snapshot of the machine and kernel taken
//! there ([`Session::snapshot`]). Every later run of the command restores that snapshot into the
//! same engine ([`Session::restore`]), which has kept its translations, points the PM mount at
//! the image's private directory, and goes on from the pending system call. Nothing before that
//! call can tell images apart, so a restored run is the run a fresh machine would make: same
//! instructions, same trace hash, same findings (`tests/crash.rs` compares the reports of
//! `--fresh-recoveries` runs).
//!
//! A command is run fresh every time when a snapshot cannot hold its state at that call (more
//! than one thread, an open host file or pipe, a finding already made), when it never reaches
//! such a call, and for runs with analyses, a PMRace hold or delay injection (recoveries have
//! none). Passes of the caller's own that watch PM only (crash testing's watchers of recovery
//! reads) are installed after the restore: they see the run from the snapshot point on, which
//! is where its first PM access can be.

use std::cell::RefCell;

use analyses::Analysis;
use emu::events::Interest;

use crate::session::{Session, Snapshot};
use crate::spec::{RunOutcome, RunSpec, SessionError};
use crate::Runner;

/// Commands kept warm per worker thread (a recovery and its checker).
const KEEP: usize = 2;

/// A session paused at its snapshot point, and the snapshot that brings it back there.
struct Warm {
    session: Session,
    snapshot: Snapshot,
}

enum Entry {
    Ready(Box<Warm>),
    /// No snapshot is possible for this command: every run is fresh.
    Cold,
}

thread_local! {
    /// Per command (its spec without the PM directory), most recently used last.
    static CACHE: RefCell<Vec<(RunSpec, Entry)>> = const { RefCell::new(Vec::new()) };
}

/// How many runs were restored from a snapshot, and how many ran fresh, on this thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    /// Runs restored from a snapshot.
    pub restored: u64,
    /// Runs made in a fresh machine.
    pub fresh: u64,
}

thread_local! {
    static COUNTS: std::cell::Cell<Counts> = const { std::cell::Cell::new(Counts { restored: 0, fresh: 0 }) };
}

fn count(restored: bool) {
    COUNTS.with(|c| {
        let mut v = c.get();
        if restored {
            v.restored += 1;
        } else {
            v.fresh += 1;
        }
        c.set(v);
    });
}

/// This thread's counts since the last call (and resets them).
pub fn take_counts() -> Counts {
    COUNTS.with(|c| c.replace(Counts::default()))
}

/// Whether runs of `spec` can be restored from snapshots: no passes but `extra` ones that watch
/// PM only (a pass watching all memory or taint would need hooks the snapshot's engine lacks),
/// nothing steering the schedule from outside.
fn eligible(spec: &RunSpec, extra: &[Box<dyn Analysis>]) -> bool {
    let plain = |p: &dyn Analysis| {
        let i = p.interest();
        !i.has(Interest::MEMORY) && !i.has(Interest::TAINT)
    };
    spec.analyses.iter().all(|a| a == "none")
        && extra.iter().all(|p| plain(p.as_ref()))
        && spec.hold.is_none()
        && spec.delay.is_none()
        && !spec.preempt_all
}

/// What identifies a command's runs up to the snapshot: the whole spec but the PM directory.
fn key_of(spec: &RunSpec) -> RunSpec {
    RunSpec { pm_dir: std::path::PathBuf::new(), ..spec.clone() }
}

/// Runs `spec` (a recovery or checker on one crash image's private PM directory), from this
/// thread's snapshot of the command when there is one.
pub fn run(spec: &RunSpec) -> Result<RunOutcome, SessionError> {
    run_with(spec, Vec::new())
}

/// [`run`] with passes of its own (which see the run from the snapshot point on).
pub fn run_with(spec: &RunSpec, extra: Vec<Box<dyn Analysis>>) -> Result<RunOutcome, SessionError> {
    if !eligible(spec, &extra) {
        return fresh(spec, extra);
    }
    let key = key_of(spec);
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(i) = cache.iter().position(|(k, _)| *k == key) {
            // Most recently used last.
            let (key, mut entry) = cache.remove(i);
            let out = match &mut entry {
                Entry::Cold => fresh(spec, extra),
                Entry::Ready(w) => rerun(w, spec, extra),
            };
            cache.push((key, entry));
            return out;
        }
        let (out, entry) = first_run(spec, extra)?;
        if cache.len() >= KEEP {
            cache.remove(0);
        }
        cache.push((key, entry));
        Ok(out)
    })
}

/// A run in a fresh machine.
fn fresh(spec: &RunSpec, extra: Vec<Box<dyn Analysis>>) -> Result<RunOutcome, SessionError> {
    count(false);
    Runner::default().run_with(spec, None, extra)
}

/// The command's first run on this thread: fresh, pausing at the snapshot point to take one.
fn first_run(spec: &RunSpec, extra: Vec<Box<dyn Analysis>>) -> Result<(RunOutcome, Entry), SessionError> {
    count(false);
    let mut s = Session::start(spec, None, extra, true, None)?;
    if let Some(end) = s.drive(true) {
        // It never reached a point where images could differ.
        return Ok((crate::validation::complete(spec, s.finish(end)), Entry::Cold));
    }
    let snapshot = s.snapshot();
    let out = to_end(&mut s, spec);
    let entry = match snapshot {
        Some(snapshot) => Entry::Ready(Box::new(Warm { session: s, snapshot })),
        None => Entry::Cold,
    };
    Ok((out, entry))
}

/// Runs to the end and reports; the session stays ready to be restored again.
fn to_end(s: &mut Session, spec: &RunSpec) -> RunOutcome {
    let end = s.drive_to_end();
    crate::validation::complete(spec, s.finish(end))
}

/// A later run of the command: restore the snapshot and go on from its pending system call.
fn rerun(w: &mut Warm, spec: &RunSpec, extra: Vec<Box<dyn Analysis>>) -> Result<RunOutcome, SessionError> {
    let Some(kernel) = w.snapshot.kernel_for(&spec.pm_dir) else {
        return fresh(spec, extra);
    };
    count(true);
    w.session.restore(&w.snapshot, kernel, extra)?;
    Ok(to_end(&mut w.session, spec))
}
