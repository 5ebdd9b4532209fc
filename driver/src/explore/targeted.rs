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
//! seed and the interleaving (`Finding::interleaving`) of the run that exposed it, so that
//! `ferrite replay --finding` rebuilds that run.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use analyses::alias::{AliasProfiler, PairType, Profile};
use emu::sched::Hold;

use crate::report::RunReport;
use crate::spec::{RunOutcome, RunSpec, SessionError};
use crate::Runner;

/// Runs of one entry while coverage grows (PMRace's `TTL_RUN_LOOP`).
pub const TTL_RUN_LOOP: u32 = 3;

/// One run of the exploration: run `i` (its seed derived from the base seed) with `hold`.
fn run_one(
    runner: &Runner,
    spec: &RunSpec,
    i: u64,
    hold: Option<Hold>,
) -> Result<(RunReport, RunOutcome, Profile), SessionError> {
    let (_dir, mut s) = super::exploration_run(spec, i)?;
    s.hold = hold;
    let profile = Rc::new(RefCell::new(Profile::default()));
    let (report, out) = runner.execute_with(&s, None, vec![Box::new(AliasProfiler::new(profile.clone()))])?;
    let p = profile.borrow().clone();
    Ok((report, out, p))
}

/// Runs at most `n` runs; returns the merged report (its `run` is the first run's), the first
/// run's outcome, and the summary line.
pub fn explore(runner: &Runner, spec: &RunSpec, n: u32) -> Result<(RunReport, RunOutcome, String), SessionError> {
    let mut coverage: BTreeSet<(u64, u64, PairType)> = BTreeSet::new();
    // Entries explored: (publication, its store PC or its word).
    let mut explored: BTreeSet<(bool, u64)> = BTreeSet::new();
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
    'rounds: while runs < u64::from(n) {
        let (report, out, profile) = run_one(runner, spec, runs, None)?;
        runs += 1;
        profiling += 1;
        coverage.extend(profile.pairs.iter().copied());
        absorb(report, out, &mut first);
        let key = |e: &analyses::alias::Entry| {
            (e.publication, if e.publication { e.stores.first().copied().unwrap_or(0) } else { e.dev })
        };
        let entries: Vec<_> = profile.entries().into_iter().filter(|e| !explored.contains(&key(e))).collect();
        for e in entries {
            explored.insert(key(&e));
            for k in 0..TTL_RUN_LOOP {
                if runs >= u64::from(n) {
                    break 'rounds;
                }
                let loads = e.loads.iter().copied().collect();
                let hold = if e.publication {
                    Hold { loads, dev: 0, len: 0, privileged: k, stores: e.stores.iter().copied().collect() }
                } else {
                    Hold { loads, dev: e.dev, len: 8, privileged: k, stores: Vec::new() }
                };
                let (report, out, profile) = run_one(runner, spec, runs, Some(hold))?;
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
    let (mut report, out) = first.ok_or(SessionError::NoRun)?;
    report.findings = analyses::Finding::merge(findings);
    report.discarded = analyses::Finding::merge(discarded);
    report.stats = stats;
    report.run.seed = spec.seed;
    report.run.schedules = runs as u32;
    report.run.strategy = "pmrace".into();
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
