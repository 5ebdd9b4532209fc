//! `--strategy pmrace`: PMRace's PM-aware interleaving exploration (Chen et al., "Efficiently
//! Detecting Concurrency Bugs in Persistent Memory Programs", ASPLOS 2022, §4.2), with the
//! deterministic scheduler holding readers where PMRace's instrumentation sleeps in `usleep`.
//!
//! The runs go one after the other, because each depends on the coverage of those before:
//! - **seed tier**: a *profiling run* (a plain seeded-random schedule) records PM alias pairs
//!   (`analyses::alias`) and yields the priority entries: first the *publication sites* (a store
//!   of a fresh object's address into PM, with the loads of the fields it stores to, held on any
//!   address), then PM words shared across threads, with their loads and stores, heaviest first;
//! - **interleaving tier**: each entry not explored yet becomes a targeted interleaving
//!   (`emu::sched::Hold`): its loads are sync points where readers wait until another thread
//!   stores to the word, then read it before the writer's flush;
//! - **execution tier**: the same entry runs again with the next seed and the next privileged
//!   thread (up to [`TTL_RUN_LOOP`] times) while it adds alias-pair coverage.
//!
//! When the entries run out, a new profiling run with the next seed starts the next round. Every
//! run starts from a private copy of the PM directory; findings are merged, each keeping the
//! schedule seed and the interleaving (`Finding::interleaving`) of the run that exposed it, so
//! that `ferrite replay --finding` rebuilds that run.
//!
//! # Seeds and snapshots
//! As with `run --explore` ([`super::schedules`]), run `i` has the program seed `--seed` (what
//! the guest observes) and the schedule seed `explore_seed(S, i)`, `S` being `--schedule-seed` or
//! else `--seed`; so runs differ only in their schedules and their holds. A run is the same as
//! the profiling run up to the first scheduling point where a second thread could run, unless
//! its hold stopped a reader before that: a hold acts only at a PM load at one of its PCs. The
//! first run stops there ([`Session::stop_before_first_choice`]), is checkpointed with the PCs of
//! the PM loads made so far (`Profile::loads_seen`), and goes on; every later run whose hold
//! names none of those PCs is that checkpoint restored, reseeded and given its hold
//! ([`Session::set_hold`]), with the profiler's state as it was there. The others, and every run
//! with `--no-snapshots` or when the checkpoint cannot be taken, run from the start: the report
//! is the same either way. (Until ferrite 0.1 of 2026-11-26, run `i` used `explore_seed(--seed, i)`
//! as both seeds; the findings of such reports carry no schedule seed, and their replay still
//! seeds both with the finding's seed.)

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use analyses::alias::{AliasProfiler, PairType, Profile};
use emu::sched::Hold;

use crate::report::RunReport;
use crate::session::{Checkpoint, Driven};
use crate::spec::{Branching, RunOutcome, RunSpec, SessionError};
use crate::{Runner, Session};

/// Runs of one entry while coverage grows (PMRace's `TTL_RUN_LOOP`).
pub const TTL_RUN_LOOP: u32 = 3;

/// The profiling run's checkpoint at its first choice, from which later runs go on.
struct Start {
    session: Session,
    /// The PM directory the session runs on.
    dir: tempfile::TempDir,
    checkpoint: Checkpoint,
    /// The profile the session's profiler (and its copies) write into.
    profile: Rc<RefCell<Profile>>,
    /// The PCs of the PM loads made before the checkpoint.
    loads: BTreeSet<u64>,
}

/// The runs of one exploration, one after the other.
struct Runs<'r, 'a> {
    runner: &'r Runner<'a>,
    spec: &'r RunSpec,
    /// The next run from the start is to be checkpointed (the first, with snapshots).
    checkpoint_next: bool,
    start: Option<Box<Start>>,
    counts: Branching,
}

impl Runs<'_, '_> {
    /// The spec of run `i` with `hold` (without its PM directory).
    fn spec(&self, i: u64, hold: Option<Hold>) -> RunSpec {
        let mut s = self.spec.clone();
        s.schedule_seed = Some(super::explore_seed(self.spec.sched_seed(), i));
        s.hold = hold;
        // Each run writes its own overlay of the working directory.
        s.private_cwd = true;
        s.discard_output |= i > 0;
        s.quiet |= i > 0;
        s
    }

    /// Run `i` with `hold`: its report, outcome and profile.
    fn one(&mut self, i: u64, hold: Option<Hold>) -> Result<(RunReport, RunOutcome, Profile), SessionError> {
        let s = self.spec(i, hold);
        let r = self.run(s)?;
        self.counts.instructions_from_start += r.1.instructions;
        self.counts.chain_trace(&r.0.run.trace_hash);
        Ok(r)
    }

    fn run(&mut self, s: RunSpec) -> Result<(RunReport, RunOutcome, Profile), SessionError> {
        if let Some(start) = self.start.as_deref_mut() {
            let held_before = s.hold.as_ref().is_some_and(|h| h.loads.iter().any(|pc| start.loads.contains(pc)));
            if !held_before {
                if let Some((s, out)) = from_checkpoint(start, s.clone()) {
                    self.counts.from_snapshot += 1;
                    self.counts.instructions += out.instructions - start.checkpoint.icount();
                    let profile = start.profile.borrow().clone();
                    return Ok((RunReport::of(&s, &out), out, profile));
                }
                // A host file that cannot be opened again, or a scheduler asked before the
                // checkpoint: no later run can go on from it.
                self.counts.refused += 1;
                self.start = None;
            }
        }
        let dir = super::pm_copy(&s)?;
        let s = RunSpec { pm_dir: dir.path().to_path_buf(), ..s };
        let profile = Rc::new(RefCell::new(Profile::default()));
        let mut session = self.runner.start(&s, None, vec![Box::new(AliasProfiler::new(profile.clone()))])?;
        self.counts.from_start += 1;
        // Only a run without a hold is every run's common start.
        let checkpointing = s.hold.is_none() && std::mem::take(&mut self.checkpoint_next);
        if checkpointing {
            session.stop_before_first_choice();
        }
        let mut taken = None;
        let end = loop {
            match session.drive_debug() {
                Driven::End(end) => break end,
                Driven::Decision => {
                    taken = session.checkpoint().map(|c| (c, profile.borrow().loads_seen.clone()));
                    if taken.is_none() {
                        self.counts.refused += 1;
                    }
                }
                // Stops only a debugger asks for; none is set.
                _ => {}
            }
        };
        let out = crate::validation::complete(&s, session.finish(end));
        self.counts.instructions += out.instructions;
        let report = RunReport::of(&s, &out);
        let p = profile.borrow().clone();
        if let Some((checkpoint, loads)) = taken {
            self.counts.snapshots += 1;
            self.counts.peak_bytes = checkpoint.bytes() as u64;
            self.start = Some(Box::new(Start { session, dir, checkpoint, profile, loads }));
        }
        Ok((report, out, p))
    }
}

/// Runs `s` on from `start`'s checkpoint: restored, reseeded with `s`'s schedule seed, given
/// `s`'s hold, and driven to its end without output. Its spec (on the session's PM directory) and
/// outcome, or `None` when the checkpoint cannot serve it.
fn from_checkpoint(start: &mut Start, s: RunSpec) -> Option<(RunSpec, RunOutcome)> {
    let session = &mut start.session;
    if session.rewind(&start.checkpoint).is_err() || !session.reseed(s.sched_seed()) {
        return None;
    }
    session.set_hold(s.hold.clone());
    session.quiet_from_now();
    let s = RunSpec { pm_dir: start.dir.path().to_path_buf(), ..s };
    let end = session.drive_to_end();
    let out = crate::validation::complete(&s, session.finish(end));
    Some((s, out))
}

/// Runs at most `n` runs, later ones from a checkpoint of the first where they can with
/// `snapshots`; returns the merged report (its `run` is the first run's), the first run's
/// outcome (with how the runs started, [`RunOutcome::branching`]), and the summary line.
pub fn explore(
    runner: &Runner,
    spec: &RunSpec,
    n: u32,
    snapshots: bool,
) -> Result<(RunReport, RunOutcome, String), SessionError> {
    let mut runner = Runs { runner, spec, checkpoint_next: snapshots, start: None, counts: Branching::default() };
    let mut coverage: BTreeSet<(u64, u64, PairType)> = BTreeSet::new();
    // Entries explored: (publication, its store PC and first load, or its word).
    let mut explored: BTreeSet<(bool, u64, u64)> = BTreeSet::new();
    let mut first: Option<(RunReport, RunOutcome)> = None;
    let mut findings = Vec::new();
    let mut discarded = Vec::new();
    let mut stats: BTreeMap<String, u64> = BTreeMap::new();
    let (mut runs, mut profiling, mut targeted) = (0u64, 0u64, 0u64);
    let mut absorb = |report: RunReport, out: RunOutcome, first: &mut Option<(RunReport, RunOutcome)>| {
        findings.extend(report.findings.iter().cloned());
        discarded.extend(report.discarded.iter().cloned());
        for (k, v) in &report.stats {
            *stats.entry(k.clone()).or_insert(0) += v;
        }
        if first.is_none() {
            *first = Some((report, out));
        }
    };
    // ferrite's interrupt (emu::interrupt) starts no run after it; of the runs it stopped only
    // the first is kept, as for `run --explore` (`schedules::Worker::run_all`): its report says
    // where it stopped, so its findings replay, and a later run's would not.
    let interrupted = |runs: u64| runs > 0 && emu::interrupt::requested().is_some();
    let stopped = |r: &RunReport| r.run.exit.interrupted.is_some();
    'rounds: while runs < u64::from(n) {
        if interrupted(runs) {
            break;
        }
        let (report, out, profile) = runner.one(runs, None)?;
        if runs > 0 && stopped(&report) {
            break;
        }
        let first_stopped = stopped(&report);
        runs += 1;
        profiling += 1;
        coverage.extend(profile.pairs.iter().copied());
        absorb(report, out, &mut first);
        if first_stopped {
            break;
        }
        // A publication entry is its store and the field it publishes into (its first load).
        let key = |e: &analyses::alias::Entry| {
            if e.publication {
                (true, e.stores.first().copied().unwrap_or(0), e.loads.first().copied().unwrap_or(0))
            } else {
                (false, e.dev, 0)
            }
        };
        let entries: Vec<_> = profile.entries().into_iter().filter(|e| !explored.contains(&key(e))).collect();
        for e in entries {
            explored.insert(key(&e));
            for k in 0..TTL_RUN_LOOP {
                if runs >= u64::from(n) || interrupted(runs) {
                    break 'rounds;
                }
                let loads = e.loads.iter().copied().collect();
                let hold = if e.publication {
                    Hold { loads, dev: 0, len: 0, privileged: k, stores: e.stores.iter().copied().collect() }
                } else {
                    Hold { loads, dev: e.dev, len: 8, privileged: k, stores: Vec::new() }
                };
                let (report, out, profile) = runner.one(runs, Some(hold))?;
                if stopped(&report) {
                    break 'rounds;
                }
                runs += 1;
                targeted += 1;
                let before = coverage.len();
                coverage.extend(profile.pairs.iter().copied());
                absorb(report, out, &mut first);
                if coverage.len() == before {
                    break;
                }
            }
        }
    }
    let (mut report, mut out) = first.ok_or(SessionError::NoRun)?;
    let c = &runner.counts;
    if !spec.quiet && snapshots && runs > 1 {
        say!("{}", c.summary("pmrace run"));
    }
    out.branching = Some(runner.counts);
    report.findings = analyses::Finding::merge(findings);
    report.discarded = analyses::Finding::merge(discarded);
    report.stats = stats;
    report.run.seed = spec.seed;
    report.run.schedules = runs as u32;
    report.run.strategy = "pmrace".into();
    if runs < u64::from(n) || report.run.exit.interrupted.is_some() {
        report.run.interrupted = emu::interrupt::requested();
    }
    let summary = format!(
        "ferrite: pmrace exploration: {runs} run(s) from seed {} ({profiling} profiling, {targeted} targeted over {} PM word(s) and {} publication site(s)), {} alias pair(s) covered; {} distinct finding(s)",
        spec.seed,
        explored.iter().filter(|e| !e.0).count(),
        explored.iter().filter(|e| e.0).count(),
        coverage.len(),
        report.findings.len()
    );
    Ok((report, out, summary))
}
