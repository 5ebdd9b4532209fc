//! `ferrite replay`: a report's run again, with the same inputs and seed, checked against the
//! report (its trace hash, or the finding asked for); a crash finding's image rebuilt and
//! recovered again.

use anyhow::{anyhow, bail, Context as _, Result};
use driver::say;

use crate::cli::ReplayArgs;
use crate::report::Report;

/// `ferrite replay`.
pub fn replay(a: ReplayArgs) -> Result<i32> {
    super::check_report_path("--report-out", a.report_out.as_deref())?;
    super::check_outside_pm_dir("--report-out", a.report_out.as_deref(), a.pm_dir.as_deref())?;
    let orig = Report::read(&a.report)?;
    let pm = super::PmDir::new(a.pm_dir, super::PmUse::Writes)?;
    let (mut spec, wanted) = orig.replay_spec(a.finding, pm.path()).map_err(|e| anyhow!(e))?;
    // A FIFO or a device named as the program is refused before anything waits on it.
    let bytes = loader::input::read_regular(&spec.program, loader::input::PROGRAM_CAP)
        .with_context(|| format!("cannot read program `{}`", spec.program.display()))?;
    if blake3::hash(&bytes).to_hex().as_str() != orig.run.program_hash {
        bail!(
            "program `{}` changed since the report was written (its hash differs); the run cannot be replayed",
            spec.program.display()
        );
    }
    spec.debug_dirs = driver::symbols::debug_dirs(a.debug_dir.as_deref());
    spec.trace_syscalls = a.trace_syscalls;
    let runner = super::runner();
    if let Some(addr) = &a.gdb {
        if let (Some(f), Some(c)) = (&wanted, &orig.crash) {
            if let Some(image) = &f.crash_image {
                if a.workload {
                    // The workload's own run, stopped at the crash point.
                    let (at, tid) = match crashtest::crash_point_of(&runner, &spec, c, image)? {
                        Ok(p) => p,
                        Err(why) => bail!("replay diverged: {why}"),
                    };
                    let note = crate::gdb::workload_note(f, &spec.argv, at);
                    let start = crate::gdb::Start::At(at, tid);
                    crate::gdb::serve(&spec, addr, start, orig.findings.clone(), Some(note))?;
                    return Ok(0);
                }
                // A crash finding: its recovery, on its crash image rebuilt from a fresh
                // workload run, is what gdb sees; or its checker (`--check`), on what the
                // recovery left, if the recovery passes there.
                let served = match crashtest::recovery_of(&runner, &spec, c, image)? {
                    Ok(r) => r,
                    Err(why) => bail!("replay diverged: {why}"),
                };
                let note = crate::gdb::crash_note(f, &served.spec.argv, served.after.as_deref());
                let start = crate::gdb::Start::Finding(f);
                crate::gdb::serve(&served.spec, addr, start, orig.findings.clone(), Some(note))?;
                return Ok(0);
            }
        }
        if a.workload {
            bail!("--workload serves a crash finding's workload: give --finding with the ID of a crash finding");
        }
        let start = wanted.as_ref().map_or(crate::gdb::Start::Entry, crate::gdb::Start::Finding);
        crate::gdb::serve(&spec, addr, start, orig.findings.clone(), None)?;
        return Ok(0);
    }
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
    if let Some(listen) = &out.listen {
        let got = listen.as_ref().map_err(|why| anyhow!("replay diverged from the recorded host clients: {why}"))?;
        let want = orig.run.listen.as_ref().map(|l| &l.outputs);
        let got = driver::report::ListenInfo::of(got);
        if want != Some(&got.outputs) {
            bail!(
                "replay diverged from the recorded host clients: {}",
                outputs_difference(&got.outputs, want.map_or(&[][..], |w| &w[..]))
            );
        }
    }
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
        .map(|f| {
            f.seed == orig.run.schedule_seed.unwrap_or(orig.run.seed)
                && f.schedule.as_ref().is_none_or(|s| s.is_empty())
        })
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

/// Where what the guest sent the host connections (`got`) first differs from the recording.
fn outputs_difference(got: &[driver::report::ListenOutput], want: &[driver::report::ListenOutput]) -> String {
    match got.iter().zip(want).position(|(g, w)| g != w) {
        Some(i) if got[i].bytes != want[i].bytes => {
            format!("the guest sent connection {i} {} bytes instead of {}", got[i].bytes, want[i].bytes)
        }
        Some(i) => format!("the guest sent connection {i} other bytes ({} of them) than it did", got[i].bytes),
        None => format!("the guest had {} connections instead of {}", got.len(), want.len()),
    }
}
