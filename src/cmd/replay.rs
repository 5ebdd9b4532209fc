//! `ferrite replay`: a report's run again, with the same inputs and seed, checked against the
//! report (its trace hash, or the finding asked for); a crash finding's image rebuilt and
//! recovered again.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context as _, Result};
use driver::{say, RunSpec};

use crate::cli::ReplayArgs;
use crate::report::Report;

/// `ferrite replay`.
pub fn replay(a: ReplayArgs) -> Result<i32> {
    super::check_report_path("--report-out", a.report_out.as_deref())?;
    let orig = Report::read(&a.report)?;
    let program = PathBuf::from(&orig.run.program);
    let bytes = std::fs::read(&program).with_context(|| format!("cannot read program `{}`", program.display()))?;
    if blake3::hash(&bytes).to_hex().as_str() != orig.run.program_hash {
        bail!(
            "program `{}` changed since the report was written (its hash differs); the run cannot be replayed",
            program.display()
        );
    }
    let wanted = match a.finding {
        Some(id) => Some(
            orig.findings
                .iter()
                .find(|f| f.id == id)
                .cloned()
                .ok_or_else(|| anyhow!("the report has no finding {id}"))?,
        ),
        None => None,
    };
    let pm = super::PmDir::new(a.pm_dir)?;
    let spec = RunSpec {
        program,
        argv: orig.run.args.clone(),
        env: orig.run.env.clone(),
        seed: wanted.as_ref().map(|f| f.seed).unwrap_or(orig.run.seed),
        pm_dir: pm.path(),
        pm_mount: orig.run.pm_mount.clone(),
        max_instructions: orig.run.max_instructions,
        max_memory: orig.run.max_memory,
        cpus: orig.run.cpus,
        analyses: orig.run.analyses.clone(),
        strategy: driver::strategy(&orig.run.strategy, orig.run.pct_depth),
        max_threads: orig.run.max_threads,
        discard_output: false,
        quiet: false,
        max_open_files: orig.run.max_open_files,
        pm: orig.run.pm,
        custom_locks: orig.run.custom_locks.clone(),
        preempt_all: orig.run.preempt_all,
        remap_pm: false,
        schedule: wanted.as_ref().and_then(|f| f.schedule.clone()).unwrap_or_default(),
        settings: orig.run.settings.clone(),
        recover: orig.run.recover.clone(),
        hold: wanted.as_ref().and_then(|f| f.interleaving.clone()),
        delay: orig.run.delay,
        debug_dirs: driver::symbols::debug_dirs(a.debug_dir.as_deref()),
        private_cwd: false,
        trace_syscalls: a.trace_syscalls,
    };
    let runner = super::runner();
    if let (Some(f), Some(c)) = (&wanted, &orig.crash) {
        if let Some(image) = &f.crash_image {
            // A crash finding: rebuild its image from a fresh workload run and recover it.
            return Ok(match crashtest::replay(&runner, &spec, c, image)? {
                crashtest::Replayed::Reproduced(what) => {
                    say!("ferrite: replay reproduced finding {}: {what}", f.id);
                    66
                }
                crashtest::Replayed::Diverged(why) => {
                    say!("ferrite: replay diverged: {why}");
                    1
                }
                crashtest::Replayed::Passed => {
                    say!("ferrite: replay diverged: recovery passed on the rebuilt crash image of finding {}", f.id);
                    1
                }
            });
        }
    }
    let (report, out) = runner.execute(&spec)?;
    let report = Report::new(report, None);
    driver::print_findings(&report.findings);
    if let Some(path) = &a.report_out {
        report.write(path)?;
    }
    let mut changed: Vec<String> = Vec::new();
    for (path, hash) in &orig.run.inputs {
        match report.run.inputs.get(path) {
            Some(h) if h == hash => {}
            Some(_) => changed.push(format!("input file `{path}` changed")),
            None => changed.push(format!("input file `{path}` was not read")),
        }
    }
    // A finding from a later --explore schedule ran with its own seed: the report's trace hash
    // describes the first schedule, so only the finding itself can be checked.
    let same_schedule = wanted
        .as_ref()
        .map(|f| f.seed == orig.run.seed && f.schedule.as_ref().is_none_or(|s| s.is_empty()))
        .unwrap_or(true);
    if same_schedule && report.run.trace_hash != orig.run.trace_hash {
        let why = if changed.is_empty() { "the execution took another path".to_string() } else { changed.join("; ") };
        say!(
            "ferrite: replay diverged: trace hash {} instead of {} ({why})",
            report.run.trace_hash,
            orig.run.trace_hash
        );
        return Ok(1);
    }
    if let Some(f) = wanted {
        if !report.findings.iter().any(|g| g.key() == f.key()) {
            say!("ferrite: replay diverged: finding {} did not come back", f.id);
            return Ok(1);
        }
        say!("ferrite: replay reproduced finding {} (trace hash {})", f.id, report.run.trace_hash);
    } else {
        say!("ferrite: replay reproduced the run (trace hash {})", report.run.trace_hash);
    }
    Ok(out.end.exit_status(report.findings.len(), 66))
}
