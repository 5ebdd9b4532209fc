//! `ferrite bench`: emulation speed against native execution, per configuration of passes; or,
//! with `--recover`, crash testing's recoveries per second, fresh and from a snapshot.

use std::time::Instant;

use anyhow::{anyhow, bail, Context as _, Result};

use crate::cli::BenchArgs;
use crate::report::Report;

/// `ferrite bench`.
pub fn bench(a: BenchArgs) -> Result<i32> {
    use std::process::{Command as Proc, Stdio};
    if let Some(recover) = &a.recover {
        return bench_crash(&a, recover);
    }
    if a.snapshots {
        return bench_snapshots(&a);
    }
    let exe = std::env::current_exe().context("cannot find ferrite's own executable")?;
    let expected = std::cell::Cell::new(None::<i32>);
    let time = |cmd: &mut Proc| -> Result<(f64, u64)> {
        // The program measured natively starts with the default SIGXFSZ action, not the
        // ignored one ferrite itself runs with (main).
        use std::os::unix::process::CommandExt as _;
        // SAFETY: the closure runs in the child between fork and exec and only calls signal(2),
        // which is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
                Ok(())
            })
        };
        let name = cmd.get_program().to_string_lossy().into_owned();
        let t = Instant::now();
        let out = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .with_context(|| format!("cannot run the benchmark command `{name}`"))?;
        let secs = t.elapsed().as_secs_f64();
        // The native run's status is the guest's; under ferrite the same, or 66 with findings.
        let code = out.status.code();
        match expected.get() {
            None => expected.set(code),
            Some(e) if code == Some(e) || code == Some(66) => {}
            Some(e) => {
                bail!("benchmark command exited with {}, natively {e}{}", out.status, why(&out.stderr));
            }
        }
        Ok((secs, peak_rss_children_kib()))
    };
    let runs = a.runs.max(1);
    let tmp = tempfile::NamedTempFile::with_suffix(".json").context("cannot create a temporary report")?;
    let host = tempfile::NamedTempFile::with_suffix(".json").context("cannot create a temporary file")?;
    // (configuration, seconds, peak RSS KiB, allocations, [switches, blocks translated, cache flushes])
    type Row = (String, f64, u64, Option<u64>, [Option<u64>; 3]);
    let mut rows: Vec<Row> = Vec::new();
    let mut native = Vec::new();
    let mut native_rss = 0;
    for _ in 0..runs {
        let pm = tempfile::tempdir().context("cannot create a temporary PM directory")?;
        let args: Vec<String> =
            a.command[1..].iter().map(|s| s.replace("/mnt/pmem0", &pm.path().display().to_string())).collect();
        let (t, rss) = time(Proc::new(&a.command[0]).args(&args))?;
        native.push(t);
        native_rss = native_rss.max(rss);
    }
    let n = super::median(native);
    rows.push(("native".into(), n, native_rss, None, [None; 3]));
    let mut instructions = 0;
    for config in &a.configs {
        let mut ts = Vec::new();
        let mut rss_max = 0;
        for _ in 0..runs {
            let mut words = config.split_whitespace();
            let analyses = words.next().unwrap_or("none");
            let (t, rss) = time(
                Proc::new(&exe)
                    .args(["run", "--quiet", "--analyses", analyses])
                    .args(words)
                    .arg("--report")
                    .arg(tmp.path())
                    .arg("--host-stats")
                    .arg(host.path())
                    .arg("--")
                    .args(&a.command),
            )?;
            ts.push(t);
            rss_max = rss_max.max(rss);
        }
        instructions = Report::read(tmp.path())?.run.instructions;
        let stats: serde_json::Value =
            serde_json::from_slice(&std::fs::read(host.path()).context("--host-stats")?).context("--host-stats")?;
        let engine = [&stats["switches"], &stats["blocks_translated"], &stats["cache_flushes"]].map(|v| v.as_u64());
        let name = format!("ferrite --analyses {config}");
        rows.push((name, super::median(ts), rss_max, stats["allocations"].as_u64(), engine));
    }
    driver::out!("program: {}  ({instructions} guest instructions; median of {runs} runs)", a.command.join(" "));
    driver::out!(
        "| configuration | time (s) | vs native | vs plain emulation | M guest insns/s | peak RSS (MiB) | host allocations \
         | switches | blocks translated | cache flushes |"
    );
    driver::out!("|---|---|---|---|---|---|---|---|---|---|");
    let plain = rows.get(1).map(|r| r.1).unwrap_or(n);
    let cell = |v: Option<u64>| v.map_or(String::from("-"), |a| a.to_string());
    for (name, t, rss, allocs, [switches, blocks, flushes]) in &rows {
        let mips = if name == "native" { String::from("-") } else { format!("{:.0}", instructions as f64 / t / 1e6) };
        driver::out!(
            "| {name} | {t:.3} | {:.1}x | {:.2}x | {mips} | {:.1} | {} | {} | {} | {} |",
            t / n,
            t / plain,
            *rss as f64 / 1024.0,
            cell(*allocs),
            cell(*switches),
            cell(*blocks),
            cell(*flushes)
        );
    }
    Ok(0)
}

/// `ferrite bench --snapshots`: what a snapshot of the whole run costs half-way through it, and
/// a debugger's step back at its end, in this process (wall-clock time, median of the runs).
fn bench_snapshots(a: &BenchArgs) -> Result<i32> {
    use driver::session::Driven;
    let runs = a.runs.max(1) as usize;
    let program = driver::spec::program_path(&a.command[0], &[]);
    let pm = tempfile::tempdir().context("cannot create a temporary PM directory")?;
    let mut spec = driver::RunSpec::new(program, a.command.clone(), pm.path().to_path_buf());
    spec.analyses = Vec::new();
    spec.discard_output = true;
    spec.quiet = true;
    let fresh = |spec: &mut driver::RunSpec| -> Result<(driver::Session, tempfile::TempDir)> {
        let pm = tempfile::tempdir().context("cannot create a temporary PM directory")?;
        spec.pm_dir = pm.path().to_path_buf();
        Ok((driver::Session::start(spec, None, Vec::new(), false, None)?, pm))
    };
    let (mut s, _pm) = fresh(&mut spec)?;
    let end = s.drive_to_end();
    let total = s.finish(end).outcome.instructions;
    let half = total / 2;
    let (mut s, _pm) = fresh(&mut spec)?;
    s.enable_debugging();
    // Goes to instruction `n` (stops nothing if the run ends first).
    let run_to = |s: &mut driver::Session, n: u64| {
        s.machine_mut().stop_at(Some(n));
        while !matches!(s.drive_debug(), Driven::Machine(emu::DebugStop::Reached) | Driven::End(_)) {}
    };
    run_to(&mut s, half);
    let threads = s.kernel().live_threads();
    let processes = s.kernel().process_count();
    let (mut take, mut again, mut restore) = (Vec::new(), Vec::new(), Vec::new());
    let (mut held, mut again_held) = (0, 0);
    for _ in 0..runs {
        let t = Instant::now();
        let c = s.checkpoint().ok_or_else(|| anyhow!("the run cannot be snapshotted half-way"))?;
        take.push(t.elapsed().as_secs_f64());
        held = held.max(c.bytes());
        // The run goes on a little and is snapshotted again while the first lives (as the
        // debugger's timeline and an exploration's stack do): only what it wrote is copied.
        run_to(&mut s, half + (total - half) / 10);
        let t = Instant::now();
        let c2 = s.checkpoint().ok_or_else(|| anyhow!("the run cannot be snapshotted"))?;
        again.push(t.elapsed().as_secs_f64());
        again_held = again_held.max(c2.bytes());
        drop(c2);
        // Then comes back.
        let t = Instant::now();
        s.rewind(&c)?;
        restore.push(t.elapsed().as_secs_f64());
    }
    // A debugger at the end of the run, stepping back.
    let pristine = tempfile::tempdir().context("cannot create a temporary PM directory")?;
    spec.pm_dir = pristine.path().to_path_buf();
    let mut tl = crate::gdb::timeline::Timeline::new(&spec)?;
    tl.run_to_end();
    let mut back = Vec::new();
    for _ in 0..runs.max(3) {
        let t = Instant::now();
        let tid = tl.current_thread();
        tl.reverse_step(tid)?;
        back.push(t.elapsed().as_secs_f64());
    }
    let ms = |v: Vec<f64>| super::median(v) * 1e3;
    driver::out!(
        "program: {} ({total} guest instructions); median of {runs} runs, wall-clock time",
        a.command.join(" ")
    );
    driver::out!("restores find the pages written since a snapshot by: {}", emu::dirty::mode());
    driver::out!();
    driver::out!(
        "| snapshot at | processes | live threads | held (MiB) | take (ms) | again a tenth later: copied (MiB) | take (ms) | \
         restore (ms) | reverse-stepi at the end (ms) |"
    );
    driver::out!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mib = |b: usize| b as f64 / f64::from(1 << 20);
    driver::out!(
        "| {half} | {processes} | {threads} | {:.1} | {:.2} | {:.1} | {:.2} | {:.2} | {:.1} |",
        mib(held),
        ms(take),
        mib(again_held),
        ms(again),
        ms(restore),
        ms(back)
    );
    Ok(0)
}

/// `ferrite bench --recover`: recoveries per second on one core, fresh and from a snapshot.
fn bench_crash(a: &BenchArgs, recover: &str) -> Result<i32> {
    use std::process::{Command as Proc, Stdio};
    let exe = std::env::current_exe().context("cannot find ferrite's own executable")?;
    let runs = a.runs.max(1);
    let report = tempfile::NamedTempFile::with_suffix(".json").context("cannot create a temporary report")?;
    // One ferrite invocation on a fresh PM directory: (CPU seconds, report). CPU time, not wall
    // time: recoveries per second *per core*, whatever else the machine is doing.
    let ferrite = |args: &[&str], command: &[String]| -> Result<(f64, Report)> {
        let pm = tempfile::tempdir().context("cannot create a temporary PM directory")?;
        let t = children_cpu_secs();
        let out = Proc::new(&exe)
            .args(args)
            .args(["--quiet", "--analyses", "none", "--pm-dir"])
            .arg(pm.path())
            .arg("--report")
            .arg(report.path())
            .arg("--")
            .args(command)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("cannot run ferrite")?;
        let secs = children_cpu_secs() - t;
        if !matches!(out.status.code(), Some(0 | 66)) {
            bail!("`ferrite {}` exited with {}{}", args.join(" "), out.status, why(&out.stderr));
        }
        Ok((secs, Report::read(report.path())?))
    };
    let mut workload = Vec::new();
    for _ in 0..runs {
        workload.push(ferrite(&["run"], &a.command)?.0);
    }
    let workload = super::median(workload);
    // The recovery's length, on what the workload left (run in the same directory).
    let recovery: Vec<String> = super::split_command(recover);
    let pm = tempfile::tempdir().context("cannot create a temporary PM directory")?;
    let in_pm = |cmd: &[String]| {
        let status = Proc::new(&exe)
            .args(["run", "--quiet", "--analyses", "none", "--pm-dir"])
            .arg(pm.path())
            .arg("--report")
            .arg(report.path())
            .arg("--")
            .args(cmd)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        status.context("cannot run ferrite").and_then(|_| Ok(Report::read(report.path())?))
    };
    in_pm(&a.command)?;
    let recovery_insns = in_pm(&recovery)?.run.instructions;
    driver::out!(
        "workload: {} ({workload:.3} CPU s under ferrite); recovery: {recover} ({recovery_insns} guest instructions); median of {runs} runs, 1 worker, CPU time",
        a.command.join(" ")
    );
    driver::out!(
        "| recoveries | crash points | unique images | mode | CPU time (s) | recoveries/s per core | speed-up |"
    );
    driver::out!("|---|---|---|---|---|---|---|");
    let mut fresh_rate = None;
    for (mode, flag) in [("fresh machine", Some("--fresh-recoveries")), ("from a snapshot", None)] {
        let mut args = vec!["crash", "--jobs", "1", "--recover", recover];
        args.extend(flag);
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..runs {
            let (t, r) = ferrite(&args, &a.command)?;
            times.push(t);
            last = r.crash;
        }
        let c = last.ok_or_else(|| anyhow!("the crash report has no crash section"))?;
        let t = super::median(times);
        let rate = c.recoveries as f64 / (t - workload).max(1e-6);
        let speedup = fresh_rate.map(|f: f64| format!("{:.1}x", rate / f)).unwrap_or_else(|| "-".into());
        fresh_rate.get_or_insert(rate);
        driver::out!(
            "| {} | {} | {} | {mode} | {t:.3} | {rate:.0} | {speedup} |",
            c.recoveries,
            c.crash_points,
            c.unique_images
        );
    }
    Ok(0)
}

/// User and system CPU time of the children waited for so far (getrusage), in seconds.
fn children_cpu_secs() -> f64 {
    let ru = super::rusage(libc::RUSAGE_CHILDREN);
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

/// Peak resident set of the largest child waited for so far (getrusage), in KiB.
fn peak_rss_children_kib() -> u64 {
    super::rusage(libc::RUSAGE_CHILDREN).ru_maxrss.max(0) as u64
}

/// The `error:` line a failed ferrite run printed, as `: why` (empty if it printed none).
fn why(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("error: "))
        .map(|l| format!(": {l}"))
        .unwrap_or_default()
}
