//! `ferrite run`: one run of a program, or an exploration of its schedules, reported.

use std::time::Instant;

use anyhow::{Context as _, Result};
use driver::{explore, RunOutcome, RunReport, RunSpec};

use crate::cli::{RunArgs, RunOptions};
use crate::report::Report;

/// What exhaustive exploration's snapshots may hold: at most a quarter of what ferrite may hold
/// (`--max-host-memory`); nothing with `--no-snapshots`.
pub(crate) fn snapshot_budget(no_snapshots: bool) -> Option<u64> {
    let limit = crate::host_memory::LIMIT.load(std::sync::atomic::Ordering::Relaxed) / 4;
    (!no_snapshots).then_some(limit.min(explore::exhaustive::SNAPSHOT_BUDGET))
}

/// One run, or the exploration the options ask for: `--strategy exhaustive`, `--strategy
/// pmrace` (with its summary line), `--explore N` random schedules.
pub fn explore_as(spec: &RunSpec, opts: &RunOptions) -> Result<(RunReport, RunOutcome, Option<String>)> {
    let runner = super::runner();
    Ok(if spec.strategy == emu::sched::Strategy::Exhaustive {
        let budget = snapshot_budget(opts.no_snapshots);
        let (r, o) =
            explore::exhaustive::explore(&runner, spec, opts.explore.max(1), opts.max_preemptions, opts.por, budget)?;
        (r, o, None)
    } else if opts.strategy == "pmrace" {
        let (r, o, summary) = explore::targeted::explore(&runner, spec, opts.explore.max(1), !opts.no_snapshots)?;
        (r, o, Some(summary))
    } else if opts.explore > 1 {
        let (r, o) = explore::random(&runner, spec, opts.explore, !opts.no_snapshots)?;
        (r, o, None)
    } else {
        let (r, o) = runner.execute(spec)?;
        (r, o, None)
    })
}

/// `ferrite run`.
pub fn run(a: RunArgs) -> Result<i32> {
    let started = Instant::now();
    let allocations = crate::HOST_ALLOCATIONS.load(std::sync::atomic::Ordering::Relaxed);
    let opts = a.opts;
    if opts.explore == 0 {
        // As `compare`: zero schedules would still run one, which the option did not ask for.
        anyhow::bail!("--explore needs at least one schedule");
    }
    super::check_report_path("--report", opts.report.as_deref())?;
    super::check_outside_pm_dir("--report", opts.report.as_deref(), opts.pm_dir.as_deref())?;
    let shard = super::merge::shard_of(&a.shard, opts.report.as_deref(), opts.quiet)?;
    if !a.listen.is_empty() {
        let clash = if opts.explore > 1 {
            Some("--explore")
        } else if opts.strategy == "exhaustive" || opts.strategy == "pmrace" {
            Some("--strategy exhaustive and pmrace")
        } else if opts.recover.is_some() {
            Some("--recover")
        } else if shard.is_some() {
            Some("--shard")
        } else {
            None
        };
        if let Some(c) = clash {
            anyhow::bail!("--listen cannot be combined with {c}: host clients are served once, by one run");
        }
        let mut guests: Vec<u16> = a.listen.iter().map(|l| l.0).collect();
        guests.sort_unstable();
        if guests.windows(2).any(|w| w[0] == w[1]) {
            anyhow::bail!("--listen names a guest port twice");
        }
    }
    let pm = super::PmDir::new(opts.pm_dir.clone(), super::PmUse::Writes)?;
    let mut spec = super::run_spec(&opts, &a.command, pm.path())?;
    if !a.listen.is_empty() {
        spec.listen = Some(syscalls::listen::ListenSpec::Record(a.listen.clone()));
    }
    if let (Some(shard), Some(path)) = (shard, &opts.report) {
        return super::merge::explore_part(&opts, &a.command, &spec, shard, path);
    }
    // One run, or an exploration's schedules (each stops, and the exploration keeps the
    // schedules that ended: explore::schedules, explore::exhaustive, explore::targeted). Not
    // runs whose findings recoveries validate (a stopped validation would not be the replay's).
    let stoppable = opts.recover.is_none() && a.listen.is_empty();
    if stoppable {
        crate::signals::stop_run_on_interrupt();
    }
    let (report, out, summary) = explore_as(&spec, &opts)?;
    if let Some(Err(why)) = &out.listen {
        anyhow::bail!("--listen: {why}");
    }
    let report = Report::new(report, None);
    if !opts.quiet {
        if let Some(summary) = summary {
            driver::say!("{summary}");
        }
        driver::print_findings(&report.findings);
        if let Some(s) = report.run.interrupted {
            driver::say!(
                "ferrite: interrupted by {}: {} of {} schedules ran; the findings above are theirs{}",
                emu::sig::name(s),
                report.run.schedules,
                opts.explore,
                if opts.report.is_some() { ", and each replays from the report" } else { "" }
            );
        } else if let driver::GuestEnd::Interrupted(s) = out.end {
            driver::say!(
                "ferrite: interrupted by {}: the run stopped at instruction {}; the findings above are those made \
                 so far{}",
                emu::sig::name(s),
                report.run.instructions,
                if opts.report.is_some() {
                    ", and `ferrite replay` of the report re-runs it to the same point"
                } else {
                    ""
                }
            );
        }
        if opts.explore > 1 && spec.strategy != emu::sched::Strategy::Exhaustive && opts.strategy != "pmrace" {
            driver::say!(
                "ferrite: explored {} schedules from seed {}; {} distinct finding(s)",
                report.run.schedules,
                opts.seed,
                report.findings.len()
            );
        }
        if let Some(b) = out.branching.filter(|b| b.refused > 0) {
            driver::say!(
                "ferrite: note: the run could not be snapshotted or restored {} time(s), and schedules re-ran from the \
                 start or an earlier snapshot instead: {}",
                b.refused,
                b.refused_why.unwrap_or("unknown")
            );
        }
    }
    if let Some(path) = &opts.report {
        report.write(path)?;
    }
    if let Some(path) = &a.host_stats {
        let mut stats = serde_json::json!({
            "allocations": crate::HOST_ALLOCATIONS.load(std::sync::atomic::Ordering::Relaxed) - allocations,
            "peak_heap_bytes": crate::host_memory::PEAK.load(std::sync::atomic::Ordering::Relaxed),
            "wall_seconds": started.elapsed().as_secs_f64(),
            "instructions": report.run.instructions,
            "switches": report.run.switches,
            "blocks_translated": out.translation.blocks_translated,
            "cache_flushes": out.translation.cache_flushes,
            "ranges_removed": out.translation.ranges_removed,
            "hooks_swept": out.translation.hooks_swept,
            "atomic_dram_pcs": out.translation.atomic_dram_pcs,
            "atomic_pm_pcs": out.translation.atomic_pm_pcs,
            "regions_peak": out.translation.regions_peak,
            "regions_faulted_in": out.translation.regions_faulted_in,
            "regions_evicted": out.translation.regions_evicted,
            "dirty_pages": emu::dirty::mode(),
        });
        if let (Some(b), Some(map)) = (out.branching, stats.as_object_mut()) {
            map.insert("exploration".into(), super::exploration_json(&b));
        }
        crate::report::write_whole(path, stats.to_string().as_bytes())
            .with_context(|| format!("--host-stats {}", path.display()))?;
    }
    if let Some(s) = report.run.interrupted {
        return Ok(128 + s);
    }
    Ok(out.end.exit_status(report.findings.len(), opts.findings_exit_code))
}
