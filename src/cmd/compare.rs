//! `ferrite compare`: runs every selected detector over the suite, one phase per detector with
//! its runs in parallel, measures each phase's time and memory, scores, and reports
//! ([`crate::compare`]). Sharded (`--shard I/N`), it runs only its share of the (detector,
//! case, seed) runs and writes them as a part, which `ferrite merge` scores with the others.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context as _, Result};
use driver::say;

use crate::cli::CompareArgs;
use crate::compare::render::summary_csv;
use crate::compare::score::{self, CompareReport, DetectorOut};
use crate::compare::suite::{default_suite, filter_cases, load_suite, run_job, Case, RunRecord};
use crate::compare::{applies, render, select_detectors, Detector};
use crate::part::option_lines;
use serde::{Deserialize, Serialize};

/// A shard's runs, as its part's body: enough to score them with the other shards' runs.
#[derive(Serialize, Deserialize)]
pub struct CompareBody {
    /// `--suite` as given (or the default), `--analyses`, `--cases`, `--explore`: the merge
    /// loads the suite again with them.
    pub suite: PathBuf,
    pub analyses: Vec<String>,
    pub cases: Vec<String>,
    pub explore: u32,
    pub jobs: usize,
    pub wall_s: f64,
    pub peak_rss_mib: f64,
    /// Each detector's phase in this shard.
    pub phases: Vec<Phase>,
    /// The shard's runs, each with its unit (its position in the plan).
    pub runs: Vec<(u64, RunRecord)>,
}

/// What one shard measured of a detector's phase.
#[derive(Serialize, Deserialize)]
pub struct Phase {
    pub wall_s: f64,
    pub peak_rss_mib: f64,
    pub rss_at_start_mib: f64,
    pub memory_scope: String,
}

/// A detector's phase in a shard: the detector, its (case, seed) runs this shard owns, and
/// their units.
type OwnedPhase = (usize, Vec<(usize, u64)>, Vec<u64>);

/// The plan: one phase per detector, its (case, seed) runs in the order they start. The runs
/// of all phases in this order are the campaign's units.
pub fn plan(cases: &[Case], detectors: &[Detector]) -> Vec<(usize, Vec<(usize, u64)>)> {
    detectors
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
        .collect()
}

/// The suite's cases (filtered by `--cases`), its manifests and the detectors, or why not.
pub fn load(suite: &Path, wanted: &[String], analyses: &[String]) -> Result<(Vec<Case>, Vec<PathBuf>, Vec<Detector>)> {
    if !suite.exists() {
        bail!("suite `{}` does not exist", suite.display());
    }
    let (cases, files) = load_suite(suite)?;
    let cases = filter_cases(cases, wanted)?;
    let detectors = select_detectors(analyses)?;
    Ok((cases, files, detectors))
}

/// The inputs of a compare campaign, for its parts' headers: the manifests, the cases as
/// resolved (bug lines found in the sources), and every guest binary.
pub fn inputs(files: &[PathBuf], cases: &[Case]) -> BTreeMap<String, String> {
    use crate::part::{hash_path, hash_text};
    let mut m = BTreeMap::new();
    for f in files {
        m.insert(format!("manifest `{}`", f.display()), hash_path(f));
    }
    m.insert("cases as resolved".into(), hash_text(&format!("{cases:?}")));
    for c in cases {
        let mut bins = vec![&c.argv[0]];
        if let Some(cr) = &c.crash {
            bins.push(&cr.recover[0]);
            bins.extend(cr.check.as_ref().map(|k| &k[0]));
        }
        for b in bins {
            m.insert(format!("guest `{b}`"), hash_path(Path::new(b)));
        }
    }
    m
}

/// `ferrite compare`.
pub fn compare(a: CompareArgs) -> Result<i32> {
    let started = Instant::now();
    let shard = super::merge::shard_of(&a.shard, a.report.as_deref(), a.quiet)?;
    if let Some(r) = &a.report {
        if !r.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
            bail!("--report `{}`: use a .json file name (the .csv and .svg are written next to it)", r.display());
        }
    }
    if let Some(r) = &a.report {
        super::check_output("--report", r)?;
    }
    if a.explore == 0 {
        bail!("--explore needs at least one schedule");
    }
    let suite = a.suite.clone().unwrap_or_else(default_suite);
    let suite = std::path::absolute(&suite).unwrap_or(suite);
    let (cases, files, detectors) = load(&suite, &a.cases, &a.analyses)?;
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
        bail!(
            "{} guest binar{} missing ({}{}): build the suite first with `make -C guests`",
            missing.len(),
            if missing.len() == 1 { "y is" } else { "ies are" },
            missing.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            if missing.len() > 3 { ", ..." } else { "" }
        );
    }
    let jobs = a.jobs.unwrap_or_else(crate::cli::values::default_jobs).max(1);
    let report_path = a.report.as_ref().map(|r| std::path::absolute(r).unwrap_or_else(|_| r.clone()));
    // Guests run over a scratch working directory of their own, which no run writes: each
    // has a private layer over it (`run_job`), so the files some write are neither left in the
    // user's directory nor seen by another run.
    let scratch = tempfile::Builder::new()
        .prefix("ferrite-compare-")
        .tempdir()
        .context("cannot create a scratch working directory")?;
    std::env::set_current_dir(scratch.path()).context("cannot enter the scratch working directory")?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .with_context(|| format!("cannot start {jobs} workers"))?;

    // The plan: one phase per detector, its (case, seed) runs in parallel; a shard keeps the
    // runs it owns, each with its unit.
    let full = plan(&cases, &detectors);
    let units: u64 = full.iter().map(|p| p.1.len() as u64).sum();
    let mut next = 0u64;
    let plan: Vec<OwnedPhase> = full
        .into_iter()
        .map(|(di, runs)| {
            let (mut keep, mut ids) = (Vec::new(), Vec::new());
            for r in runs {
                if shard.is_none_or(|s| s.owns(next)) {
                    keep.push(r);
                    ids.push(next);
                }
                next += 1;
            }
            (di, keep, ids)
        })
        .collect();
    let total: usize = plan.iter().map(|p| p.1.len()).sum();
    if !a.quiet {
        say!(
            "ferrite: comparing {} detector(s) on {} case(s): {total} runs{} on {jobs} worker(s)",
            detectors.len(),
            cases.len(),
            shard.map(|s| format!(" of {units} (shard {s})")).unwrap_or_default()
        );
    }
    let bar = if a.quiet { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(total as u64) };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:>12} {pos}/{len} runs [{bar:30}] {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    // A harness's timeout or the user's ^C ends the comparison with what ran: no run starts
    // after the first interrupt, the runs under way stop at their next block and are dropped
    // (a stopped run's findings would score as misses), and the pairs that ran in full are
    // scored. Not for a shard, whose part must hold its whole share.
    if shard.is_none() {
        crate::signals::stop_run_on_interrupt();
    }
    let mut results: BTreeMap<(usize, usize), Vec<RunRecord>> = BTreeMap::new();
    let mut det_out: Vec<DetectorOut> = Vec::new();
    let mut unit_runs: Vec<(u64, RunRecord)> = Vec::new();
    let mut ran = 0usize;
    for (di, runs, ids) in &plan {
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
        let records: Vec<Option<Result<RunRecord>>> = pool.install(|| {
            runs.par_iter()
                .map(|&(ci, seed)| {
                    if emu::interrupt::requested().is_some() {
                        return None;
                    }
                    let r = run_job(d, &cases[ci], seed, a.explore, jobs)
                        .with_context(|| format!("{} on case `{}` (seed {seed})", d.name, cases[ci].name));
                    bar.inc(1);
                    // A run the interrupt may have stopped is not the run the case asks for.
                    (emu::interrupt::requested().is_none()).then_some(r)
                })
                .collect()
        });
        let wall_s = phase.elapsed().as_secs_f64();
        let peak = if phase_scope { status_kib("VmHWM:").unwrap_or(0) } else { process_peak_kib() };
        let mut time_s = 0.0;
        let mut instructions = 0;
        let mut cut: BTreeSet<usize> = BTreeSet::new();
        let ran_before = ran;
        for ((&(ci, _), r), &unit) in runs.iter().zip(records).zip(ids) {
            let Some(r) = r else {
                cut.insert(ci);
                continue;
            };
            let r = r?;
            ran += 1;
            time_s += r.time_s;
            instructions += r.instructions;
            if shard.is_some() {
                unit_runs.push((unit, r.clone()));
            }
            results.entry((*di, ci)).or_default().push(r);
        }
        for ci in cut {
            // Some of the case's seeds did not run: the case is not scored for this detector.
            results.remove(&(*di, ci));
        }
        det_out.push(DetectorOut {
            name: d.name.clone(),
            classes: d.claim.classes.to_vec(),
            schedule_dependent: d.claim.schedule_dependent,
            cases: results.keys().filter(|k| k.0 == *di).count(),
            runs: ran - ran_before,
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

    if let (Some(shard), Some(path)) = (shard, &report_path) {
        let quiet = a.quiet;
        let mut opts = CompareArgs { suite: Some(suite.clone()), report: None, jobs: None, quiet: false, ..a };
        opts.shard = Default::default();
        let mut header = crate::part::Header::new("compare", shard, option_lines(&opts), inputs(&files, &cases));
        header.units = units;
        let body = CompareBody {
            suite,
            analyses: opts.analyses,
            cases: opts.cases,
            explore: opts.explore,
            jobs,
            wall_s: started.elapsed().as_secs_f64(),
            peak_rss_mib: process_peak_kib() as f64 / 1024.0,
            phases: det_out
                .iter()
                .map(|d| Phase {
                    wall_s: d.wall_s,
                    peak_rss_mib: d.peak_rss_mib,
                    rss_at_start_mib: d.rss_at_start_mib,
                    memory_scope: d.memory_scope.clone(),
                })
                .collect(),
            runs: unit_runs,
        };
        crate::part::write(path, header, &body)?;
        if !quiet {
            say!("ferrite: wrote part {} (shard {shard}: {total} of {units} runs)", path.display());
        }
        return Ok(0);
    }
    let (case_out, summary) = score::score(&cases, &detectors, &results, &mut det_out);
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
        interrupted: emu::interrupt::requested(),
    };
    emit(&report, &cases, &detectors, report_path.as_deref(), a.quiet)?;
    if let Some(s) = report.interrupted {
        if !a.quiet {
            say!(
                "ferrite: interrupted by {}: {ran} of {total} runs ended before it; the tables score the (detector, case) pairs \
                 that ran in full, the others are blank",
                emu::sig::name(s)
            );
        }
        return Ok(128 + s);
    }
    Ok(0)
}

/// Prints the tables and writes the report with its CSV and chart.
pub fn emit(
    report: &CompareReport,
    cases: &[Case],
    detectors: &[Detector],
    report_path: Option<&Path>,
    quiet: bool,
) -> Result<()> {
    render::print_tables(report, cases, detectors);
    if let Some(path) = report_path {
        let json = serde_json::to_string_pretty(&report).expect("the report serialises");
        crate::report::write_whole(path, (json + "\n").as_bytes())
            .with_context(|| format!("cannot write report `{}`", path.display()))?;
        let csv = path.with_extension("csv");
        crate::report::write_whole(&csv, summary_csv(&report.summary).as_bytes())
            .with_context(|| format!("cannot write `{}`", csv.display()))?;
        #[cfg(feature = "chart")]
        {
            let svg = path.with_extension("svg");
            render::chart(&report.detectors, &svg)
                .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", svg.display()))?;
            if !quiet {
                say!("ferrite: wrote {}, {} and {}", path.display(), csv.display(), svg.display());
            }
        }
        #[cfg(not(feature = "chart"))]
        if !quiet {
            say!("ferrite: wrote {} and {} (the chart needs the `chart` feature)", path.display(), csv.display());
        }
    }
    Ok(())
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

pub fn process_peak_kib() -> u64 {
    super::rusage(libc::RUSAGE_SELF).ru_maxrss.max(0) as u64
}
