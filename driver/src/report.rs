//! What a run was and what it found, as reports record it ([`RunReport`]; docs/report-format.md
//! is the schema), and the human summary of findings on standard error.

use std::collections::BTreeMap;

use analyses::Finding;
use serde::{Deserialize, Serialize};
use syscalls::ProcessExit;

use crate::spec::{GuestEnd, RunOutcome, RunSpec};

/// A run, or an exploration of many: the `run` section of a report and what was found.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// The run (for an exploration, its first run, with the schedules counted).
    pub run: RunInfo,
    /// Findings, merged and numbered.
    pub findings: Vec<Finding>,
    /// The passes' counters, summed over explored schedules (`pmrace.inter_candidates`,
    /// `pmrace.validated_false_positives`, ...).
    pub stats: BTreeMap<String, u64>,
    /// Findings that post-failure validation discarded as false positives, with the reason in
    /// their message.
    pub discarded: Vec<Finding>,
}

impl RunReport {
    /// The report of one run of `spec`.
    pub fn of(spec: &RunSpec, out: &RunOutcome) -> RunReport {
        RunReport {
            run: RunInfo::of(spec, out),
            findings: out.findings.clone(),
            stats: out.stats.clone(),
            discarded: out.discarded.clone(),
        }
    }
}

/// How the guest ended: exactly one of `code`, `signal`, `hang`, `deadlock` or `interrupted`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ExitInfo {
    /// The exit status.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub code: Option<i32>,
    /// The signal that killed it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signal: Option<i32>,
    /// Stopped by the instruction budget.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub hang: bool,
    /// Every live thread blocked for good.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub deadlock: bool,
    /// ferrite was interrupted by this signal and stopped the run where `instructions` says.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interrupted: Option<i32>,
}

impl From<GuestEnd> for ExitInfo {
    fn from(end: GuestEnd) -> ExitInfo {
        match end {
            GuestEnd::Exited(ProcessExit::Code(c)) => ExitInfo { code: Some(c), ..ExitInfo::default() },
            GuestEnd::Exited(ProcessExit::Signal(s)) => ExitInfo { signal: Some(s), ..ExitInfo::default() },
            GuestEnd::Hang => ExitInfo { hang: true, ..ExitInfo::default() },
            GuestEnd::Deadlock => ExitInfo { deadlock: true, ..ExitInfo::default() },
            GuestEnd::Interrupted(s) => ExitInfo { interrupted: Some(s), ..ExitInfo::default() },
        }
    }
}

/// Everything that defines a run, and what it did: the `run` section of a report, from which
/// `ferrite replay` rebuilds the run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunInfo {
    /// The program's path as given.
    pub program: String,
    /// BLAKE3 of the program's bytes.
    pub program_hash: String,
    /// argv, starting with the program as given.
    pub args: Vec<String>,
    /// The guest's environment.
    pub env: Vec<String>,
    /// The seed: of what the guest observes (random bytes), and of the scheduler unless
    /// `schedule_seed` is given.
    pub seed: u64,
    /// The scheduler's seed, when it is not `seed` (`--schedule-seed`, and every `--explore`
    /// report of the random strategies: the first schedule's). When present, each finding's
    /// `seed` is the schedule seed of the run that exposed it and `seed` here is every run's
    /// program seed; when absent, a finding's `seed` seeded both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_seed: Option<u64>,
    /// How the guest ended.
    pub exit: ExitInfo,
    /// Instructions retired.
    pub instructions: u64,
    /// Most threads alive at once.
    pub threads: u32,
    /// Thread switches the scheduler made.
    pub switches: u64,
    /// The scheduling strategy's name.
    pub strategy: String,
    /// `--pct-depth` (0 unless the strategy is PCT).
    pub pct_depth: u32,
    /// `--max-threads`.
    pub max_threads: usize,
    /// `--max-open-files`.
    #[serde(default = "default_open_files")]
    pub max_open_files: i32,
    /// The persistence model the run used.
    #[serde(default)]
    pub pm: emu::pm::PmConfig,
    /// Lock functions named in `--config`.
    #[serde(default)]
    pub custom_locks: Vec<emu::sync::CustomLock>,
    /// `--preempt all`.
    #[serde(default)]
    pub preempt_all: bool,
    /// The trace hash.
    pub trace_hash: String,
    /// Where the PM mount appeared in the guest.
    pub pm_mount: String,
    /// `--max-instructions`.
    pub max_instructions: u64,
    /// `--max-memory`.
    pub max_memory: u64,
    /// `--cpus`.
    pub cpus: u32,
    /// The analyses that ran.
    pub analyses: Vec<String>,
    /// Schedules explored (`--explore`); the rest of `run` describes the first.
    #[serde(default = "one")]
    pub schedules: u32,
    /// An exploration ferrite's user interrupted (the signal): `schedules` counts the schedules
    /// whose findings the report holds, each run to its end but the first, whose `exit` says
    /// where it stopped if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<i32>,
    /// Host files the guest read, with the BLAKE3 of their contents.
    pub inputs: BTreeMap<String, String>,
    /// Settings for the passes from `--config` (PMRace's synchronisation variables and
    /// allow-list).
    #[serde(default, skip_serializing_if = "is_default")]
    pub settings: analyses::Settings,
    /// `--recover`, which validates the findings of passes that ask for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recover: Option<Vec<String>>,
    /// `--delay` and `--delay-decay`: active delay injection at releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<emu::sched::DelayInjection>,
    /// `--listen`: the host clients' events, injected again by `ferrite replay`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<ListenInfo>,
}

/// The `run.listen` section: what host clients did through `--listen`, and what the guest
/// sent them (docs/report-format.md).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ListenInfo {
    /// The guest ports host clients reached.
    pub ports: Vec<u16>,
    /// Every host event as `POINT CONN connect PORT`, `POINT CONN data BASE64`,
    /// `POINT CONN close` or `POINT 0 signal N`, in order.
    pub events: Vec<String>,
    /// What the guest sent each connection, by connection number.
    pub outputs: Vec<ListenOutput>,
    /// The host input was cut at the limit (its connections closed there).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// What the guest sent one host connection.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ListenOutput {
    /// Its length in bytes.
    pub bytes: u64,
    /// Its BLAKE3.
    pub blake3: String,
}

impl ListenInfo {
    /// The section of a recording.
    pub fn of(r: &syscalls::listen::Recorded) -> ListenInfo {
        ListenInfo {
            ports: r.ports.clone(),
            events: r.events.iter().map(|e| e.line()).collect(),
            outputs: r.outputs.iter().map(|o| ListenOutput { bytes: o.bytes, blake3: o.blake3.clone() }).collect(),
            truncated: r.truncated,
        }
    }

    /// The recording back, checked as a run would have written it.
    pub fn recorded(&self) -> Result<syscalls::listen::Recorded, String> {
        let events = self
            .events
            .iter()
            .map(|e| syscalls::listen::Event::parse(e))
            .collect::<Result<Vec<_>, String>>()
            .map_err(|e| format!("run.listen.events: {e}"))?;
        let outputs = self
            .outputs
            .iter()
            .map(|o| syscalls::listen::Output { bytes: o.bytes, blake3: o.blake3.clone() })
            .collect();
        let r = syscalls::listen::Recorded { ports: self.ports.clone(), events, outputs, truncated: self.truncated };
        r.validate().map_err(|e| format!("run.listen: {e}"))?;
        Ok(r)
    }
}

impl RunInfo {
    /// The `run` section of one run of `spec`.
    pub fn of(spec: &RunSpec, out: &RunOutcome) -> RunInfo {
        RunInfo {
            program: spec.program.display().to_string(),
            program_hash: out.program_hash.clone(),
            args: spec.argv.clone(),
            env: spec.env.clone(),
            seed: spec.seed,
            schedule_seed: spec.schedule_seed,
            exit: out.end.into(),
            instructions: out.instructions,
            threads: out.threads,
            switches: out.switches,
            strategy: crate::spec::strategy_name(spec.strategy).into(),
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
            interrupted: None,
            inputs: out.inputs.clone(),
            settings: spec.settings.clone(),
            recover: spec.recover.clone(),
            delay: spec.delay,
            listen: match &out.listen {
                Some(Ok(r)) => Some(ListenInfo::of(r)),
                _ => None,
            },
        }
    }
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn default_open_files() -> i32 {
    1024
}

fn one() -> u32 {
    1
}

/// Frames of each backtrace printed on the terminal (the report keeps them all).
const PRINTED_FRAMES: usize = 16;

/// The findings on standard error, like a sanitizer's report. Write errors (a closed pipe) are
/// ignored: the report file, if any, still gets everything.
pub fn print_findings(findings: &[Finding]) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    for f in findings {
        let stacks = f.stack_count();
        let times = match (f.occurrences > 1, stacks > 1) {
            (_, true) => format!(" (x{}, {stacks} call stacks)", f.occurrences),
            (true, false) => format!(" (x{})", f.occurrences),
            (false, false) => String::new(),
        };
        let _ = writeln!(err, "ferrite: finding {} [{}] {}{times}", f.id, f.analysis, f.message);
        for l in &f.locations {
            for (i, fr) in l.backtrace.iter().take(PRINTED_FRAMES).enumerate() {
                let lead = if i == 0 { format!("  {:>8}", l.role) } else { format!("  {:>8}", format!("#{i}")) };
                let _ = writeln!(err, "{lead}  {}  [{:#x}]", fr.describe(), fr.pc);
                for at in &fr.inlined_at {
                    let _ = writeln!(err, "  {:>8}    inlined in {}", "", at.describe());
                }
            }
            if l.backtrace.len() > PRINTED_FRAMES {
                let _ = writeln!(err, "  {:>8}  ... {} more frames", "", l.backtrace.len() - PRINTED_FRAMES);
            }
        }
    }
}

/// Checking a report's `run` section and rebuilding its run: what `ferrite replay` trusts of a
/// file that anyone may have written. Every field the replay uses is held to what the command
/// line accepts ([`crate::spec::limits`]), hashes to their shape, so that a corrupt report is
/// said to be corrupt (status 2) instead of replaying into an abort, a hang or a "diverged".
impl RunInfo {
    /// The first field that no run of ferrite could have written, as `run.FIELD: why`.
    pub fn validate(&self) -> Result<(), String> {
        use crate::spec::limits::{self, check};
        let field = |name: &str, why: String| Err(format!("run.{name}: {why}"));
        if self.program.is_empty() || self.program.contains('\0') {
            return field("program", "not a path".into());
        }
        if !is_hex(&self.program_hash, 64) {
            return field("program_hash", "not a BLAKE3 hash (64 hexadecimal digits)".into());
        }
        if !is_hex(&self.trace_hash, 32) {
            return field("trace_hash", "not a trace hash (32 hexadecimal digits)".into());
        }
        if self.args.is_empty() {
            return field("args", "empty (argv[0] is the program)".into());
        }
        if self.args.iter().any(|a| a.contains('\0')) {
            return field("args", "an argument contains a NUL byte".into());
        }
        if let Some(e) =
            self.env.iter().find(|e| e.contains('\0') || e.split_once('=').is_none_or(|(k, _)| k.is_empty()))
        {
            return field("env", format!("`{}` is not KEY=VALUE", e.escape_debug()));
        }
        if !limits::STRATEGIES.contains(&self.strategy.as_str()) {
            return field("strategy", format!("`{}` is not one of {}", self.strategy, limits::STRATEGIES.join(", ")));
        }
        check("run.pct_depth", self.pct_depth, &limits::PCT_DEPTH)?;
        check("run.max_threads", self.max_threads, &limits::MAX_THREADS)?;
        check("run.max_open_files", self.max_open_files, &limits::MAX_OPEN_FILES)?;
        check("run.max_memory", self.max_memory, &limits::MAX_MEMORY)?;
        check("run.cpus", self.cpus, &limits::CPUS)?;
        check("run.schedules", self.schedules, &limits::EXPLORE)?;
        limits::pm_mount(&self.pm_mount).or_else(|e| field("pm_mount", e))?;
        if self.analyses.is_empty() {
            return field("analyses", "empty (`none` runs no pass)".into());
        }
        let ends = [
            self.exit.code.is_some(),
            self.exit.signal.is_some(),
            self.exit.hang,
            self.exit.deadlock,
            self.exit.interrupted.is_some(),
        ];
        if ends.iter().filter(|e| **e).count() != 1 {
            return field("exit", "not exactly one of code, signal, hang, deadlock, interrupted".into());
        }
        if self.exit.interrupted.is_some_and(|s| !(1..=64).contains(&s)) {
            return field("exit.interrupted", "not a signal number (1 to 64)".into());
        }
        if let Some((path, _)) = self.inputs.iter().find(|(p, h)| p.is_empty() || !is_hex(h, 64)) {
            return field("inputs", format!("`{}` has no BLAKE3 hash (64 hexadecimal digits)", path.escape_debug()));
        }
        if let Some(r) = &self.recover {
            if r.is_empty() || r.iter().any(|a| a.is_empty() || a.contains('\0')) {
                return field("recover", "not a command (a program and its arguments)".into());
            }
        }
        if let Some(d) = &self.delay {
            check("run.delay.decay", d.decay, &limits::DELAY_DECAY)?;
        }
        if let Some(l) = self.custom_locks.iter().find(|l| l.symbol.is_empty()) {
            return field("custom_locks", format!("a lock function has no name ({:?})", l.kind));
        }
        for v in &self.settings.sync_vars {
            limits::sync_var(v.offset, v.size).or_else(|e| field("settings.sync_vars", e))?;
        }
        if let Some(l) = &self.listen {
            l.recorded()?;
        }
        Ok(())
    }

    /// The run this section describes, on the PM directory `pm_dir` (what `ferrite replay`
    /// runs before it picks a finding's seed, schedule or interleaving). Call
    /// [`RunInfo::validate`] first.
    pub fn spec(&self, pm_dir: std::path::PathBuf) -> RunSpec {
        RunSpec {
            program: self.program.clone().into(),
            argv: self.args.clone(),
            env: self.env.clone(),
            seed: self.seed,
            schedule_seed: self.schedule_seed,
            pm_dir,
            pm_mount: self.pm_mount.clone(),
            max_instructions: self.max_instructions,
            max_memory: self.max_memory,
            cpus: self.cpus,
            analyses: self.analyses.clone(),
            strategy: crate::spec::strategy(&self.strategy, self.pct_depth),
            max_threads: self.max_threads,
            discard_output: false,
            quiet: false,
            max_open_files: self.max_open_files,
            pm: self.pm,
            custom_locks: self.custom_locks.clone(),
            preempt_all: self.preempt_all,
            remap_pm: false,
            schedule: Vec::new(),
            settings: self.settings.clone(),
            recover: self.recover.clone(),
            hold: None,
            delay: self.delay,
            debug_dirs: Vec::new(),
            private_cwd: false,
            trace_syscalls: false,
            listen: self.listen.as_ref().and_then(|l| l.recorded().ok()).map(syscalls::listen::ListenSpec::Replay),
            stop_at: self.exit.interrupted.map(|s| (self.instructions, s)),
        }
    }
}

/// The first thing wrong with a finding `ferrite replay --finding` would rebuild its run from
/// (its schedule and PMRace interleaving; a crash image is checked against the crash section
/// by the caller), as `findings[ID].FIELD: why`.
pub fn validate_finding(f: &Finding) -> Result<(), String> {
    let field = |name: &str, why: &str| Err(format!("findings[{}].{name}: {why}", f.id));
    if f.analysis.is_empty() || f.kind.is_empty() {
        return field("analysis", "empty");
    }
    if let Some(h) = &f.interleaving {
        if h.dev.checked_add(h.len).is_none() {
            return field("interleaving", "its bytes run past the end of the address space");
        }
        if h.loads.windows(2).any(|w| w[0] > w[1]) {
            return field("interleaving", "its loads are not sorted");
        }
    }
    Ok(())
}

/// `s` is `len` lowercase hexadecimal digits.
fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
