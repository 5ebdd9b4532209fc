//! The subcommands, one module each, and what they share: a run's specification from the
//! command line, the PM directory, the runner every run goes through.

pub mod bench;
pub mod compare;
pub mod crash;
mod hawkset_cfg;
pub mod merge;
pub mod replay;
pub mod run;
pub mod slurm;
pub mod triage;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use driver::{RunSpec, Runner};

use crate::cli::RunOptions;

/// The runner of every run ferrite makes: findings of passes that ask for it are validated on
/// crash images with the program's recovery ([`crashtest::Validate`]).
pub fn runner() -> Runner<'static> {
    static VALIDATE: crashtest::Validate = crashtest::Validate;
    Runner::validating(&VALIDATE)
}

/// Holds the PM directory of a run: the user's, or a temporary one removed afterwards.
pub enum PmDir {
    /// `--pm-dir`, and the open directory that holds its lock ([`PmDir::new`]) while ferrite
    /// uses it.
    User { path: PathBuf, _lock: std::fs::File },
    /// A fresh temporary directory.
    Temp(tempfile::TempDir),
}

/// How a ferrite uses `--pm-dir`: `run` and `replay` write its files (the guest's PM), `crash`
/// only reads them (its campaign works on copies).
#[derive(Clone, Copy, PartialEq)]
pub enum PmUse {
    Writes,
    Reads,
}

impl PmDir {
    /// The user's directory (which must exist), or a fresh temporary one. The user's is locked
    /// (`flock`: exclusively by a ferrite that writes it, shared by one that only reads it), so
    /// that a second ferrite writing the same directory at once is refused with an error instead
    /// of both guests' PM files mixing; crash campaigns (shards on one machine) share it. The
    /// lock is the host's and invisible to guests, whose `flock` is the emulated kernel's; it
    /// goes with the process, also when ferrite is killed.
    pub fn new(user: Option<PathBuf>, how: PmUse) -> Result<PmDir> {
        Ok(match user {
            Some(p) => {
                if !p.is_dir() {
                    bail!("--pm-dir `{}` is not a directory", p.display());
                }
                let dir = std::fs::File::open(&p).with_context(|| format!("--pm-dir `{}`", p.display()))?;
                let op = if how == PmUse::Writes { libc::LOCK_EX } else { libc::LOCK_SH };
                use std::os::fd::AsRawFd as _;
                // SAFETY: flock(2) on a descriptor this function owns and keeps open.
                if unsafe { libc::flock(dir.as_raw_fd(), op | libc::LOCK_NB) } != 0 {
                    let e = std::io::Error::last_os_error();
                    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                        bail!(
                            "--pm-dir `{}` is in use by another ferrite{}: wait for it to end, or give each its own directory",
                            p.display(),
                            if how == PmUse::Writes { "" } else { " that writes it (a run or a replay)" }
                        );
                    }
                    // A file system without locks: nothing to guard with.
                }
                PmDir::User { path: p, _lock: dir }
            }
            None => PmDir::Temp(
                tempfile::Builder::new()
                    .prefix("ferrite-pm-")
                    .tempdir()
                    .context("cannot create a temporary PM directory")?,
            ),
        })
    }

    /// Its path.
    pub fn path(&self) -> PathBuf {
        match self {
            PmDir::User { path, .. } => path.clone(),
            PmDir::Temp(t) => t.path().to_path_buf(),
        }
    }
}

fn guest_env(opts: &RunOptions) -> Result<Vec<String>> {
    let mut env: Vec<String> = if opts.env_clear {
        Vec::new()
    } else {
        std::env::vars_os().map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy())).collect()
    };
    for kv in &opts.env {
        let Some((k, _)) = kv.split_once('=') else {
            bail!("--env `{kv}` is not KEY=VALUE");
        };
        env.retain(|e| e.split_once('=').map(|(ek, _)| ek) != Some(k));
        env.push(kv.clone());
    }
    Ok(env)
}

/// The run the options describe, of `command` on the PM directory `pm_dir`.
pub fn run_spec(opts: &RunOptions, command: &[String], pm_dir: PathBuf) -> Result<RunSpec> {
    let config = load_configs(&opts.config)?;
    let env = guest_env(opts)?;
    Ok(RunSpec {
        program: driver::spec::program_path(&command[0], &env),
        argv: command.to_vec(),
        env,
        seed: opts.seed,
        schedule_seed: opts.schedule_seed,
        pm_dir,
        pm_mount: opts.pm_mount.clone(),
        max_instructions: opts.max_instructions,
        max_memory: opts.max_memory,
        cpus: opts.cpus,
        analyses: pass_options(opts),
        strategy: driver::strategy(&opts.strategy, opts.pct_depth),
        max_threads: opts.max_threads,
        discard_output: false,
        quiet: opts.quiet,
        max_open_files: opts.max_open_files,
        pm: emu::pm::PmConfig {
            atomicity: opts.atomicity.parse().map_err(|e| anyhow::anyhow!("--atomicity: {e}"))?,
            flush_model: opts.flush_model.parse().map_err(|e| anyhow::anyhow!("--flush-model: {e}"))?,
            persistency: opts.persistency.parse().map_err(|e| anyhow::anyhow!("--persistency: {e}"))?,
        },
        preempt_all: opts.preempt == "all",
        remap_pm: false,
        schedule: Vec::new(),
        custom_locks: config.locks,
        settings: analyses::Settings { sync_vars: config.sync_vars, pmrace_allow: config.pmrace_allow },
        recover: opts.recover.as_deref().map(split_command).filter(|c| !c.is_empty()),
        hold: None,
        delay: (opts.delay > 0).then_some(emu::sched::DelayInjection { length: opts.delay, decay: opts.delay_decay }),
        debug_dirs: driver::symbols::debug_dirs(opts.debug_dir.as_deref()),
        private_cwd: false,
        trace_syscalls: opts.trace_syscalls,
        listen: None,
        stop_at: None,
    })
}

/// A command given as one string, split at whitespace (no quoting).
pub fn split_command(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// `--analyses` with the options given as shorthand flags (`--irh`, `--persist-owner`,
/// `--oscs-condflag`, `--pmrace-compat`) applied to the passes whose registry row lists the
/// flag ([`analyses::PassInfo::flags`]), when those passes are selected. A pass named with its
/// own options keeps them.
fn pass_options(opts: &RunOptions) -> Vec<String> {
    let selected = |p: &analyses::PassInfo| opts.analyses.iter().any(|a| a == p.name || (a == "all" && !p.opt_in));
    // Each pass's options from the flags, in the order the flags are first given to a pass.
    let mut per_pass: Vec<(&'static analyses::PassInfo, Vec<String>)> = Vec::new();
    for (flag, value) in opts.shorthands() {
        for p in analyses::PASSES {
            for (_, key) in p.flags.iter().filter(|(f, _)| *f == flag) {
                let option = format!("{key}={value}");
                match per_pass.iter_mut().find(|(q, _)| q.name == p.name) {
                    Some((_, v)) => v.push(option),
                    None => per_pass.push((p, vec![option])),
                }
            }
        }
    }
    let mut out: Vec<String> = opts.analyses.clone();
    for (p, options) in per_pass {
        if selected(p) && !out.iter().any(|a| a.starts_with(&format!("{}:", p.name))) {
            out.push(format!("{}:{}", p.name, options.join(":")));
        }
    }
    out
}

/// Settings from `--config FILE` (RON, or HawkSet's YAML lock configuration).
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Lock functions to treat as acquire, try-acquire (with its success or failure value, in
    /// the return value or an out-parameter) or release, with the lock's argument and mode.
    #[serde(default)]
    locks: Vec<emu::sync::CustomLock>,
    /// PMRace's synchronisation variables: `(offset: N, size: S, init: V)` in every PM file.
    #[serde(default)]
    sync_vars: Vec<analyses::SyncVar>,
    /// PMRace's allow-list: function names or `file.c:LINE` whose findings are known benign.
    #[serde(default)]
    pmrace_allow: Vec<String>,
}

/// The settings of every `--config FILE`, in order: locks, synchronisation variables and
/// allow-list entries add up (as HawkSet's repeated `-cfg` files do); the same lock function
/// declared twice differently is an error.
fn load_configs(paths: &[PathBuf]) -> Result<Config> {
    let mut all = Config::default();
    for path in paths {
        let c = load_config(path)?;
        for lock in c.locks {
            match all.locks.iter().find(|l| l.symbol == lock.symbol) {
                Some(l) if *l == lock => {}
                Some(_) => bail!(
                    "config `{}`: lock function `{}` is declared differently by an earlier --config",
                    path.display(),
                    lock.symbol
                ),
                None => all.locks.push(lock),
            }
        }
        all.sync_vars.extend(c.sync_vars);
        all.pmrace_allow.extend(c.pmrace_allow);
    }
    Ok(all)
}

/// One configuration file: ferrite's RON, or HawkSet's lock configuration (YAML), told apart
/// by the first token (RON starts with `(`).
fn load_config(path: &Path) -> Result<Config> {
    let text = loader::input::read_regular_text(path, loader::input::CONFIG_CAP)
        .with_context(|| format!("cannot read config `{}`", path.display()))?;
    if hawkset_cfg::is_hawkset(&text) {
        let locks = hawkset_cfg::parse(&text)
            .map_err(|e| anyhow::anyhow!("config `{}` (HawkSet's format): {e}", path.display()))?;
        return Ok(Config { locks, ..Config::default() });
    }
    // `result_arg: 1` and `TryAcquire(success: 0)` are written without `Some(...)`.
    let options = ron::Options::default().with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME);
    let config: Config =
        options.from_str(&text).with_context(|| format!("config `{}` is not valid", path.display()))?;
    for v in &config.sync_vars {
        driver::spec::limits::sync_var(v.offset, v.size)
            .map_err(|e| anyhow::anyhow!("config `{}`: sync_vars: {e}", path.display()))?;
    }
    for lock in &config.locks {
        lock.check().map_err(|e| anyhow::anyhow!("config `{}`: {e}", path.display()))?;
    }
    Ok(config)
}

/// Refuses an unknown report format before any time is spent on a run.
pub fn check_report_path(option: &str, path: Option<&Path>) -> Result<()> {
    if let Some(r) = path {
        let ext = r.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase());
        if !matches!(ext.as_deref(), Some("json" | "ron" | "sarif")) {
            bail!("{option} `{}`: use a .json, .ron or .sarif file name", r.display());
        }
        check_output(option, r)?;
    }
    Ok(())
}

/// Refuses, before anything runs, an output file that cannot be written where it is: a
/// directory, or a file in a directory that does not exist. Otherwise a campaign of hours would
/// end with nothing but the error of its last step.
pub fn check_output(option: &str, path: &Path) -> Result<()> {
    if path.is_dir() {
        bail!("{option} `{}` is a directory: give a file name", path.display());
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        bail!("{option} `{}`: directory `{}` does not exist", path.display(), dir.display());
    }
    // A read-only mount (or, for another user, a directory without write permission) would
    // refuse the file only at the end.
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap_or_default();
    // SAFETY: access(2) reads the NUL-terminated path `c`, alive through the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        let e = std::io::Error::last_os_error();
        bail!("{option} `{}`: directory `{}` is not writable: {e}", path.display(), dir.display());
    }
    Ok(())
}

/// Refuses an output file inside the PM directory: the guest would find it there in the next
/// run, whose input the PM directory's contents are (a report would change its own replay).
pub fn check_outside_pm_dir(option: &str, path: Option<&Path>, pm_dir: Option<&Path>) -> Result<()> {
    let (Some(path), Some(pm)) = (path, pm_dir) else { return Ok(()) };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let (Ok(dir), Ok(pm)) = (std::fs::canonicalize(dir), std::fs::canonicalize(pm)) else { return Ok(()) };
    if dir.starts_with(&pm) {
        bail!(
            "{option} `{}` is inside --pm-dir `{}`: the guest would see it, and the PM directory's contents are the next run's input; write it elsewhere",
            path.display(),
            pm.display()
        );
    }
    Ok(())
}

/// The median of `v` (not empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Resource usage of the process (`RUSAGE_SELF`) or of the children waited for so far
/// (`RUSAGE_CHILDREN`).
pub fn rusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: `rusage` is plain data, for which all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct it is given, which lives through the call.
    unsafe { libc::getrusage(who, &mut ru) };
    ru
}

/// `--host-stats`' `exploration`: how an exploration's schedules ran (from the start, from a
/// snapshot), the guest instructions that took, and the schedules' trace hashes chained.
pub fn exploration_json(b: &driver::Branching) -> serde_json::Value {
    serde_json::json!({
        "from_start": b.from_start,
        "from_snapshot": b.from_snapshot,
        "snapshots": b.snapshots,
        "refused": b.refused,
        "refused_why": b.refused_why,
        "instructions": b.instructions,
        "instructions_from_start": b.instructions_from_start,
        "instructions_to_branch": b.instructions_to_branch,
        "peak_snapshot_bytes": b.peak_bytes,
        "evicted": b.evicted,
        "thinned": b.thinned,
        "trace_hashes": b.traces.iter().map(|x| format!("{x:02x}")).collect::<String>(),
    })
}
