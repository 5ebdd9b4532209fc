//! The report file ferrite writes: what a run was and what it found (the driver's
//! [`RunReport`]) and, for `ferrite crash`, what crash testing covered ([`CrashSummary`]); as
//! JSON, RON or SARIF 2.1.0, chosen by the file extension. docs/report-format.md is the schema.

use std::collections::BTreeMap;
use std::path::Path;

use analyses::Finding;
use crashtest::CrashSummary;
use driver::{RunInfo, RunReport};
use serde::{Deserialize, Serialize};

/// A report file.
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
    /// The report of a run (or an exploration), with crash testing's summary if any.
    pub fn new(r: RunReport, crash: Option<CrashSummary>) -> Report {
        Report {
            ferrite: env!("CARGO_PKG_VERSION").into(),
            run: r.run,
            findings: r.findings,
            crash,
            stats: r.stats,
            discarded: r.discarded,
        }
    }

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
