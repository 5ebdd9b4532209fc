//! The report file ferrite writes: what a run was and what it found (the driver's
//! [`RunReport`]) and, for `ferrite crash`, what crash testing covered ([`CrashSummary`]); as
//! JSON, RON or SARIF 2.1.0, chosen by the file extension. docs/report-format.md is the schema.

use std::collections::BTreeMap;
use std::path::Path;

use analyses::Finding;
use crashtest::CrashSummary;
use driver::{RunInfo, RunReport, RunSpec};
use serde::{Deserialize, Serialize};

/// Files being written whole beside their destination ([`write_whole`]'s temporaries), for a
/// signal that ends ferrite meanwhile (a second interrupt during the first one's report).
static WRITING: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Removes the temporaries of reports being written (ferrite is ending on a signal).
pub fn remove_unfinished() {
    for p in WRITING.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        let _ = std::fs::remove_file(p);
    }
}

/// Writes `bytes` to `path` so that the file is never seen half-written: into a temporary file
/// next to it, flushed to the disk, then renamed over it. A full file system or a file-size
/// limit (`RLIMIT_FSIZE`) fails the write of the temporary, which is removed; an older file at
/// `path` is left as it was. Two ferrites writing the same path each rename a whole file: the
/// last to finish wins. A path that is not a regular file (`/dev/stdout`, a FIFO, a link to
/// either) cannot be replaced by a rename and is written directly; a link to a regular file is
/// followed, so that the link stays and its target gets the new contents.
pub fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let (target, mode) = match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => return std::fs::write(path, bytes),
        Ok(m) => (std::fs::canonicalize(path)?, Some(std::os::unix::fs::PermissionsExt::mode(&m.permissions()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (path.to_path_buf(), None),
        Err(e) => return Err(e),
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // The temporary's name is unique among live processes by the pid (and a counter for the
    // threads of one ferrite); `create_new` never reuses a leftover.
    static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.ferrite-{}-{n}.tmp", std::process::id()));
    WRITING.lock().unwrap_or_else(|e| e.into_inner()).push(tmp.clone());
    let written = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        if let Some(mode) = mode {
            // A replaced report keeps the permissions its owner gave it, as an overwrite would.
            f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode & 0o7777))?;
        }
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &target)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    WRITING.lock().unwrap_or_else(|e| e.into_inner()).retain(|p| *p != tmp);
    written
}

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
        write_whole(path, (text + "\n").as_bytes()).map_err(|e| ReportError::Write(name, e))
    }

    /// Reads a report (a regular file of at most [`loader::input::REPORT_CAP`] bytes) and
    /// checks it ([`Report::validate`]): a report that does not parse or that no run of ferrite
    /// could have written is [`ReportError::Corrupt`].
    pub fn read(path: &Path) -> Result<Report, ReportError> {
        let name = path.display().to_string();
        let format = format_of(path).ok_or_else(|| ReportError::Format(name.clone()))?;
        let text = loader::input::read_regular_text(path, loader::input::REPORT_CAP)
            .map_err(|e| ReportError::Read(name.clone(), e))?;
        Report::parse(&text, format).map_err(|e| ReportError::Corrupt(name, e))
    }

    /// A report from its text in `format`, checked.
    fn parse(text: &str, format: Format) -> Result<Report, String> {
        let report: Report = match format {
            Format::Json => serde_json::from_str(text).map_err(|e| e.to_string())?,
            Format::Ron => ron::from_str(text).map_err(|e| e.to_string())?,
            Format::Sarif => {
                return Err("SARIF reports are for code-scanning tools; replay needs the .json or .ron report".into())
            }
        };
        report.validate()?;
        Ok(report)
    }

    /// A report from JSON (`json`) or RON text, checked: what `ferrite replay` does with a
    /// report file before it runs anything. The binary reads files; the fuzz target and
    /// tests/never_panics.rs, which include this module, call this.
    #[allow(dead_code)]
    pub fn from_text(text: &str, json: bool) -> Result<Report, String> {
        Report::parse(text, if json { Format::Json } else { Format::Ron })
    }

    /// The first thing in the report that no run of ferrite could have written: a `run` field
    /// outside what the command line accepts ([`RunInfo::validate`]), a finding whose schedule
    /// or crash image cannot be rebuilt, a crash section without a recovery command.
    pub fn validate(&self) -> Result<(), String> {
        self.run.validate()?;
        let mut ids = std::collections::BTreeSet::new();
        for f in &self.findings {
            if !ids.insert(f.id) {
                return Err(format!("findings: two findings have id {}", f.id));
            }
            driver::report::validate_finding(f)?;
            if f.crash_image.is_some() && self.crash.is_none() {
                return Err(format!("findings[{}].crash_image: the report has no crash section", f.id));
            }
        }
        if let Some(c) = &self.crash {
            validate_crash(c)?;
        }
        Ok(())
    }

    /// The finding `ferrite replay --finding ID` asks for, and the run that rebuilds it, on the
    /// PM directory `pm_dir`: the `run` section's, with the finding's seed, exhaustive schedule
    /// and PMRace interleaving. The report must have been validated.
    pub fn replay_spec(
        &self,
        finding: Option<u32>,
        pm_dir: std::path::PathBuf,
    ) -> Result<(RunSpec, Option<Finding>), String> {
        let wanted = match finding {
            Some(id) => Some(
                self.findings
                    .iter()
                    .find(|f| f.id == id)
                    .cloned()
                    .ok_or_else(|| format!("the report has no finding {id}"))?,
            ),
            None => None,
        };
        let mut spec = self.run.spec(pm_dir);
        if let Some(f) = &wanted {
            // A finding's seed is its run's schedule seed when the report names one.
            match spec.schedule_seed {
                Some(_) => spec.schedule_seed = Some(f.seed),
                None => spec.seed = f.seed,
            }
            spec.schedule = f.schedule.clone().unwrap_or_default();
            spec.hold = f.interleaving.clone();
            // Where an interrupted exploration's first schedule stopped says nothing of the
            // later schedules, each of which the report holds only if it ran to its end.
            if f.seed != self.run.schedule_seed.unwrap_or(self.run.seed) || !spec.schedule.is_empty() {
                spec.stop_at = None;
            }
        }
        Ok((spec, wanted))
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
                            .flat_map(|fr| {
                                // A frame in inlined code, then each call it was inlined at, as
                                // code flow steps of their own (viewers show their lines).
                                let own = json!({ "location": {
                                    "physicalLocation": phys(&fr.file, fr.line),
                                    "message": { "text": fr.describe() } } });
                                std::iter::once(own).chain(fr.inlined_at.iter().map(|at| {
                                    json!({ "location": {
                                        "physicalLocation": phys(&at.file, at.line),
                                        "message": { "text": format!("inlined in {}", at.describe()) } } })
                                }))
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

/// The first thing wrong with a report's crash section, as `crash.FIELD: why`.
fn validate_crash(c: &CrashSummary) -> Result<(), String> {
    use driver::spec::limits;
    let command = |name: &str, cmd: &[String]| {
        if cmd.is_empty() || cmd.iter().any(|a| a.is_empty() || a.contains('\0')) {
            Err(format!("crash.{name}: not a command (a program and its arguments)"))
        } else {
            Ok(())
        }
    };
    command("recover", &c.recover)?;
    if let Some(check) = &c.check {
        command("check", check)?;
    }
    if !["fences", "stores"].contains(&c.crash_point_mode.as_str()) {
        return Err(format!("crash.crash_point_mode: `{}` is not fences or stores", c.crash_point_mode.escape_debug()));
    }
    limits::check("crash.max_images", c.max_images, &limits::MAX_IMAGES)?;
    if !c.max_space_log2.is_finite() || c.max_space_log2 < 0.0 {
        return Err(format!("crash.max_space_log2: {} is not a number of bits", c.max_space_log2));
    }
    if c.covered_log2.is_some_and(|n| !n.is_finite() || n < 0.0) {
        return Err("crash.covered_log2: not a number of bits".into());
    }
    if c.interrupted.is_some_and(|s| !(1..=64).contains(&s)) {
        return Err("crash.interrupted: not a signal number (1 to 64)".into());
    }
    Ok(())
}
