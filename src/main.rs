//! The `ferrite` command: run, replay and measure guests.

/// Like `eprintln!`, but a closed or full standard error never panics ferrite.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// Like `println!`, without panicking on a closed pipe.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

mod cli;
mod compare;
mod crash;
mod lazy;
mod por;
mod report;
mod session;
mod symbols;
mod targeted;
mod validate;
mod warm;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

use cli::{BenchArgs, Cli, Command, CrashArgs, ReplayArgs, RunArgs, RunOptions};
use report::{ExitInfo, Report, RunInfo};
use session::{GuestEnd, RunSpec};
use syscalls::ProcessExit;

/// The system allocator, counting allocations: `ferrite bench` shows how many the emulator makes
/// per guest instruction (its hot path should make none), and tests check that the count does
/// not grow with the instructions a guest executes.
struct CountingAlloc;

static HOST_ALLOCATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counter has no effect on memory.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        HOST_ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        HOST_ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        HOST_ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as above.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc;

/// ferrite's own failures (bad input, unreadable files): exit 2 with one `error:` line.
#[derive(Debug)]
pub(crate) struct Fatal(pub(crate) String);

impl<E: std::fmt::Display> From<E> for Fatal {
    fn from(e: E) -> Fatal {
        Fatal(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // From here on the kernel lets ferrite write only where it means to (docs/sandbox.md).
    let _tmp = match confine(&cli.command) {
        Ok(t) => t,
        Err(Fatal(msg)) => {
            say!("error: {msg}");
            return ExitCode::from(2);
        }
    };
    let res = match cli.command {
        Command::Run(a) => cmd_run(a),
        Command::Replay(a) => cmd_replay(a),
        Command::Crash(a) => cmd_crash(a),
        Command::Bench(a) => cmd_bench(a),
        Command::Compare(a) => compare::cmd_compare(a),
    };
    match res {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(Fatal(msg)) => {
            say!("error: {msg}");
            ExitCode::from(2)
        }
    }
}

/// Confines ferrite's own writes with Landlock ([`syscalls::landlock`]) to the working directory,
/// the command's output files' directories, `--pm-dir` and a private temporary directory (made
/// here, before any thread, holding every temporary directory made later, and removed when the
/// guard is dropped).
fn confine(cmd: &Command) -> Result<syscalls::landlock::TempRoot, Fatal> {
    let tmp = syscalls::landlock::TempRoot::new().map_err(|e| Fatal(format!("temporary directory: {e}")))?;
    let _ = tempfile::env::override_temp_dir(tmp.path());
    let dir_of = |f: &Option<PathBuf>| {
        f.as_ref().map(|f| {
            f.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new(".")).to_path_buf()
        })
    };
    let mut writable = vec![PathBuf::from(".")];
    writable.extend(
        match cmd {
            Command::Run(a) => vec![dir_of(&a.opts.report), dir_of(&a.host_stats), a.opts.pm_dir.clone()],
            Command::Crash(a) => vec![dir_of(&a.opts.report), a.opts.pm_dir.clone()],
            Command::Replay(a) => vec![dir_of(&a.report_out), a.pm_dir.clone()],
            Command::Compare(a) => vec![dir_of(&a.report)],
            Command::Bench(_) => vec![],
        }
        .into_iter()
        .flatten(),
    );
    let alone = "ferrite's own writes are confined by its path checks alone";
    match syscalls::landlock::confine(&writable, &tmp) {
        Ok(syscalls::landlock::Confinement::None) if std::env::var_os("FERRITE_NO_LANDLOCK").is_none() => {
            say!("warning: the kernel has no Landlock; {alone}")
        }
        Err(e) => say!("warning: {e}; {alone}"),
        Ok(_) => {}
    }
    Ok(tmp)
}

/// Holds the PM directory of a run: the user's, or a temporary one removed afterwards.
enum PmDir {
    User(PathBuf),
    Temp(tempfile::TempDir),
}

impl PmDir {
    fn new(user: Option<PathBuf>) -> Result<PmDir, Fatal> {
        Ok(match user {
            Some(p) => {
                if !p.is_dir() {
                    return Err(Fatal(format!("--pm-dir `{}` is not a directory", p.display())));
                }
                PmDir::User(p)
            }
            None => PmDir::Temp(tempfile::Builder::new().prefix("ferrite-pm-").tempdir()?),
        })
    }

    fn path(&self) -> PathBuf {
        match self {
            PmDir::User(p) => p.clone(),
            PmDir::Temp(t) => t.path().to_path_buf(),
        }
    }
}

fn guest_env(opts: &RunOptions) -> Result<Vec<String>, Fatal> {
    let mut env: Vec<String> = if opts.env_clear {
        Vec::new()
    } else {
        std::env::vars_os().map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy())).collect()
    };
    for kv in &opts.env {
        let Some((k, _)) = kv.split_once('=') else {
            return Err(Fatal(format!("--env `{kv}` is not KEY=VALUE")));
        };
        env.retain(|e| e.split_once('=').map(|(ek, _)| ek) != Some(k));
        env.push(kv.clone());
    }
    Ok(env)
}

/// PCT needs the number of scheduling points it spreads its change points over; without a
/// profiling run, this estimate (PCT's k) is used.
const PCT_EXPECTED_POINTS: u64 = 10_000;

fn strategy(name: &str, depth: u32) -> emu::sched::Strategy {
    match name {
        "pct" => emu::sched::Strategy::Pct { depth: depth.max(1), expected_points: PCT_EXPECTED_POINTS },
        "fifo" => emu::sched::Strategy::Fifo,
        "exhaustive" => emu::sched::Strategy::Exhaustive,
        // `pmrace` holds readers at chosen loads; the other choices are the random strategy's.
        _ => emu::sched::Strategy::Random,
    }
}

fn spec_strategy_name(s: emu::sched::Strategy) -> String {
    match s {
        emu::sched::Strategy::Random => "random",
        emu::sched::Strategy::Pct { .. } => "pct",
        emu::sched::Strategy::Fifo => "fifo",
        emu::sched::Strategy::Exhaustive => "exhaustive",
    }
    .into()
}

fn exit_info(end: GuestEnd) -> ExitInfo {
    match end {
        GuestEnd::Exited(ProcessExit::Code(c)) => ExitInfo { code: Some(c), ..ExitInfo::default() },
        GuestEnd::Exited(ProcessExit::Signal(s)) => ExitInfo { signal: Some(s), ..ExitInfo::default() },
        GuestEnd::Hang => ExitInfo { hang: true, ..ExitInfo::default() },
        GuestEnd::Deadlock => ExitInfo { deadlock: true, ..ExitInfo::default() },
    }
}

/// The status ferrite exits with: a signal's 128+N first (what a shell would have seen natively),
/// then the findings code, then the guest's own status.
fn exit_status(end: GuestEnd, findings: usize, findings_code: i32) -> i32 {
    match end {
        GuestEnd::Exited(ProcessExit::Signal(s)) => 128 + s,
        _ if findings > 0 => findings_code,
        GuestEnd::Exited(ProcessExit::Code(c)) => c,
        GuestEnd::Hang | GuestEnd::Deadlock => findings_code,
    }
}

fn execute(spec: &RunSpec) -> Result<(Report, session::RunOutcome), Fatal> {
    execute_with(spec, None, Vec::new())
}

pub(crate) fn execute_with(
    spec: &RunSpec,
    crash: Option<std::rc::Rc<std::cell::RefCell<crash::CrashLog>>>,
    extra: Vec<Box<dyn analyses::Analysis>>,
) -> Result<(Report, session::RunOutcome), Fatal> {
    let out = session::run_with(spec, crash, extra)?;
    let report = Report {
        ferrite: env!("CARGO_PKG_VERSION").into(),
        run: RunInfo {
            program: spec.program.display().to_string(),
            program_hash: out.program_hash.clone(),
            args: spec.argv.clone(),
            env: spec.env.clone(),
            seed: spec.seed,
            exit: exit_info(out.end),
            instructions: out.instructions,
            threads: out.threads,
            switches: out.switches,
            strategy: spec_strategy_name(spec.strategy),
            pct_depth: match spec.strategy {
                emu::sched::Strategy::Pct { depth, .. } => depth,
                _ => 0,
            },
            max_threads: spec.max_threads,
            max_open_files: spec.max_open_files,
            pm: spec.pm,
            custom_locks: spec.custom_locks.clone(),
            preempt_all: spec.preempt_all,
            trace_hash: out.trace_hash.clone(),
            pm_mount: spec.pm_mount.clone(),
            max_instructions: spec.max_instructions,
            max_memory: spec.max_memory,
            cpus: spec.cpus,
            analyses: spec.analyses.clone(),
            schedules: 1,
            inputs: out.inputs.clone(),
            settings: spec.settings.clone(),
            recover: spec.recover.clone(),
            delay: spec.delay,
        },
        findings: out.findings.clone(),
        crash: None,
        stats: out.stats.clone(),
        discarded: out.discarded.clone(),
    };
    Ok((report, out))
}

fn run_spec(opts: &RunOptions, command: &[String], pm_dir: PathBuf) -> Result<RunSpec, Fatal> {
    let config = match &opts.config {
        Some(p) => load_config(p)?,
        None => Config::default(),
    };
    Ok(RunSpec {
        program: PathBuf::from(&command[0]),
        argv: command.to_vec(),
        env: guest_env(opts)?,
        seed: opts.seed,
        pm_dir,
        pm_mount: opts.pm_mount.clone(),
        max_instructions: opts.max_instructions,
        max_memory: opts.max_memory,
        cpus: opts.cpus,
        analyses: pass_options(opts),
        strategy: strategy(&opts.strategy, opts.pct_depth),
        max_threads: opts.max_threads,
        discard_output: false,
        quiet: opts.quiet,
        max_open_files: opts.max_open_files,
        pm: emu::pm::PmConfig {
            atomicity: opts.atomicity.parse().map_err(|e| Fatal(format!("--atomicity: {e}")))?,
            flush_model: opts.flush_model.parse().map_err(|e| Fatal(format!("--flush-model: {e}")))?,
            persistency: opts.persistency.parse().map_err(|e| Fatal(format!("--persistency: {e}")))?,
        },
        preempt_all: opts.preempt == "all",
        remap_pm: false,
        schedule: Vec::new(),
        custom_locks: config.locks,
        settings: analyses::Settings { sync_vars: config.sync_vars, pmrace_allow: config.pmrace_allow },
        recover: opts.recover.as_deref().map(split_command).filter(|c| !c.is_empty()),
        hold: None,
        delay: (opts.delay > 0).then_some(emu::sched::DelayInjection { length: opts.delay, decay: opts.delay_decay }),
        debug_dirs: symbols::debug_dirs(opts.debug_dir.as_deref()),
        private_cwd: false,
        trace_syscalls: opts.trace_syscalls,
    })
}

/// A command given as one string, split at whitespace (no quoting).
fn split_command(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// The instruction budget of one recovery: ten times the workload's instructions, at least 20
/// million, at most `--max-instructions` (`ferrite crash`, its replay, and `ferrite compare`).
fn recovery_budget(workload: u64, max_instructions: u64) -> u64 {
    workload.saturating_mul(10).max(20_000_000).min(max_instructions)
}

fn cmd_crash(a: CrashArgs) -> Result<i32, Fatal> {
    let opts = &a.opts;
    check_report_path("--report", opts.report.as_deref())?;
    let recover = opts.recover.as_deref().map(split_command).unwrap_or_else(|| a.command.clone());
    if recover.is_empty() {
        return Err(Fatal("--recover needs a program".into()));
    }
    let check = a.check.as_deref().map(split_command).filter(|c| !c.is_empty());
    let user = PmDir::new(opts.pm_dir.clone())?;
    let base = run_spec(opts, &a.command, user.path())?;
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    // `--explore N`: N schedules of the workload (seeds as for `run`), each crash-tested; images
    // already recovered for an earlier schedule are not recovered again.
    let schedules = opts.explore.max(1);
    let mut seen = std::collections::BTreeSet::new();
    let mut first: Option<(Report, session::RunOutcome)> = None;
    let mut findings = Vec::new();
    let mut summary = report::CrashSummary {
        crash_points: 0,
        images: 0,
        unique_images: 0,
        recoveries: 0,
        failures: 0,
        sampled_points: 0,
        max_space_log2: 0.0,
        recover: recover.clone(),
        check: check.clone(),
        crash_point_mode: a.crash_points.clone(),
        max_images: a.max_images,
        crash_at: a.crash_at,
        remap: a.remap,
        dedup_points: a.dedup_points,
        lazy: a.lazy,
        covered_log2: None,
    };
    let mut restored = 0;
    for i in 0..u64::from(schedules) {
        // The workload runs on a copy: the user's PM directory is never changed.
        let (_work, spec) = exploration_run(&base, i)?;
        let (report, out, log) = crash_workload(&spec, &a.crash_points, a.crash_at, a.dedup_points)?;
        let plan = crash::Plan {
            recover: recover.clone(),
            check: check.clone(),
            base: RunSpec { analyses: vec!["none".into()], discard_output: true, quiet: true, ..spec.clone() },
            budget: recovery_budget(out.instructions, opts.max_instructions),
            jobs,
            max_images: a.max_images,
            quiet: opts.quiet,
            remap: a.remap,
            xfd: a.xfd,
            fresh: a.fresh_recoveries,
            lazy: a.lazy,
        };
        let tested = crash::test_all(&log, &plan, &mut seen)?;
        findings.extend(report.findings.iter().cloned());
        findings.extend(tested.findings);
        summary.crash_points += log.points.len() as u64;
        summary.images += tested.images;
        summary.unique_images += tested.unique_images;
        summary.recoveries += tested.recoveries;
        summary.failures += tested.failures;
        summary.sampled_points += tested.sampled_points;
        summary.max_space_log2 = summary.max_space_log2.max(tested.max_space_log2);
        if let Some(c) = tested.covered_log2 {
            let total = summary.covered_log2.map_or(c, |t| crash::log2_add(t, c));
            summary.covered_log2 = Some(total);
        }
        restored += tested.restored;
        if first.is_none() {
            first = Some((report, out));
        }
    }
    let (mut report, out) = first.ok_or_else(|| Fatal("no workload run".into()))?;
    report.findings = analyses::Finding::merge(findings);
    report.run.seed = base.seed;
    report.run.schedules = schedules;
    report.crash = Some(summary);
    if !opts.quiet {
        report::print_findings(&report.findings);
        let c = report.crash.as_ref().expect("set above");
        say!(
            "ferrite: crash testing: {}{} crash points, {} images, {} unique, {} recoveries ({restored} from a snapshot), {} failing{}",
            if schedules > 1 { format!("{schedules} schedules, ") } else { String::new() },
            c.crash_points,
            c.images,
            c.unique_images,
            c.recoveries,
            c.failures,
            if c.sampled_points > 0 {
                format!(" ({} points sampled; largest space 2^{:.1} images)", c.sampled_points, c.max_space_log2)
            } else if let Some(n) = c.covered_log2 {
                format!(" (every image of every point: 2^{n:.1} images, read lazily)")
            } else {
                " (every image of every point)".to_string()
            }
        );
    }
    if let Some(path) = &opts.report {
        report.write(path)?;
    }
    if a.crash_at.is_some() && out.end == GuestEnd::Hang {
        // The workload was stopped at the crash point, not hung: only findings count.
        let n = report.findings.len();
        return Ok(if n > 0 { opts.findings_exit_code.clamp(0, 255) } else { 0 });
    }
    Ok(exit_status(out.end, report.findings.len(), opts.findings_exit_code))
}

/// `ferrite crash`'s workload run (its `--crash-points` mode, `--crash-at`, `--dedup-points`) in
/// `spec.pm_dir`, recording its crash points: `cmd_crash`, its replay and `compare` share it.
pub(crate) fn crash_workload(
    spec: &RunSpec,
    mode: &str,
    crash_at: Option<u64>,
    dedup_points: bool,
) -> Result<(Report, session::RunOutcome, crash::CrashLog), Fatal> {
    let mut spec = spec.clone();
    if let Some(n) = crash_at {
        spec.max_instructions = n;
    }
    let log = crash::CrashLog::new(&spec.pm_dir, crash::every_store(mode, spec.pm));
    log.borrow_mut().at_end_only = crash_at.is_some();
    log.borrow_mut().dedup_sites = dedup_points;
    let (report, out) = execute_with(&spec, Some(log.clone()), Vec::new())?;
    let log = std::rc::Rc::try_unwrap(log).map_err(|_| Fatal("internal: crash log still shared".into()))?.into_inner();
    Ok((report, out, log))
}

/// Rebuilds a crash finding's image from a fresh workload run with its seed and recovers it.
fn replay_crash(
    spec: &RunSpec,
    c: &report::CrashSummary,
    f: &analyses::Finding,
    image: &analyses::CrashImageRef,
) -> Result<i32, Fatal> {
    let work = tempfile::Builder::new().prefix("ferrite-crash-").tempdir()?;
    copy_dir(&spec.pm_dir, work.path())?;
    let spec = RunSpec { pm_dir: work.path().to_path_buf(), ..spec.clone() };
    let (_, out, log) = crash_workload(&spec, &c.crash_point_mode, c.crash_at, c.dedup_points)?;
    let points = log.point_data();
    let Some(point) = points.get(image.point as usize) else {
        say!("ferrite: replay diverged: the workload has {} crash points, not {}", points.len(), image.point + 1);
        return Ok(1);
    };
    let Some(files) = crash::image_files(point, &image.choice, &log.file_paths) else {
        say!("ferrite: replay diverged: crash point {} has another crash space", image.point);
        return Ok(1);
    };
    let plan = crash::Plan {
        recover: c.recover.clone(),
        check: c.check.clone(),
        base: RunSpec { analyses: vec!["none".into()], discard_output: false, quiet: true, ..spec.clone() },
        budget: recovery_budget(out.instructions, spec.max_instructions),
        jobs: 1,
        max_images: c.max_images,
        quiet: true,
        remap: c.remap,
        xfd: false,
        fresh: false,
        lazy: c.lazy,
    };
    match crash::recover(&plan, &files, &[])? {
        crash::Verdict::Failed { what, .. } => {
            say!("ferrite: replay reproduced finding {}: {what}", f.id);
            Ok(66)
        }
        crash::Verdict::Passed | crash::Verdict::ReadOpen { .. } => {
            say!("ferrite: replay diverged: recovery passed on the rebuilt crash image of finding {}", f.id);
            Ok(1)
        }
    }
}

fn cmd_run(a: RunArgs) -> Result<i32, Fatal> {
    let started = Instant::now();
    let allocations = HOST_ALLOCATIONS.load(std::sync::atomic::Ordering::Relaxed);
    let opts = a.opts;
    check_report_path("--report", opts.report.as_deref())?;
    let pm = PmDir::new(opts.pm_dir.clone())?;
    let spec = run_spec(&opts, &a.command, pm.path())?;
    let (report, out) = if spec.strategy == emu::sched::Strategy::Exhaustive {
        explore_exhaustive(&spec, opts.explore.max(1), opts.max_preemptions, opts.por)?
    } else if opts.strategy == "pmrace" {
        let (report, out, summary) = targeted::explore(&spec, opts.explore.max(1))?;
        if !opts.quiet {
            say!("{summary}");
        }
        (report, out)
    } else if opts.explore > 1 {
        explore(&spec, opts.explore)?
    } else {
        execute(&spec)?
    };
    if !opts.quiet {
        report::print_findings(&report.findings);
        if opts.explore > 1 && spec.strategy != emu::sched::Strategy::Exhaustive && opts.strategy != "pmrace" {
            say!(
                "ferrite: explored {} schedules from seed {}; {} distinct finding(s)",
                opts.explore,
                opts.seed,
                report.findings.len()
            );
        }
    }
    if let Some(path) = &opts.report {
        report.write(path)?;
    }
    if let Some(path) = &a.host_stats {
        let stats = serde_json::json!({
            "allocations": HOST_ALLOCATIONS.load(std::sync::atomic::Ordering::Relaxed) - allocations,
            "wall_seconds": started.elapsed().as_secs_f64(),
            "instructions": report.run.instructions,
        });
        std::fs::write(path, stats.to_string()).map_err(|e| Fatal(format!("--host-stats {}: {e}", path.display())))?;
    }
    Ok(exit_status(out.end, report.findings.len(), opts.findings_exit_code))
}

/// The seed of exploration run `i` (run 0 uses the base seed itself).
pub(crate) fn explore_seed(base: u64, i: u64) -> u64 {
    if i == 0 {
        return base;
    }
    let mut z = base ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `--strategy exhaustive`: runs schedules depth first, each following a prefix of decisions of
/// an earlier run with one decision changed, as long as the prefix has at most `max_preemptions`
/// preemptions, until `limit` runs or none is left. Sequential: each run's decisions decide the
/// next runs. Each finding keeps the decisions that reproduce it.
fn explore_exhaustive(
    spec: &RunSpec,
    limit: u32,
    max_preemptions: u32,
    por: bool,
) -> Result<(Report, session::RunOutcome), Fatal> {
    let mut pending: Vec<Vec<u32>> = vec![Vec::new()];
    let mut seen: std::collections::BTreeSet<Vec<u32>> = std::collections::BTreeSet::new();
    let mut first: Option<(Report, session::RunOutcome)> = None;
    let mut findings = Vec::new();
    let mut runs = 0u32;
    while let Some(prefix) = pending.pop() {
        if runs >= limit {
            break;
        }
        runs += 1;
        let dir = tempfile::Builder::new().prefix("ferrite-pm-").tempdir()?;
        copy_dir(&spec.pm_dir, dir.path())?;
        let mut s = spec.clone();
        s.pm_dir = dir.path().to_path_buf();
        s.schedule = prefix.clone();
        s.discard_output |= runs > 1;
        s.quiet |= runs > 1;
        let accesses = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let extra: Vec<Box<dyn analyses::Analysis>> =
            if por { vec![Box::new(por::Footprint(accesses.clone()))] } else { Vec::new() };
        let (mut report, out) = execute_with(&s, None, extra)?;
        for f in &mut report.findings {
            f.schedule = Some(prefix.clone());
        }
        findings.extend(report.findings.clone());
        let d = &out.decisions;
        // With --por only the alternatives dynamic partial-order reduction asks for.
        let backtrack = por.then(|| por::backtracks(d, &accesses.borrow()));
        let chosen: Vec<u32> = d.iter().map(|x| x.chosen).collect();
        let mut preemptions = 0u32;
        let mut children = Vec::new();
        for (j, x) in d.iter().enumerate() {
            // Without reduction, decisions before the prefix's end were expanded by the runs
            // that led here. With it, a race found now can ask for an alternative at an earlier
            // decision (DPOR's backtrack sets along the path); `seen` keeps each prefix once.
            if j >= prefix.len() || por {
                let wanted = |t: &u32| backtrack.as_ref().is_none_or(|b| b[j].contains(t));
                for &alt in x.runnable.iter().filter(|t| **t != x.chosen && wanted(t)) {
                    let cost = preemptions + u32::from(x.optional && alt != x.current);
                    if cost <= max_preemptions {
                        let mut p = chosen[..j].to_vec();
                        p.push(alt);
                        children.push(p);
                    }
                }
            }
            preemptions += u32::from(x.optional && x.chosen != x.current);
        }
        // Depth first: the deepest alternatives are tried first.
        for c in children {
            if seen.insert(c.clone()) {
                pending.push(c);
            }
        }
        if first.is_none() {
            first = Some((report, out));
        }
    }
    let (mut report, out) = first.ok_or_else(|| Fatal("--explore needs at least one run".into()))?;
    report.findings = analyses::Finding::merge(findings);
    report.run.schedules = runs;
    if !spec.quiet {
        say!(
            "ferrite: exhaustive exploration: {runs} schedule(s) with at most {max_preemptions} preemption(s){}{}",
            if por { " (partial-order reduced)" } else { "" },
            if pending.is_empty() { ", every one" } else { "; more remain (raise --explore)" }
        );
    }
    Ok((report, out))
}

/// Copies the PM directory's files, so that every exploration run starts from the same pool
/// and none changes the user's.
pub(crate) fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let dst = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            std::fs::create_dir_all(&dst)?;
            copy_dir(&e.path(), &dst)?;
        } else if e.file_type()?.is_file() {
            std::fs::copy(e.path(), dst)?;
        }
    }
    Ok(())
}

/// Run `i` of an exploration: its seed derived from the spec's, a private copy of the PM
/// directory (kept while the directory guard lives), and only run 0's output and warnings shown.
pub(crate) fn exploration_run(spec: &RunSpec, i: u64) -> Result<(tempfile::TempDir, RunSpec), Fatal> {
    let dir = tempfile::Builder::new().prefix("ferrite-pm-").tempdir()?;
    copy_dir(&spec.pm_dir, dir.path())?;
    let mut s = spec.clone();
    s.seed = explore_seed(spec.seed, i);
    s.pm_dir = dir.path().to_path_buf();
    // Runs execute in parallel: each writes its own overlay of the working directory.
    s.private_cwd = true;
    s.discard_output |= i > 0;
    s.quiet |= i > 0;
    Ok((dir, s))
}

/// Runs `n` schedules derived from the spec's seed in parallel (one engine per worker) and
/// merges their findings; each finding keeps the seed of the run that exposed it. The first
/// run's output passes through; the others' is discarded.
fn explore(spec: &RunSpec, n: u32) -> Result<(Report, session::RunOutcome), Fatal> {
    use rayon::prelude::*;
    let results: Vec<Result<(Report, session::RunOutcome), Fatal>> = (0..u64::from(n))
        .into_par_iter()
        .map(|i| {
            let (_dir, s) = exploration_run(spec, i)?;
            execute(&s)
        })
        .collect();
    let mut all = results.into_iter();
    let (mut report, first) = all.next().ok_or_else(|| Fatal("--explore needs at least one run".into()))??;
    let mut findings = report.findings.clone();
    for r in all {
        let r = r?.0;
        findings.extend(r.findings);
        for (k, v) in r.stats {
            *report.stats.entry(k).or_insert(0) += v;
        }
        report.discarded.extend(r.discarded);
    }
    report.findings = analyses::Finding::merge(findings);
    report.discarded = analyses::Finding::merge(std::mem::take(&mut report.discarded));
    report.run.seed = spec.seed;
    report.run.schedules = n;
    Ok((report, first))
}

/// `--analyses` with the options given as flags (`--irh`, `--persist-owner`, `--oscs-condflag`)
/// applied to the passes they concern when those are selected. A pass named with its own
/// options keeps them.
fn pass_options(opts: &RunOptions) -> Vec<String> {
    let selected =
        |name: &str| opts.analyses.iter().any(|a| a == name || (a == "all" && !analyses::OPT_IN.contains(&name)));
    let mut out: Vec<String> = opts.analyses.clone();
    let mut add = |name: &str, option: String| {
        if selected(name) && !out.iter().any(|a| a.starts_with(&format!("{name}:"))) {
            out.push(format!("{name}:{option}"));
        }
    };
    let mut hawkset = Vec::new();
    let mut vardalith = Vec::new();
    if let Some(n) = opts.irh {
        hawkset.push(format!("irh={n}"));
    }
    if let Some(who) = &opts.persist_owner {
        hawkset.push(format!("persist_owner={who}"));
        vardalith.push(format!("persist_owner={who}"));
    }
    if !hawkset.is_empty() {
        add("hawkset", hawkset.join(":"));
    }
    if !vardalith.is_empty() {
        add("vardalith", vardalith.join(":"));
    }
    if opts.oscs_condflag {
        add("oscs", "condflag=on".into());
    }
    if opts.pmrace_compat {
        add("pmrace", "compat=on".into());
    }
    out
}

/// Settings from `--config FILE` (RON).
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Lock functions to treat as acquire, try-acquire (with its success value) or release.
    #[serde(default)]
    locks: Vec<emu::sync::CustomLock>,
    /// PMRace's synchronisation variables: `(offset: N, size: S, init: V)` in every PM file.
    #[serde(default)]
    sync_vars: Vec<analyses::SyncVar>,
    /// PMRace's allow-list: function names or `file.c:LINE` whose findings are known benign.
    #[serde(default)]
    pmrace_allow: Vec<String>,
}

fn load_config(path: &std::path::Path) -> Result<Config, Fatal> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Fatal(format!("cannot read config `{}`: {e}", path.display())))?;
    ron::from_str(&text).map_err(|e| Fatal(format!("config `{}` is not valid: {e}", path.display())))
}

/// Refuses an unknown report format before any time is spent on a run.
fn check_report_path(option: &str, path: Option<&std::path::Path>) -> Result<(), Fatal> {
    if let Some(r) = path {
        let ext = r.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase());
        if !matches!(ext.as_deref(), Some("json" | "ron" | "sarif")) {
            return Err(Fatal(format!("{option} `{}`: use a .json, .ron or .sarif file name", r.display())));
        }
    }
    Ok(())
}

fn cmd_replay(a: ReplayArgs) -> Result<i32, Fatal> {
    check_report_path("--report-out", a.report_out.as_deref())?;
    let orig = Report::read(&a.report)?;
    let program = PathBuf::from(&orig.run.program);
    let bytes =
        std::fs::read(&program).map_err(|e| Fatal(format!("cannot read program `{}`: {e}", program.display())))?;
    if blake3::hash(&bytes).to_hex().as_str() != orig.run.program_hash {
        return Err(Fatal(format!(
            "program `{}` changed since the report was written (its hash differs); the run cannot be replayed",
            program.display()
        )));
    }
    let wanted = match a.finding {
        Some(id) => Some(
            orig.findings
                .iter()
                .find(|f| f.id == id)
                .cloned()
                .ok_or_else(|| Fatal(format!("the report has no finding {id}")))?,
        ),
        None => None,
    };
    let pm = PmDir::new(a.pm_dir)?;
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
        strategy: strategy(&orig.run.strategy, orig.run.pct_depth),
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
        debug_dirs: symbols::debug_dirs(a.debug_dir.as_deref()),
        private_cwd: false,
        trace_syscalls: a.trace_syscalls,
    };
    if let (Some(f), Some(c)) = (&wanted, &orig.crash) {
        if let Some(image) = &f.crash_image {
            return replay_crash(&spec, c, f, image);
        }
    }
    let (report, out) = execute(&spec)?;
    report::print_findings(&report.findings);
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
    Ok(exit_status(out.end, report.findings.len(), 66))
}

fn cmd_bench(a: BenchArgs) -> Result<i32, Fatal> {
    use std::process::{Command as Proc, Stdio};
    if let Some(recover) = &a.recover {
        return bench_crash(&a, recover);
    }
    let exe = std::env::current_exe()?;
    let expected = std::cell::Cell::new(None::<i32>);
    let time = |cmd: &mut Proc| -> Result<(f64, u64), Fatal> {
        let t = Instant::now();
        let out = cmd.stdout(Stdio::null()).stderr(Stdio::null()).output()?;
        let secs = t.elapsed().as_secs_f64();
        // The native run's status is the guest's; under ferrite the same, or 66 with findings.
        let code = out.status.code();
        match expected.get() {
            None => expected.set(code),
            Some(e) if code == Some(e) || code == Some(66) => {}
            Some(e) => {
                return Err(Fatal(format!("benchmark command exited with {}, natively {e}", out.status)));
            }
        }
        Ok((secs, peak_rss_children_kib()))
    };
    let runs = a.runs.max(1);
    let tmp = tempfile::NamedTempFile::with_suffix(".json")?;
    let host = tempfile::NamedTempFile::with_suffix(".json")?;
    let mut rows: Vec<(String, f64, u64, Option<u64>)> = Vec::new();
    let mut native = Vec::new();
    let mut native_rss = 0;
    for _ in 0..runs {
        let pm = tempfile::tempdir()?;
        let args: Vec<String> =
            a.command[1..].iter().map(|s| s.replace("/mnt/pmem0", &pm.path().display().to_string())).collect();
        let (t, rss) = time(Proc::new(&a.command[0]).args(&args))?;
        native.push(t);
        native_rss = native_rss.max(rss);
    }
    let n = median(native);
    rows.push(("native".into(), n, native_rss, None));
    let mut instructions = 0;
    for config in &a.configs {
        let mut ts = Vec::new();
        let mut rss_max = 0;
        for _ in 0..runs {
            let (t, rss) = time(
                Proc::new(&exe)
                    .args(["run", "--quiet", "--analyses", config, "--report"])
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
        let stats: serde_json::Value = serde_json::from_slice(&std::fs::read(host.path())?)?;
        rows.push((format!("ferrite --analyses {config}"), median(ts), rss_max, stats["allocations"].as_u64()));
    }
    out!("program: {}  ({instructions} guest instructions; median of {runs} runs)", a.command.join(" "));
    out!("| configuration | time (s) | vs native | vs plain emulation | M guest insns/s | peak RSS (MiB) | host allocations |");
    out!("|---|---|---|---|---|---|---|");
    let plain = rows.get(1).map(|r| r.1).unwrap_or(n);
    for (name, t, rss, allocs) in &rows {
        let mips = if name == "native" { String::from("-") } else { format!("{:.0}", instructions as f64 / t / 1e6) };
        let allocs = allocs.map_or(String::from("-"), |a| a.to_string());
        out!(
            "| {name} | {t:.3} | {:.1}x | {:.2}x | {mips} | {:.1} | {allocs} |",
            t / n,
            t / plain,
            *rss as f64 / 1024.0
        );
    }
    Ok(0)
}

/// The median of `v` (not empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// `ferrite bench --recover`: recoveries per second on one core, fresh and from a snapshot.
fn bench_crash(a: &BenchArgs, recover: &str) -> Result<i32, Fatal> {
    use std::process::{Command as Proc, Stdio};
    let exe = std::env::current_exe()?;
    let runs = a.runs.max(1);
    let report = tempfile::NamedTempFile::with_suffix(".json")?;
    // One ferrite invocation on a fresh PM directory: (CPU seconds, report). CPU time, not wall
    // time: recoveries per second *per core*, whatever else the machine is doing.
    let ferrite = |args: &[&str], command: &[String]| -> Result<(f64, Report), Fatal> {
        let pm = tempfile::tempdir()?;
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
            .stderr(Stdio::null())
            .status()?;
        let secs = children_cpu_secs() - t;
        if !matches!(out.code(), Some(0 | 66)) {
            return Err(Fatal(format!("`ferrite {}` exited with {out}", args.join(" "))));
        }
        Ok((secs, Report::read(report.path())?))
    };
    let mut workload = Vec::new();
    for _ in 0..runs {
        workload.push(ferrite(&["run"], &a.command)?.0);
    }
    let workload = median(workload);
    // The recovery's length, on what the workload left (run in the same directory).
    let recovery: Vec<String> = split_command(recover);
    let pm = tempfile::tempdir()?;
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
        status.map_err(Fatal::from).and_then(|_| Ok(Report::read(report.path())?))
    };
    in_pm(&a.command)?;
    let recovery_insns = in_pm(&recovery)?.run.instructions;
    out!(
        "workload: {} ({workload:.3} CPU s under ferrite); recovery: {recover} ({recovery_insns} guest instructions); median of {runs} runs, 1 worker, CPU time",
        a.command.join(" ")
    );
    out!("| recoveries | crash points | unique images | mode | CPU time (s) | recoveries/s per core | speed-up |");
    out!("|---|---|---|---|---|---|---|");
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
        let c = last.ok_or_else(|| Fatal("the crash report has no crash section".into()))?;
        let t = median(times);
        let rate = c.recoveries as f64 / (t - workload).max(1e-6);
        let speedup = fresh_rate.map(|f: f64| format!("{:.1}x", rate / f)).unwrap_or_else(|| "-".into());
        fresh_rate.get_or_insert(rate);
        out!(
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
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

/// Peak resident set of the largest child waited for so far (getrusage), in KiB.
fn peak_rss_children_kib() -> u64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    ru.ru_maxrss.max(0) as u64
}
