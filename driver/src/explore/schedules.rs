//! The schedules of `--explore N` under the random strategies (`random`, `pct`, `fifo`), from one
//! snapshot of their common start.
//!
//! Schedule `i` is the run whose program seed is `--seed` (the kernel's random bytes, RDRAND:
//! what the guest observes) and whose schedule seed is `explore_seed(S, i)`, `S` being
//! `--schedule-seed` or else `--seed` (the scheduler's choices and delay injection). So every
//! schedule is the same run until the scheduler is first asked something whose answer depends
//! on its seed, which is not before another thread can run: single-threaded start-up (loading,
//! creating and filling a pool) is common to all of them. Each worker runs its first schedule
//! from the program's start, stops it where a second thread could first run
//! ([`Session::stop_before_first_choice`], right after the first thread's `clone`), snapshots it
//! there and goes on; every later schedule of the worker is that snapshot restored and reseeded
//! ([`Session::reseed`]), which gives it the scheduler a run started with its seed has at that
//! point. A run that never had a second thread never consulted its schedule seed: the other
//! schedules are that same run, and their results are its own with their seed.
//!
//! Schedules run from the start instead whenever that cannot be done: the run could not be
//! snapshotted there (a pass that cannot be copied, a forked guest, a host file that cannot be
//! opened again), or its scheduler had already been asked
//! something by then (then the schedules part earlier than the snapshot). Either way every
//! schedule's run is the one a fresh run with its two seeds makes: the report is the same with
//! `--no-snapshots`, and `ferrite run --seed P --schedule-seed S` reproduces any schedule on
//! its own.

use crate::report::RunReport;
use crate::session::{Checkpoint, Driven};
use crate::spec::{Branching, RunOutcome, RunSpec, SessionError};
use crate::{Runner, Session};

/// The spec of schedule `i` (without its PM directory): the program seed of `spec`, its own
/// schedule seed, and only schedule 0's output and warnings shown.
pub fn schedule_spec(spec: &RunSpec, i: u64) -> RunSpec {
    let mut s = spec.clone();
    s.schedule_seed = Some(super::explore_seed(spec.sched_seed(), i));
    // Runs execute in parallel: each writes its own overlay of the working directory.
    s.private_cwd = true;
    s.discard_output |= i > 0;
    s.quiet |= i > 0;
    s
}

/// One schedule's results: its index, its report, and (for schedule 0, whose run describes
/// the exploration) its outcome.
pub type Ran = (u64, RunReport, Option<RunOutcome>);

/// Runs the schedules `indices` (ascending) of `spec`'s exploration in parallel, one worker per
/// core each taking every W-th one, with `snapshots` from their common start; their results in
/// the order of `indices`, and how they ran.
pub fn run(
    runner: &Runner,
    spec: &RunSpec,
    indices: &[u64],
    snapshots: bool,
) -> Result<(Vec<Ran>, Branching), SessionError> {
    use rayon::prelude::*;
    let workers = rayon::current_num_threads().clamp(1, indices.len().max(1));
    let parts: Vec<Result<(Vec<Ran>, Branching), SessionError>> = (0..workers)
        .into_par_iter()
        .map(|w| {
            let mine: Vec<u64> = indices.iter().copied().skip(w).step_by(workers).collect();
            Worker::new(runner, spec, snapshots).run_all(&mine)
        })
        .collect();
    let mut runs = Vec::with_capacity(indices.len());
    let mut counts = Branching::default();
    for part in parts {
        let (r, c) = part?;
        runs.extend(r);
        counts.from_start += c.from_start;
        counts.from_snapshot += c.from_snapshot;
        counts.snapshots += c.snapshots;
        counts.refused += c.refused;
        counts.refused_why = counts.refused_why.or(c.refused_why);
        counts.instructions += c.instructions;
        counts.instructions_from_start += c.instructions_from_start;
        // The workers hold theirs at the same time.
        counts.peak_bytes += c.peak_bytes;
        counts.evicted += c.evicted;
        counts.thinned += c.thinned;
    }
    runs.sort_by_key(|r| r.0);
    for (_, report, _) in &runs {
        counts.chain_trace(&report.run.trace_hash);
    }
    Ok((runs, counts))
}

/// Where a worker's later schedules start.
enum Start {
    /// Nothing yet: the next schedule runs from the program's start, and is snapshotted.
    Nothing,
    /// The session and its PM directory, and the snapshot of their common start.
    Snapshot(Box<(Session, tempfile::TempDir, Checkpoint)>),
    /// A run that never consulted its schedule seed (its report and instructions): every
    /// schedule is that run.
    Same(Box<RunReport>, u64),
    /// No snapshot can serve: every schedule runs from the start.
    Refused,
}

/// One worker's schedules, one after the other.
struct Worker<'r, 'a> {
    runner: &'r Runner<'a>,
    spec: &'r RunSpec,
    start: Start,
    counts: Branching,
}

impl<'r, 'a> Worker<'r, 'a> {
    fn new(runner: &'r Runner<'a>, spec: &'r RunSpec, snapshots: bool) -> Worker<'r, 'a> {
        let start = if snapshots { Start::Nothing } else { Start::Refused };
        Worker { runner, spec, start, counts: Branching::default() }
    }

    /// Stops at ferrite's interrupt ([`emu::interrupt`]): no schedule starts after it, and of
    /// the schedules it stopped only schedule 0 is kept (it describes the exploration, and its
    /// report says where it stopped, so it replays); another stopped schedule's findings could
    /// not be replayed from the report, which records one stop point.
    fn run_all(mut self, mine: &[u64]) -> Result<(Vec<Ran>, Branching), SessionError> {
        let mut runs = Vec::with_capacity(mine.len());
        for &i in mine {
            if i != 0 && emu::interrupt::requested().is_some() {
                break;
            }
            let s = schedule_spec(self.spec, i);
            let (report, out, instructions) = self.one(s)?;
            self.counts.instructions_from_start += instructions;
            let stopped = report.run.exit.interrupted.is_some();
            if i == 0 || !stopped {
                runs.push((i, report, out.filter(|_| i == 0)));
            }
            if stopped {
                break;
            }
        }
        Ok((runs, self.counts))
    }

    /// Runs the schedule `s` from wherever it can start: its report, its outcome (not of a
    /// copy) and its instructions.
    fn one(&mut self, s: RunSpec) -> Result<(RunReport, Option<RunOutcome>, u64), SessionError> {
        let seed = s.sched_seed();
        match &mut self.start {
            Start::Same(run, instructions) => {
                self.counts.from_snapshot += 1;
                let mut report = (**run).clone();
                report.run.schedule_seed = Some(seed);
                for f in report.findings.iter_mut().chain(report.discarded.iter_mut()) {
                    f.seed = seed;
                }
                return Ok((report, None, *instructions));
            }
            Start::Snapshot(held) => {
                let (session, dir, checkpoint) = &mut **held;
                if let Some((s, out)) = run_from_checkpoint(session, checkpoint, dir.path(), s.clone()) {
                    self.counts.from_snapshot += 1;
                    self.counts.instructions += out.instructions - checkpoint.icount();
                    let instructions = out.instructions;
                    return Ok((RunReport::of(&s, &out), Some(out), instructions));
                }
                // A host file that cannot be opened again now.
                self.counts.refuse("a host file of the run cannot be opened again");
                self.start = Start::Refused;
            }
            Start::Nothing | Start::Refused => {}
        }
        let dir = super::pm_copy(&s)?;
        let s = RunSpec { pm_dir: dir.path().to_path_buf(), ..s };
        let mut session = self.runner.start(&s, None, Vec::new())?;
        self.counts.from_start += 1;
        let snapshot = matches!(self.start, Start::Nothing);
        if snapshot {
            session.stop_before_first_choice();
        }
        let mut checkpoint = Err("the run ended before a second thread could run");
        let mut stopped = false;
        let end = loop {
            match session.drive_debug() {
                Driven::End(end) => break end,
                Driven::Decision => {
                    stopped = true;
                    checkpoint = session.checkpoint_or_why();
                }
                // Stops only a debugger asks for; none is set.
                _ => {}
            }
        };
        let out = crate::validation::complete(&s, session.finish(end));
        self.counts.instructions += out.instructions;
        let report = RunReport::of(&s, &out);
        if snapshot {
            // Reseeding checks that nothing before the stop depended on the schedule seed.
            let pristine = session.machine_mut().scheduler().reseeded(seed).is_some();
            self.start = match checkpoint {
                Ok(c) if stopped => {
                    self.counts.snapshots += 1;
                    self.counts.peak_bytes = c.bytes() as u64;
                    Start::Snapshot(Box::new((session, dir, c)))
                }
                // Validation re-runs recoveries, which a copy would not.
                Err(_) if !stopped && pristine && out.threads == 1 && s.recover.is_none() => {
                    Start::Same(Box::new(report.clone()), out.instructions)
                }
                Err(why) => {
                    self.counts.refuse(why);
                    Start::Refused
                }
                Ok(_) => {
                    self.counts.refuse("the run stopped where it cannot be snapshotted");
                    Start::Refused
                }
            };
        }
        let instructions = out.instructions;
        Ok((report, Some(out), instructions))
    }
}

/// Runs schedule `s` on from `checkpoint` of `session`, whose PM files are in `dir`: the
/// checkpoint restored, the scheduler reseeded with `s`'s schedule seed, and the run driven to its
/// end without output. Its spec (with `dir`) and outcome, or `None` when the checkpoint cannot be
/// restored (a host file that cannot be opened again): the caller runs `s` from the start.
pub fn run_from_checkpoint(
    session: &mut Session,
    checkpoint: &Checkpoint,
    dir: &std::path::Path,
    s: RunSpec,
) -> Option<(RunSpec, RunOutcome)> {
    if session.rewind(checkpoint).is_err() || !session.reseed(s.sched_seed()) {
        return None;
    }
    session.quiet_from_now();
    let s = RunSpec { pm_dir: dir.to_path_buf(), ..s };
    let end = session.drive_to_end();
    let out = crate::validation::complete(&s, session.finish(end));
    Some((s, out))
}
