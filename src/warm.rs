//! Recovery runs restored from a snapshot in a warm engine.
//!
//! Crash testing runs the same recovery command on many crash images, which differ only in the
//! contents of the PM files. Each worker thread keeps, per recovery command, one machine that ran
//! the command once up to its first system call that depends on the PM files or changes a host
//! file ([`syscalls::Kernel::snapshot_boundary`]), and a snapshot of the machine and kernel taken
//! there ([`emu::MachineSnapshot`]). Every later run of the command restores that snapshot into the
//! same engine, which has kept its translations, points the PM mount at the image's private
//! directory, and goes on from the pending system call. Nothing before that call can tell images
//! apart, so a restored run is the run a fresh machine would make: same instructions, same trace
//! hash, same findings (`tests/crash.rs` compares the reports of `--fresh-recoveries` runs).
//!
//! A command is run fresh every time when a snapshot cannot hold its state at that call (more
//! than one thread, an open host file or pipe, a finding already made), when it never reaches
//! such a call, and for runs with analyses, a PMRace hold or delay injection (recoveries have
//! none). Passes of the caller's own that watch PM only (crash testing's watchers of recovery
//! reads) are installed after the restore: they see the run from the snapshot point on, which
//! is where its first PM access can be.

use std::cell::RefCell;

use analyses::{Analysis, Passes};
use emu::events::Interest;
use syscalls::Kernel;

use crate::session::{RunOutcome, RunSpec, Session, SessionError};

/// Commands kept warm per worker thread (a recovery and its checker).
const KEEP: usize = 2;

/// A machine paused at its snapshot point, and what restoring it needs.
struct Warm {
    session: Session,
    machine: emu::MachineSnapshot,
    kernel: Kernel,
    trace: blake3::Hasher,
    objects: usize,
    reported_unsupported: usize,
    max_threads_seen: usize,
    regions_seen: usize,
}

enum Entry {
    Ready(Box<Warm>),
    /// No snapshot is possible for this command: every run is fresh.
    Cold,
}

thread_local! {
    static CACHE: RefCell<Vec<(String, Entry)>> = const { RefCell::new(Vec::new()) };
}

/// How many runs were restored from a snapshot, and how many ran fresh, on this thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    pub restored: u64,
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
fn key_of(spec: &RunSpec) -> String {
    let mut s = spec.clone();
    s.pm_dir = std::path::PathBuf::new();
    format!("{s:?}")
}

/// Runs `spec` (a recovery or checker on one crash image's private PM directory), from this
/// thread's snapshot of the command when there is one.
pub fn run(spec: &RunSpec) -> Result<RunOutcome, SessionError> {
    run_with(spec, Vec::new())
}

/// [`run`] with passes of its own (which see the run from the snapshot point on).
pub fn run_with(spec: &RunSpec, extra: Vec<Box<dyn Analysis>>) -> Result<RunOutcome, SessionError> {
    if !eligible(spec, &extra) {
        count(false);
        return crate::session::run_with(spec, None, extra);
    }
    let key = key_of(spec);
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(i) = cache.iter().position(|(k, _)| *k == key) {
            // Most recently used last.
            let (key, entry) = cache.remove(i);
            let (out, entry) = match entry {
                Entry::Cold => {
                    count(false);
                    (crate::session::run_with(spec, None, extra), Entry::Cold)
                }
                Entry::Ready(mut w) => {
                    let out = rerun(&mut w, spec, extra);
                    (out, Entry::Ready(w))
                }
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

/// The command's first run on this thread: fresh, pausing at the snapshot point to take one.
fn first_run(spec: &RunSpec, extra: Vec<Box<dyn Analysis>>) -> Result<(RunOutcome, Entry), SessionError> {
    count(false);
    let mut s = Session::start(spec, None, extra, true)?;
    if let Some(end) = s.drive(true) {
        // It never reached a point where images could differ.
        return Ok((s.finish(end)?, Entry::Cold));
    }
    let snap = if s.findings.is_empty() { s.m.snapshot().zip(s.k.fork_copy()) } else { None };
    let trace = s.trace.clone();
    let (objects, reported_unsupported, max_threads_seen, regions_seen) =
        (s.symbols.count(), s.reported_unsupported, s.max_threads_seen, s.regions_seen);
    let out = finish(&mut s)?;
    let entry = match snap {
        Some((machine, kernel)) => Entry::Ready(Box::new(Warm {
            session: s,
            machine,
            kernel,
            trace,
            objects,
            reported_unsupported,
            max_threads_seen,
            regions_seen,
        })),
        None => Entry::Cold,
    };
    Ok((out, entry))
}

/// Runs to the end and reports; leaves the machine ready to be restored again.
fn finish(s: &mut Session) -> Result<RunOutcome, SessionError> {
    let end = loop {
        if let Some(end) = s.drive(false) {
            break end;
        }
    };
    let out = s.finish(end);
    // The report took the (empty) passes; put an empty set back, which installs no hooks and
    // needs no code information.
    s.m.set_observer(Box::new(Passes::new(Vec::new())));
    out
}

/// A later run of the command: restore the snapshot and go on from its pending system call.
fn rerun(w: &mut Warm, spec: &RunSpec, extra: Vec<Box<dyn Analysis>>) -> Result<RunOutcome, SessionError> {
    let Some(mut k) = w.kernel.fork_copy() else {
        count(false);
        return crate::session::run_with(spec, None, extra);
    };
    count(true);
    k.cfg.pm_dir = spec.pm_dir.clone();
    let s = &mut w.session;
    s.m.restore(&w.machine)?;
    s.k = k;
    s.spec.pm_dir = spec.pm_dir.clone();
    s.trace = w.trace.clone();
    s.findings.clear();
    s.symbols.keep_first(w.objects);
    s.reported_unsupported = w.reported_unsupported;
    s.max_threads_seen = w.max_threads_seen;
    s.regions_seen = w.regions_seen;
    s.syscall_pending = true;
    if !extra.is_empty() {
        let mut passes = Passes::new(extra);
        passes.configure(&spec.settings);
        s.m.set_observer(Box::new(passes));
    }
    finish(s)
}
