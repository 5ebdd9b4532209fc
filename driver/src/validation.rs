//! Post-failure validation as a step after the session (PMRace's, §4.4 of Chen et al., "Efficiently
//! Detecting Concurrency Bugs in Persistent Memory Programs", ASPLOS 2022): the findings of a
//! pass that asks for crash images ([`analyses::PassInfo::wants_images`]) are run against the
//! program's recovery on an image the pass captured, and kept, discarded or marked by the
//! verdict.
//!
//! The driver knows neither how images are kept nor how a recovery is run: a [`Validator`]
//! (crash testing's) makes the store the passes capture into and judges each request. What is
//! the same for every such pass is here: its known false positives are dropped first
//! ([`analyses::PassInfo::known_benign`]), every verdict is counted (`NAME.validated_bugs`,
//! `NAME.validated_false_positives`, `NAME.unvalidated`), a false positive moves to the report's
//! `discarded` list, and the finding's message says what validation concluded.

use std::cell::RefCell;
use std::rc::Rc;

use analyses::{Finding, ImageSink, Location};

use crate::session::{Finished, PassFinding};
use crate::spec::{RunOutcome, RunSpec};

/// What validation of one finding concluded.
pub enum Verdict {
    /// Recovery repairs it: not a bug.
    FalsePositive(String),
    /// Recovery does not repair it; the extra location (a recovery load) if there is one.
    Confirmed(String, Option<Location>),
    /// Validation could not run.
    NotRun(String),
}

/// Makes the image stores of runs whose passes capture crash images.
pub trait Validator: Sync {
    /// The store for one run on the PM directory `pm_dir`.
    fn images(&self, pm_dir: &std::path::Path) -> Box<dyn ImageStore>;
}

/// The crash images one run's passes captured, and the validation of requests on them.
pub trait ImageStore {
    /// Where the passes capture images.
    fn sink(&self) -> Rc<RefCell<dyn ImageSink>>;
    /// An empty store for the same PM directory: a run restored from a checkpoint taken before
    /// any image was captured captures into one of its own.
    fn fresh(&self) -> Box<dyn ImageStore>;
    /// Validates one finding's request of the run `run` of `spec` (whose PM files and
    /// instruction count are known now).
    fn validate(&self, spec: &RunSpec, run: &RunOutcome, request: &analyses::Validation) -> Verdict;
}

/// The run's outcome with its passes' findings validated where their pass asked for it, in the
/// order they were reported, then merged and numbered.
pub fn complete(spec: &RunSpec, finished: Finished) -> RunOutcome {
    let Finished { mut outcome, passes, raised, images } = finished;
    let mut discarded = Vec::new();
    let mut findings = std::mem::take(&mut outcome.findings);
    for PassFinding { mut finding, request } in passes {
        let info = analyses::info(&finding.analysis);
        let wants = info.is_some_and(|p| p.wants_images);
        if !wants && request.is_none() {
            findings.push(finding);
            continue;
        }
        let analysis = finding.analysis.clone();
        if info.is_some_and(|p| wants && (p.known_benign)(&finding, &spec.settings)) {
            *outcome.stats.entry(format!("{analysis}.whitelisted_false_positives")).or_insert(0) += 1;
            continue;
        }
        let verdict = match (&request, &images) {
            (Some(v), Some(store)) => store.validate(spec, &outcome, v),
            _ if spec.recover.is_none() => Verdict::NotRun("no --recover command to validate it with".into()),
            _ => Verdict::NotRun("no crash image exposes it in this run".into()),
        };
        let counter = match verdict {
            Verdict::FalsePositive(_) => "validated_false_positives",
            Verdict::Confirmed(..) => "validated_bugs",
            Verdict::NotRun(_) => "unvalidated",
        };
        *outcome.stats.entry(format!("{analysis}.{counter}")).or_insert(0) += 1;
        match verdict {
            Verdict::FalsePositive(why) => {
                finding.message = format!("{}; discarded: {why}", finding.message);
                discarded.push(finding);
                continue;
            }
            Verdict::Confirmed(why, at) => {
                finding.message = format!("{}; validated: {why}", finding.message);
                finding.locations.extend(at);
            }
            Verdict::NotRun(why) if wants => {
                finding.message = format!("{}; not validated: {why}", finding.message);
            }
            Verdict::NotRun(_) => {}
        }
        findings.push(finding);
    }
    findings.extend(raised);
    let mut findings = Finding::merge(findings);
    let mut discarded = Finding::merge(discarded);
    for f in findings.iter_mut().chain(discarded.iter_mut()) {
        f.interleaving = spec.hold.clone();
    }
    outcome.findings = findings;
    outcome.discarded = discarded;
    outcome
}
