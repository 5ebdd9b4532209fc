//! Scoring: which labelled bugs each finding names, and TP, FP and FN per detector, case and
//! bug class (docs/compare.md): a bug is found when a finding of its class names one of its
//! lines; a finding of a claimed class naming no such line is a false positive, counted once per
//! distinct set of lines; schedule-dependent detectors count k/N over their N seeds.

use std::collections::{BTreeMap, BTreeSet};

use analyses::Finding;
use serde::{Deserialize, Serialize};

use super::suite::{Case, RunRecord};
use super::{class_of, Detector};

#[derive(Serialize, Deserialize, Clone)]
pub struct ScoredFinding {
    pub analysis: String,
    pub kind: String,
    pub class: String,
    /// Whether the detector claims the class (unclaimed findings are listed, not scored).
    pub claimed: bool,
    /// `file:line` of each location with a source line.
    pub lines: Vec<String>,
    /// The bugs whose labelled lines it names (of its class).
    pub matches: Vec<String>,
    pub message: String,
    #[serde(skip, default)]
    signature: String,
}

impl ScoredFinding {
    /// Sets the signature (what tells false positives apart: the class and the set of lines;
    /// not serialised, so set again after reading a finding from a shard's part).
    pub fn restore_signature(&mut self) {
        let mut sig = self.lines.clone();
        sig.sort();
        sig.dedup();
        self.signature = format!("{}|{}", self.class, sig.join(","));
    }
}

/// How a finding of a run of `d` on `case` scores.
pub fn score_finding(d: &Detector, case: &Case, f: &Finding) -> ScoredFinding {
    let class = class_of(&f.analysis, &f.kind);
    let claimed = d.claim.classes.contains(&class.as_str());
    let sites: Vec<(String, u32)> = f.locations.iter().filter_map(|l| Some((l.file.clone()?, l.line?))).collect();
    let mut lines: Vec<String> =
        sites.iter().map(|(file, line)| format!("{}:{line}", file.rsplit('/').next().unwrap_or(file))).collect();
    lines.dedup();
    let matches: Vec<String> = case
        .bugs
        .iter()
        .filter(|b| b.in_class(&class) && sites.iter().any(|(file, line)| b.names(file, *line)))
        .map(|b| b.id.clone())
        .collect();
    let mut scored = ScoredFinding {
        analysis: f.analysis.clone(),
        kind: f.kind.clone(),
        signature: String::new(),
        class,
        claimed,
        lines,
        matches,
        message: f.message.clone(),
    };
    scored.restore_signature();
    scored
}

#[derive(Default, Clone, Copy, Serialize)]
pub struct Counts {
    pub tp: f64,
    pub fp: f64,
    #[serde(rename = "fn")]
    pub fn_: f64,
}

impl Counts {
    fn add(&mut self, o: Counts) {
        self.tp += o.tp;
        self.fp += o.fp;
        self.fn_ += o.fn_;
    }

    fn precision(&self) -> Option<f64> {
        (self.tp + self.fp > 0.0).then(|| self.tp / (self.tp + self.fp))
    }

    fn recall(&self) -> Option<f64> {
        (self.tp + self.fn_ > 0.0).then(|| self.tp / (self.tp + self.fn_))
    }

    fn f1(&self) -> Option<f64> {
        (self.tp + self.fp + self.fn_ > 0.0).then(|| 2.0 * self.tp / (2.0 * self.tp + self.fp + self.fn_))
    }
}

/// Scores of one detector on one case, in one class, from its runs.
/// Bugs the detector is not scored on (`beyond`) are left out; findings naming them are no
/// false positives.
/// Returns the counts, the scored bugs and the bugs beyond the detector (listed, not scored).
fn score_class(case: &Case, runs: &[RunRecord], class: &str, base: &str) -> (Counts, Vec<BugScore>, Vec<BugScore>) {
    let n = runs.len().max(1) as f64;
    let mut counts = Counts::default();
    let mut bugs = Vec::new();
    let mut beyond = Vec::new();
    for b in case.bugs.iter().filter(|b| b.in_class(class)) {
        let seeds: Vec<u64> = runs
            .iter()
            .filter(|r| r.findings.iter().any(|f| f.claimed && f.class == class && f.matches.contains(&b.id)))
            .map(|r| r.seed)
            .collect();
        let score = BugScore { bug: b.id.clone(), class: class.to_string(), found: seeds.len(), of: runs.len(), seeds };
        if !b.scored_for(base, class) {
            beyond.push(score);
            continue;
        }
        let k = score.found as f64;
        counts.tp += k / n;
        counts.fn_ += (n - k) / n;
        bugs.push(score);
    }
    for r in runs {
        let fps: BTreeSet<&str> = r
            .findings
            .iter()
            .filter(|f| f.claimed && f.class == class && f.matches.is_empty())
            .map(|f| f.signature.as_str())
            .collect();
        counts.fp += fps.len() as f64 / n;
    }
    (counts, bugs, beyond)
}

#[derive(Serialize, Clone)]
pub struct BugScore {
    pub bug: String,
    pub class: String,
    /// Runs (seeds) that found it, of how many.
    pub found: usize,
    pub of: usize,
    pub seeds: Vec<u64>,
}

#[derive(Serialize, Clone)]
pub struct CaseDetector {
    /// `found` (every claimed bug in every run), `partial`, `missed`, `clean` (no claimed bug,
    /// no false positive) or `false-positive` (no claimed bug, something reported).
    pub verdict: String,
    pub tp: f64,
    pub fp: f64,
    #[serde(rename = "fn")]
    pub fn_: f64,
    pub bugs: Vec<BugScore>,
    /// Bugs of its classes the case says are beyond the detector's definition (`beyond`):
    /// what it found of them, not scored.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub beyond: Vec<BugScore>,
    pub time_s: f64,
    pub runs: Vec<RunRecord>,
}

#[derive(Serialize)]
pub struct CaseOut {
    pub name: String,
    pub program: String,
    pub args: Vec<String>,
    pub seeds: Vec<u64>,
    /// `bug-free`, or the labelled bugs.
    pub truth: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub detectors: BTreeMap<String, CaseDetector>,
}

#[derive(Serialize, Clone)]
pub struct SummaryRow {
    pub detector: String,
    pub class: String,
    /// Cases the detector ran on, and labelled bugs of the class among them.
    pub cases: usize,
    pub bugs: usize,
    pub tp: f64,
    pub fp: f64,
    #[serde(rename = "fn")]
    pub fn_: f64,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub f1: Option<f64>,
    /// The detector's summed run time over all its cases (seconds of one worker).
    pub time_s: f64,
    /// Peak resident set of the ferrite process during the detector's phase.
    pub peak_rss_mib: f64,
}

#[derive(Serialize, Clone)]
pub struct DetectorOut {
    pub name: String,
    pub classes: Vec<&'static str>,
    pub schedule_dependent: bool,
    pub cases: usize,
    pub runs: usize,
    /// Summed run time (seconds of one worker) and the phase's wall time with --jobs workers.
    pub time_s: f64,
    pub wall_s: f64,
    pub instructions: u64,
    pub peak_rss_mib: f64,
    pub rss_at_start_mib: f64,
    /// `phase` (VmHWM reset at the phase's start) or `process` (getrusage: the process's peak
    /// so far, when the reset is not possible).
    pub memory_scope: String,
    /// Micro-averaged over its claimed classes.
    pub tp: f64,
    pub fp: f64,
    #[serde(rename = "fn")]
    pub fn_: f64,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub f1: Option<f64>,
}

#[derive(Serialize)]
pub struct CompareReport {
    pub ferrite: String,
    pub suite: Vec<String>,
    pub jobs: usize,
    pub explore: u32,
    pub wall_s: f64,
    pub peak_rss_mib: f64,
    pub detectors: Vec<DetectorOut>,
    pub cases: Vec<CaseOut>,
    pub summary: Vec<SummaryRow>,
    /// The user interrupted the comparison with this signal: only the (detector, case) pairs
    /// whose every run ended before it are scored; the others are blank, as not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<i32>,
}

/// Scores every detector's runs: per case and detector, then per detector and class (the
/// totals go into `det_out`, one row per detector).
pub fn score(
    cases: &[Case],
    detectors: &[Detector],
    results: &BTreeMap<(usize, usize), Vec<RunRecord>>,
    det_out: &mut [DetectorOut],
) -> (Vec<CaseOut>, Vec<SummaryRow>) {
    // Scores: per case and detector, then per detector and class.
    let mut case_out: Vec<CaseOut> = Vec::new();
    let mut sums: BTreeMap<(usize, &'static str), (Counts, usize, usize)> = BTreeMap::new();
    for (ci, case) in cases.iter().enumerate() {
        let mut dets = BTreeMap::new();
        for (di, d) in detectors.iter().enumerate() {
            let Some(runs) = results.get(&(di, ci)) else { continue };
            let mut total = Counts::default();
            let mut bugs = Vec::new();
            let mut beyond = Vec::new();
            for class in &d.claim.classes {
                let (c, b, out) = score_class(case, runs, class, d.base());
                beyond.extend(out);
                let e = sums.entry((di, *class)).or_default();
                e.0.add(c);
                e.1 += 1;
                e.2 += b.len();
                total.add(c);
                bugs.extend(b);
            }
            let n_bugs = bugs.len() as f64;
            let verdict = if n_bugs == 0.0 {
                if total.fp > 0.0 {
                    "false-positive"
                } else {
                    "clean"
                }
            } else if (total.tp - n_bugs).abs() < 1e-9 {
                "found"
            } else if total.tp > 0.0 {
                "partial"
            } else {
                "missed"
            };
            dets.insert(
                d.name.clone(),
                CaseDetector {
                    verdict: verdict.into(),
                    tp: total.tp,
                    fp: total.fp,
                    fn_: total.fn_,
                    bugs,
                    beyond,
                    time_s: runs.iter().map(|r| r.time_s).sum(),
                    runs: runs.clone(),
                },
            );
        }
        let truth = if case.bugs.is_empty() {
            serde_json::Value::String("bug-free".into())
        } else {
            serde_json::to_value(&case.bugs).expect("bugs serialise")
        };
        case_out.push(CaseOut {
            name: case.name.clone(),
            program: case.program.clone(),
            args: case.argv[1..].to_vec(),
            seeds: case.seeds.clone(),
            truth,
            note: case.note.clone(),
            detectors: dets,
        });
    }
    let mut summary = Vec::new();
    for (di, d) in detectors.iter().enumerate() {
        let mut all = Counts::default();
        for class in &d.claim.classes {
            let (c, n_cases, n_bugs) = sums.get(&(di, *class)).copied().unwrap_or_default();
            all.add(c);
            summary.push(SummaryRow {
                detector: d.name.clone(),
                class: class.to_string(),
                cases: n_cases,
                bugs: n_bugs,
                tp: c.tp,
                fp: c.fp,
                fn_: c.fn_,
                precision: c.precision(),
                recall: c.recall(),
                f1: c.f1(),
                time_s: det_out[di].time_s,
                peak_rss_mib: det_out[di].peak_rss_mib,
            });
        }
        let o = &mut det_out[di];
        (o.tp, o.fp, o.fn_) = (all.tp, all.fp, all.fn_);
        (o.precision, o.recall, o.f1) = (all.precision(), all.recall(), all.f1());
    }
    (case_out, summary)
}
