//! `ferrite compare`: every detector over a labelled suite of guests, side by side.
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
//! and it goes through [`crate::execute`] / [`crate::crash::test_all`]. Then each detector is
//! scored on the bug classes it claims ([`CLAIMS`]):
//!
//! - a bug is found (TP) by a run when one of the detector's findings of the bug's class names
//!   one of the bug's labelled lines among its locations; each bug counts once per run;
//! - a finding of a claimed class that names no labelled line of a bug of its class is a false
//!   positive (FP); FPs are counted once per distinct set of lines;
//! - a labelled bug of a claimed class that a run did not find is a false negative (FN);
//! - schedule-dependent detectors run once per seed of the case, and a bug found in k of N seeds
//!   counts k/N TP and (N-k)/N FN; FPs count 1/N per seed that showed them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use analyses::Finding;
use clap::Parser as _;
use serde::{Deserialize, Serialize};

use crate::cli::{Cli, Command, CompareArgs};
use driver::{out, say};

/// An error of `ferrite compare`, said in full.
#[derive(Debug)]
pub struct Fatal(pub String);

impl<E: std::fmt::Display> From<E> for Fatal {
    fn from(e: E) -> Fatal {
        Fatal(format!("{e:#}"))
    }
}

/// How a detector is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runner {
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
    pub classes: &'static [&'static str],
    /// Runs once per seed of a case (and is scored k/N); otherwise once, with the first seed.
    pub schedule_dependent: bool,
    pub runner: Runner,
}

/// The claims table. A detector of ferrite that is not here cannot be compared: add its row.
pub const CLAIMS: &[Claim] = &[
    Claim {
        name: "unpersisted",
        classes: &["unpersisted-store", "flush-without-fence", "redundant-flush"],
        schedule_dependent: false,
        runner: Runner::Pass,
    },
    Claim { name: "hawkset", classes: &["persistence-race"], schedule_dependent: true, runner: Runner::Pass },
    Claim { name: "vardalith", classes: &["persistence-race"], schedule_dependent: true, runner: Runner::Pass },
    Claim {
        name: "pmrace",
        classes: &["persistence-race", "sync-inconsistency"],
        schedule_dependent: true,
        runner: Runner::Pass,
    },
    Claim { name: "oscs", classes: &["atomicity-violation"], schedule_dependent: true, runner: Runner::Pass },
    Claim { name: "hmtrace", classes: &["data-race"], schedule_dependent: true, runner: Runner::Pass },
    Claim { name: "crash", classes: &["crash-consistency"], schedule_dependent: false, runner: Runner::Crash },
    Claim {
        name: "machine",
        classes: &["fault", "deadlock", "hang"],
        schedule_dependent: true,
        runner: Runner::Machine,
    },
];

/// The bug class of each finding kind. Findings of analysis `fault` are class `fault`; a kind
/// not listed is its own class (claimed by nobody unless added to [`CLAIMS`]).
pub const KIND_CLASSES: &[(&str, &str)] = &[
    ("unpersisted-store", "unpersisted-store"),
    ("flush-without-fence", "flush-without-fence"),
    ("nt-store-without-fence", "flush-without-fence"),
    ("flush-clean-line", "redundant-flush"),
    ("redundant-fence", "redundant-flush"),
    ("persistence-induced-race", "persistence-race"),
    ("inter-thread-inconsistency", "persistence-race"),
    ("sync-inconsistency", "sync-inconsistency"),
    ("order-sensitive-critical-sections", "atomicity-violation"),
    ("data-race", "data-race"),
    ("recovery-failed", "crash-consistency"),
    ("all-threads-blocked", "deadlock"),
    ("instruction-budget", "hang"),
];

/// The class `crash` is scored on: labelled crash-consistency bugs, and every bug labelled
/// harmful after recovery whatever its class.
const CRASH_CLASS: &str = "crash-consistency";

fn class_of(analysis: &str, kind: &str) -> String {
    if analysis == "fault" {
        return "fault".into();
    }
    KIND_CLASSES.iter().find(|(k, _)| *k == kind).map_or_else(|| kind.to_string(), |(_, c)| c.to_string())
}

fn known_classes() -> BTreeSet<&'static str> {
    CLAIMS.iter().flat_map(|c| c.classes.iter().copied()).collect()
}

// ---------------------------------------------------------------------------------------------
// The manifest.

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    /// Where the guest binaries are, relative to the manifest's directory (default `build`).
    #[serde(default)]
    build: Option<String>,
    /// Where the guest sources (whose markers label the bugs) are (default `src`).
    #[serde(default)]
    sources: Option<String>,
    cases: Vec<CaseSpec>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct CaseSpec {
    name: String,
    /// The binary's file name under the build directory.
    program: String,
    /// The guest's arguments; `{pool}`, `{guest}` and `{build}` are replaced.
    #[serde(default)]
    args: Vec<String>,
    /// The PM pool's path inside the guest (`{pool}`; default `/mnt/pmem0/pool`).
    #[serde(default)]
    pool: Option<String>,
    /// Seeds of the schedule-dependent detectors (default `[0]`).
    #[serde(default)]
    seeds: Vec<u64>,
    /// The detectors the case is meant for (by name; empty: every detector). Detectors that
    /// claim the class of one of its bugs run on it in any case.
    #[serde(default)]
    analyses: Vec<String>,
    /// More `ferrite run` options for every run of the case (`--max-instructions`, `--cpus`).
    #[serde(default)]
    options: Vec<String>,
    /// How `crash` recovers this case; without it, `crash` runs only if a bug is harmful.
    #[serde(default)]
    crash: Option<CrashSpec>,
    truth: Truth,
    #[serde(default)]
    note: Option<String>,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
struct CrashSpec {
    /// The recovery command (default: the program itself with its arguments).
    #[serde(default)]
    recover: Vec<String>,
    /// A checker run after each successful recovery.
    #[serde(default)]
    check: Vec<String>,
    /// More `ferrite crash` options (`--crash-points stores`, `--max-images N`).
    #[serde(default)]
    options: Vec<String>,
}

#[derive(Deserialize, Debug, Clone)]
enum Truth {
    BugFree,
    Bugs(Vec<BugSpec>),
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct BugSpec {
    class: String,
    /// The source lines of the bug: the racing or inconsistent accesses.
    at: Vec<Site>,
    /// Whether the bug breaks the program after a crash and its recovery.
    #[serde(default)]
    harmful: Option<bool>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    note: Option<String>,
}

#[derive(Deserialize, Debug, Clone)]
enum Site {
    /// Every line of a source file containing the text (a whole marker comment).
    Marker(String, String),
    /// A line number.
    Line(String, u32),
    /// The line `n` lines after (before, if negative) each line containing the marker: for a
    /// line that has no marker of its own.
    Offset(String, String, i32),
}

/// A case ready to run.
#[derive(Debug, Clone)]
struct Case {
    name: String,
    program: String,
    /// argv: the binary's absolute path, then the arguments.
    argv: Vec<String>,
    seeds: Vec<u64>,
    analyses: Vec<String>,
    options: Vec<String>,
    crash: Option<ResolvedCrash>,
    bugs: Vec<Bug>,
    note: Option<String>,
}

#[derive(Debug, Clone)]
struct ResolvedCrash {
    recover: Vec<String>,
    check: Option<Vec<String>>,
    options: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
struct Bug {
    id: String,
    class: String,
    /// `file:line` of each labelled line.
    lines: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    harmful: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    #[serde(skip)]
    sites: Vec<(String, u32)>,
}

impl Bug {
    /// Whether a finding location at `file:line` is one of the bug's lines.
    fn names(&self, file: &str, line: u32) -> bool {
        self.sites.iter().any(|(f, l)| *l == line && (file == f || file.ends_with(&format!("/{f}"))))
    }

    /// Whether the bug is part of the ground truth of `class`.
    fn in_class(&self, class: &str) -> bool {
        self.class == class || (class == CRASH_CLASS && self.harmful == Some(true))
    }
}

fn load_suite(path: &Path) -> Result<(Vec<Case>, Vec<PathBuf>), Fatal> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| Fatal(format!("cannot read suite directory `{}`: {e}", path.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "ron"))
            .collect();
        v.sort();
        if v.is_empty() {
            return Err(Fatal(format!("suite directory `{}` has no .ron manifest", path.display())));
        }
        v
    } else {
        vec![path.to_path_buf()]
    };
    let mut cases = Vec::new();
    for f in &files {
        cases.extend(load_manifest(f)?);
    }
    let mut seen = BTreeSet::new();
    for c in &cases {
        if !seen.insert(c.name.clone()) {
            return Err(Fatal(format!("suite: two cases are named `{}`", c.name)));
        }
    }
    Ok((cases, files))
}

fn load_manifest(path: &Path) -> Result<Vec<Case>, Fatal> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Fatal(format!("cannot read suite `{}`: {e}", path.display())))?;
    let suite: SuiteFile = ron::Options::default()
        .with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME)
        .from_str(&text)
        .map_err(|e| Fatal(format!("suite `{}` is not a valid manifest: {e}", path.display())))?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let base = if base.as_os_str().is_empty() { PathBuf::from(".") } else { base };
    let abs = |p: &str| -> PathBuf {
        let p = base.join(p);
        std::fs::canonicalize(&p).unwrap_or(p)
    };
    let build = abs(suite.build.as_deref().unwrap_or("build"));
    let sources = abs(suite.sources.as_deref().unwrap_or("src"));
    let classes = known_classes();
    let mut sources_cache: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::new();
    for spec in suite.cases {
        let ctx = |msg: String| Fatal(format!("suite `{}`, case `{}`: {msg}", path.display(), spec.name));
        let binary = build.join(&spec.program);
        let pool = spec.pool.clone().unwrap_or_else(|| "/mnt/pmem0/pool".into());
        let subst = |s: &str| {
            s.replace("{pool}", &pool)
                .replace("{guest}", &binary.display().to_string())
                .replace("{build}", &build.display().to_string())
        };
        let mut argv = vec![binary.display().to_string()];
        argv.extend(spec.args.iter().map(|a| subst(a)));
        let crash = spec.crash.as_ref().map(|c| ResolvedCrash {
            recover: if c.recover.is_empty() { argv.clone() } else { c.recover.iter().map(|a| subst(a)).collect() },
            check: if c.check.is_empty() { None } else { Some(c.check.iter().map(|a| subst(a)).collect()) },
            options: c.options.clone(),
        });
        if let Some(bad) = spec.analyses.iter().find(|a| claim_of(a.split(':').next().unwrap_or(a)).is_none()) {
            return Err(ctx(format!(
                "unknown detector `{bad}` in `analyses` (known: {})",
                CLAIMS.iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
            )));
        }
        let mut bugs = Vec::new();
        if let Truth::Bugs(list) = &spec.truth {
            if list.is_empty() {
                return Err(ctx("`Bugs([])` lists no bug: write `BugFree`".into()));
            }
            for (i, b) in list.iter().enumerate() {
                if !classes.contains(b.class.as_str()) {
                    return Err(ctx(format!(
                        "unknown bug class `{}` (known: {})",
                        b.class,
                        classes.iter().copied().collect::<Vec<_>>().join(", ")
                    )));
                }
                if (b.harmful == Some(true) || b.class == CRASH_CLASS) && spec.crash.is_none() {
                    return Err(ctx(format!(
                        "bug {} is harmful after recovery, but the case has no `crash` recovery to show it",
                        i + 1
                    )));
                }
                if b.at.is_empty() {
                    return Err(ctx(format!("bug {} has no lines (`at`)", i + 1)));
                }
                let mut sites = Vec::new();
                for site in &b.at {
                    match site {
                        Site::Line(file, line) => sites.push((file.clone(), *line)),
                        Site::Marker(file, marker) | Site::Offset(file, marker, _) => {
                            if !sources_cache.contains_key(file) {
                                let p = sources.join(file);
                                let text = std::fs::read_to_string(&p)
                                    .map_err(|e| ctx(format!("cannot read source `{}`: {e}", p.display())))?;
                                sources_cache.insert(file.clone(), text);
                            }
                            let hits: Vec<u32> = sources_cache[file]
                                .lines()
                                .enumerate()
                                .filter(|(_, l)| l.contains(marker.as_str()))
                                .map(|(n, _)| n as u32 + 1)
                                .collect();
                            if hits.is_empty() {
                                return Err(ctx(format!(
                                    "marker `{marker}` is not in {}",
                                    sources.join(file).display()
                                )));
                            }
                            let delta = if let Site::Offset(_, _, n) = site { *n } else { 0 };
                            for l in hits {
                                let l = i64::from(l) + i64::from(delta);
                                if l < 1 {
                                    return Err(ctx(format!("`Offset` of marker `{marker}` is before line 1")));
                                }
                                sites.push((file.clone(), l as u32));
                            }
                        }
                    }
                }
                sites.sort();
                sites.dedup();
                bugs.push(Bug {
                    id: b.id.clone().unwrap_or_else(|| format!("{}#{}", spec.name, i + 1)),
                    class: b.class.clone(),
                    lines: sites.iter().map(|(f, l)| format!("{f}:{l}")).collect(),
                    harmful: b.harmful,
                    note: b.note.clone(),
                    sites,
                });
            }
        }
        let mut seeds = if spec.seeds.is_empty() { vec![0] } else { spec.seeds.clone() };
        seeds.dedup();
        out.push(Case {
            name: spec.name.clone(),
            program: spec.program.clone(),
            argv,
            seeds,
            analyses: spec.analyses.clone(),
            options: spec.options.clone(),
            crash,
            bugs,
            note: spec.note.clone(),
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Detectors and runs.

/// A detector as selected: `hawkset` or a variant with options (`hawkset:irh=0`).
#[derive(Clone)]
struct Detector {
    /// As given (`hawkset:irh=0`): the column name.
    name: String,
    claim: &'static Claim,
}

impl Detector {
    fn base(&self) -> &'static str {
        self.claim.name
    }

    /// Whether a finding is this detector's own (and not the machine's, in a pass's run).
    fn owns(&self, f: &Finding) -> bool {
        match self.claim.runner {
            Runner::Pass => f.analysis == self.base(),
            Runner::Crash => f.analysis == "crash",
            Runner::Machine => matches!(f.analysis.as_str(), "fault" | "deadlock" | "hang"),
        }
    }

    fn analyses_option(&self) -> &str {
        match self.claim.runner {
            Runner::Pass => &self.name,
            _ => "none",
        }
    }
}

fn claim_of(base: &str) -> Option<&'static Claim> {
    CLAIMS.iter().find(|c| c.name == base)
}

fn available(claim: &Claim) -> bool {
    claim.runner != Runner::Pass || analyses::info(claim.name).is_some()
}

fn select_detectors(names: &[String]) -> Result<Vec<Detector>, Fatal> {
    let names: Vec<String> = names.iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    let mut out: Vec<Detector> = Vec::new();
    let all = names.is_empty() || names.iter().any(|n| n == "all");
    if all {
        out.extend(CLAIMS.iter().filter(|c| available(c)).map(|c| Detector { name: c.name.into(), claim: c }));
    }
    for n in names.iter().filter(|n| n.as_str() != "all") {
        let base = n.split(':').next().unwrap_or(n);
        let Some(claim) = claim_of(base) else {
            return Err(Fatal(format!(
                "--analyses: `{base}` is not in the claims table of `ferrite compare` (known: {})",
                CLAIMS.iter().filter(|c| available(c)).map(|c| c.name).collect::<Vec<_>>().join(", ")
            )));
        };
        if !available(claim) {
            return Err(Fatal(format!("--analyses: `{base}` is not an analysis of this ferrite")));
        }
        if claim.runner != Runner::Pass && n != base {
            return Err(Fatal(format!("--analyses: `{base}` takes no options")));
        }
        if claim.runner == Runner::Pass {
            analyses::build(std::slice::from_ref(n)).map_err(|e| Fatal(format!("--analyses: {e}")))?;
        }
        if !out.iter().any(|d| d.name == *n) {
            out.push(Detector { name: n.clone(), claim });
        }
    }
    // The claims table's order, variants after their base.
    out.sort_by_key(|d| (CLAIMS.iter().position(|c| c.name == d.base()), d.name.clone()));
    Ok(out)
}

/// Whether `d` runs on `case`: the case is meant for it, or it claims the class of one of the
/// case's bugs. `crash` runs only on cases that say how to recover (`crash: (...)`).
fn applies(d: &Detector, case: &Case) -> bool {
    if d.claim.runner == Runner::Crash {
        return case.crash.is_some();
    }
    let claims_a_bug = case.bugs.iter().any(|b| d.claim.classes.iter().any(|c| b.in_class(c)));
    case.analyses.is_empty() || case.analyses.iter().any(|a| a == d.base() || *a == d.name) || claims_a_bug
}

/// One run's result, as scored.
#[derive(Serialize, Clone)]
struct RunRecord {
    seed: u64,
    time_s: f64,
    instructions: u64,
    exit: driver::ExitInfo,
    /// The equivalent command line.
    command: String,
    findings: Vec<ScoredFinding>,
}

#[derive(Serialize, Clone)]
struct ScoredFinding {
    analysis: String,
    kind: String,
    class: String,
    /// Whether the detector claims the class (unclaimed findings are listed, not scored).
    claimed: bool,
    /// `file:line` of each location with a source line.
    lines: Vec<String>,
    /// The bugs whose labelled lines it names (of its class).
    matches: Vec<String>,
    message: String,
    #[serde(skip)]
    signature: String,
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn quote_all(v: &[String]) -> String {
    v.iter().map(|s| shell_quote(s)).collect::<Vec<_>>().join(" ")
}

/// The `ferrite` command line of a run (what `ferrite run`/`crash` would be given), parsed by
/// the real command-line parser so that every default is the same.
fn command_line(d: &Detector, case: &Case, seed: u64, explore: u32) -> Vec<String> {
    let sub = if d.claim.runner == Runner::Crash { "crash" } else { "run" };
    let mut v: Vec<String> = vec!["ferrite".into(), sub.into(), "--quiet".into(), "--env-clear".into()];
    v.extend(["--analyses".into(), d.analyses_option().to_string(), "--seed".into(), seed.to_string()]);
    if explore > 1 && d.claim.runner != Runner::Crash && !case.options.iter().any(|o| o.starts_with("--explore")) {
        v.extend(["--explore".into(), explore.to_string()]);
    }
    v.extend(case.options.iter().cloned());
    if let (Runner::Crash, Some(c)) = (d.claim.runner, &case.crash) {
        v.extend(c.options.iter().cloned());
    }
    if let (true, Some(c)) = (d.base() == "pmrace", &case.crash) {
        // PMRace validates its findings with the program's recovery.
        v.extend(["--recover".into(), c.recover.join(" ")]);
    }
    v.push("--".into());
    v.extend(case.argv.iter().cloned());
    v
}

fn display_command(d: &Detector, case: &Case, argv: &[String]) -> String {
    // Without the `--quiet` that command_line puts third.
    let mut shown: Vec<String> = argv[..2].iter().chain(&argv[3..]).cloned().collect();
    if d.claim.runner == Runner::Crash {
        let recover = case.crash.as_ref().map(|c| c.recover.clone()).unwrap_or_else(|| case.argv.clone());
        let mut extra = vec!["--recover".to_string(), recover.join(" ")];
        if let Some(check) = case.crash.as_ref().and_then(|c| c.check.clone()) {
            extra.extend(["--check".to_string(), check.join(" ")]);
        }
        let at = shown.iter().position(|a| a == "--").unwrap_or(shown.len());
        shown.splice(at..at, extra);
    }
    quote_all(&shown)
}

/// Runs one job: `d` on `case` with `seed`. Guest output is discarded.
fn run_job(d: &Detector, case: &Case, seed: u64, explore: u32, jobs: usize) -> Result<RunRecord, Fatal> {
    let argv = command_line(d, case, seed, explore);
    let cli = Cli::try_parse_from(&argv).map_err(|e| {
        let msg = e.to_string();
        let first = msg.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim_start_matches("error: ").to_string();
        Fatal(format!("case `{}`: options `{}`: {first}", case.name, quote_all(&argv[2..])))
    })?;
    let start = Instant::now();
    let (findings, instructions, exit) = match cli.command {
        Command::Run(a) => {
            // As `cmd_run`: one run, `--explore N` schedules from the seed, or exhaustive
            // exploration; the guest's output is discarded.
            let pm = tempfile::Builder::new().prefix("ferrite-pm-").tempdir()?;
            let mut spec = crate::cmd::run_spec(&a.opts, &a.command, pm.path().to_path_buf())?;
            spec.discard_output = true;
            let (report, out, _) = crate::cmd::run::explore_as(&spec, &a.opts)?;
            (report.findings, out.instructions, report.run.exit)
        }
        Command::Crash(a) => crash_job(case, &a, jobs)?,
        _ => unreachable!("compare builds only run and crash command lines"),
    };
    let time_s = start.elapsed().as_secs_f64();
    let scored = findings.iter().filter(|f| d.owns(f)).map(|f| score_finding(d, case, f)).collect();
    Ok(RunRecord { seed, time_s, instructions, exit, command: display_command(d, case, &argv), findings: scored })
}

/// `ferrite crash` on one case: the workload run with the crash recorder, then every crash
/// image recovered (the steps of `cmd_crash`, with the guest's output discarded).
fn crash_job(
    case: &Case,
    a: &crate::cli::CrashArgs,
    jobs: usize,
) -> Result<(Vec<Finding>, u64, driver::ExitInfo), Fatal> {
    let work = tempfile::Builder::new().prefix("ferrite-crash-").tempdir()?;
    let mut spec = crate::cmd::run_spec(&a.opts, &a.command, work.path().to_path_buf())?;
    spec.discard_output = true;
    let (report, out, log) =
        crashtest::workload(&crate::cmd::runner(), &spec, &a.crash_points, a.crash_at, a.dedup_points)?;
    let c = case.crash.clone().unwrap_or(ResolvedCrash { recover: case.argv.clone(), check: None, options: vec![] });
    let plan = crashtest::Plan {
        recover: c.recover,
        check: c.check,
        base: driver::RunSpec { analyses: vec!["none".into()], discard_output: true, quiet: true, ..spec.clone() },
        budget: crashtest::recovery_budget(out.instructions, a.opts.max_instructions),
        jobs: a.jobs.unwrap_or(jobs).max(1),
        max_images: a.max_images,
        quiet: true,
        remap: false,
        xfd: false,
        fresh: false,
        lazy: false,
    };
    let tested = crashtest::test_all(&log, &plan, &mut std::collections::BTreeSet::new())?;
    let mut findings = report.findings.clone();
    findings.extend(tested.findings);
    Ok((Finding::merge(findings), out.instructions, report.run.exit))
}

fn score_finding(d: &Detector, case: &Case, f: &Finding) -> ScoredFinding {
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
    let mut sig: Vec<String> = lines.clone();
    sig.sort();
    sig.dedup();
    ScoredFinding {
        analysis: f.analysis.clone(),
        kind: f.kind.clone(),
        signature: format!("{class}|{}", sig.join(",")),
        class,
        claimed,
        lines,
        matches,
        message: f.message.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// Scores.

#[derive(Default, Clone, Copy, Serialize)]
struct Counts {
    tp: f64,
    fp: f64,
    #[serde(rename = "fn")]
    fn_: f64,
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
fn score_class(case: &Case, runs: &[RunRecord], class: &str) -> (Counts, Vec<BugScore>) {
    let n = runs.len().max(1) as f64;
    let mut counts = Counts::default();
    let mut bugs = Vec::new();
    for b in case.bugs.iter().filter(|b| b.in_class(class)) {
        let seeds: Vec<u64> = runs
            .iter()
            .filter(|r| r.findings.iter().any(|f| f.claimed && f.class == class && f.matches.contains(&b.id)))
            .map(|r| r.seed)
            .collect();
        let k = seeds.len() as f64;
        counts.tp += k / n;
        counts.fn_ += (n - k) / n;
        bugs.push(BugScore { bug: b.id.clone(), class: class.to_string(), found: seeds.len(), of: runs.len(), seeds });
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
    (counts, bugs)
}

#[derive(Serialize, Clone)]
struct BugScore {
    bug: String,
    class: String,
    /// Runs (seeds) that found it, of how many.
    found: usize,
    of: usize,
    seeds: Vec<u64>,
}

#[derive(Serialize, Clone)]
struct CaseDetector {
    /// `found` (every claimed bug in every run), `partial`, `missed`, `clean` (no claimed bug,
    /// no false positive) or `false-positive` (no claimed bug, something reported).
    verdict: String,
    tp: f64,
    fp: f64,
    #[serde(rename = "fn")]
    fn_: f64,
    bugs: Vec<BugScore>,
    time_s: f64,
    runs: Vec<RunRecord>,
}

#[derive(Serialize)]
struct CaseOut {
    name: String,
    program: String,
    args: Vec<String>,
    seeds: Vec<u64>,
    /// `bug-free`, or the labelled bugs.
    truth: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    detectors: BTreeMap<String, CaseDetector>,
}

#[derive(Serialize, Clone)]
struct SummaryRow {
    detector: String,
    class: String,
    /// Cases the detector ran on, and labelled bugs of the class among them.
    cases: usize,
    bugs: usize,
    tp: f64,
    fp: f64,
    #[serde(rename = "fn")]
    fn_: f64,
    precision: Option<f64>,
    recall: Option<f64>,
    f1: Option<f64>,
    /// The detector's summed run time over all its cases (seconds of one worker).
    time_s: f64,
    /// Peak resident set of the ferrite process during the detector's phase.
    peak_rss_mib: f64,
}

#[derive(Serialize, Clone)]
struct DetectorOut {
    name: String,
    classes: Vec<&'static str>,
    schedule_dependent: bool,
    cases: usize,
    runs: usize,
    /// Summed run time (seconds of one worker) and the phase's wall time with --jobs workers.
    time_s: f64,
    wall_s: f64,
    instructions: u64,
    peak_rss_mib: f64,
    rss_at_start_mib: f64,
    /// `phase` (VmHWM reset at the phase's start) or `process` (getrusage: the process's peak
    /// so far, when the reset is not possible).
    memory_scope: String,
    /// Micro-averaged over its claimed classes.
    tp: f64,
    fp: f64,
    #[serde(rename = "fn")]
    fn_: f64,
    precision: Option<f64>,
    recall: Option<f64>,
    f1: Option<f64>,
}

#[derive(Serialize)]
struct CompareReport {
    ferrite: String,
    suite: Vec<String>,
    jobs: usize,
    explore: u32,
    wall_s: f64,
    peak_rss_mib: f64,
    detectors: Vec<DetectorOut>,
    cases: Vec<CaseOut>,
    summary: Vec<SummaryRow>,
}

// ---------------------------------------------------------------------------------------------
// Memory.

fn status_kib(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// Resets the process's peak RSS (VmHWM) to its current RSS; false where the kernel refuses.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn process_peak_kib() -> u64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_maxrss.max(0) as u64
}

// ---------------------------------------------------------------------------------------------
// The command.

/// The default suite: guests/manifest.ron from the working directory, else the one of the
/// source tree ferrite was built from.
fn default_suite() -> PathBuf {
    let here = PathBuf::from("guests/manifest.ron");
    if here.is_file() {
        return here;
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("guests/manifest.ron")
}

fn filter_cases(cases: Vec<Case>, wanted: &[String]) -> Result<Vec<Case>, Fatal> {
    let wanted: Vec<&String> = wanted.iter().filter(|w| !w.trim().is_empty()).collect();
    if wanted.is_empty() {
        return Ok(cases);
    }
    for w in &wanted {
        let hit = cases.iter().any(|c| match w.strip_suffix('*') {
            Some(p) => c.name.starts_with(p),
            None => c.name == **w,
        });
        if !hit {
            return Err(Fatal(format!("--cases: no case matches `{w}`")));
        }
    }
    Ok(cases
        .into_iter()
        .filter(|c| {
            wanted.iter().any(|w| match w.strip_suffix('*') {
                Some(p) => c.name.starts_with(p),
                None => c.name == **w,
            })
        })
        .collect())
}

pub fn cmd_compare(a: CompareArgs) -> Result<i32, Fatal> {
    let started = Instant::now();
    if let Some(r) = &a.report {
        if !r.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
            return Err(Fatal(format!(
                "--report `{}`: use a .json file name (the .csv and .svg are written next to it)",
                r.display()
            )));
        }
    }
    if let Some(dir) = a.report.as_ref().and_then(|r| r.parent()).filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return Err(Fatal(format!("--report: directory `{}` does not exist", dir.display())));
        }
    }
    if a.explore == 0 {
        return Err(Fatal("--explore needs at least one schedule".into()));
    }
    let suite = a.suite.clone().unwrap_or_else(default_suite);
    if !suite.exists() {
        return Err(Fatal(format!("suite `{}` does not exist", suite.display())));
    }
    let (cases, files) = load_suite(&suite)?;
    let cases = filter_cases(cases, &a.cases)?;
    let detectors = select_detectors(&a.analyses)?;
    // Nothing is built here: every binary must exist already.
    let mut missing: Vec<String> = cases
        .iter()
        .flat_map(|c| {
            let mut v = vec![c.argv[0].clone()];
            if let Some(cr) = &c.crash {
                v.push(cr.recover[0].clone());
                v.extend(cr.check.as_ref().map(|k| k[0].clone()));
            }
            v
        })
        .filter(|p| !Path::new(p).is_file())
        .collect();
    missing.sort();
    missing.dedup();
    if !missing.is_empty() {
        return Err(Fatal(format!(
            "{} guest binar{} missing ({}{}): build the suite first with `make -C guests`",
            missing.len(),
            if missing.len() == 1 { "y is" } else { "ies are" },
            missing.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            if missing.len() > 3 { ", ..." } else { "" }
        )));
    }
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).max(1);
    let report_path = a.report.as_ref().map(|r| std::path::absolute(r).unwrap_or_else(|_| r.clone()));
    // Guests run in a scratch working directory of their own (the files some write there are
    // not left in the user's), shared by every run.
    let scratch = tempfile::Builder::new().prefix("ferrite-compare-").tempdir()?;
    std::env::set_current_dir(scratch.path())?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .map_err(|e| Fatal(format!("cannot start {jobs} workers: {e}")))?;

    // The plan: one phase per detector, its (case, seed) runs in parallel.
    let plan: Vec<(usize, Vec<(usize, u64)>)> = detectors
        .iter()
        .enumerate()
        .map(|(di, d)| {
            let runs = cases
                .iter()
                .enumerate()
                .filter(|(_, c)| applies(d, c))
                .flat_map(|(ci, c)| {
                    let seeds = if d.claim.schedule_dependent { c.seeds.clone() } else { vec![c.seeds[0]] };
                    seeds.into_iter().map(move |s| (ci, s))
                })
                .collect::<Vec<_>>();
            // Runs that explore many schedules first, so that they do not end the phase alone.
            let mut runs = runs;
            runs.sort_by_key(|&(ci, _)| !cases[ci].options.iter().any(|o| o.starts_with("--explore")));
            (di, runs)
        })
        .collect();
    let total: usize = plan.iter().map(|p| p.1.len()).sum();
    if !a.quiet {
        say!(
            "ferrite: comparing {} detector(s) on {} case(s): {total} runs on {jobs} worker(s)",
            detectors.len(),
            cases.len()
        );
    }
    let bar = if a.quiet { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(total as u64) };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:>12} {pos}/{len} runs [{bar:30}] {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut results: BTreeMap<(usize, usize), Vec<RunRecord>> = BTreeMap::new();
    let mut det_out: Vec<DetectorOut> = Vec::new();
    for (di, runs) in &plan {
        use rayon::prelude::*;
        let d = &detectors[*di];
        bar.set_message(d.name.clone());
        // What earlier phases freed goes back to the system first, so that the peak is this
        // phase's own (plus the process's baseline, reported as rss_at_start_mib).
        // SAFETY: malloc_trim only releases free heap memory.
        unsafe { libc::malloc_trim(0) };
        let rss_start = status_kib("VmRSS:").unwrap_or(0);
        let phase_scope = reset_peak_rss();
        let phase = Instant::now();
        let records: Vec<Result<RunRecord, Fatal>> = pool.install(|| {
            runs.par_iter()
                .map(|&(ci, seed)| {
                    let r = run_job(d, &cases[ci], seed, a.explore, jobs).map_err(|Fatal(e)| {
                        Fatal(format!("{} on case `{}` (seed {seed}): {e}", d.name, cases[ci].name))
                    });
                    bar.inc(1);
                    r
                })
                .collect()
        });
        let wall_s = phase.elapsed().as_secs_f64();
        let peak = if phase_scope { status_kib("VmHWM:").unwrap_or(0) } else { process_peak_kib() };
        let mut time_s = 0.0;
        let mut instructions = 0;
        for (&(ci, _), r) in runs.iter().zip(records) {
            let r = r?;
            time_s += r.time_s;
            instructions += r.instructions;
            results.entry((*di, ci)).or_default().push(r);
        }
        det_out.push(DetectorOut {
            name: d.name.clone(),
            classes: d.claim.classes.to_vec(),
            schedule_dependent: d.claim.schedule_dependent,
            cases: runs.iter().map(|r| r.0).collect::<BTreeSet<_>>().len(),
            runs: runs.len(),
            time_s,
            wall_s,
            instructions,
            peak_rss_mib: peak as f64 / 1024.0,
            rss_at_start_mib: rss_start as f64 / 1024.0,
            memory_scope: if phase_scope { "phase" } else { "process" }.into(),
            tp: 0.0,
            fp: 0.0,
            fn_: 0.0,
            precision: None,
            recall: None,
            f1: None,
        });
    }
    bar.finish_and_clear();
    std::env::set_current_dir(std::env::temp_dir()).ok();
    drop(scratch);

    // Scores: per case and detector, then per detector and class.
    let mut case_out: Vec<CaseOut> = Vec::new();
    let mut sums: BTreeMap<(usize, &'static str), (Counts, usize, usize)> = BTreeMap::new();
    for (ci, case) in cases.iter().enumerate() {
        let mut dets = BTreeMap::new();
        for (di, d) in detectors.iter().enumerate() {
            let Some(runs) = results.get(&(di, ci)) else { continue };
            let mut total = Counts::default();
            let mut bugs = Vec::new();
            for class in d.claim.classes {
                let (c, b) = score_class(case, runs, class);
                let e = sums.entry((di, class)).or_default();
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
        for class in d.claim.classes {
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
    let report = CompareReport {
        ferrite: env!("CARGO_PKG_VERSION").into(),
        suite: files.iter().map(|f| f.display().to_string()).collect(),
        jobs,
        explore: a.explore,
        wall_s: started.elapsed().as_secs_f64(),
        peak_rss_mib: process_peak_kib() as f64 / 1024.0,
        detectors: det_out,
        cases: case_out,
        summary,
    };
    print_tables(&report, &cases, &detectors);
    if let Some(path) = &report_path {
        let json = serde_json::to_string_pretty(&report).expect("the report serialises");
        std::fs::write(path, json + "\n")
            .map_err(|e| Fatal(format!("cannot write report `{}`: {e}", path.display())))?;
        let csv = path.with_extension("csv");
        std::fs::write(&csv, summary_csv(&report.summary))
            .map_err(|e| Fatal(format!("cannot write `{}`: {e}", csv.display())))?;
        let svg = path.with_extension("svg");
        chart(&report.detectors, &svg).map_err(|e| Fatal(format!("cannot write `{}`: {e}", svg.display())))?;
        if !a.quiet {
            say!("ferrite: wrote {}, {} and {}", path.display(), csv.display(), svg.display());
        }
    }
    Ok(0)
}

// ---------------------------------------------------------------------------------------------
// Output.

/// A count: whole numbers plainly, fractions (k/N over seeds) with two decimals.
fn num(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{}", x.round() as i64)
    } else {
        format!("{x:.2}")
    }
}

fn ratio(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:.2}"))
}

/// A Markdown table with padded columns.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let width = |i: usize| {
        rows.iter().map(|r| r[i].chars().count()).chain([header[i].chars().count()]).max().unwrap_or(0).max(3)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        format!("| {} |", padded.join(" | "))
    };
    let mut out = vec![line(header.iter().map(|s| s.to_string()).collect())];
    out.push(format!("|{}|", widths.iter().map(|w| "-".repeat(w + 2)).collect::<Vec<_>>().join("|")));
    out.extend(rows.iter().map(|r| line(r.clone())));
    out.join("\n")
}

fn print_tables(report: &CompareReport, cases: &[Case], detectors: &[Detector]) {
    let runs: usize = report.detectors.iter().map(|d| d.runs).sum();
    out!(
        "ferrite compare: {} cases, {} detectors, {runs} runs on {} workers in {:.1} s (peak RSS {:.0} MiB)",
        report.cases.len(),
        report.detectors.len(),
        report.jobs,
        report.wall_s,
        report.peak_rss_mib
    );
    let mut classes: Vec<&str> = Vec::new();
    for d in detectors {
        for c in d.claim.classes {
            if !classes.contains(c) {
                classes.push(c);
            }
        }
    }
    for class in classes {
        let rows: Vec<Vec<String>> = report
            .summary
            .iter()
            .filter(|r| r.class == class)
            .map(|r| {
                vec![
                    r.detector.clone(),
                    r.cases.to_string(),
                    r.bugs.to_string(),
                    num(r.tp),
                    num(r.fp),
                    num(r.fn_),
                    ratio(r.precision),
                    ratio(r.recall),
                    ratio(r.f1),
                    format!("{:.2}", r.time_s),
                    format!("{:.0}", r.peak_rss_mib),
                ]
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        out!("");
        out!("## {class}");
        out!(
            "{}",
            table(
                &[
                    "detector",
                    "cases",
                    "bugs",
                    "TP",
                    "FP",
                    "FN",
                    "precision",
                    "recall",
                    "F1",
                    "time (s)",
                    "peak RSS (MiB)"
                ],
                &rows
            )
        );
    }
    // Who found what.
    out!("");
    out!("## cases");
    let mut header: Vec<&str> = vec!["case", "truth"];
    header.extend(detectors.iter().map(|d| d.name.as_str()));
    let rows: Vec<Vec<String>> = report
        .cases
        .iter()
        .zip(cases)
        .map(|(c, case)| {
            let truth = if case.bugs.is_empty() {
                "bug-free".to_string()
            } else {
                let mut v: Vec<String> = case
                    .bugs
                    .iter()
                    .map(|b| format!("{}{}", b.class, if b.harmful == Some(true) { "*" } else { "" }))
                    .collect();
                v.dedup();
                v.join(" ")
            };
            let mut row = vec![c.name.clone(), truth];
            for d in detectors {
                row.push(match c.detectors.get(&d.name) {
                    None => String::new(),
                    Some(cd) if cd.bugs.is_empty() => {
                        if cd.fp > 0.0 {
                            format!("FP {}", num(cd.fp))
                        } else {
                            "ok".into()
                        }
                    }
                    Some(cd) => {
                        let mut s = format!("{}/{}", num(cd.tp), cd.bugs.len());
                        if cd.fp > 0.0 {
                            s.push_str(&format!(" FP {}", num(cd.fp)));
                        }
                        s
                    }
                });
            }
            row
        })
        .collect();
    out!("{}", table(&header, &rows));
    out!(
        "(k/n: labelled bugs of the detector's classes found, averaged over seeds; FP: false positives; ok: \
         nothing to find and nothing reported; blank: not run; *: harmful after recovery)"
    );
    out!("");
    out!("## cost");
    let rows: Vec<Vec<String>> = report
        .detectors
        .iter()
        .map(|d| {
            vec![
                d.name.clone(),
                d.cases.to_string(),
                d.runs.to_string(),
                format!("{:.2}", d.time_s),
                format!("{:.2}", d.wall_s),
                format!("{:.1}", d.instructions as f64 / 1e6),
                format!("{:.0}", d.peak_rss_mib),
                ratio(d.f1),
            ]
        })
        .collect();
    out!(
        "{}",
        table(
            &["detector", "cases", "runs", "run time (s)", "phase wall (s)", "M guest insns", "peak RSS (MiB)", "F1"],
            &rows
        )
    );
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn summary_csv(rows: &[SummaryRow]) -> String {
    let opt = |x: Option<f64>| x.map_or_else(String::new, |v| format!("{v:.4}"));
    let mut out = String::from("detector,class,cases,bugs,tp,fp,fn,precision,recall,f1,time_s,peak_rss_mib\n");
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{:.4},{:.4},{:.4},{},{},{},{:.3},{:.1}\n",
            csv_field(&r.detector),
            csv_field(&r.class),
            r.cases,
            r.bugs,
            r.tp,
            r.fp,
            r.fn_,
            opt(r.precision),
            opt(r.recall),
            opt(r.f1),
            r.time_s,
            r.peak_rss_mib
        ));
    }
    out
}

/// Detection (F1 over the detector's claimed classes) against cost (summed run time), one point
/// per detector, as SVG.
fn chart(detectors: &[DetectorOut], path: &Path) -> Result<(), String> {
    use plotters::prelude::*;
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let times: Vec<f64> = detectors.iter().map(|d| d.time_s.max(1e-3)).collect();
    let lo = times.iter().copied().fold(f64::INFINITY, f64::min).min(1.0) / 2.0;
    let hi = times.iter().copied().fold(0.0, f64::max).max(lo * 4.0) * 2.0;
    let root = SVGBackend::new(path, (860, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("ferrite compare: detection against cost", ("sans-serif", 22))
        .margin(24)
        .x_label_area_size(48)
        .y_label_area_size(56)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0f64..1.08f64)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_labels(10)
        .x_label_formatter(&|v| if *v >= 1.0 { format!("{v:.0}") } else { format!("{v:.2}") })
        .y_label_formatter(&|v| format!("{v:.1}"))
        .x_desc("summed run time over the suite (s, log scale)")
        .y_desc("F1 on claimed classes")
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (d, t)) in detectors.iter().zip(&times).enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        let y = d.f1.unwrap_or(0.0);
        let label = format!("{} (F1 {}, {:.1} s)", d.name, ratio(d.f1), d.time_s);
        chart
            .draw_series([Circle::new((*t, y), 7, colour.filled())])
            .map_err(|x| e(&x))?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 8, y), 6, colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}
