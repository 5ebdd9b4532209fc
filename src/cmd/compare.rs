//! `ferrite compare`: runs every selected detector over the suite, one phase per detector with
//! its runs in parallel, measures each phase's time and memory, scores, and reports
//! ([`crate::compare`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context as _, Result};
use driver::say;

use crate::cli::CompareArgs;
use crate::compare::render::summary_csv;
use crate::compare::score::{self, CompareReport, DetectorOut};
use crate::compare::suite::{default_suite, filter_cases, load_suite, run_job, RunRecord};
use crate::compare::{applies, render, select_detectors};

/// `ferrite compare`.
pub fn compare(a: CompareArgs) -> Result<i32> {
    let started = Instant::now();
    if let Some(r) = &a.report {
        if !r.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
            bail!("--report `{}`: use a .json file name (the .csv and .svg are written next to it)", r.display());
        }
    }
    if let Some(dir) = a.report.as_ref().and_then(|r| r.parent()).filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            bail!("--report: directory `{}` does not exist", dir.display());
        }
    }
    if a.explore == 0 {
        bail!("--explore needs at least one schedule");
    }
    let suite = a.suite.clone().unwrap_or_else(default_suite);
    if !suite.exists() {
        bail!("suite `{}` does not exist", suite.display());
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
    // Guests run in a scratch working directory of their own (the files some write there are
    // not left in the user's), shared by every run.
    let scratch = tempfile::Builder::new()
        .prefix("ferrite-compare-")
        .tempdir()
        .context("cannot create a scratch working directory")?;
    std::env::set_current_dir(scratch.path()).context("cannot enter the scratch working directory")?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .with_context(|| format!("cannot start {jobs} workers"))?;

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
        let records: Vec<Result<RunRecord>> = pool.install(|| {
            runs.par_iter()
                .map(|&(ci, seed)| {
                    let r = run_job(d, &cases[ci], seed, a.explore, jobs)
                        .with_context(|| format!("{} on case `{}` (seed {seed})", d.name, cases[ci].name));
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
    };
    render::print_tables(&report, &cases, &detectors);
    if let Some(path) = &report_path {
        let json = serde_json::to_string_pretty(&report).expect("the report serialises");
        std::fs::write(path, json + "\n").with_context(|| format!("cannot write report `{}`", path.display()))?;
        let csv = path.with_extension("csv");
        std::fs::write(&csv, summary_csv(&report.summary))
            .with_context(|| format!("cannot write `{}`", csv.display()))?;
        #[cfg(feature = "chart")]
        {
            let svg = path.with_extension("svg");
            render::chart(&report.detectors, &svg)
                .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", svg.display()))?;
            if !a.quiet {
                say!("ferrite: wrote {}, {} and {}", path.display(), csv.display(), svg.display());
            }
        }
        #[cfg(not(feature = "chart"))]
        if !a.quiet {
            say!("ferrite: wrote {} and {} (the chart needs the `chart` feature)", path.display(), csv.display());
        }
    }
    Ok(0)
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
    super::rusage(libc::RUSAGE_SELF).ru_maxrss.max(0) as u64
}
