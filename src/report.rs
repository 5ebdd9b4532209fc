//! Reports: what a run was and what it found, as JSON, RON or SARIF 2.1.0 (chosen by the file
//! extension), and the human summary on standard error. docs/report-format.md is the schema.

use std::collections::BTreeMap;
use std::path::Path;

use analyses::Finding;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// The ferrite version that wrote the report.
    pub ferrite: String,
    pub run: RunInfo,
    pub findings: Vec<Finding>,
    /// For `ferrite crash`: what crash testing covered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash: Option<CrashSummary>,
    /// The passes' counters, summed over explored schedules (`pmrace.inter_candidates`,
    /// `pmrace.validated_false_positives`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stats: BTreeMap<String, u64>,
    /// Findings that post-failure validation discarded as false positives, with the reason in
    /// their message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discarded: Vec<Finding>,
}

/// What `ferrite crash` did.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CrashSummary {
    /// Distinct crash points of the workload run.
    pub crash_points: u64,
    /// Images tried over all points (before deduplication).
    pub images: u64,
    /// Images with distinct file contents.
    pub unique_images: u64,
    /// Recovery runs, minimisation included.
    pub recoveries: u64,
    /// Unique images whose recovery failed.
    pub failures: u64,
    /// Points whose space was sampled rather than enumerated.
    pub sampled_points: u64,
    /// log2 of the largest crash space met.
    pub max_space_log2: f64,
    /// How recovery was run, for replay.
    pub recover: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Vec<String>>,
    pub crash_point_mode: String,
    pub max_images: usize,
    /// `--crash-at N`: the one crash point, after N instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash_at: Option<u64>,
    /// `--remap`: recovery mapped the PM files elsewhere.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remap: bool,
    /// `--dedup-points`: one crash point per instruction and call stack.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dedup_points: bool,
    /// `--lazy`: images were explored by Jaaru's refinement.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lazy: bool,
    /// `--lazy`: log2 of the images of the points explored to the end, each covered by some
    /// recovery (the recoveries read only the lines that tell them apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covered_log2: Option<f64>,
}

/// How the guest ended: exactly one of `code`, `signal`, `hang` or `deadlock`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ExitInfo {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signal: Option<i32>,
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub hang: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub deadlock: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunInfo {
    pub program: String,
    /// BLAKE3 of the program's bytes.
    pub program_hash: String,
    /// argv, starting with the program as given.
    pub args: Vec<String>,
    pub env: Vec<String>,
    pub seed: u64,
    pub exit: ExitInfo,
    pub instructions: u64,
    /// Most guest threads alive at once.
    pub threads: u32,
    /// Thread switches the scheduler made.
    pub switches: u64,
    pub strategy: String,
    pub pct_depth: u32,
    pub max_threads: usize,
    #[serde(default = "default_open_files")]
    pub max_open_files: i32,
    /// The persistence model the run used.
    #[serde(default)]
    pub pm: emu::pm::PmConfig,
    /// Lock functions named in `--config`.
    #[serde(default)]
    pub custom_locks: Vec<emu::sync::CustomLock>,
    /// `--preempt all`.
    #[serde(default)]
    pub preempt_all: bool,
    pub trace_hash: String,
    pub pm_mount: String,
    pub max_instructions: u64,
    pub max_memory: u64,
    pub cpus: u32,
    /// The analyses that ran.
    pub analyses: Vec<String>,
    /// Schedules explored (`--explore`); the rest of `run` describes the first.
    #[serde(default = "one")]
    pub schedules: u32,
    /// Host files the guest read, with the BLAKE3 of their contents.
    pub inputs: BTreeMap<String, String>,
    /// Settings for the passes from `--config` (PMRace's synchronisation variables and
    /// allow-list).
    #[serde(default, skip_serializing_if = "is_default")]
    pub settings: analyses::Settings,
    /// `--recover`, which validates pmrace's findings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recover: Option<Vec<String>>,
    /// `--delay` and `--delay-decay`: active delay injection at releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<emu::sched::DelayInjection>,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn default_open_files() -> i32 {
    1024
}

fn one() -> u32 {
    1
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot write report `{0}`: {1}")]
    Write(String, std::io::Error),
    #[error("cannot read report `{0}`: {1}")]
    Read(String, std::io::Error),
    #[error("report `{0}` is not a valid ferrite report: {1}")]
    Corrupt(String, String),
    #[error("report `{0}`: unknown format (use a .json, .ron or .sarif file name)")]
    Format(String),
}

enum Format {
    Json,
    Ron,
    Sarif,
}

fn format_of(path: &Path) -> Option<Format> {
    match path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).as_deref() {
        Some("json") => Some(Format::Json),
        Some("ron") => Some(Format::Ron),
        Some("sarif") => Some(Format::Sarif),
        _ => None,
    }
}

impl Report {
    pub fn write(&self, path: &Path) -> Result<(), ReportError> {
        let name = path.display().to_string();
        let text = match format_of(path).ok_or_else(|| ReportError::Format(name.clone()))? {
            Format::Json => serde_json::to_string_pretty(self).expect("reports serialise"),
            Format::Ron => {
                ron::ser::to_string_pretty(self, ron::ser::PrettyConfig::default()).expect("reports serialise")
            }
            Format::Sarif => serde_json::to_string_pretty(&self.sarif()).expect("reports serialise"),
        };
        std::fs::write(path, text + "\n").map_err(|e| ReportError::Write(name, e))
    }

    pub fn read(path: &Path) -> Result<Report, ReportError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ReportError::Read(name.clone(), e))?;
        match format_of(path) {
            Some(Format::Json) => serde_json::from_str(&text).map_err(|e| ReportError::Corrupt(name, e.to_string())),
            Some(Format::Ron) => ron::from_str(&text).map_err(|e| ReportError::Corrupt(name, e.to_string())),
            Some(Format::Sarif) => Err(ReportError::Corrupt(
                name,
                "SARIF reports are for code-scanning tools; replay needs the .json or .ron report".into(),
            )),
            None => Err(ReportError::Format(name)),
        }
    }

    /// SARIF 2.1.0: one result per finding, rule = analysis/kind, with code flows for backtraces.
    fn sarif(&self) -> serde_json::Value {
        use serde_json::json;
        let mut rules: Vec<String> = self.findings.iter().map(|f| format!("{}/{}", f.analysis, f.kind)).collect();
        rules.sort();
        rules.dedup();
        let phys = |file: &Option<String>, line: Option<u32>| {
            json!({
                "artifactLocation": { "uri": file.clone().unwrap_or_else(|| self.run.program.clone()) },
                "region": { "startLine": line.unwrap_or(1) }
            })
        };
        let results: Vec<serde_json::Value> = self
            .findings
            .iter()
            .map(|f| {
                let locations: Vec<serde_json::Value> = f
                    .locations
                    .iter()
                    .map(|l| json!({ "physicalLocation": phys(&l.file, l.line), "message": { "text": l.role } }))
                    .collect();
                let flows: Vec<serde_json::Value> = f
                    .locations
                    .iter()
                    .map(|l| {
                        let frames: Vec<serde_json::Value> = l
                            .backtrace
                            .iter()
                            .map(|fr| {
                                json!({ "location": {
                                    "physicalLocation": phys(&fr.file, fr.line),
                                    "message": { "text": fr.describe() } } })
                            })
                            .collect();
                        json!({ "threadFlows": [ { "locations": frames } ], "message": { "text": l.role } })
                    })
                    .collect();
                json!({
                    "ruleId": format!("{}/{}", f.analysis, f.kind),
                    "level": "error",
                    "message": { "text": f.message },
                    "locations": locations,
                    "codeFlows": flows,
                    "properties": { "ferriteId": f.id, "seed": f.seed }
                })
            })
            .collect();
        json!({
            "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
            "version": "2.1.0",
            "runs": [{
                "tool": { "driver": {
                    "name": "ferrite",
                    "version": self.ferrite,
                    "rules": rules.iter().map(|r| json!({ "id": r })).collect::<Vec<_>>()
                } },
                "invocations": [{
                    "executionSuccessful": true,
                    "commandLine": self.run.args.join(" "),
                    "properties": { "seed": self.run.seed, "traceHash": self.run.trace_hash }
                }],
                "results": results
            }]
        })
    }
}

/// Frames of each backtrace printed on the terminal (the report keeps them all).
const PRINTED_FRAMES: usize = 16;

/// The findings on standard error, like a sanitizer's report. Write errors (a closed pipe) are
/// ignored: the report file, if any, still gets everything.
pub fn print_findings(findings: &[Finding]) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    for f in findings {
        let times = if f.occurrences > 1 { format!(" (x{})", f.occurrences) } else { String::new() };
        let _ = writeln!(err, "ferrite: finding {} [{}] {}{times}", f.id, f.analysis, f.message);
        for l in &f.locations {
            for (i, fr) in l.backtrace.iter().take(PRINTED_FRAMES).enumerate() {
                let lead = if i == 0 { format!("  {:>8}", l.role) } else { format!("  {:>8}", format!("#{i}")) };
                let _ = writeln!(err, "{lead}  {}  [{:#x}]", fr.describe(), fr.pc);
            }
            if l.backtrace.len() > PRINTED_FRAMES {
                let _ = writeln!(err, "  {:>8}  ... {} more frames", "", l.backtrace.len() - PRINTED_FRAMES);
            }
        }
    }
}
