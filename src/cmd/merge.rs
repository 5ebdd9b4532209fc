//! `ferrite merge`: the parts of a sharded campaign ([`crate::part`]) into the report an
//! unsharded run would have written — the same findings with the same ids, the same counts and
//! trace hashes, timings summed — after checking that the parts are every shard of one
//! campaign. Also where a subcommand learns its shard ([`shard_of`]).

use std::collections::BTreeMap;
use std::path::Path;

use analyses::Finding;
use anyhow::{bail, Context as _, Result};
use driver::say;
use driver::shard::{Shard, Source};
use serde::{Deserialize, Serialize};

use crate::cli::{MergeArgs, ShardArgs};
use crate::part::{Header, Part};
use crate::report::Report;

/// The shard of this process (`--shard`, `--shard-count`, the job array's environment), said on
/// standard error; a shard needs a `.json` report for its part.
pub fn shard_of(a: &ShardArgs, report: Option<&Path>, quiet: bool) -> Result<Option<Shard>> {
    let resolved = driver::shard::resolve(a.shard.as_deref(), a.shard_count, |k| std::env::var(k).ok())
        .map_err(anyhow::Error::msg)?;
    let Some((shard, source)) = resolved else { return Ok(None) };
    crate::part::check_path(report)?;
    if !quiet {
        let from = match source {
            Source::Option => "--shard",
            Source::Slurm => "SLURM_ARRAY_TASK_ID",
            Source::Kubernetes => "JOB_COMPLETION_INDEX",
        };
        say!("ferrite: shard {shard} of the campaign (from {from})");
    }
    Ok(Some(shard))
}

/// A crash campaign's shard, as its part's body.
#[derive(Serialize, Deserialize)]
struct CrashBody {
    /// The report, without findings; its recoveries and failures are the shard's.
    report: Report,
    /// The findings before merging, in the campaign's order ([`crashtest::Campaign::pieces`]).
    pieces: Vec<((u64, u8, u64), Finding)>,
}

/// Writes a crash campaign's part. A shard's status is 0 once its part is written: the
/// findings are the merge's to report.
pub fn write_crash_part(path: &Path, mut header: Header, c: crashtest::Campaign, quiet: bool) -> Result<i32> {
    header.units = c.units;
    let (shard, units) = (header.shard, c.units);
    let mut report = Report::new(c.report, Some(c.summary));
    report.findings.clear();
    let recovered = report.crash.as_ref().map_or(0, |s| s.recoveries);
    crate::part::write(path, header, &CrashBody { report, pieces: c.pieces })?;
    if !quiet {
        say!(
            "ferrite: wrote part {} (shard {shard}: {recovered} recoveries, of {units} unique images in all)",
            path.display()
        );
    }
    Ok(0)
}

/// `ferrite merge`.
pub fn merge(a: MergeArgs) -> Result<i32> {
    super::check_output("--report", &a.report)?;
    let parts = crate::part::read_all(&a.parts)?;
    match parts[0].part.kind.as_str() {
        "crash" => {
            super::check_report_path("--report", Some(&a.report))?;
            merge_crash(parts, &a)
        }
        "explore" => {
            super::check_report_path("--report", Some(&a.report))?;
            merge_explore(parts, &a)
        }
        "compare" => {
            if !a.report.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
                bail!(
                    "--report `{}`: use a .json file name (the .csv and .svg are written next to it)",
                    a.report.display()
                );
            }
            merge_compare(parts, &a)
        }
        other => bail!("parts of kind `{other}` cannot be merged by this ferrite"),
    }
}

fn bodies<T: serde::de::DeserializeOwned>(parts: Vec<Part>) -> Result<Vec<(Header, T)>> {
    parts
        .into_iter()
        .map(|p| {
            let body = serde_json::from_value(p.body)
                .with_context(|| format!("shard {}/{}: the part's body is not valid", p.part.shard, p.part.shards))?;
            Ok((p.part, body))
        })
        .collect()
}

fn merge_crash(parts: Vec<Part>, a: &MergeArgs) -> Result<i32> {
    let parts: Vec<(Header, CrashBody)> = bodies(parts)?;
    let (_, first) = &parts[0];
    let mut report = first.report.clone();
    let mut summary = report.crash.clone().context("a crash part without its crash summary")?;
    (summary.recoveries, summary.failures) = (0, 0);
    let mut pieces: Vec<((u64, u8, u64), Finding)> = Vec::new();
    for (h, b) in &parts {
        // Every shard ran the same workload: its run, and the findings it made, are the same.
        if b.report.run != first.report.run {
            bail!(
                "shard {}/{} saw another workload run than shard 0 (trace hash {}, not {}): the run is not deterministic across the hosts",
                h.shard,
                h.shards,
                b.report.run.trace_hash,
                first.report.run.trace_hash
            );
        }
        let s = b.report.crash.as_ref().context("a crash part without its crash summary")?;
        summary.recoveries += s.recoveries;
        summary.failures += s.failures;
        let workload = |p: &&((u64, u8, u64), Finding)| p.0 .1 == 0;
        if h.shard == 0 {
            pieces.extend(b.pieces.iter().filter(workload).cloned());
        }
        pieces.extend(b.pieces.iter().filter(|p| !workload(p)).cloned());
    }
    pieces.sort_by_key(|p| p.0);
    report.findings = Finding::merge(pieces.into_iter().map(|p| p.1).collect());
    report.crash = Some(summary);
    if !a.quiet {
        driver::print_findings(&report.findings);
        say!("ferrite: merged {} shards: {} findings", parts.len(), report.findings.len());
    }
    report.write(&a.report)?;
    Ok(0)
}

fn merge_compare(parts: Vec<Part>, a: &MergeArgs) -> Result<i32> {
    use super::compare::{emit, inputs, load, plan, CompareBody};
    use crate::compare::score::{self, CompareReport, DetectorOut};
    let parts: Vec<(Header, CompareBody)> = bodies(parts)?;
    let (h0, b0) = &parts[0];
    let (cases, files, detectors) = load(&b0.suite, &b0.cases, &b0.analyses)?;
    let now = inputs(&files, &cases);
    if now != h0.inputs {
        let key = now.keys().chain(h0.inputs.keys()).find(|k| now.get(*k) != h0.inputs.get(*k)).cloned();
        bail!("the suite changed since the shards ran ({}): run them again", key.unwrap_or_default());
    }
    let plan = plan(&cases, &detectors);
    let units: Vec<(usize, usize)> = plan.iter().flat_map(|(di, runs)| runs.iter().map(|&(ci, _)| (*di, ci))).collect();
    if units.len() as u64 != h0.units {
        bail!("the suite has {} runs now, the parts {}: run them again", units.len(), h0.units);
    }
    let mut by_unit: BTreeMap<u64, crate::compare::suite::RunRecord> = BTreeMap::new();
    for (h, b) in &parts {
        for (u, r) in &b.runs {
            let shard = Shard { index: h.shard, count: h.shards };
            if *u >= h0.units || !shard.owns(*u) || by_unit.insert(*u, r.clone()).is_some() {
                bail!("shard {shard}'s part has run {u}, which is not its own");
            }
        }
    }
    if let Some(u) = (0..h0.units).find(|u| !by_unit.contains_key(u)) {
        bail!("run {u} is in no part (shard {}/{} is incomplete)", u % u64::from(h0.shards), h0.shards);
    }
    let mut results: BTreeMap<(usize, usize), Vec<crate::compare::suite::RunRecord>> = BTreeMap::new();
    for (u, mut r) in by_unit {
        r.findings.iter_mut().for_each(|f| f.restore_signature());
        results.entry(units[u as usize]).or_default().push(r);
    }
    let mut det_out: Vec<DetectorOut> = plan
        .iter()
        .map(|(di, runs)| {
            let d = &detectors[*di];
            let recs = || runs.iter().map(|(ci, _)| *ci).collect::<std::collections::BTreeSet<_>>();
            let mine = results.iter().filter(|((dd, _), _)| dd == di).flat_map(|(_, v)| v);
            let phases = parts.iter().map(|(_, b)| &b.phases[*di]);
            DetectorOut {
                name: d.name.clone(),
                classes: d.claim.classes.to_vec(),
                schedule_dependent: d.claim.schedule_dependent,
                cases: recs().len(),
                runs: runs.len(),
                time_s: mine.clone().map(|r| r.time_s).fold(0.0, |x, y| x + y),
                wall_s: phases.clone().map(|p| p.wall_s).fold(0.0, |x, y| x + y),
                instructions: mine.map(|r| r.instructions).sum(),
                peak_rss_mib: phases.clone().map(|p| p.peak_rss_mib).fold(0.0, f64::max),
                rss_at_start_mib: phases.clone().map(|p| p.rss_at_start_mib).fold(0.0, f64::max),
                memory_scope: b0.phases[*di].memory_scope.clone(),
                tp: 0.0,
                fp: 0.0,
                fn_: 0.0,
                precision: None,
                recall: None,
                f1: None,
            }
        })
        .collect();
    let (case_out, summary) = score::score(&cases, &detectors, &results, &mut det_out);
    let report = CompareReport {
        ferrite: env!("CARGO_PKG_VERSION").into(),
        suite: files.iter().map(|f| f.display().to_string()).collect(),
        jobs: parts.iter().map(|(_, b)| b.jobs).max().unwrap_or(1),
        explore: b0.explore,
        wall_s: parts.iter().map(|(_, b)| b.wall_s).sum(),
        peak_rss_mib: parts.iter().map(|(_, b)| b.peak_rss_mib).fold(0.0, f64::max),
        detectors: det_out,
        cases: case_out,
        summary,
        interrupted: None,
    };
    emit(&report, &cases, &detectors, Some(&a.report), a.quiet)?;
    Ok(0)
}

/// The inputs of a run: the programs (the workload's first), the config file, the PM
/// directory, the guest's environment.
pub fn run_inputs(
    programs: &[&String],
    config: &[std::path::PathBuf],
    spec: &driver::RunSpec,
) -> BTreeMap<String, String> {
    use crate::part::{hash_path, hash_text};
    let mut inputs = BTreeMap::new();
    for p in programs {
        inputs.insert(format!("program `{p}`"), hash_path(&driver::spec::program_path(p, &spec.env)));
    }
    for c in config {
        inputs.insert(format!("config `{}`", c.display()), hash_path(c));
    }
    inputs.insert("PM directory".into(), hash_path(&spec.pm_dir));
    inputs.insert("guest environment".into(), hash_text(&spec.env.join("\n")));
    inputs
}

/// An exploration's shard, as its part's body.
#[derive(Serialize, Deserialize)]
struct ExploreBody {
    /// `random` (`--explore N`) or `exhaustive`.
    mode: String,
    /// The first run's report (random run 0 or the exhaustive root), where this shard ran it.
    first: Option<Report>,
    pieces: Vec<driver::explore::sharded::Piece>,
    /// Whether the shard explored all it owns (exhaustive exploration can be cut by --explore).
    complete: bool,
}

/// `ferrite run --shard`: the shard's schedules of `--explore N` or `--strategy exhaustive`,
/// written as a part.
pub fn explore_part(
    opts: &crate::cli::RunOptions,
    command: &[String],
    spec: &driver::RunSpec,
    shard: Shard,
    path: &Path,
) -> Result<i32> {
    use driver::explore::sharded;
    let runner = super::runner();
    let exhaustive = spec.strategy == emu::sched::Strategy::Exhaustive;
    if opts.strategy == "pmrace" {
        bail!("--strategy pmrace cannot be sharded: each of its runs is guided by what the earlier ones covered");
    }
    if !exhaustive && opts.explore < 2 {
        bail!("one run cannot be sharded: shard an exploration (--explore N, --strategy exhaustive)");
    }
    let mut o = opts.clone();
    (o.report, o.quiet, o.pm_dir) = (None, false, None);
    let mut options = crate::part::option_lines(&o);
    options.extend(crate::part::option_lines(&command));
    let mut programs = vec![&command[0]];
    programs.extend(spec.recover.as_ref().map(|r| &r[0]));
    let mut header = Header::new("explore", shard, options, run_inputs(&programs, &opts.config, spec));
    let runs = if exhaustive {
        let budget = super::run::snapshot_budget(opts.no_snapshots);
        sharded::exhaustive(&runner, spec, opts.explore.max(1), opts.max_preemptions, opts.por, shard, budget)?
    } else {
        sharded::random(&runner, spec, opts.explore, shard, !opts.no_snapshots)?
    };
    header.units = if exhaustive { 0 } else { u64::from(opts.explore) };
    let ran = runs.pieces.len();
    let body = ExploreBody {
        mode: if exhaustive { "exhaustive" } else { "random" }.into(),
        first: runs.first.map(|r| Report::new(r, None)),
        pieces: runs.pieces,
        complete: runs.complete,
    };
    crate::part::write(path, header, &body)?;
    if !opts.quiet {
        say!(
            "ferrite: wrote part {} (shard {shard}: {ran} schedule(s){})",
            path.display(),
            if body.complete { "" } else { "; more remain in its branches (raise --explore)" }
        );
    }
    Ok(0)
}

fn merge_explore(parts: Vec<Part>, a: &MergeArgs) -> Result<i32> {
    let parts: Vec<(Header, ExploreBody)> = bodies(parts)?;
    let random = parts[0].1.mode == "random";
    let first = parts.iter().find_map(|(_, b)| b.first.clone()).context("no part has the exploration's first run")?;
    for (h, b) in &parts {
        if let Some(f) = b.first.as_ref().filter(|f| f.run != first.run) {
            bail!(
                "shard {}/{} saw another first run (trace hash {}, not {}): the run is not deterministic across the hosts",
                h.shard,
                h.shards,
                f.run.trace_hash,
                first.run.trace_hash
            );
        }
    }
    let incomplete: Vec<String> =
        parts.iter().filter(|(_, b)| !b.complete).map(|(h, _)| format!("{}/{}", h.shard, h.shards)).collect();
    let pieces = parts.into_iter().flat_map(|(_, b)| b.pieces).collect();
    let run =
        driver::RunReport { run: first.run, findings: first.findings, stats: first.stats, discarded: first.discarded };
    let report = Report::new(driver::explore::sharded::merge(run, pieces, random), None);
    if !a.quiet {
        driver::print_findings(&report.findings);
        say!("ferrite: merged {} schedules: {} findings", report.run.schedules, report.findings.len());
        if !incomplete.is_empty() {
            say!("ferrite: shards {} stopped at --explore with schedules left", incomplete.join(", "));
        }
    }
    report.write(&a.report)?;
    Ok(0)
}
