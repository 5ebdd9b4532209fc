//! What defines a run ([`RunSpec`]), how it ended ([`GuestEnd`]) and what it found
//! ([`RunOutcome`]).
//!
//! A spec is plain data: two runs of equal specs on equal inputs are the same run, instruction
//! for instruction. That is what replay, exploration and warm snapshots rely on (a warm engine
//! is reused for a spec equal to its own up to the PM directory).

use std::collections::BTreeMap;
use std::path::PathBuf;

use analyses::Finding;
use syscalls::ProcessExit;

/// The command line's defaults, shared by [`RunSpec::new`] and the `ferrite` options.
pub mod defaults {
    /// Retired instructions before a run is stopped as a hang (`--max-instructions`).
    pub const MAX_INSTRUCTIONS: u64 = 20_000_000_000;
    /// Guest memory the guest may map, in bytes (`--max-memory`, whose default is written `4G`).
    pub const MAX_MEMORY: u64 = 4 << 30;
    /// CPUs the guest is told it has (`--cpus`).
    pub const CPUS: u32 = 4;
    /// Guest threads alive at once (`--max-threads`).
    pub const MAX_THREADS: usize = 256;
    /// Open file descriptors (`--max-open-files`).
    pub const MAX_OPEN_FILES: i32 = 1024;
    /// Where the PM mount appears in the guest (`--pm-mount`).
    pub const PM_MOUNT: &str = "/mnt/pmem0";
}

/// The values ferrite accepts for the numbers and names that define a run, whether they come
/// from the command line or from a report's `run` section (docs/cli.md lists them). Each bound
/// keeps a run's cost proportional to what it is asked for: a number the guest sees is turned
/// into files and masks of that size (`--cpus` into `/proc/cpuinfo`), a depth into as many change
/// points, so an unbounded value is an allocation that aborts or a loop that never ends.
pub mod limits {
    use std::fmt::Display;
    use std::ops::RangeInclusive;

    /// `--cpus`: at least one, at most glibc's `CPU_SETSIZE` (the affinity mask a guest's
    /// `cpu_set_t` holds).
    pub const CPUS: RangeInclusive<u32> = 1..=1024;
    /// `--pct-depth`: at most one change point per scheduling point PCT spreads them over.
    pub const PCT_DEPTH: RangeInclusive<u32> = 0..=10_000;
    /// `--max-threads`: Linux's default `pid_max`.
    pub const MAX_THREADS: RangeInclusive<usize> = 1..=32_768;
    /// `--max-open-files`: the three standard streams, up to the hard limit a guest may raise
    /// its own limit to with `prlimit`.
    pub const MAX_OPEN_FILES: RangeInclusive<i32> = 3..=4096;
    /// `--max-memory`: 1 MiB to the 128 TiB of the x86-64 user address space.
    pub const MAX_MEMORY: RangeInclusive<u64> = (1 << 20)..=(1 << 47);
    /// `--explore`: schedules of one exploration.
    pub const EXPLORE: RangeInclusive<u32> = 0..=1_000_000;
    /// `--delay-decay`: percentage points.
    pub const DELAY_DECAY: RangeInclusive<u32> = 0..=100;
    /// `--findings-exit-code`: an exit status.
    pub const EXIT_CODE: RangeInclusive<i32> = 0..=255;
    /// `--jobs`: worker threads (each recovery worker keeps a warm emulator).
    pub const JOBS: RangeInclusive<usize> = 1..=256;
    /// `ferrite crash --max-images`: images per crash point before it is sampled.
    pub const MAX_IMAGES: RangeInclusive<usize> = 1..=(1 << 20);
    /// `ferrite bench --runs`.
    pub const BENCH_RUNS: RangeInclusive<u32> = 1..=1000;
    /// The scheduling strategies (`--strategy`).
    pub const STRATEGIES: [&str; 5] = ["random", "pct", "fifo", "exhaustive", "pmrace"];
    /// Longest `--pm-mount`, in bytes (`PATH_MAX` less its NUL).
    pub const PM_MOUNT_LEN: usize = 4095;

    /// `value` if it lies in `range`, else the message `NAME: VALUE is not in START..=END`.
    pub fn check<T: PartialOrd + Display>(name: &str, value: T, range: &RangeInclusive<T>) -> Result<T, String> {
        if range.contains(&value) {
            Ok(value)
        } else {
            Err(format!("{name}: {value} is not in {}..={}", range.start(), range.end()))
        }
    }

    /// Checks a synchronisation variable of PMRace's (`sync_vars` in `--config`): 1, 2, 4 or 8
    /// bytes at an offset they fit after.
    pub fn sync_var(offset: u64, size: u32) -> Result<(), String> {
        if [1, 2, 4, 8].contains(&size) && offset.checked_add(u64::from(size)).is_some() {
            Ok(())
        } else {
            Err(format!("(offset: {offset}, size: {size}) is not 1, 2, 4 or 8 bytes in a file"))
        }
    }

    /// Checks a PM mount point: an absolute guest path other than `/` itself, without `.` or
    /// `..` components or NUL bytes, at most [`PM_MOUNT_LEN`] bytes.
    pub fn pm_mount(path: &str) -> Result<(), String> {
        let why = if path.is_empty() {
            "is empty"
        } else if !path.starts_with('/') {
            "is not an absolute path"
        } else if path.trim_end_matches('/').is_empty() {
            "is the root directory"
        } else if path.len() > PM_MOUNT_LEN {
            "is longer than 4095 bytes"
        } else if path.contains('\0') {
            "contains a NUL byte"
        } else if path.split('/').any(|c| c == "." || c == "..") {
            "has a `.` or `..` component"
        } else {
            return Ok(());
        };
        Err(format!("`{}` {why}; give an absolute guest path such as /mnt/pmem0", path.escape_debug()))
    }
}

/// Everything that defines a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSpec {
    /// The program's host path.
    pub program: PathBuf,
    /// argv, with argv[0] as the user gave the program.
    pub argv: Vec<String>,
    /// The guest's environment, `KEY=VALUE` each.
    pub env: Vec<String>,
    /// Seed of everything the guest could observe as nondeterminism (the kernel's random
    /// bytes, RDRAND) and, unless `schedule_seed` is given, of the scheduler.
    pub seed: u64,
    /// Seed of the scheduler's choices and of delay injection (`--schedule-seed`, and each
    /// `--explore` schedule's own); `None`: `seed`. Findings carry it as their seed.
    pub schedule_seed: Option<u64>,
    /// The host directory behind the PM mount.
    pub pm_dir: PathBuf,
    /// Where the PM mount appears in the guest's namespace.
    pub pm_mount: String,
    /// Retired instructions before the run is stopped as a hang.
    pub max_instructions: u64,
    /// Guest memory the guest may map, in bytes.
    pub max_memory: u64,
    /// CPUs the guest is told it has.
    pub cpus: u32,
    /// `--analyses`: pass names, with options after a colon.
    pub analyses: Vec<String>,
    /// The scheduling strategy.
    pub strategy: emu::sched::Strategy,
    /// Guest threads alive at once.
    pub max_threads: usize,
    /// Drop the guest's stdout and stderr (exploration runs after the first).
    pub discard_output: bool,
    /// No warnings of ferrite's own on standard error.
    pub quiet: bool,
    /// Open file descriptors (RLIMIT_NOFILE).
    pub max_open_files: i32,
    /// The persistence model (`--atomicity`, `--flush-model`, `--persistency`).
    pub pm: emu::pm::PmConfig,
    /// Lock functions named by the user (`--config`).
    pub custom_locks: Vec<emu::sync::CustomLock>,
    /// Every shared memory access is a scheduling point (`--preempt all`).
    pub preempt_all: bool,
    /// PM files mapped away from their usual address (`ferrite crash --remap`, recovery only).
    pub remap_pm: bool,
    /// `--strategy exhaustive`: the decisions to follow.
    pub schedule: Vec<u32>,
    /// Settings for the passes (`--config`).
    pub settings: analyses::Settings,
    /// The recovery command that validates findings on crash images (`--recover`).
    pub recover: Option<Vec<String>>,
    /// PMRace's targeted interleaving (`--strategy pmrace`): readers held at sync-point loads.
    pub hold: Option<emu::sched::Hold>,
    /// Active delay injection at releases (`--delay`).
    pub delay: Option<emu::sched::DelayInjection>,
    /// Where separate debug files of the program and its libraries are looked for (`--debug-dir`).
    pub debug_dirs: Vec<PathBuf>,
    /// The guest's working directory is private, backed by the PM directory's
    /// [`syscalls::vfs::PRIVATE_CWD`] over ferrite's own, which it never writes (recoveries of
    /// crash images, which find the image's non-PM files there). A run with a
    /// [`crate::Probe`] that tracks durable files always has one.
    pub private_cwd: bool,
    /// Print the guest's system calls on standard error (`--trace-syscalls`).
    pub trace_syscalls: bool,
    /// `--listen`: host clients served and recorded, or a recording injected again.
    pub listen: Option<syscalls::listen::ListenSpec>,
    /// The replay of an interrupted run: where it stopped (retired instructions) and the signal
    /// that stopped it. The run ends there as that run ended ([`GuestEnd::Interrupted`]), not as
    /// a hang, whatever `max_instructions` says.
    pub stop_at: Option<(u64, i32)>,
}

impl RunSpec {
    /// The seed of the scheduler's choices: `schedule_seed`, else `seed`.
    pub fn sched_seed(&self) -> u64 {
        self.schedule_seed.unwrap_or(self.seed)
    }

    /// A run of `argv` (`argv[0]` is `program` as the user named it) on the PM directory
    /// `pm_dir`, with the command line's defaults: seed 0, every PM pass, the random strategy.
    pub fn new(program: PathBuf, argv: Vec<String>, pm_dir: PathBuf) -> RunSpec {
        RunSpec {
            program,
            argv,
            env: Vec::new(),
            seed: 0,
            schedule_seed: None,
            pm_dir,
            pm_mount: defaults::PM_MOUNT.into(),
            max_instructions: defaults::MAX_INSTRUCTIONS,
            max_memory: defaults::MAX_MEMORY,
            cpus: defaults::CPUS,
            analyses: vec!["all".into()],
            strategy: emu::sched::Strategy::Random,
            max_threads: defaults::MAX_THREADS,
            discard_output: false,
            quiet: false,
            max_open_files: defaults::MAX_OPEN_FILES,
            pm: emu::pm::PmConfig::default(),
            custom_locks: Vec::new(),
            preempt_all: false,
            remap_pm: false,
            schedule: Vec::new(),
            settings: analyses::Settings::default(),
            recover: None,
            hold: None,
            delay: None,
            debug_dirs: Vec::new(),
            private_cwd: false,
            trace_syscalls: false,
            listen: None,
            stop_at: None,
        }
    }
}

/// PCT needs the number of scheduling points it spreads its change points over; without a
/// profiling run, this estimate (PCT's k) is used.
const PCT_EXPECTED_POINTS: u64 = 10_000;

/// The scheduler strategy of a `--strategy` name (`pmrace` holds readers at chosen loads; its
/// other choices are the random strategy's).
pub fn strategy(name: &str, depth: u32) -> emu::sched::Strategy {
    match name {
        "pct" => emu::sched::Strategy::Pct { depth: depth.max(1), expected_points: PCT_EXPECTED_POINTS },
        "fifo" => emu::sched::Strategy::Fifo,
        "exhaustive" => emu::sched::Strategy::Exhaustive,
        _ => emu::sched::Strategy::Random,
    }
}

/// The name of a strategy, as reports record it.
pub fn strategy_name(s: emu::sched::Strategy) -> &'static str {
    match s {
        emu::sched::Strategy::Random => "random",
        emu::sched::Strategy::Pct { .. } => "pct",
        emu::sched::Strategy::Fifo => "fifo",
        emu::sched::Strategy::Exhaustive => "exhaustive",
    }
}

/// How the guest ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuestEnd {
    /// It exited, or a signal killed it.
    Exited(ProcessExit),
    /// Stopped by the instruction budget.
    Hang,
    /// Every live thread blocked for good.
    Deadlock,
    /// ferrite was interrupted by this signal (SIGINT, SIGTERM, SIGHUP) and stopped the run at
    /// its next block start ([`emu::interrupt`]), or a replay reached the instruction an
    /// interrupted run stopped at ([`RunSpec::stop_at`]).
    Interrupted(i32),
}

impl GuestEnd {
    /// The status ferrite exits with: a signal's 128+N first (what a shell would have seen
    /// natively), then the findings code, then the guest's own status.
    pub fn exit_status(self, findings: usize, findings_code: i32) -> i32 {
        match self {
            GuestEnd::Exited(ProcessExit::Signal(s)) | GuestEnd::Interrupted(s) => 128 + s,
            _ if findings > 0 => findings_code,
            GuestEnd::Exited(ProcessExit::Code(c)) => c,
            GuestEnd::Hang | GuestEnd::Deadlock => findings_code,
        }
    }
}

/// What a run did and found.
pub struct RunOutcome {
    /// How the guest ended.
    pub end: GuestEnd,
    /// `--strategy exhaustive`: every scheduling decision the run made.
    pub decisions: Vec<emu::sched::Decision>,
    /// Most threads alive at once.
    pub threads: u32,
    /// Thread switches the scheduler made.
    pub switches: u64,
    /// Instructions retired.
    pub instructions: u64,
    /// The run's trace hash (docs/architecture.md, "The trace hash").
    pub trace_hash: String,
    /// Findings, merged and numbered.
    pub findings: Vec<Finding>,
    /// Host files the guest read, with the BLAKE3 of their contents.
    pub inputs: BTreeMap<String, String>,
    /// BLAKE3 of the program's bytes.
    pub program_hash: String,
    /// The passes' counters (`pmrace.inter_candidates`, ...), validation's included.
    pub stats: BTreeMap<String, u64>,
    /// The PM files the guest opened: device file id → path relative to the PM directory.
    pub pm_files: BTreeMap<u32, PathBuf>,
    /// Findings post-failure validation showed to be false positives (recovery repairs them).
    pub discarded: Vec<Finding>,
    /// Reads of PM file contents no pass saw as loads (`Kernel::pm_file_reads`).
    pub pm_file_reads: u64,
    /// What Unicorn's translation cache did (blocks translated, flushes).
    pub translation: emu::machine::TranslationStats,
    /// `--listen`: what the host clients did and the guest sent them, or why a replay of a
    /// recording diverged from it.
    pub listen: Option<Result<syscalls::listen::Recorded, String>>,
    /// For an exhaustive exploration: how its schedules were run (from the start or from a
    /// snapshot of an earlier one).
    pub branching: Option<Branching>,
}

/// How an exhaustive exploration's schedules were run (`ferrite run --host-stats`; the report
/// is the same either way). A schedule that shares its first decisions with an earlier one goes
/// on from a snapshot taken at or before the first decision where they differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Branching {
    /// Schedules run from the program's start (the first, and those no snapshot served).
    pub from_start: u64,
    /// Schedules that went on from a snapshot.
    pub from_snapshot: u64,
    /// Snapshots taken.
    pub snapshots: u64,
    /// Times a run could not be snapshotted (a pass that cannot be copied, such as pmrace after
    /// it captured a crash image, a forked guest, a host file that cannot be opened again).
    pub refused: u64,
    /// Why the first refusal happened (a run that could not be snapshotted, or a snapshot that
    /// could not be restored): what `--host-stats` and the exploration's summary say.
    pub refused_why: Option<&'static str>,
    /// Guest instructions executed, over all schedules.
    pub instructions: u64,
    /// Guest instructions re-running every schedule from its start would have executed.
    pub instructions_from_start: u64,
    /// Of `instructions`, those schedules ran from where they went on to their first new
    /// decision (what a snapshot nearer it would have saved; exhaustive exploration only).
    pub instructions_to_branch: u64,
    /// The most bytes the snapshots held at once.
    pub peak_bytes: u64,
    /// Snapshots dropped to make room under the budget (exhaustive exploration): those no
    /// waiting schedule could go on from, then every other one of a run's evenly spaced ones.
    pub evicted: u64,
    /// Of `evicted`, those dropped by thinning a run's own snapshots after its new decision
    /// (every other one, the newest kept), when dropping those no waiting schedule could go on
    /// from was not room enough.
    pub thinned: u64,
    /// The trace hashes of the schedules run, in order, hashed together (BLAKE3, the first 16
    /// bytes): what shows that runs from snapshots took the paths runs from the start take.
    pub traces: [u8; 16],
}

impl Branching {
    /// The summary line an exploration prints: how many of its `what`s (schedules, pmrace runs)
    /// went on from a snapshot and what that saved.
    pub fn summary(&self, what: &str) -> String {
        format!(
            "ferrite: {} {what}(s) went on from a snapshot, {} ran from the start; {} guest instructions run ({} \
             from the start)",
            self.from_snapshot, self.from_start, self.instructions, self.instructions_from_start
        )
    }

    /// Counts a refusal, and keeps `why` if it is the first.
    pub fn refuse(&mut self, why: &'static str) {
        self.refused += 1;
        self.refused_why = self.refused_why.or(Some(why));
    }

    /// Chains the trace hash of the next schedule, in run order, into [`Branching::traces`].
    pub fn chain_trace(&mut self, trace: &str) {
        let mut h = blake3::Hasher::new();
        h.update(&self.traces);
        h.update(trace.as_bytes());
        self.traces.copy_from_slice(&h.finalize().as_bytes()[..16]);
    }
}

/// The host path of the program `name` as a shell finds it (`execvp`): a name with a `/` in it
/// as given; otherwise the first executable regular file of that name in the directories of
/// `PATH` (the guest's, from `env`, else ferrite's own); otherwise the name as given, which then
/// fails to be read with that name in the message. argv[0] stays as the user wrote it.
pub fn program_path(name: &str, env: &[String]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    if name.is_empty() || name.contains('/') {
        return PathBuf::from(name);
    }
    let path = env
        .iter()
        .find_map(|kv| kv.strip_prefix("PATH=").map(str::to_string))
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    path.split(':')
        .map(|dir| if dir.is_empty() { PathBuf::from(".") } else { PathBuf::from(dir) }.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// The program and arguments the kernel would start for `program` run with `argv`, and the
/// ELF file's bytes: a `#!` script is run by its interpreter, with the interpreter (and the one
/// argument the line may give it) and the script's path in front of the script's own arguments,
/// as Linux's `binfmt_script` does (five scripts at most before the program, as `exec_binprm`
/// allows, the line cut at 256 bytes). A script
/// without an execute bit is refused, as `execve` refuses it.
pub fn follow_scripts(program: &std::path::Path, argv: &[String]) -> std::io::Result<(PathBuf, Vec<String>, Vec<u8>)> {
    let (mut program, mut argv) = (program.to_path_buf(), argv.to_vec());
    for depth in 0..6 {
        let bytes = match loader::input::read_regular(&program, loader::input::PROGRAM_CAP) {
            Ok(b) => b,
            // The script was read; what is missing is its interpreter, which the error names.
            Err(e) if depth > 0 => {
                let what = format!("its `#!` interpreter `{}` cannot be read: {e}", program.display());
                return Err(std::io::Error::new(e.kind(), what));
            }
            Err(e) => return Err(e),
        };
        let Some(line) = loader::script::shebang(&bytes) else { return Ok((program, argv, bytes)) };
        // As execve: a script runs only if it may be executed.
        if std::fs::metadata(&program).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111)? == 0
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "a `#!` script without execute permission (chmod +x runs it under its interpreter)",
            ));
        }
        let Some(loader::script::Shebang { interp, arg }) = line else {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "its `#!` line names no interpreter, or one longer than the 255 bytes Linux reads of the line (ENOEXEC)"));
        };
        let interp = String::from_utf8_lossy(&interp).into_owned();
        let mut next = vec![interp.clone()];
        next.extend(arg.map(|a| String::from_utf8_lossy(&a).into_owned()));
        next.push(program.display().to_string());
        next.extend(argv.into_iter().skip(1));
        (program, argv) = (PathBuf::from(&interp), next);
    }
    Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "more than five `#!` scripts in a row (ELOOP)"))
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The program cannot be read.
    #[error("cannot read program `{0}`: {1}")]
    Program(String, std::io::Error),
    /// The program cannot be started.
    #[error("`{0}` cannot be run: {1}")]
    Exec(String, syscalls::ExecError),
    /// The emulator failed.
    #[error("the emulator failed: {0}")]
    Emu(#[from] emu::EmuError),
    /// ferrite's working directory is unusable.
    #[error("working directory: {0}")]
    Cwd(std::io::Error),
    /// `--analyses` names no pass or bad options.
    #[error("--analyses: {0}")]
    Analyses(String),
    /// A temporary directory or a copy of the PM directory could not be made.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// An exploration was asked for no run.
    #[error("--explore needs at least one run")]
    NoRun,
}
