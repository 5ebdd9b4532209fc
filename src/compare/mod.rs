//! `ferrite compare`: every detector over a labelled suite of guests, side by side.
//!
//! [`suite`] reads the manifest and runs the jobs, [`score`] scores them, [`render`] prints and
//! writes the results.
//!
//! A suite is a RON manifest (`guests/manifest.ron`, docs/compare.md): each case names a guest
//! binary, its arguments and seeds, the detectors it is meant for, optionally how to recover it
//! after a crash, and its ground truth — bug-free, or a list of bugs, each with a class, the
//! source lines that make it (given as marker comments, found by grepping the sources) and
//! whether it is harmful after recovery.
//!
//! Every selected detector runs over every case it applies to, one phase per detector, with the
//! runs of a phase in parallel (one engine per worker). A run is exactly what `ferrite run` (or
//! `ferrite crash`) does with the same options: its options are parsed by the same command line,
//! and it goes through the same runner and crash-testing campaign. Then each detector is scored
//! on the bug classes it claims ([`claims`]: the pass registry's rows, crash testing and the
//! machine):
//!
//! - a bug is found (TP) by a run when one of the detector's findings of the bug's class names
//!   one of the bug's labelled lines among its locations; each bug counts once per run;
//! - a finding of a claimed class that names no labelled line of a bug of its class is a false
//!   positive (FP); FPs are counted once per distinct set of lines;
//! - a labelled bug of a claimed class that a run did not find is a false negative (FN);
//! - schedule-dependent detectors run once per seed of the case, and a bug found in k of N seeds
//!   counts k/N TP and (N-k)/N FN; FPs count 1/N per seed that showed them.

pub mod render;
pub mod score;
pub mod suite;

use std::collections::BTreeSet;
use std::sync::OnceLock;

use analyses::Finding;
use anyhow::{bail, Result};

use suite::Case;

/// How a detector is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunsAs {
    /// A pass of `--analyses`: `ferrite run --analyses NAME`.
    Pass,
    /// Crash testing: `ferrite crash --analyses none` with the case's recovery command.
    Crash,
    /// Plain emulation (`--analyses none`): what the machine itself reports (faults, deadlocks,
    /// hangs).
    Machine,
}

/// What a detector claims to find: it is scored on these bug classes only.
pub struct Claim {
    pub name: &'static str,
    pub classes: Vec<&'static str>,
    /// Runs once per seed of a case (and is scored k/N); otherwise once, with the first seed.
    pub schedule_dependent: bool,
    pub runner: RunsAs,
    /// A pass whose findings are validated on crash images: its runs get the case's recovery
    /// command (`--recover`).
    pub wants_images: bool,
}

/// The claims: every pass of the registry ([`analyses::PASSES`], in its order), then crash
/// testing and the machine itself.
pub fn claims() -> &'static [Claim] {
    static CLAIMS: OnceLock<Vec<Claim>> = OnceLock::new();
    CLAIMS.get_or_init(|| {
        let mut v: Vec<Claim> = analyses::PASSES
            .iter()
            .map(|p| Claim {
                name: p.name,
                classes: p.claimed_classes(),
                schedule_dependent: p.schedule_dependent,
                runner: RunsAs::Pass,
                wants_images: p.wants_images,
            })
            .collect();
        v.push(Claim {
            name: "crash",
            classes: vec![CRASH_CLASS],
            schedule_dependent: false,
            runner: RunsAs::Crash,
            wants_images: false,
        });
        v.push(Claim {
            name: "machine",
            classes: vec!["fault", "deadlock", "hang"],
            schedule_dependent: true,
            runner: RunsAs::Machine,
            wants_images: false,
        });
        v
    })
}

/// The bug class of the kinds of findings that are no pass's: crash testing's and the
/// machine's. A pass's kinds are in its registry row; findings of analysis `fault` are class
/// `fault`; any other kind is its own class (claimed by nobody).
const OTHER_KINDS: &[(&str, &str)] =
    &[("recovery-failed", CRASH_CLASS), ("all-threads-blocked", "deadlock"), ("instruction-budget", "hang")];

/// The class `crash` is scored on: labelled crash-consistency bugs, and every bug labelled
/// harmful after recovery whatever its class.
pub const CRASH_CLASS: &str = "crash-consistency";

/// The bug class of a finding.
pub fn class_of(analysis: &str, kind: &str) -> String {
    if analysis == "fault" {
        return "fault".into();
    }
    analyses::class_of_kind(kind)
        .or_else(|| OTHER_KINDS.iter().find(|(k, _)| *k == kind).map(|(_, c)| *c))
        .map_or_else(|| kind.to_string(), str::to_string)
}

/// Every class some detector claims.
pub fn known_classes() -> BTreeSet<&'static str> {
    claims().iter().flat_map(|c| c.classes.iter().copied()).collect()
}

/// A detector as selected: `hawkset` or a variant with options (`hawkset:irh=0`).
#[derive(Clone)]
pub struct Detector {
    /// As given (`hawkset:irh=0`): the column name.
    pub name: String,
    pub claim: &'static Claim,
}

impl Detector {
    pub fn base(&self) -> &'static str {
        self.claim.name
    }

    /// Whether a finding is this detector's own (and not the machine's, in a pass's run).
    pub fn owns(&self, f: &Finding) -> bool {
        match self.claim.runner {
            RunsAs::Pass => f.analysis == self.base(),
            RunsAs::Crash => f.analysis == "crash",
            RunsAs::Machine => matches!(f.analysis.as_str(), "fault" | "deadlock" | "hang"),
        }
    }

    pub fn analyses_option(&self) -> &str {
        match self.claim.runner {
            RunsAs::Pass => &self.name,
            _ => "none",
        }
    }
}

/// The claim of a detector's base name.
pub fn claim_of(base: &str) -> Option<&'static Claim> {
    claims().iter().find(|c| c.name == base)
}

/// The detectors `--analyses` selects (every one when empty or `all`), in the claims' order.
pub fn select_detectors(names: &[String]) -> Result<Vec<Detector>> {
    let names: Vec<String> = names.iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    let mut out: Vec<Detector> = Vec::new();
    let all = names.is_empty() || names.iter().any(|n| n == "all");
    if all {
        out.extend(claims().iter().map(|c| Detector { name: c.name.into(), claim: c }));
    }
    for n in names.iter().filter(|n| n.as_str() != "all") {
        let base = n.split(':').next().unwrap_or(n);
        let Some(claim) = claim_of(base) else {
            bail!(
                "--analyses: `{base}` is not in the claims table of `ferrite compare` (known: {})",
                claims().iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
            );
        };
        if claim.runner != RunsAs::Pass && n != base {
            bail!("--analyses: `{base}` takes no options");
        }
        if claim.runner == RunsAs::Pass {
            analyses::build(std::slice::from_ref(n)).map_err(|e| anyhow::anyhow!("--analyses: {e}"))?;
        }
        if !out.iter().any(|d| d.name == *n) {
            out.push(Detector { name: n.clone(), claim });
        }
    }
    // The claims table's order, variants after their base.
    out.sort_by_key(|d| (claims().iter().position(|c| c.name == d.base()), d.name.clone()));
    Ok(out)
}

/// Whether `d` runs on `case`: the case is meant for it, or it claims the class of one of the
/// case's bugs. `crash` runs only on cases that say how to recover (`crash: (...)`).
pub fn applies(d: &Detector, case: &Case) -> bool {
    if d.claim.runner == RunsAs::Crash {
        return case.crash.is_some();
    }
    let claims_a_bug = case.bugs.iter().any(|b| d.claim.classes.iter().any(|c| b.scored_for(d.base(), c)));
    case.analyses.is_empty() || case.analyses.iter().any(|a| a == d.base() || *a == d.name) || claims_a_bug
}
