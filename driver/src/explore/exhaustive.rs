//! `--strategy exhaustive`: runs schedules depth first, each following a prefix of decisions of
//! an earlier run with one decision changed, as long as the prefix has at most `max_preemptions`
//! preemptions, until `limit` runs or none is left. Sequential: each run's decisions decide the
//! next runs. Each finding keeps the decisions that reproduce it. With `--por` only the
//! alternatives dynamic partial-order reduction asks for are tried ([`super::por`]).
//!
//! What waits to run is kept small: a run with `n` decisions can leave up to `n` times the
//! threads alternatives behind (with `--preempt all`, hundreds of thousands), and each used to
//! be a copy of its whole prefix (quadratic: 21 GB for a 0.9 M-instruction program). A pending
//! schedule is now the run's decisions, shared by all its alternatives, a length and the
//! alternative ([`Branch`]); the run's decisions are freed with its last alternative. Without
//! reduction the prefixes form a tree, so no two are equal and none is remembered; with it, a
//! 128-bit hash of each prefix tried keeps duplicates out.

use std::hash::{Hash, Hasher};
use std::rc::Rc;

use crate::report::RunReport;
use crate::spec::{RunOutcome, RunSpec, SessionError};
use crate::Runner;

use super::por;

/// A schedule still to run: the first `len` decisions of an earlier run, then `alt` (none for
/// the first run).
pub(crate) struct Branch {
    base: Rc<[u32]>,
    len: usize,
    alt: Option<u32>,
}

impl Branch {
    pub(crate) fn prefix(&self) -> Vec<u32> {
        self.base[..self.len].iter().copied().chain(self.alt).collect()
    }

    /// Two independent 64-bit hashes of the prefix (deterministic: fixed keys).
    fn key(&self) -> (u64, u64) {
        #[allow(deprecated)]
        let mut a = std::hash::SipHasher::new_with_keys(0, 0);
        #[allow(deprecated)]
        let mut b = std::hash::SipHasher::new_with_keys(0x9e37_79b9_7f4a_7c15, 0xf39c_c060_5ced_c834);
        self.base[..self.len].hash(&mut a);
        self.alt.hash(&mut a);
        self.base[..self.len].hash(&mut b);
        self.alt.hash(&mut b);
        (a.finish(), b.finish())
    }
}

/// Explores up to `limit` schedules of `spec` with at most `max_preemptions` preemptions each.
pub fn explore(
    runner: &Runner,
    spec: &RunSpec,
    limit: u32,
    max_preemptions: u32,
    por: bool,
) -> Result<(RunReport, RunOutcome), SessionError> {
    let mut pending = vec![Branch { base: Rc::from(Vec::new()), len: 0, alt: None }];
    let mut seen: std::collections::BTreeSet<(u64, u64)> = std::collections::BTreeSet::new();
    let mut first: Option<(RunReport, RunOutcome)> = None;
    let mut findings = Vec::new();
    let mut runs = 0u32;
    while let Some(branch) = pending.pop() {
        if runs >= limit {
            pending.push(branch);
            break;
        }
        runs += 1;
        let prefix = branch.prefix();
        drop(branch);
        let (report, out, children) = step(runner, spec, &prefix, runs > 1, max_preemptions, por)?;
        findings.extend(report.findings.clone());
        // Depth first: the deepest alternatives are tried first.
        for c in children {
            if !por || seen.insert(c.key()) {
                pending.push(c);
            }
        }
        if first.is_none() {
            first = Some((report, out));
        }
    }
    let (mut report, out) = first.ok_or(SessionError::NoRun)?;
    report.findings = analyses::Finding::merge(findings);
    report.run.schedules = runs;
    if !spec.quiet {
        say!(
            "ferrite: exhaustive exploration: {runs} schedule(s) with at most {max_preemptions} preemption(s){}{}",
            if por { " (partial-order reduced)" } else { "" },
            if pending.is_empty() { ", every one" } else { "; more remain (raise --explore)" }
        );
    }
    Ok((report, out))
}

/// One run of an exhaustive exploration: the schedule `prefix` (its findings keep it), and
/// the schedules it leads to, in the order they are pushed on the stack. `later` runs discard
/// their output.
pub(crate) fn step(
    runner: &Runner,
    spec: &RunSpec,
    prefix: &[u32],
    later: bool,
    max_preemptions: u32,
    por: bool,
) -> Result<(RunReport, RunOutcome, Vec<Branch>), SessionError> {
    let dir = super::pm_copy(spec)?;
    let mut s = spec.clone();
    s.pm_dir = dir.path().to_path_buf();
    s.schedule = prefix.to_vec();
    s.discard_output |= later;
    s.quiet |= later;
    let accesses = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let extra: Vec<Box<dyn analyses::Analysis>> =
        if por { vec![Box::new(por::Footprint(accesses.clone()))] } else { Vec::new() };
    let (mut report, out) = runner.execute_with(&s, None, extra)?;
    for f in &mut report.findings {
        f.schedule = Some(prefix.to_vec());
    }
    let d = &out.decisions;
    // With --por only the alternatives dynamic partial-order reduction asks for.
    let backtrack = por.then(|| por::backtracks(d, &accesses.borrow()));
    let chosen: Rc<[u32]> = d.iter().map(|x| x.chosen).collect();
    let mut preemptions = 0u32;
    let mut children = Vec::new();
    for (j, x) in d.iter().enumerate() {
        // Without reduction, decisions before the prefix's end were expanded by the runs
        // that led here. With it, a race found now can ask for an alternative at an earlier
        // decision (DPOR's backtrack sets along the path); `seen` keeps each prefix once.
        if j >= prefix.len() || por {
            let wanted = |t: &u32| backtrack.as_ref().is_none_or(|b| b[j].contains(t));
            for &alt in x.runnable.iter().filter(|t| **t != x.chosen && wanted(t)) {
                let cost = preemptions + u32::from(x.optional && alt != x.current);
                if cost <= max_preemptions {
                    children.push(Branch { base: chosen.clone(), len: j, alt: Some(alt) });
                }
            }
        }
        preemptions += u32::from(x.optional && x.chosen != x.current);
    }
    Ok((report, out, children))
}
