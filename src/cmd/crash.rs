//! `ferrite crash`: crash testing of a workload ([`crashtest`]), reported.

use anyhow::{bail, Context as _, Result};
use driver::{say, GuestEnd};

use crate::cli::CrashArgs;
use crate::report::Report;

/// `ferrite crash`.
pub fn crash(a: CrashArgs) -> Result<i32> {
    let started = std::time::Instant::now();
    let opts = &a.opts;
    super::check_report_path("--report", opts.report.as_deref())?;
    super::check_outside_pm_dir("--report", opts.report.as_deref(), opts.pm_dir.as_deref())?;
    let shard = super::merge::shard_of(&a.shard, opts.report.as_deref(), opts.quiet)?;
    if shard.is_some() && a.lazy {
        bail!("--lazy cannot be sharded: its crash points share what recovery read (run it unsharded)");
    }
    if opts.schedule_seed.is_some() {
        bail!("--schedule-seed applies to `ferrite run` only (`ferrite crash --explore` derives each schedule's from --seed)");
    }
    let recover = opts.recover.as_deref().map(super::split_command).unwrap_or_else(|| a.command.clone());
    if recover.is_empty() {
        bail!("--recover needs a program");
    }
    let check = a.check.as_deref().map(super::split_command).filter(|c| !c.is_empty());
    let user = super::PmDir::new(opts.pm_dir.clone(), super::PmUse::Reads)?;
    let base = super::run_spec(opts, &a.command, user.path())?;
    let options = options(&a, recover, check, a.jobs.unwrap_or_else(crate::cli::values::default_jobs), shard);
    if let (Some(shard), Some(path)) = (shard, &opts.report) {
        // Recorded before the run: the PM directory as the campaign's input.
        let header = part_header(&a, &options, &base, shard);
        let c = crashtest::test(&super::runner(), &base, &options)?;
        host_stats(&a, &c, started)?;
        return super::merge::write_crash_part(path, header, c, opts.quiet);
    }
    // A harness's timeout (SIGTERM) or the user's ^C stops the campaign where it is and keeps
    // what it found: the workload run stops at its next block, no recovery or schedule starts
    // after, and the failures found are reported (unminimised if minimising had not begun).
    // Not for a shard, whose part must be the shard's whole work (run it again instead).
    crate::signals::stop_run_on_interrupt();
    let c = crashtest::test(&super::runner(), &base, &options)?;
    host_stats(&a, &c, started)?;
    let schedules = c.report.run.schedules;
    let interrupted = c.summary.interrupted;
    let report = Report::new(c.report, Some(c.summary));
    if !opts.quiet {
        driver::print_findings(&report.findings);
        let c_ = report.crash.as_ref().expect("set above");
        say!(
            "ferrite: crash testing: {}{} crash points, {} images, {} unique, {} recoveries ({} from a snapshot), {} failing{}",
            if schedules > 1 { format!("{schedules} schedules, ") } else { String::new() },
            c_.crash_points,
            c_.images,
            c_.unique_images,
            c_.recoveries,
            c.restored,
            c_.failures,
            if c_.sampled_points > 0 {
                format!(" ({} points sampled; largest space 2^{:.1} images)", c_.sampled_points, c_.max_space_log2)
            } else if let Some(n) = c_.covered_log2 {
                format!(" (every image of every point: 2^{n:.1} images, read lazily)")
            } else {
                " (every image of every point)".to_string()
            }
        );
    }
    if let Some(s) = interrupted {
        if !opts.quiet {
            say!(
                "ferrite: interrupted by {}: crash testing stopped; the failures above are those found before it{}",
                emu::sig::name(s),
                if opts.report.is_some() { ", and each replays from the report" } else { "" }
            );
        }
        if let Some(path) = &opts.report {
            report.write(path)?;
        }
        return Ok(128 + s);
    }
    if let Some(path) = &opts.report {
        report.write(path)?;
    }
    if a.crash_at.is_some() && c.outcome.end == GuestEnd::Hang {
        // The workload was stopped at the crash point, not hung: only findings count.
        let n = report.findings.len();
        return Ok(if n > 0 { opts.findings_exit_code.clamp(0, 255) } else { 0 });
    }
    Ok(c.outcome.end.exit_status(report.findings.len(), opts.findings_exit_code))
}

/// The campaign `a` asks for, recovering with `recover` (and checking with `check`) on `jobs`
/// workers: what `ferrite crash` runs, and `ferrite compare`'s crash testing of a case.
pub(crate) fn options(
    a: &CrashArgs,
    recover: Vec<String>,
    check: Option<Vec<String>>,
    jobs: usize,
    shard: Option<driver::shard::Shard>,
) -> crashtest::Options {
    crashtest::Options {
        recover,
        check,
        crash_points: a.crash_points.clone(),
        crash_at: a.crash_at,
        dedup_points: a.dedup_points,
        max_images: a.max_images,
        jobs,
        remap: a.remap,
        xfd: a.xfd,
        fresh: a.fresh_recoveries,
        lazy: a.lazy,
        schedules: a.opts.explore.max(1),
        shard: shard.unwrap_or(driver::shard::Shard::WHOLE),
        snapshots: !a.opts.no_snapshots,
    }
}

/// `--host-stats`: the campaign's wall-clock time and how its workload runs went.
fn host_stats(a: &CrashArgs, c: &crashtest::Campaign, started: std::time::Instant) -> Result<()> {
    let Some(path) = &a.host_stats else { return Ok(()) };
    let stats = serde_json::json!({
        "wall_seconds": started.elapsed().as_secs_f64(),
        "restored_recoveries": c.restored,
        "exploration": super::exploration_json(&c.workloads),
    });
    crate::report::write_whole(path, stats.to_string().as_bytes())
        .with_context(|| format!("--host-stats {}", path.display()))
}

/// The header of a crash campaign's part: the options that define its results and the hashes
/// of its inputs.
fn part_header(
    a: &CrashArgs,
    o: &crashtest::Options,
    base: &driver::RunSpec,
    shard: driver::shard::Shard,
) -> crate::part::Header {
    use crate::part::option_lines;
    let mut opts = a.opts.clone();
    (opts.report, opts.quiet, opts.pm_dir) = (None, false, None);
    let mut options = option_lines(&opts);
    options.extend(option_lines(&(&a.check, &a.crash_points, a.max_images, a.dedup_points, a.crash_at)));
    options.extend(option_lines(&(a.remap, a.xfd, a.fresh_recoveries, a.lazy, &a.command, &o.recover)));
    let mut programs = vec![&a.command[0], &o.recover[0]];
    programs.extend(o.check.as_ref().map(|c| &c[0]));
    let inputs = super::merge::run_inputs(&programs, &a.opts.config, base);
    crate::part::Header::new("crash", shard, options, inputs)
}
