//! The command line: what each subcommand takes, with help that teaches.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use driver::spec::{defaults, limits};

pub mod values;

use values::ranged;

#[derive(Parser, Debug)]
#[command(
    name = "ferrite",
    version,
    about = "Finds concurrency and crash-consistency bugs in persistent-memory programs",
    long_about = "ferrite runs an unmodified x86-64 Linux program inside a deterministic emulator. The \
program maps files from a persistent-memory (PM) mount; ferrite models what each cache line would keep \
after a crash, runs detectors over the execution, and reports findings with source lines. Every run is \
defined by its inputs and a seed, so every finding replays exactly.\n\n\
Exit status: the guest's own status when there are no findings; 128+N when the guest was killed by \
signal N (as a shell reports it); 66 when there are findings (--findings-exit-code); 2 when ferrite \
itself or its input is at fault (not an ELF, a bad option, a corrupt report).",
    after_help = "Examples:\n  ferrite run -- ./my_log /mnt/pmem0/pool\n  ferrite run --report out.json --seed 7 -- ./kv /mnt/pmem0/kv 1000\n  ferrite replay out.json"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// Most memory ferrite itself may keep on its heap (bytes; K, M, G suffixes): the PM
    /// device's state, the analyses' records, crash points and images, an exploration's
    /// schedules. Beyond it the run ends with an `error:` line and status 2 instead of
    /// exhausting the machine. The guest's own memory is --max-memory's. [default: half of the
    /// machine's RAM]
    #[arg(long, global = true, value_name = "BYTES", value_parser = parse_size)]
    pub max_host_memory: Option<u64>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a program under ferrite and report what it finds.
    Run(RunArgs),
    /// Run a report's program again with the same inputs and seed, and check it reproduces.
    Replay(ReplayArgs),
    /// Test crash consistency: recover from every crash image the PM model allows.
    Crash(CrashArgs),
    /// Measure emulation speed against native execution of the same program.
    Bench(BenchArgs),
    /// Run every detector over a labelled suite of guests and score them side by side.
    Compare(CompareArgs),
    /// Merge the parts of a sharded campaign (--shard I/N) into the report one unsharded run
    /// would have written.
    Merge(MergeArgs),
    /// Write a Slurm batch script that runs a crash or compare campaign as a job array of
    /// shards, then merges them.
    Slurm(SlurmArgs),
    /// Rank a report's findings for triage, the shapes of published bugs first, with a reason each.
    Triage(TriageArgs),
}

#[derive(Args, Debug)]
pub struct TriageArgs {
    /// A report written by `ferrite run`, `crash` or `replay` (.json or .ron).
    pub report: PathBuf,

    /// Show only the first N findings.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
}

#[derive(Args, Debug)]
pub struct CrashArgs {
    #[command(flatten)]
    pub opts: RunOptions,

    #[command(flatten)]
    pub shard: ShardArgs,

    /// A checker run after each successful recovery on the same files; a non-zero exit is a
    /// failure.
    #[arg(long, value_name = "CMD ARGS", value_parser = values::command)]
    pub check: Option<String>,

    /// Where crashes happen: `fences` (before every fence, clflush or msync that persists
    /// something, and at exit) or `stores` (also after every PM store).
    #[arg(long, value_name = "WHERE", default_value = "fences", value_parser = ["fences", "stores"])]
    pub crash_points: String,

    /// Images per crash point above which the point is sampled (targeted images first) instead
    /// of enumerated.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = ranged(limits::MAX_IMAGES))]
    pub max_images: usize,

    /// Recoveries run in parallel (default: the number of CPUs).
    #[arg(long, value_name = "N", value_parser = ranged(limits::JOBS))]
    pub jobs: Option<usize>,

    /// One crash point per instruction and call stack (Mumak's deduplication): a loop's fence
    /// is a crash point the first time only. Fewer images; a bug that needs a later iteration's
    /// state can be missed.
    #[arg(long)]
    pub dedup_points: bool,

    /// Crash at exactly one point: after N retired instructions of the workload (all threads),
    /// instead of at every fence and at exit.
    #[arg(long, value_name = "N")]
    pub crash_at: Option<u64>,

    /// Recovery maps the PM files at another address than the workload did (64 GiB lower, hints
    /// ignored): absolute pointers stored in PM then point outside the pool.
    #[arg(long)]
    pub remap: bool,

    /// Also report recoveries that pass but read, before writing them, PM bytes whose value
    /// depended on the crash (lines not durable at the crash point: XFDetector's cross-failure
    /// races). Off by default: recovery code that checks such data (checksums, commit flags)
    /// reads it on purpose.
    #[arg(long)]
    pub xfd: bool,

    /// Run every recovery from the program's start in a fresh machine. By default each worker
    /// runs a recovery command once, keeps a snapshot taken just before its first system call
    /// that touches the PM files, and restores it (with the engine's translations) for every
    /// other image: the same results, several times faster.
    #[arg(long)]
    pub fresh_recoveries: bool,

    /// Explore each crash point's images lazily, as Jaaru does: recover the newest image while
    /// watching which unpersisted lines recovery reads, and branch over a line's older versions
    /// only where recovery read it. Covers every image of a point (however many lines are
    /// dirty) with one recovery per distinct behaviour; up to --max-images recoveries a point.
    #[arg(long, conflicts_with = "xfd")]
    pub lazy: bool,

    /// Write host-side measurements of the campaign as JSON here (wall-clock seconds;
    /// `exploration`: how the schedules' workload runs went, from the start or from a snapshot
    /// of their common start, and the guest instructions they ran): kept out of the report
    /// because they say how, not what.
    #[arg(long, value_name = "FILE", hide = true)]
    pub host_stats: Option<PathBuf>,

    /// The workload program, then its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM [ARGS]...")]
    pub command: Vec<String>,
}

#[derive(Args, Debug, Clone)]
pub struct RunOptions {
    /// Seed for everything the guest could observe as nondeterminism (scheduling, time offsets,
    /// randomness). The same seed and inputs give the same execution, bit for bit.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// `ferrite run`: seed the scheduler's choices (and --delay's) with S instead of --seed,
    /// which then seeds only what the guest observes (random bytes). With --explore N, the N
    /// schedule seeds derive from S. Reproduces a finding of `--explore` run on its own
    /// (`--seed` the report's, `--schedule-seed` the finding's).
    #[arg(long, value_name = "S")]
    pub schedule_seed: Option<u64>,

    /// The initialization removal heuristic of hawkset and vardalith: a store made durable
    /// before N+1 threads accessed its bytes is initialisation and ignored, as are those
    /// threads' earlier loads (`hawkset:irh=N`; 0 disables; hawkset by default also asks that
    /// the persist happen before the publishing access, `hawkset:irh_order`).
    #[arg(long, value_name = "N")]
    pub irh: Option<u32>,

    /// Whose flush and fence make a store durable for hawkset and vardalith: `own` (the writer's,
    /// as the papers assume) or `any` (the hardware rule).
    #[arg(long, value_name = "WHO", value_parser = ["own", "any"])]
    pub persist_owner: Option<String>,

    /// Shorthand for `oscs:condflag=on`: OSCS ignores a flag set under a mutex and waited on with
    /// a condition variable (the paper's main false positive).
    #[arg(long)]
    pub oscs_condflag: bool,

    /// Detectors to run, comma-separated. `all` (the default) is every PM pass: unpersisted,
    /// hawkset, vardalith. The data-race and atomicity passes watch every memory access and are
    /// named explicitly: hmtrace, oscs. `none` runs the machine alone. A pass takes options after
    /// a colon, e.g. `hawkset:irh=0`, `oscs:condflag=on` (docs/analyses/NAME.md lists them).
    #[arg(long, value_name = "A,B", value_delimiter = ',', default_value = "all")]
    pub analyses: Vec<String>,

    /// Power-fail atomicity inside a cache line: `line` (a line never tears) or `word8` (each
    /// aligned 8-byte word persists on its own, PMDK's guarantee).
    #[arg(long, value_name = "A", default_value = "line", value_parser = ["line", "word8"])]
    pub atomicity: String,

    /// `intel`: clflush persists when it executes; `strict`: every flush waits for a fence
    /// (HawkSet's convention, more crash states).
    #[arg(long, value_name = "M", default_value = "intel", value_parser = ["intel", "strict"])]
    pub flush_model: String,

    /// `adr`: caches are volatile; `eadr`: caches are in the persistence domain (stores are
    /// durable at once, non-temporal stores still wait for a fence).
    #[arg(long, value_name = "P", default_value = "adr", value_parser = ["adr", "eadr"])]
    pub persistency: String,

    /// A RON file of extra settings, e.g. custom lock functions:
    /// `(locks: [(symbol: "spin_acquire", kind: Acquire), (symbol: "spin_try", kind: TryAcquire(success: 1)), (symbol: "spin_release", kind: Release)])`,
    /// or HawkSet's YAML lock configuration (`adquire:`, `try_adquire:`, `release:`).
    /// Repeatable: the files' settings add up.
    #[arg(long, value_name = "FILE")]
    pub config: Vec<PathBuf>,

    /// Host directory behind the guest's PM mount. Without it, a fresh temporary directory is used
    /// and removed afterwards.
    #[arg(long, value_name = "DIR", value_parser = values::pm_dir)]
    pub pm_dir: Option<PathBuf>,

    /// Where the PM mount appears in the guest's file namespace.
    #[arg(long, value_name = "PATH", default_value = defaults::PM_MOUNT, value_parser = values::pm_mount)]
    pub pm_mount: String,

    /// Write the report here; the format follows the extension: .json, .ron or .sarif.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    /// Stop the guest after this many retired instructions and report a `hang`. A guest that
    /// spins without a system call ends only here, after minutes at the default: give a lower
    /// budget (e.g. 1000000000, seconds), or interrupt ferrite (Ctrl-C, `timeout -s INT 60
    /// ferrite ...`), which stops the guest where it stands and still writes the report.
    #[arg(long, value_name = "N", default_value_t = defaults::MAX_INSTRUCTIONS)]
    pub max_instructions: u64,

    /// Most guest memory (bytes; K, M, G suffixes) the guest may map; beyond it mmap and brk fail
    /// with ENOMEM.
    #[arg(long, value_name = "BYTES", default_value = "4G", value_parser = values::max_memory)]
    pub max_memory: u64,

    /// Exit status when there are findings (like ThreadSanitizer's exitcode).
    #[arg(long, value_name = "N", default_value_t = 66, value_parser = ranged(limits::EXIT_CODE))]
    pub findings_exit_code: i32,

    /// Run N schedules derived from the seed (in parallel on all cores; one after another, depth
    /// first, with --strategy exhaustive) and merge their findings
    /// (each keeps the seed that exposed it, for `ferrite replay --finding`). Only the first run's
    /// output is shown; every run starts from a copy of the PM directory. Under the random
    /// strategies every schedule shares --seed's random bytes and differs in its schedule seed,
    /// so all go on from one snapshot taken where a second thread could first run.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = ranged(limits::EXPLORE))]
    pub explore: u32,

    /// Scheduling strategy: random (seeded preemption), pct (Burckhardt et al.'s probabilistic
    /// concurrency testing, see --pct-depth), fifo (no preemption), or exhaustive (every
    /// schedule with at most --max-preemptions preemptions, depth first, up to --explore runs), or
    /// pmrace (PMRace's PM-aware exploration: a profiling run finds PM words shared across
    /// threads, then runs hold readers at their loads until another thread stores there, guided
    /// by alias-pair coverage, up to --explore runs).
    #[arg(long, value_name = "S", default_value = "random", value_parser = ["random", "pct", "fifo", "exhaustive", "pmrace"])]
    pub strategy: String,

    /// Preemptions per schedule for --strategy exhaustive (switches where the running thread
    /// could have gone on; switches when it blocks are free).
    #[arg(long, value_name = "K", default_value_t = 2)]
    pub max_preemptions: u32,

    /// Scheduling points: `sync` (system calls, locked instructions, PM accesses and the
    /// instruction quantum) or `all` (also every access to memory outside the running thread's
    /// stack: explores races on plain variables, at a cost).
    #[arg(long, value_name = "P", default_value = "sync", value_parser = ["sync", "all"])]
    pub preempt: String,

    /// With --strategy exhaustive: dynamic partial-order reduction. Each run records every
    /// memory access; only the alternatives that reorder two conflicting accesses of different
    /// threads are tried, instead of every runnable thread at every decision.
    #[arg(long)]
    pub por: bool,

    /// With --explore: run every schedule from the program's start instead of going on from a
    /// snapshot of an earlier schedule taken where they part (the report is the same; only
    /// slower).
    #[arg(long)]
    pub no_snapshots: bool,

    /// Bug depth d for --strategy pct: d-1 priority change points per run.
    #[arg(long, value_name = "D", default_value_t = 3, value_parser = ranged(limits::PCT_DEPTH))]
    pub pct_depth: u32,

    /// Most guest threads alive at once; beyond it clone fails with EAGAIN.
    #[arg(long, value_name = "N", default_value_t = defaults::MAX_THREADS, value_parser = ranged(limits::MAX_THREADS))]
    pub max_threads: usize,

    /// Most file descriptors open at once (RLIMIT_NOFILE); beyond it open and dup fail with
    /// EMFILE.
    #[arg(long, value_name = "N", default_value_t = defaults::MAX_OPEN_FILES, value_parser = ranged(limits::MAX_OPEN_FILES))]
    pub max_open_files: i32,

    /// Number of CPUs the guest is told it has.
    #[arg(long, value_name = "N", default_value_t = defaults::CPUS, value_parser = ranged(limits::CPUS))]
    pub cpus: u32,

    /// Start the guest with an empty environment (plus any --env).
    #[arg(long)]
    pub env_clear: bool,

    /// Set a variable in the guest's environment (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = values::env)]
    pub env: Vec<String>,

    /// Print nothing of ferrite's own but errors (the guest's output still passes through).
    #[arg(long, short)]
    pub quiet: bool,

    /// The program's recovery command (program and arguments, split at spaces). `crash` runs it
    /// on every crash image (default: the workload command itself); pmrace runs it on the crash
    /// image of each finding to validate it (without it, pmrace findings are not validated).
    #[arg(long, value_name = "CMD ARGS", value_parser = values::command)]
    pub recover: Option<String>,

    /// Active delay injection (Vardalith's, after TSVD): a thread entering a release (unlock,
    /// sem_post, custom release) with PM stores not yet fenced waits N instructions of the others,
    /// with a probability per release site that starts at 100% and drops by --delay-decay after
    /// each delay there that exposed nothing. Widens persistence windows for every pass. 0: off.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub delay: u64,

    /// Host directories searched for separate debug files (gdb's debug-file-directory): by build
    /// ID, `DIR/.build-id/ab/cdef....debug`, and by `.gnu_debuglink`, `DIR/<object's dir>/NAME`
    /// (after the object's own directory and its `.debug`). Repeatable or colon-separated;
    /// replaces the default, /usr/lib/debug; without a value, none is searched. Debug files give
    /// library frames their source lines in reports.
    #[arg(long = "debug-dir", value_name = "DIR", value_delimiter = ':', num_args = 0..=1)]
    pub debug_dir: Option<Vec<PathBuf>>,

    /// Print every system call of the guest with its arguments and result on standard error,
    /// one line each, as strace does: `[tid] openat(AT_FDCWD, "in.txt", 0x0, 0x0) = 3`. For
    /// comparing with `strace` of a native run when a program behaves differently under
    /// ferrite. The workload run only (not recoveries or checks); changes nothing in the run.
    #[arg(long)]
    pub trace_syscalls: bool,

    /// Percentage points a release site's delay probability loses per fruitless delay.
    #[arg(long, value_name = "P", default_value_t = 5, value_parser = ranged(limits::DELAY_DECAY))]
    pub delay_decay: u32,

    /// Shorthand for `pmrace:compat=on`: PMRace's own persistence rule (a flush alone makes data
    /// clean, non-temporal stores are clean at once), to compare with the paper's counts.
    #[arg(long)]
    pub pmrace_compat: bool,
}

impl RunOptions {
    /// The shorthand flags given (flags that set an option of some passes:
    /// [`analyses::PassInfo::flags`]), as `(flag, value)` in the order they are declared here.
    pub fn shorthands(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        if let Some(n) = self.irh {
            v.push(("irh", n.to_string()));
        }
        if let Some(who) = &self.persist_owner {
            v.push(("persist-owner", who.clone()));
        }
        if self.oscs_condflag {
            v.push(("oscs-condflag", "on".to_string()));
        }
        if self.pmrace_compat {
            v.push(("pmrace-compat", "on".to_string()));
        }
        v
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub opts: RunOptions,

    #[command(flatten)]
    pub shard: ShardArgs,

    /// Serve native clients: connections to 127.0.0.1:HOST_PORT (0: any free port) become
    /// loopback TCP connections to the guest's listener on GUEST_PORT. Repeatable. The port is
    /// announced on standard error as `ferrite: listening on 127.0.0.1:PORT for guest port
    /// GUEST_PORT`. A client that connects before the guest listens waits. Every connection,
    /// byte and close enters the machine at a counted point and is recorded in the report
    /// (`run.listen`), so `ferrite replay` runs the server again without the clients. While
    /// every guest thread waits for the host, ferrite waits too; SIGINT or SIGTERM then goes to
    /// the guest (a second one as SIGKILL), and the run ends with its report. Cannot be
    /// combined with --explore, --strategy exhaustive or pmrace, --recover or --shard.
    #[arg(long, value_name = "GUEST_PORT=HOST_PORT", value_parser = parse_listen)]
    pub listen: Vec<(u16, u16)>,

    /// Write host-side measurements of this run as JSON here (heap allocations ferrite made,
    /// wall-clock seconds, `dirty_pages`: how snapshot restores find written pages; for
    /// `--strategy exhaustive`, `exploration`: schedules run from the start and from a snapshot,
    /// guest instructions run and what running every schedule from the start runs): the numbers `ferrite bench` reports, kept out of the report because
    /// they are not deterministic or say how, not what.
    #[arg(long, value_name = "FILE", hide = true)]
    pub host_stats: Option<PathBuf>,

    /// The program to run, then its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM [ARGS]...")]
    pub command: Vec<String>,
}

/// `--listen GUEST_PORT=HOST_PORT`.
fn parse_listen(s: &str) -> Result<(u16, u16), String> {
    let (g, h) = s.split_once('=').ok_or_else(|| format!("`{s}` is not GUEST_PORT=HOST_PORT"))?;
    let port = |p: &str| p.parse::<u16>().map_err(|_| format!("`{p}` is not a port (0..=65535)"));
    let (g, h) = (port(g)?, port(h)?);
    if g == 0 {
        return Err("the guest port cannot be 0".into());
    }
    Ok((g, h))
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// A report written by `ferrite run --report`.
    pub report: PathBuf,

    /// Replay the run that exposed this finding and check the finding comes back.
    #[arg(long, value_name = "ID")]
    pub finding: Option<u32>,

    /// Write the replay's own report here.
    #[arg(long, value_name = "FILE")]
    pub report_out: Option<PathBuf>,

    /// Host directory behind the PM mount for the replay (default: a fresh temporary one).
    #[arg(long, value_name = "DIR", value_parser = values::pm_dir)]
    pub pm_dir: Option<PathBuf>,

    /// Debug-file directories, as for `run` (not recorded in the report).
    #[arg(long = "debug-dir", value_name = "DIR", value_delimiter = ':', num_args = 0..=1)]
    pub debug_dir: Option<Vec<PathBuf>>,

    /// Print the replayed run's system calls on standard error, as `run --trace-syscalls`.
    #[arg(long)]
    pub trace_syscalls: bool,

    /// Serve the replayed run to gdb on [ADDR:]PORT (address 127.0.0.1 unless given), stopped at
    /// the program's first instruction, or at the finding's place with --finding; then
    /// `gdb PROGRAM -ex 'target remote :PORT'`. Breakpoints, watchpoints, threads, and
    /// reverse-stepi/reverse-continue work (docs/replay.md).
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub gdb: Option<String>,

    /// With --gdb and a crash finding: serve the workload's run, stopped at the crash point
    /// (before the instruction the crash comes before), instead of the recovery.
    #[arg(long, requires = "gdb")]
    pub workload: bool,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Runs of each configuration; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = ranged(limits::BENCH_RUNS))]
    pub runs: u32,

    /// ferrite configurations to measure (repeatable): an --analyses value, optionally followed
    /// by more `ferrite run` options in the same argument (`--config "none --strategy fifo"`);
    /// the first is the baseline of plain emulation. `/mnt/pmem0` in the program's arguments
    /// becomes a temporary directory for the native run.
    #[arg(long = "config", value_name = "ANALYSES [OPTIONS]", default_values = ["none", "all"])]
    pub configs: Vec<String>,

    /// Measure crash testing instead: `ferrite crash --jobs 1` of the program with this recovery
    /// command, each recovery in a fresh machine and restored from a snapshot, reported as
    /// recoveries per second per core of CPU time (the workload's own run subtracted).
    #[arg(long, value_name = "CMD ARGS", value_parser = values::command)]
    pub recover: Option<String>,

    /// Measure snapshots instead: one of the whole run taken half-way (every thread, guest
    /// memory, the PM device and files), another when the run went on a tenth (which copies only
    /// what it wrote), the first restored then, and a debugger's
    /// `reverse-stepi` at the end of the run, in wall-clock time.
    #[arg(long, conflicts_with = "recover")]
    pub snapshots: bool,

    /// The program to measure, then its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM [ARGS]...")]
    pub command: Vec<String>,
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mul) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        Some('T' | 't') => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let not_a_size = || format!("`{s}` is not a size (a number with an optional K, M, G or T suffix)");
    // A number of more digits than u64 holds is as much too large as one the suffix overflows.
    let too_large = || format!("`{s}` is more than 2^64 - 1 bytes (16 EiB)");
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return Err(not_a_size());
    }
    num.parse::<u64>().ok().and_then(|n| n.checked_mul(mul)).ok_or_else(too_large)
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  make -C guests && ferrite compare --report cmp.json\n  ferrite compare --analyses hawkset,hawkset:irh=0,vardalith --cases 'pi_*'\n  ferrite compare --suite my-suite/manifest.ron --jobs 4\n\ndocs/compare.md describes the manifest and the scoring."
)]
pub struct CompareArgs {
    /// The suite: a RON manifest, or a directory whose .ron manifests are read together
    /// (default: guests/manifest.ron). Guest binaries must be built already (`make -C guests`).
    #[arg(long, value_name = "FILE_OR_DIR")]
    pub suite: Option<PathBuf>,

    /// Detectors to compare, comma-separated: analyses (with options, `hawkset:irh=0`), `crash`
    /// and `machine` (faults, deadlocks, hangs). Default: every one.
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub analyses: Vec<String>,

    /// Only these cases (comma-separated names; `pm_*` matches a prefix).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub cases: Vec<String>,

    /// Each run explores N schedules derived from its seed (as `ferrite run --explore N`).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = ranged(limits::EXPLORE))]
    pub explore: u32,

    /// Write the results as JSON here, with the summary as CSV (.csv) and the chart of
    /// detection against cost (.svg) next to it.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    /// Runs in parallel (default: the number of CPUs).
    #[arg(long, value_name = "N", value_parser = ranged(limits::JOBS))]
    pub jobs: Option<usize>,

    /// No progress on standard error (the tables still go to standard output).
    #[arg(long, short)]
    pub quiet: bool,

    #[command(flatten)]
    pub shard: ShardArgs,
}

/// Sharding a campaign over a job array (docs/campaigns.md).
#[derive(Args, Debug, Clone, Default)]
pub struct ShardArgs {
    /// Do shard I of N (I from 0) of the campaign's independent units and write a part
    /// (--report FILE.json) for `ferrite merge`. Without it, Slurm's SLURM_ARRAY_TASK_ID and
    /// SLURM_ARRAY_TASK_COUNT are used when set; `off` runs the whole campaign regardless.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,

    /// The number of shards, with a Kubernetes Indexed Job's JOB_COMPLETION_INDEX as I.
    #[arg(long, value_name = "N")]
    pub shard_count: Option<u32>,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  for i in 0 1 2 3; do ferrite crash --shard $i/4 --report part-$i.json -- ./log /mnt/pmem0/log; done\n  ferrite merge part-*.json --report crash.json\n\ndocs/campaigns.md runs the shards as a Slurm job array, a Kubernetes Indexed Job or with GNU parallel."
)]
pub struct MergeArgs {
    /// The parts, one per shard (written by `--shard I/N --report PART.json`), in any order.
    #[arg(required = true, value_name = "PART.json")]
    pub parts: Vec<PathBuf>,

    /// Write the merged report here (as the unsharded command's --report).
    #[arg(long, value_name = "FILE", required = true)]
    pub report: PathBuf,

    /// Print nothing but errors and, for compare, the tables.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  ferrite slurm --shards 16 --cpus 4 --mem 8G --dir cmp -- compare --cases 'pm_*'\n  bash cmp/campaign.sbatch\n\ndocs/campaigns.md also shows the Kubernetes Indexed Job and GNU parallel equivalents."
)]
pub struct SlurmArgs {
    /// Shards: the job array's size.
    #[arg(long, value_name = "N")]
    pub shards: u32,

    /// CPUs of each task (its --jobs).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub cpus: u32,

    /// Memory of each task, in Slurm's notation (`4G`).
    #[arg(long, value_name = "SIZE", default_value = "4G")]
    pub mem: String,

    /// Time limit of each task, in Slurm's notation (`2:00:00`).
    #[arg(long, value_name = "TIME")]
    pub time: Option<String>,

    /// The Slurm partition.
    #[arg(long, value_name = "NAME")]
    pub partition: Option<String>,

    /// Where the script, the parts, the logs and the merged report go (on a file system every
    /// node sees).
    #[arg(long, value_name = "DIR", default_value = "ferrite-campaign")]
    pub dir: PathBuf,

    /// The campaign: `crash` or `compare` and its options (without --report, --shard, --jobs).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "SUBCOMMAND [ARGS]...")]
    pub command: Vec<String>,
}
