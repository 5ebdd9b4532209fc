//! The workload runs of a crash campaign's schedules (`ferrite crash --explore N`), from one
//! snapshot of their common start.
//!
//! Schedule `i` is the workload run whose program seed is `--seed` and whose schedule seed is
//! `explore_seed(--seed, i)`, as `ferrite run --explore` gives them
//! ([`driver::explore::schedules`]): the schedules are one run until a second thread can first
//! run, and that prefix (loading the program, creating and filling its pool, recording its crash
//! points so far) is run once. The first schedule runs from the start and stops there
//! ([`Session::stop_before_first_choice`]); a checkpoint of the session then holds the machine,
//! the kernel, the PM directory and what the recorder has logged (the recorder is the run's
//! probe, [`crate::record::Recording`]). Every later schedule is that checkpoint rewound and
//! reseeded, its crash log the checkpoint's log plus what the rest of its run records.
//!
//! Whenever that cannot be done (a pass that cannot be copied, crash images for post-failure
//! validation, a forked guest, a host file that cannot be opened again, a run whose scheduler
//! was asked something before a second thread existed, or one that never had a second
//! thread), schedules run from the start. Either way each schedule's run, log and report are
//! those of a fresh run with its two seeds: the campaign's report is the same with
//! `--no-snapshots`.

use std::cell::RefCell;
use std::rc::Rc;

use driver::session::{Checkpoint, Driven};
use driver::{Branching, RunOutcome, RunReport, RunSpec, Runner, Session};

use crate::record::{CrashLog, Recording};
use crate::Error;

/// What the workload runs are asked besides their spec.
pub struct Recorded<'o> {
    /// `--crash-points`.
    pub mode: &'o str,
    /// `--crash-at N`.
    pub crash_at: Option<u64>,
    /// `--dedup-points`.
    pub dedup_points: bool,
}

/// Where the next schedule's workload run starts.
enum Start {
    /// Nothing yet: the next run starts from the program's start and is snapshotted.
    Nothing,
    /// The session, its PM directory, its crash log and the checkpoint of their common start.
    Snapshot(Box<Held>),
    /// Every run starts from the program's start.
    Refused,
}

struct Held {
    session: Session,
    dir: tempfile::TempDir,
    log: Rc<RefCell<CrashLog>>,
    checkpoint: Checkpoint,
}

/// One schedule's workload run: its PM directory (a private copy, kept while it lives), its
/// spec, report, outcome and crash log.
pub struct Workload {
    /// The private PM directory the run started from a copy of, when it is the run's own.
    pub dir: Option<tempfile::TempDir>,
    /// The schedule's spec.
    pub spec: RunSpec,
    /// Its report.
    pub report: RunReport,
    /// Its outcome.
    pub outcome: RunOutcome,
    /// What the recorder logged.
    pub log: CrashLog,
}

/// The workload runs of a campaign's schedules, one after the other.
pub struct Workloads<'r, 'a, 'o> {
    runner: &'r Runner<'a>,
    base: &'r RunSpec,
    rec: Recorded<'o>,
    schedules: u32,
    start: Start,
    /// How the runs went (`--host-stats`' `exploration`).
    pub counts: Branching,
}

impl<'r, 'a, 'o> Workloads<'r, 'a, 'o> {
    /// The workload runs of `schedules` schedules of `base`; `snapshots`: later ones go on from
    /// a snapshot of their common start.
    pub fn new(
        runner: &'r Runner<'a>,
        base: &'r RunSpec,
        rec: Recorded<'o>,
        schedules: u32,
        snapshots: bool,
    ) -> Workloads<'r, 'a, 'o> {
        let start = if snapshots && schedules > 1 { Start::Nothing } else { Start::Refused };
        Workloads { runner, base, rec, schedules, start, counts: Branching::default() }
    }

    /// The spec of schedule `i`: one schedule is the base spec itself; of several, each has the
    /// program seed `--seed` and its own schedule seed, as `ferrite run --explore` gives them.
    fn spec(&self, i: u64) -> RunSpec {
        let mut s = if self.schedules > 1 {
            driver::explore::schedules::schedule_spec(self.base, i)
        } else {
            let mut s = self.base.clone();
            s.private_cwd = true;
            s
        };
        if let Some(n) = self.rec.crash_at {
            s.max_instructions = n;
        }
        s
    }

    /// Runs schedule `i`'s workload (schedules in ascending order).
    pub fn run(&mut self, i: u64) -> Result<Workload, Error> {
        let s = self.spec(i);
        if let Start::Snapshot(held) = &mut self.start {
            let Held { session, dir, log, checkpoint } = &mut **held;
            if let Some((s, outcome)) =
                driver::explore::schedules::run_from_checkpoint(session, checkpoint, dir.path(), s.clone())
            {
                self.counts.from_snapshot += 1;
                self.counts.instructions += outcome.instructions - checkpoint.icount();
                let taken = CrashLog::take(log);
                return Ok(self.done(None, s, outcome, taken));
            }
            // A host file that cannot be opened again now.
            self.counts.refused += 1;
            self.start = Start::Refused;
        }
        let dir = driver::explore::pm_copy(&s)?;
        let s = RunSpec { pm_dir: dir.path().to_path_buf(), ..s };
        let log = CrashLog::new(&s.pm_dir, crate::record::every_store(self.rec.mode, s.pm));
        log.borrow_mut().at_end_only = self.rec.crash_at.is_some();
        log.borrow_mut().dedup_sites = self.rec.dedup_points;
        let mut session = self.runner.start(&s, Some(Box::new(Recording(log.clone()))), Vec::new())?;
        self.counts.from_start += 1;
        let snapshot = matches!(self.start, Start::Nothing);
        if snapshot {
            session.stop_before_first_choice();
        }
        let mut checkpoint = None;
        let end = loop {
            match session.drive_debug() {
                Driven::End(end) => break end,
                Driven::Decision => checkpoint = session.checkpoint(),
                // Stops only a debugger asks for; none is set.
                _ => {}
            }
        };
        let outcome = driver::validation::complete(&s, session.finish(end));
        self.counts.instructions += outcome.instructions;
        let taken = CrashLog::take(&log);
        if snapshot {
            if let Some(checkpoint) = checkpoint {
                self.counts.snapshots += 1;
                self.counts.peak_bytes = checkpoint.bytes() as u64;
                self.start = Start::Snapshot(Box::new(Held { session, dir, log, checkpoint }));
                return Ok(self.done(None, s, outcome, taken));
            }
            self.counts.refused += 1;
            self.start = Start::Refused;
        }
        Ok(self.done(Some(dir), s, outcome, taken))
    }

    fn done(&mut self, dir: Option<tempfile::TempDir>, spec: RunSpec, outcome: RunOutcome, log: CrashLog) -> Workload {
        self.counts.instructions_from_start += outcome.instructions;
        self.counts.chain_trace(&outcome.trace_hash);
        Workload { dir, report: RunReport::of(&spec, &outcome), spec, outcome, log }
    }
}
