//! `--strategy exhaustive`: runs schedules depth first, each following a prefix of decisions of
//! an earlier run with one decision changed, as long as the prefix has at most `max_preemptions`
//! preemptions, until `limit` runs or none is left. Sequential: each run's decisions decide the
//! next runs. Each finding keeps the decisions that reproduce it. With `--por` only the
//! alternatives dynamic partial-order reduction asks for are tried ([`super::por`]).

use crate::report::RunReport;
use crate::spec::{RunOutcome, RunSpec, SessionError};
use crate::Runner;

use super::por;

/// Explores up to `limit` schedules of `spec` with at most `max_preemptions` preemptions each.
pub fn explore(
    runner: &Runner,
    spec: &RunSpec,
    limit: u32,
    max_preemptions: u32,
    por: bool,
) -> Result<(RunReport, RunOutcome), SessionError> {
    let mut pending: Vec<Vec<u32>> = vec![Vec::new()];
    let mut seen: std::collections::BTreeSet<Vec<u32>> = std::collections::BTreeSet::new();
    let mut first: Option<(RunReport, RunOutcome)> = None;
    let mut findings = Vec::new();
    let mut runs = 0u32;
    while let Some(prefix) = pending.pop() {
        if runs >= limit {
            break;
        }
        runs += 1;
        let (report, out, children) = step(runner, spec, &prefix, runs > 1, max_preemptions, por)?;
        findings.extend(report.findings.clone());
        // Depth first: the deepest alternatives are tried first.
        for c in children {
            if seen.insert(c.clone()) {
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
/// the prefixes of the schedules it leads to, in the order they are pushed on the stack.
/// `later` runs discard their output.
pub(crate) fn step(
    runner: &Runner,
    spec: &RunSpec,
    prefix: &[u32],
    later: bool,
    max_preemptions: u32,
    por: bool,
) -> Result<(RunReport, RunOutcome, Vec<Vec<u32>>), SessionError> {
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
    let chosen: Vec<u32> = d.iter().map(|x| x.chosen).collect();
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
                    let mut p = chosen[..j].to_vec();
                    p.push(alt);
                    children.push(p);
                }
            }
        }
        preemptions += u32::from(x.optional && x.chosen != x.current);
    }
    Ok((report, out, children))
}
