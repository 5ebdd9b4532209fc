//! The suite: the manifest's cases with their ground truth (docs/compare.md), and the jobs that
//! run a detector on a case, each exactly what `ferrite run` or `ferrite crash` does with the
//! same options (parsed by the same command line).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use analyses::Finding;
use anyhow::{anyhow, bail, Context as _, Result};
use clap::Parser as _;
use serde::{Deserialize, Serialize};

use super::score::{score_finding, ScoredFinding};
use super::{claim_of, claims, known_classes, Detector, RunsAs, CRASH_CLASS};
use crate::cli::{Cli, Command, CrashArgs};
use crate::cmd;

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
    /// The guest's arguments; `{pool}`, `{guest}`, `{build}` and `{sources}` are replaced.
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
    /// More options for one detector's runs only, by its name (`{"pmrace": ["--strategy",
    /// "pmrace", "--explore", "16"]}`), after `options`.
    #[serde(default)]
    pass_options: std::collections::BTreeMap<String, Vec<String>>,
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
    /// Detectors whose definition cannot report the bug, each with the reason: they are not
    /// scored on it (no TP, no FN), and their findings naming its lines are no false positives.
    #[serde(default)]
    beyond: Vec<(String, String)>,
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

impl CaseSpec {
    /// The source files the case's bugs name.
    fn truth_files(&self) -> impl Iterator<Item = &String> {
        let bugs = match &self.truth {
            Truth::Bugs(b) => b.as_slice(),
            Truth::BugFree => &[],
        };
        bugs.iter().flat_map(|b| b.at.iter()).map(|s| match s {
            Site::Marker(f, _) | Site::Line(f, _) | Site::Offset(f, _, _) => f,
        })
    }
}

/// Whether `name` is a relative path that stays below the directory it is joined to.
fn under(name: &str) -> bool {
    let p = Path::new(name);
    !name.is_empty()
        && p.components().all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir))
        && p.components().any(|c| matches!(c, std::path::Component::Normal(_)))
}

/// A case ready to run.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub program: String,
    /// argv: the binary's absolute path, then the arguments.
    pub argv: Vec<String>,
    pub seeds: Vec<u64>,
    pub analyses: Vec<String>,
    pub options: Vec<String>,
    /// More options for one detector's runs, by its base name (placeholders replaced).
    pub pass_options: std::collections::BTreeMap<String, Vec<String>>,
    pub crash: Option<ResolvedCrash>,
    pub bugs: Vec<Bug>,
    pub note: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ResolvedCrash {
    pub recover: Vec<String>,
    pub check: Option<Vec<String>>,
    pub options: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Bug {
    pub id: String,
    pub class: String,
    /// `file:line` of each labelled line.
    pub lines: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub harmful: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Detectors (base names) not scored on the bug, with the reason their definition cannot
    /// report it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub beyond: Vec<(String, String)>,
    #[serde(skip)]
    sites: Vec<(String, u32)>,
}

impl Bug {
    /// Whether a finding location at `file:line` is one of the bug's lines.
    pub fn names(&self, file: &str, line: u32) -> bool {
        self.sites.iter().any(|(f, l)| *l == line && (file == f || file.ends_with(&format!("/{f}"))))
    }

    /// Whether the bug is part of the ground truth of `class`.
    pub fn in_class(&self, class: &str) -> bool {
        self.class == class || (class == CRASH_CLASS && self.harmful == Some(true))
    }

    /// Whether detector `base` (a claims-table name) is scored on the bug in `class`.
    pub fn scored_for(&self, base: &str, class: &str) -> bool {
        self.in_class(class) && !self.beyond.iter().any(|(d, _)| d == base)
    }
}

/// The cases of a manifest, or of every manifest in a directory, and the manifests read.
pub fn load_suite(path: &Path) -> Result<(Vec<Case>, Vec<PathBuf>)> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("cannot read suite directory `{}`", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "ron"))
            .collect();
        v.sort();
        if v.is_empty() {
            bail!("suite directory `{}` has no .ron manifest", path.display());
        }
        v
    } else {
        vec![path.to_path_buf()]
    };
    let mut cases = Vec::new();
    for f in &files {
        cases.extend(load_manifest(f)?);
    }
    if cases.is_empty() {
        bail!("suite `{}` has no cases", path.display());
    }
    let mut seen = BTreeSet::new();
    for c in &cases {
        if !seen.insert(c.name.clone()) {
            bail!("suite: two cases are named `{}`", c.name);
        }
    }
    Ok((cases, files))
}

fn load_manifest(path: &Path) -> Result<Vec<Case>> {
    let text = loader::input::read_regular_text(path, loader::input::CONFIG_CAP)
        .with_context(|| format!("cannot read suite `{}`", path.display()))?;
    let suite: SuiteFile = ron::Options::default()
        .with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME)
        .from_str(&text)
        .with_context(|| format!("suite `{}` is not a valid manifest", path.display()))?;
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
        let ctx = |msg: String| anyhow!("suite `{}`, case `{}`: {msg}", path.display(), spec.name);
        // `--cases` names cases by name, comma-separated; an empty name or one with a comma
        // could never be chosen.
        if spec.name.trim().is_empty() || spec.name.contains(',') {
            return Err(ctx(
                "a case's name must be non-empty and without commas (`--cases` lists names separated by commas)".into(),
            ));
        }
        // A case names files under the manifest's build and source directories: a program or
        // source out of them (`../x`, `/bin/sh`) would make the suite depend on files it does
        // not hold (move `build` or `sources` instead).
        if let Some(bad) = std::iter::once(&spec.program).chain(spec.truth_files()).find(|f| !under(f)) {
            return Err(ctx(format!(
                "`{bad}` is not a file name under the suite's build or source directory (no `..`, not absolute, not empty)"
            )));
        }
        let binary = build.join(&spec.program);
        let pool = spec.pool.clone().unwrap_or_else(|| "/mnt/pmem0/pool".into());
        let subst = |s: &str| {
            s.replace("{pool}", &pool)
                .replace("{guest}", &binary.display().to_string())
                .replace("{build}", &build.display().to_string())
                .replace("{sources}", &sources.display().to_string())
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
                claims().iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
            )));
        }
        if let Some(bad) = spec.pass_options.keys().find(|a| claim_of(a).is_none()) {
            return Err(ctx(format!(
                "unknown detector `{bad}` in `pass_options` (known: {})",
                claims().iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
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
                for (d, why) in &b.beyond {
                    if !claims().iter().any(|c| c.name == d) {
                        return Err(ctx(format!("bug {}: unknown detector `{d}` in `beyond`", i + 1)));
                    }
                    if why.trim().is_empty() {
                        return Err(ctx(format!("bug {}: `beyond` gives no reason for `{d}`", i + 1)));
                    }
                }
                let mut sites = Vec::new();
                for site in &b.at {
                    match site {
                        Site::Line(_, 0) => return Err(ctx(format!("bug {}: `Line` numbers start at 1", i + 1))),
                        Site::Line(file, line) => sites.push((file.clone(), *line)),
                        Site::Marker(file, marker) | Site::Offset(file, marker, _) => {
                            if !sources_cache.contains_key(file) {
                                let p = sources.join(file);
                                let text = loader::input::read_regular_text(&p, loader::input::CONFIG_CAP)
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
                    beyond: b.beyond.clone(),
                    sites,
                });
            }
        }
        // A seed listed twice would run, and be scored, twice: each runs once, in the order given.
        let mut seeds: Vec<u64> = Vec::with_capacity(spec.seeds.len().max(1));
        for &s in if spec.seeds.is_empty() { &[0][..] } else { &spec.seeds[..] } {
            if !seeds.contains(&s) {
                seeds.push(s);
            }
        }
        out.push(Case {
            name: spec.name.clone(),
            program: spec.program.clone(),
            argv,
            seeds,
            analyses: spec.analyses.clone(),
            options: spec.options.iter().map(|a| subst(a)).collect(),
            pass_options: spec
                .pass_options
                .iter()
                .map(|(d, o)| (d.clone(), o.iter().map(|a| subst(a)).collect()))
                .collect(),
            crash,
            bugs,
            note: spec.note.clone(),
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Jobs.

/// One run's result, as scored.
#[derive(Serialize, Deserialize, Clone)]
pub struct RunRecord {
    pub seed: u64,
    pub time_s: f64,
    pub instructions: u64,
    pub exit: driver::ExitInfo,
    /// The equivalent command line.
    pub command: String,
    pub findings: Vec<ScoredFinding>,
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

pub fn quote_all(v: &[String]) -> String {
    v.iter().map(|s| shell_quote(s)).collect::<Vec<_>>().join(" ")
}

/// The `ferrite` command line of a run (what `ferrite run`/`crash` would be given), parsed by
/// the real command-line parser so that every default is the same.
fn command_line(d: &Detector, case: &Case, seed: u64, explore: u32) -> Vec<String> {
    let sub = if d.claim.runner == RunsAs::Crash { "crash" } else { "run" };
    let mut v: Vec<String> = vec!["ferrite".into(), sub.into(), "--quiet".into(), "--env-clear".into()];
    v.extend(["--analyses".into(), d.analyses_option().to_string(), "--seed".into(), seed.to_string()]);
    let own = case.pass_options.get(d.base()).map_or(&[][..], |o| &o[..]);
    if explore > 1
        && d.claim.runner != RunsAs::Crash
        && !case.options.iter().chain(own).any(|o| o.starts_with("--explore"))
    {
        v.extend(["--explore".into(), explore.to_string()]);
    }
    if d.claim.runner == RunsAs::Crash {
        // A case's `--explore` is its passes' exploration; crash testing explores schedules
        // only where the case's `crash` options say so (each schedule is a whole campaign).
        let mut o = case.options.iter();
        while let Some(a) = o.next() {
            match a.as_str() {
                "--explore" => {
                    o.next();
                }
                a if a.starts_with("--explore=") => {}
                _ => v.push(a.clone()),
            }
        }
    } else {
        v.extend(case.options.iter().cloned());
    }
    // The detector's own options, after the case's (one given in both is refused, as on the
    // command line).
    v.extend(own.iter().cloned());
    if let (RunsAs::Crash, Some(c)) = (d.claim.runner, &case.crash) {
        v.extend(c.options.iter().cloned());
    }
    if let (true, Some(c)) = (d.claim.wants_images, &case.crash) {
        // A pass that validates its findings on crash images does so with the program's recovery.
        v.extend(["--recover".into(), c.recover.join(" ")]);
    }
    v.push("--".into());
    v.extend(case.argv.iter().cloned());
    v
}

fn display_command(d: &Detector, case: &Case, argv: &[String]) -> String {
    // Without the `--quiet` that command_line puts third.
    let mut shown: Vec<String> = argv[..2].iter().chain(&argv[3..]).cloned().collect();
    if d.claim.runner == RunsAs::Crash {
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
pub fn run_job(d: &Detector, case: &Case, seed: u64, explore: u32, jobs: usize) -> Result<RunRecord> {
    let argv = command_line(d, case, seed, explore);
    let cli = Cli::try_parse_from(&argv).map_err(|e| {
        let msg = e.to_string();
        let first = msg.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim_start_matches("error: ").to_string();
        anyhow!("case `{}`: options `{}`: {first}", case.name, quote_all(&argv[2..]))
    })?;
    let start = Instant::now();
    let (findings, instructions, exit) = match cli.command {
        Command::Run(a) => {
            // As `cmd_run`: one run, `--explore N` schedules from the seed, or exhaustive
            // exploration; the guest's output is discarded.
            let pm =
                tempfile::Builder::new().prefix("ferrite-pm-").tempdir().context("cannot create a PM directory")?;
            let mut spec = cmd::run_spec(&a.opts, &a.command, pm.path().to_path_buf())?;
            spec.discard_output = true;
            // Every run of a campaign shares the process's working directory; a file one run
            // left there (a log, a lock file) would change what a later run does, so a run's
            // result would depend on the cases, detectors, shard and `--jobs` around it. A
            // private working directory keeps what the guest writes to this run.
            spec.private_cwd = true;
            let (report, out, _) = cmd::run::explore_as(&spec, &a.opts)?;
            (report.findings, out.instructions, report.run.exit)
        }
        Command::Crash(a) => crash_job(case, &a, jobs)?,
        _ => unreachable!("compare builds only run and crash command lines"),
    };
    let time_s = start.elapsed().as_secs_f64();
    let scored = findings.iter().filter(|f| d.owns(f)).map(|f| score_finding(d, case, f)).collect();
    Ok(RunRecord { seed, time_s, instructions, exit, command: display_command(d, case, &argv), findings: scored })
}

/// `ferrite crash` on one case, as `ferrite crash` runs it (the case's `--explore` included),
/// with the guest's output discarded.
fn crash_job(case: &Case, a: &CrashArgs, jobs: usize) -> Result<(Vec<Finding>, u64, driver::ExitInfo)> {
    let work = tempfile::Builder::new().prefix("ferrite-crash-").tempdir().context("cannot create a PM directory")?;
    let mut spec = cmd::run_spec(&a.opts, &a.command, work.path().to_path_buf())?;
    spec.discard_output = true;
    let c = case.crash.clone().unwrap_or(ResolvedCrash { recover: case.argv.clone(), check: None, options: vec![] });
    let options = cmd::crash::options(a, c.recover, c.check, a.jobs.unwrap_or(jobs).max(1), None);
    let campaign = crashtest::test(&cmd::runner(), &spec, &options)?;
    Ok((campaign.report.findings, campaign.outcome.instructions, campaign.report.run.exit))
}

/// The default suite: guests/manifest.ron from the working directory, else the one of the
/// source tree ferrite was built from.
pub fn default_suite() -> PathBuf {
    let here = PathBuf::from("guests/manifest.ron");
    if here.is_file() {
        return here;
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("guests/manifest.ron")
}

/// The cases `--cases` names (every one when none is named).
pub fn filter_cases(cases: Vec<Case>, wanted: &[String]) -> Result<Vec<Case>> {
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
            bail!("--cases: no case matches `{w}`");
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
