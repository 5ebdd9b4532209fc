//! One run of a guest: build the machine and the kernel, start the program, run it to its end,
//! and turn what happened into findings.
//!
//! The loop is the only place where the machine and the kernel meet: the machine runs until it
//! needs the outside world, the kernel answers, and every such exchange is folded into the run's
//! trace hash (instruction count, system call number, arguments, result), so two runs with the
//! same hash took the same path.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

use crate::crash::{CrashLog, Recorder};
use crate::symbols::Objects;

use analyses::{Finding, Location, Passes};
use emu::sched::Point;
use emu::{sig, Exit, Machine, MachineConfig, Reg};
use syscalls::{Deadlock, Kernel, KernelConfig, Outcome, ProcessExit};

/// Tells the passes which code is library code (and which copies for its caller).
fn give_code_info(m: &mut Machine, symbols: &Objects) {
    if let Some(obs) = m.observer_mut() {
        let any: &mut dyn std::any::Any = obs;
        if let Some(passes) = any.downcast_mut::<Passes>() {
            passes.set_code(&symbols.code_info());
        }
    }
}

/// A finding of the run itself (a fault, a hang, a deadlock).
fn run_finding(analysis: &str, kind: &str, message: String, seed: u64, locations: Vec<Location>) -> Finding {
    Finding {
        id: 0,
        analysis: analysis.into(),
        kind: kind.into(),
        message,
        seed,
        occurrences: 1,
        crash_image: None,
        schedule: None,
        interleaving: None,
        locations,
    }
}

fn deadlock_finding(symbols: &Objects, d: &Deadlock, seed: u64) -> Finding {
    let locations = d.threads.iter().map(|(tid, bt)| symbols.location("blocked", *tid, symbols.frames(bt))).collect();
    let message = format!("deadlock: all {} live threads are blocked and none can wake the others", d.threads.len());
    run_finding("deadlock", "all-threads-blocked", message, seed, locations)
}

/// Everything that defines a run.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub program: PathBuf,
    /// argv, with argv[0] as the user gave the program.
    pub argv: Vec<String>,
    pub env: Vec<String>,
    pub seed: u64,
    pub pm_dir: PathBuf,
    pub pm_mount: String,
    pub max_instructions: u64,
    pub max_memory: u64,
    pub cpus: u32,
    pub analyses: Vec<String>,
    pub strategy: emu::sched::Strategy,
    pub max_threads: usize,
    /// Drop the guest's stdout and stderr (exploration runs after the first).
    pub discard_output: bool,
    /// No warnings of ferrite's own on standard error.
    pub quiet: bool,
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
    /// [`syscalls::vfs::PRIVATE_CWD`] over ferrite's own, which it never writes (`ferrite crash`'s
    /// recoveries, which find a crash image's non-PM files there). A run that records crash
    /// points always has one.
    pub private_cwd: bool,
    /// Print the guest's system calls on standard error (`--trace-syscalls`).
    pub trace_syscalls: bool,
}

/// How the guest ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuestEnd {
    Exited(ProcessExit),
    /// Stopped by the instruction budget.
    Hang,
    /// Every live thread blocked for good.
    Deadlock,
}

pub struct RunOutcome {
    pub end: GuestEnd,
    /// `--strategy exhaustive`: every scheduling decision the run made.
    pub decisions: Vec<emu::sched::Decision>,
    /// Most threads alive at once.
    pub threads: u32,
    /// Thread switches the scheduler made.
    pub switches: u64,
    pub instructions: u64,
    pub trace_hash: String,
    pub findings: Vec<Finding>,
    pub inputs: std::collections::BTreeMap<String, String>,
    pub program_hash: String,
    /// The passes' counters (`pmrace.inter_candidates`, ...), validation's included.
    pub stats: std::collections::BTreeMap<String, u64>,
    /// The PM files the guest opened: device file id → path relative to the PM directory.
    pub pm_files: std::collections::BTreeMap<u32, std::path::PathBuf>,
    /// Findings post-failure validation showed to be false positives (recovery repairs them).
    pub discarded: Vec<Finding>,
    /// Reads of PM file contents no pass saw as loads (`Kernel::pm_file_reads`).
    pub pm_file_reads: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot read program `{0}`: {1}")]
    Program(String, std::io::Error),
    #[error("`{0}` cannot be run: {1}")]
    Exec(String, syscalls::ExecError),
    #[error("the emulator failed: {0}")]
    Emu(#[from] emu::EmuError),
    #[error("working directory: {0}")]
    Cwd(std::io::Error),
    #[error("--analyses: {0}")]
    Analyses(String),
}

pub fn run(spec: &RunSpec) -> Result<RunOutcome, SessionError> {
    run_with(spec, None, Vec::new())
}

/// A run that also records crash points into `crash` (`ferrite crash`'s workload run), with
/// `extra` passes besides the selected analyses.
pub fn run_with(
    spec: &RunSpec,
    crash: Option<Rc<RefCell<CrashLog>>>,
    extra: Vec<Box<dyn analyses::Analysis>>,
) -> Result<RunOutcome, SessionError> {
    let mut s = Session::start(spec, crash, extra, false)?;
    loop {
        if let Some(end) = s.drive(false) {
            return s.finish(end);
        }
    }
}

/// A run under way: the machine, the kernel, and what the loop has gathered so far.
pub(crate) struct Session {
    pub(crate) spec: RunSpec,
    pub(crate) m: Machine,
    pub(crate) k: Kernel,
    pub(crate) symbols: Objects,
    pub(crate) trace: blake3::Hasher,
    pub(crate) findings: Vec<Finding>,
    pub(crate) reported_unsupported: usize,
    pub(crate) max_threads_seen: usize,
    /// Mappings when symbols were last refreshed.
    pub(crate) regions_seen: usize,
    pub(crate) program_hash: String,
    pub(crate) crash: Option<Rc<RefCell<CrashLog>>>,
    pub(crate) images: Option<Rc<RefCell<CrashLog>>>,
    /// The machine stopped at a system call the loop has not handled yet (where a snapshot was
    /// taken).
    pub(crate) syscall_pending: bool,
}

impl Session {
    /// Builds the machine and the kernel and starts the program. `warm`: the machine will be
    /// restored from snapshots ([`emu::MachineConfig::warm`]).
    pub(crate) fn start(
        spec: &RunSpec,
        crash: Option<Rc<RefCell<CrashLog>>>,
        extra: Vec<Box<dyn analyses::Analysis>>,
        warm: bool,
    ) -> Result<Session, SessionError> {
        let name = spec.program.display().to_string();
        let bytes = std::fs::read(&spec.program).map_err(|e| SessionError::Program(name.clone(), e))?;
        let cwd = std::env::current_dir().map_err(SessionError::Cwd)?;
        let exe = std::fs::canonicalize(&spec.program).unwrap_or_else(|_| spec.program.clone());
        let mut m = Machine::new(MachineConfig {
            max_instructions: spec.max_instructions,
            rand_seed: spec.seed,
            strategy: spec.strategy,
            sched_seed: spec.seed,
            pm: spec.pm,
            warm,
            ..MachineConfig::default()
        })?;
        let mut k = Kernel::new(KernelConfig {
            seed: spec.seed,
            pm_mount: spec.pm_mount.trim_end_matches('/').to_string(),
            pm_dir: spec.pm_dir.clone(),
            cwd,
            max_memory: spec.max_memory,
            exe: exe.display().to_string(),
            cpus: spec.cpus,
            max_threads: spec.max_threads,
            discard_output: spec.discard_output,
            max_open_files: spec.max_open_files,
            remap_pm: spec.remap_pm,
            private_cwd: spec.private_cwd || crash.is_some(),
            track_durable: crash.is_some(),
            trace_syscalls: spec.trace_syscalls,
        });
        m.set_main_tid(k.current);
        m.scheduler().set_prefix(spec.schedule.clone());
        if let Some(h) = &spec.hold {
            k.privileged = h.privileged;
            m.set_hold(Some(h.clone()));
        }
        if let Some(d) = spec.delay {
            m.set_delays(d, spec.seed);
        }
        if spec.preempt_all {
            m.preempt_all_accesses();
        }
        let mut passes = analyses::build(&spec.analyses).map_err(SessionError::Analyses)?;
        if let Some(log) = &crash {
            passes.push(Box::new(Recorder(log.clone())));
        }
        passes.extend(extra);
        let mut passes = Passes::new(passes);
        passes.configure(&spec.settings);
        // Crash images for post-failure validation, captured by the passes that want them.
        let images = passes.wants_images().then(|| CrashLog::new(&spec.pm_dir, false));
        if let Some(log) = &images {
            passes.set_image_sink(log.clone());
        }
        m.set_observer(Box::new(passes));
        let argv: Vec<Vec<u8>> = spec.argv.iter().map(|a| a.clone().into_bytes()).collect();
        let envp: Vec<Vec<u8>> = spec.env.iter().map(|a| a.clone().into_bytes()).collect();
        let started =
            syscalls::exec(&mut m, &mut k, &bytes, &argv, &envp).map_err(|e| SessionError::Exec(name.clone(), e))?;
        let mut symbols = Objects::new(&spec.debug_dirs);
        let im = &started.image;
        symbols.add(&exe.display().to_string(), &bytes, im.load_bias, im.lowest, im.highest);
        // The interpreter of a dynamic executable.
        symbols.refresh(&m);
        m.set_sync_functions(symbols.sync_functions(&spec.custom_locks));
        give_code_info(&mut m, &symbols);
        let regions_seen = m.mem.regions().count();
        let program_hash = blake3::hash(&bytes).to_hex().to_string();

        let mut trace = blake3::Hasher::new();
        trace.update(program_hash.as_bytes());
        Ok(Session {
            spec: spec.clone(),
            m,
            k,
            symbols,
            trace,
            findings: Vec::new(),
            reported_unsupported: 0,
            max_threads_seen: 1,
            regions_seen,
            program_hash,
            crash,
            images,
            syscall_pending: false,
        })
    }

    /// Runs the guest to its end, or with `pause` until the first system call where runs on
    /// different crash images may part ([`Kernel::snapshot_boundary`]): then `None`, with that
    /// call not handled yet.
    pub(crate) fn drive(&mut self, pause: bool) -> Option<GuestEnd> {
        let Session {
            spec,
            m,
            k,
            symbols,
            trace,
            findings,
            reported_unsupported,
            max_threads_seen,
            regions_seen,
            syscall_pending,
            crash,
            ..
        } = self;
        let spec = &*spec;
        let end = loop {
            let exit = if std::mem::take(syscall_pending) { Exit::Syscall } else { m.run() };
            match exit {
                Exit::Syscall => {
                    if pause && k.snapshot_boundary(m) {
                        *syscall_pending = true;
                        return None;
                    }
                    let nr = m.reg(Reg::RAX);
                    trace.update(&m.pm_hash().to_le_bytes());
                    trace.update(&m.icount().to_le_bytes());
                    trace.update(&k.current.to_le_bytes());
                    trace.update(&nr.to_le_bytes());
                    for r in [Reg::RDI, Reg::RSI, Reg::RDX] {
                        trace.update(&m.reg(r).to_le_bytes());
                    }
                    m.emit_syscall_event(nr, m.reg(Reg::RDI), m.reg(Reg::RSI));
                    let outcome = k.syscall(m);
                    if let Some(log) = crash {
                        CrashLog::note_durable(log, k);
                    }
                    // The dynamic linker mapped a library: learn its symbols and sync functions.
                    if matches!(nr, 9 | 10) && m.mem.regions().count() != *regions_seen {
                        *regions_seen = m.mem.regions().count();
                        if symbols.refresh(m) {
                            m.set_sync_functions(symbols.sync_functions(&spec.custom_locks));
                            give_code_info(m, symbols);
                        }
                    }
                    trace.update(&m.reg(Reg::RAX).to_le_bytes());
                    while *reported_unsupported < k.unsupported.len() {
                        let u = &k.unsupported[*reported_unsupported];
                        *reported_unsupported += 1;
                        // Name the program's own call, not the libc wrapper that made it.
                        let mut pcs = m.backtrace();
                        if let Some(first) = pcs.first_mut() {
                            *first = u.pc;
                        }
                        let frames = symbols.frames(&pcs);
                        let at = symbols.summary(&frames).map(|f| f.describe());
                        if !spec.quiet {
                            say!(
                                    "ferrite: warning: unsupported system call {} (number {}) at {:#x} in {}; it returned ENOSYS",
                                    u.name,
                                    u.nr,
                                    u.pc,
                                    at.unwrap_or_default()
                                );
                        }
                    }
                    *max_threads_seen = (*max_threads_seen).max(k.live_threads());
                    for (tid, handle) in std::mem::take(&mut k.created) {
                        m.emit_thread_event(emu::events::EventKind::ThreadCreate, handle, u64::from(tid));
                    }
                    if outcome == Outcome::ThreadExit {
                        m.emit_thread_event(emu::events::EventKind::ThreadExit, 0, 0);
                    }
                    // Signals the call raised for this thread (raise, abort with a handler).
                    let mut killed = None;
                    for info in k.take_pending() {
                        if let Err(e) = k.deliver(m, info, false) {
                            killed = Some(e);
                            break;
                        }
                    }
                    if let Some(e) = killed {
                        break GuestEnd::Exited(e);
                    }
                    let point = match outcome {
                        Outcome::Exit(e) => break GuestEnd::Exited(e),
                        Outcome::Continue => {
                            let others = k.runnable().len().saturating_sub(1);
                            m.set_runnable_others(others);
                            if others == 0 || !m.scheduler().wants_switch(others) {
                                continue;
                            }
                            (Point::Optional, false)
                        }
                        Outcome::Yield => (Point::Yield, false),
                        Outcome::Block => (Point::Forced, false),
                        Outcome::ThreadExit => (Point::Forced, true),
                    };
                    if let Err(d) = k.schedule(m, point.0, point.1) {
                        findings.push(deadlock_finding(symbols, &d, spec.seed));
                        break GuestEnd::Deadlock;
                    }
                }
                Exit::Hold => {
                    // A reader at a sync-point load waits for the matching store.
                    k.hold(m, None);
                    if let Err(d) = k.schedule(m, Point::Forced, false) {
                        findings.push(deadlock_finding(symbols, &d, spec.seed));
                        break GuestEnd::Deadlock;
                    }
                }
                Exit::Preempt => {
                    let mut point = Point::Optional;
                    if let Some(length) = m.take_delay() {
                        // Delay injection: the releasing thread waits while the others run.
                        k.hold(m, Some(m.icount() + length));
                        point = Point::Forced;
                    }
                    if m.take_release() && !k.release_held().is_empty() {
                        // The matching store: the readers run before its writer goes on to its flush.
                        k.hold(m, Some(m.icount() + emu::sched::WRITER_WAIT));
                        point = Point::Forced;
                    }
                    if let Err(d) = k.schedule(m, point, false) {
                        findings.push(deadlock_finding(symbols, &d, spec.seed));
                        break GuestEnd::Deadlock;
                    }
                }
                Exit::Fault(f) => {
                    // The guest's own handler gets the first chance.
                    let exit = match k.deliver(m, syscalls::SigInfo::from_fault(&f), true) {
                        Ok(()) => continue,
                        Err(e) => e,
                    };
                    let bt = symbols.frames(&m.backtrace());
                    let name = sig::name(f.signal);
                    let below_stack = m.mem.regions().any(|r| {
                        r.backing == emu::Backing::Anon { label: Some("[stack]") }
                            && f.addr < r.start
                            && r.start - f.addr <= 1 << 20
                    });
                    let what = if f.signal == sig::SIGSEGV && below_stack {
                        format!("stack overflow ({})", f.what)
                    } else if exit == ProcessExit::Signal(f.signal) {
                        f.what.clone()
                    } else {
                        format!("{} (and the signal frame could not be written)", f.what)
                    };
                    let at = symbols.location("fault", m.tid(), bt);
                    findings.push(run_finding("fault", name, format!("{name}: {what}"), spec.seed, vec![at]));
                    break GuestEnd::Exited(exit);
                }
                Exit::Limit => {
                    let bt = symbols.frames(&m.backtrace());
                    let what = format!(
                        "the guest did not finish within {} instructions (--max-instructions)",
                        spec.max_instructions
                    );
                    let at = symbols.location("running", m.tid(), bt);
                    findings.push(run_finding("hang", "instruction-budget", what, spec.seed, vec![at]));
                    break GuestEnd::Hang;
                }
            }
        };
        Some(end)
    }

    /// What the run found, once it has ended.
    pub(crate) fn finish(&mut self, end: GuestEnd) -> Result<RunOutcome, SessionError> {
        let Session { spec, m, k, symbols, trace, findings, max_threads_seen, program_hash, crash, images, .. } = self;
        let spec = &*spec;
        // The run is over: the passes report what they saw (a hang is no end of the program, so
        // what is unpersisted at that moment is not reported).
        let crash_at = crash.as_ref().is_some_and(|l| l.borrow().at_end_only);
        if crash.is_some() && (matches!(end, GuestEnd::Exited(_)) || crash_at && end == GuestEnd::Hang) {
            // The program's end is a crash point too: what it left unpersisted may be lost. With
            // `--crash-at N` the workload stops after N instructions, and that is the one point.
            if let Some(log) = &crash {
                log.borrow_mut().recording_end = true;
            }
            m.crash_point_here();
        }
        if crash_at && end == GuestEnd::Hang {
            // The budget was the crash point, not a hang of the workload.
            findings.retain(|f| f.analysis != "hang");
        }
        if let Some(log) = &crash {
            let mut log = log.borrow_mut();
            for p in &mut log.points {
                let mut pcs = vec![p.pc];
                pcs.extend(m.stacks().call_sites(p.stack));
                p.frames = symbols.own_frames(&pcs);
            }
            let sites: Vec<(u64, (u64, emu::callstack::StackId, u32))> =
                log.store_sites.iter().map(|(k, v)| (*k, *v)).collect();
            for (id, (pc, stack, tid)) in sites {
                let mut pcs = vec![pc];
                pcs.extend(m.stacks().call_sites(stack));
                log.store_frames.insert(id, (symbols.own_frames(&pcs), tid));
            }
            for (host, id) in k.pm_files() {
                if let Ok(rel) = std::path::Path::new(host).strip_prefix(&spec.pm_dir) {
                    log.file_paths.insert(*id, rel.to_path_buf());
                }
            }
            log.initial_files = k.initial_files().clone();
        }
        let mut pm_files = std::collections::BTreeMap::new();
        for (host, id) in k.pm_files() {
            if let Ok(rel) = std::path::Path::new(host).strip_prefix(&spec.pm_dir) {
                pm_files.insert(*id, rel.to_path_buf());
            }
        }
        let mut stats = std::collections::BTreeMap::new();
        if spec.delay.is_some() {
            stats.insert("scheduler.delays".to_string(), m.delays_injected());
        }
        let mut discarded = Vec::new();
        if let Some(obs) = m.take_observer() {
            let any: Box<dyn std::any::Any> = obs;
            if let Ok(mut passes) = any.downcast::<Passes>() {
                if !matches!(end, GuestEnd::Hang | GuestEnd::Deadlock) {
                    let raws = passes.finish(m.pm());
                    stats.extend(passes.stats());
                    if let Some(log) = &images {
                        log.borrow_mut().file_paths = pm_files.clone();
                    }
                    let budget = m.icount().saturating_mul(10).max(20_000_000).min(spec.max_instructions);
                    for raw in raws {
                        let validation = raw.validation.clone();
                        let analysis = raw.analysis;
                        let mut f = symbols.finding(m, raw, spec.seed);
                        if analysis != "pmrace" && validation.is_none() {
                            findings.push(f);
                            continue;
                        }
                        if analysis == "pmrace" && analyses::pmrace::known_benign(&f, &spec.settings) {
                            *stats.entry("pmrace.whitelisted_false_positives".into()).or_insert(0) += 1;
                            continue;
                        }
                        let verdict = match (&validation, &images) {
                            (Some(v), Some(log)) => crate::validate::validate(spec, &log.borrow(), v, budget),
                            _ => crate::validate::Verdict::NotRun("no crash image exposes it in this run".into()),
                        };
                        let counter = match verdict {
                            crate::validate::Verdict::FalsePositive(_) => "validated_false_positives",
                            crate::validate::Verdict::Confirmed(..) => "validated_bugs",
                            crate::validate::Verdict::NotRun(_) => "unvalidated",
                        };
                        *stats.entry(format!("{analysis}.{counter}")).or_insert(0) += 1;
                        match verdict {
                            crate::validate::Verdict::FalsePositive(why) => {
                                f.message = format!("{}; discarded: {why}", f.message);
                                discarded.push(f);
                                continue;
                            }
                            crate::validate::Verdict::Confirmed(why, at) => {
                                f.message = format!("{}; validated: {why}", f.message);
                                f.locations.extend(at);
                            }
                            crate::validate::Verdict::NotRun(why) if analysis == "pmrace" => {
                                f.message = format!("{}; not validated: {why}", f.message);
                            }
                            crate::validate::Verdict::NotRun(_) => {}
                        }
                        findings.push(f);
                    }
                }
            }
        }
        // A guest killed by a signal it sent itself (abort, assert) is a finding too, at the call
        // that raised it.
        if let GuestEnd::Exited(ProcessExit::Signal(s)) = end {
            if !findings.iter().any(|f| f.analysis == "fault") {
                let bt = symbols.frames(&m.backtrace());
                let name = sig::name(s);
                let tid = m.tid();
                let what = if s == sig::SIGABRT {
                    "the program aborted (abort or a failed assert)"
                } else {
                    "the program killed itself"
                };
                let at = symbols.location("raised", tid, bt);
                findings.push(run_finding("fault", name, format!("{name}: {what}"), spec.seed, vec![at]));
            }
        }
        let end_code: i64 = match end {
            GuestEnd::Exited(ProcessExit::Code(c)) => i64::from(c),
            GuestEnd::Exited(ProcessExit::Signal(s)) => -i64::from(s),
            GuestEnd::Hang => i64::MIN,
            GuestEnd::Deadlock => i64::MIN + 1,
        };
        trace.update(&end_code.to_le_bytes());
        trace.update(&m.pm_hash().to_le_bytes());
        trace.update(&m.icount().to_le_bytes());
        let mut findings = Finding::merge(std::mem::take(findings));
        let mut discarded = Finding::merge(discarded);
        for f in findings.iter_mut().chain(discarded.iter_mut()) {
            f.interleaving = spec.hold.clone();
        }
        let switches = m.scheduler().switches;
        let decisions = std::mem::take(&mut m.scheduler().decisions);
        Ok(RunOutcome {
            end,
            decisions,
            threads: *max_threads_seen as u32,
            switches,
            instructions: m.icount(),
            trace_hash: trace.finalize().to_hex()[..32].to_string(),
            findings,
            inputs: k.take_inputs(),
            program_hash: program_hash.clone(),
            stats,
            pm_files,
            discarded,
            pm_file_reads: k.pm_file_reads,
        })
    }
}
