//! One run of a guest: build the machine and the kernel, start the program, run it to its end,
//! and turn what happened into findings.
//!
//! The loop is the only place where the machine and the kernel meet: the machine runs until it
//! needs the outside world, the kernel answers, and every such exchange is folded into the run's
//! trace hash (instruction count, system call number, arguments, result), so two runs with the
//! same hash took the same path.
//!
//! A session knows no pass by name and nothing of crash testing. What follows a run from
//! outside its passes (crash testing's recorder) is a [`Probe`]; what happens to findings after
//! the passes have finished (post-failure validation) is a step of the [`crate::Runner`], which
//! gets the session's [`Finished`] run.

use std::collections::BTreeMap;
use std::path::Path;

use analyses::{Analysis, Finding, Location, Passes, RawFinding};
use emu::sched::Point;
use emu::{sig, Exit, Machine, MachineConfig, Reg};
use syscalls::{Deadlock, Kernel, KernelConfig, Outcome, ProcessExit};

use crate::spec::{GuestEnd, RunOutcome, RunSpec, SessionError};
use crate::symbols::Objects;
use crate::validation::ImageStore;

/// Something that follows a run from outside its passes, through the machine and the kernel
/// (crash testing's recorder): it observes the events through a pass of its own, hears of every
/// system call, may make the run's end a point of its own, and gets the run's symbols at the end.
pub trait Probe {
    /// The pass through which it observes the run's events.
    fn pass(&self) -> Box<dyn Analysis>;
    /// Whether the kernel keeps, for the probe, what a crash would keep of the files the guest
    /// changes in its working directory (`KernelConfig::track_durable`); such a run always has
    /// a private working directory.
    fn tracks_durable_files(&self) -> bool;
    /// After each system call the kernel handled.
    fn after_syscall(&mut self, k: &Kernel);
    /// The guest ended: the probe may take the end as a point of its own
    /// ([`Machine::crash_point_here`]). Returns whether a [`GuestEnd::Hang`] was the probe's own
    /// stop (an instruction budget it set), which is then no finding.
    fn at_end(&mut self, end: GuestEnd, m: &mut Machine) -> bool;
    /// The run is over: what the probe needs of its symbols and files.
    fn symbolise(&mut self, m: &Machine, k: &Kernel, symbols: &Objects, pm_dir: &Path);
    /// A copy of what the probe has gathered so far, for a [`Checkpoint`] of the run (its pass
    /// is copied with the others, [`Analysis::fork`]); `None` (the default) when it cannot be
    /// copied, and then the run is never checkpointed.
    fn save(&self) -> Option<Box<dyn std::any::Any>> {
        None
    }
    /// Brings the probe back to `saved`, its own [`Probe::save`] of this run.
    fn restore(&mut self, _saved: &dyn std::any::Any) {}
}

/// Tells the machine the running image's synchronisation functions, and the passes which of its
/// code is library code (and which copies for its caller) and which is C++'s `std::atomic` (the
/// machine too, for [`emu::events::Interest::ATOMICS`]); computed once per image and its objects
/// ([`Objects::image_code`]).
fn give_code_info(m: &mut Machine, symbols: &mut Objects, custom: &[emu::sync::CustomLock]) {
    let (info, sync) = symbols.image_code(custom);
    m.set_sync_functions(sync.iter().copied());
    let Some(obs) = m.observer_mut() else { return };
    let any: &mut dyn std::any::Any = obs;
    if let Some(passes) = any.downcast_mut::<Passes>() {
        passes.set_code(info);
        m.set_library_code(info.library.clone());
        m.set_atomic_code(info.atomic.clone());
        m.set_atomic_objects(info.atomic_objects.clone(), info.atomic_object_code.clone());
    }
}

/// The custom locks of `--config` in the run's counters: `locks.SYMBOL.calls` for each, and
/// `.acquired` and `.failed` for acquire and try-acquire functions, so that a configuration that
/// does not say what the program does shows (a try-lock whose success is misread acquires never,
/// or always). A lock no object has a symbol for is warned about (once per process).
fn lock_stats(spec: &RunSpec, symbols: &Objects, passes: &Passes, stats: &mut BTreeMap<String, u64>) {
    use emu::sync::CustomLockKind;
    if spec.custom_locks.is_empty() {
        return;
    }
    for c in &spec.custom_locks {
        stats.entry(format!("locks.{}.calls", c.symbol)).or_insert(0);
        if c.kind != CustomLockKind::Release {
            stats.entry(format!("locks.{}.acquired", c.symbol)).or_insert(0);
            stats.entry(format!("locks.{}.failed", c.symbol)).or_insert(0);
        }
    }
    for (addr, calls, acquired, failed) in passes.lock_calls() {
        let Some(name) = symbols.custom_lock_at(&spec.custom_locks, addr) else { continue };
        *stats.entry(format!("locks.{name}.calls")).or_insert(0) += calls;
        if acquired + failed > 0 {
            *stats.entry(format!("locks.{name}.acquired")).or_insert(0) += acquired;
            *stats.entry(format!("locks.{name}.failed")).or_insert(0) += failed;
        }
    }
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    for name in symbols.missing_locks(&spec.custom_locks) {
        let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
        if !spec.quiet && !warned.iter().any(|w| w == name) {
            warned.push(name.to_string());
            say!(
                "ferrite: warning: --config names lock function `{name}`, which neither the program nor a library it \
                 loaded has (symbols are matched as the symbol table spells them: C++ names mangled)"
            );
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
        group: None,
        locations,
    }
}

fn deadlock_finding(symbols: &Objects, d: &Deadlock, seed: u64) -> Finding {
    let locations =
        d.threads.iter().map(|(tid, bt)| symbols.location("blocked", *tid, symbols.frames_of(*tid, bt))).collect();
    let message = format!("deadlock: all {} live threads are blocked and none can wake the others", d.threads.len());
    run_finding("deadlock", "all-threads-blocked", message, seed, locations)
}

/// A pass's finding, symbolised, with the validation its pass asked for.
pub struct PassFinding {
    /// The finding.
    pub finding: Finding,
    /// The pass's request to validate it on a crash image it captured.
    pub request: Option<analyses::Validation>,
}

/// A run whose session is over, before the steps after it.
pub struct Finished {
    /// The outcome, with `findings` holding the run's own findings (faults, hangs,
    /// deadlocks) so far, not merged.
    pub outcome: RunOutcome,
    /// The passes' findings in the order they reported them.
    pub passes: Vec<PassFinding>,
    /// A guest that killed itself with a signal, and no fault finding yet: its finding, which
    /// comes after the passes'.
    pub raised: Option<Finding>,
    /// The crash images the passes captured, if they asked for some.
    pub images: Option<Box<dyn ImageStore>>,
}

/// Identical synchronous faults in a row ([`syscalls::Kernel::fault_repeats`]) after which a run
/// ends as a hang (`fault-loop`): a handler that returns to its fault unchanged loops forever,
/// at hundreds of microseconds of host time a fault, far from `--max-instructions`. A program
/// that means to take one fault this often, changing only memory between them, is reported too.
const FAULT_LOOP: u32 = 100_000;

/// A run under way: the machine, the kernel, and what the loop has gathered so far.
pub struct Session {
    spec: RunSpec,
    m: Machine,
    k: Kernel,
    symbols: Objects,
    trace: blake3::Hasher,
    findings: Vec<Finding>,
    reported_unsupported: usize,
    max_threads_seen: usize,
    /// Mappings when symbols were last refreshed.
    regions_seen: usize,
    program_hash: String,
    probe: Option<Box<dyn Probe>>,
    images: Option<Box<dyn ImageStore>>,
    /// The machine stopped at a system call the loop has not handled yet (where a snapshot was
    /// taken).
    syscall_pending: bool,
    /// The machine is restored from snapshots ([`emu::MachineConfig::warm`]).
    warm: bool,
    /// What a debugger attached to the run needs ([`Session::enable_debugging`]).
    debug: Option<Box<Debugging>>,
    /// Some pass watches the run (a [`Checkpoint`] holds copies of them, if they can be copied).
    has_passes: bool,
    /// A scheduling call the loop has decided on but not made yet: the point and whether the
    /// running thread exited (where [`Session::stop_before_decision`] stopped the run).
    pending_schedule: Option<(Point, bool)>,
    /// Stop before the scheduling call that may make this decision (by index).
    stop_at_decision: Option<usize>,
    /// Stop where another thread could first run ([`Session::stop_before_first_choice`]).
    stop_at_choice: bool,
    /// Stopped there: the optional point after the system call is still to be considered.
    pending_choice: bool,
}

/// A session at any stop ([`Session::checkpoint`]), as [`Session::rewind`] brings it back, any
/// number of times: the machine (every thread, memory, the scheduler, the PM device), a copy of
/// the kernel, the PM directory's files, the trace hash so far and the debugger's record.
pub struct Checkpoint {
    machine: emu::MachineSnapshot,
    kernel: Kernel,
    files: crate::dir_image::DirImage,
    trace: blake3::Hasher,
    findings: Vec<Finding>,
    symbols: crate::symbols::ObjectsMark,
    reported_unsupported: usize,
    max_threads_seen: usize,
    regions_seen: usize,
    syscall_pending: bool,
    pending_schedule: Option<(Point, bool)>,
    pending_choice: bool,
    /// Copies of the passes, when some watch the run.
    passes: Option<Passes>,
    /// An empty store like the run's for the crash images its passes capture for validation
    /// (none captured yet: a pass holding images cannot be copied), for each restored run's own.
    images: Option<Box<dyn ImageStore>>,
    /// What the probe had gathered ([`Probe::save`]).
    probe: Option<Box<dyn std::any::Any>>,
    /// The debugger's record: how many thread stretches, and the held exit.
    debug: Option<(usize, Option<Exit>)>,
}

impl Checkpoint {
    /// The retired-instruction count it was taken at.
    pub fn icount(&self) -> u64 {
        self.machine.icount()
    }

    /// Host bytes it holds (guest memory pages and PM files), roughly.
    pub fn bytes(&self) -> usize {
        self.machine.saved_bytes() + self.files.bytes()
    }

    /// Host bytes dropping it frees: its files and the guest memory pages no other checkpoint
    /// shares. Unlike [`Checkpoint::bytes`], right whichever checkpoints were dropped before.
    pub fn unshared_bytes(&self) -> usize {
        self.machine.unshared_bytes() + self.files.bytes()
    }
}

/// Why [`Session::drive_debug`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driven {
    /// The guest ended.
    End(GuestEnd),
    /// The machine stopped for the debugger.
    Machine(emu::DebugStop),
    /// The running thread faulted with this signal; it is delivered (or ends the guest) when the
    /// run goes on.
    Fault(i32),
    /// The instruction budget ran out; the run ends as a hang when it goes on.
    Budget,
    /// The thread asked for with [`Session::stop_when_scheduled`] was scheduled.
    Scheduled,
    /// Stopped at the first system call where runs on different crash images may part
    /// ([`Session::drive`] with `pause`).
    Paused,
    /// Stopped before the scheduling call that may make the decision asked for
    /// ([`Session::stop_before_decision`]), or where another thread could first run
    /// ([`Session::stop_before_first_choice`]); the run goes on from there.
    Decision,
}

/// A debugger's view of the run: which thread ran from which instruction on, and the stop the
/// debugger has been told of but the run has not acted on yet.
#[derive(Default)]
struct Debugging {
    /// `(first instruction, thread)` for each stretch of the run one thread ran, in order.
    switches: Vec<(u64, u32)>,
    /// A fault or the budget's end, reported to the debugger, handled when the run goes on.
    held_exit: Option<Exit>,
    /// Stop as soon as this thread is scheduled.
    switch_to: Option<u32>,
}

impl Debugging {
    /// Notes the thread running after a scheduling decision; true if the debugger waits for it.
    fn scheduled(&mut self, m: &Machine) -> bool {
        let tid = m.tid();
        if self.switches.last().is_none_or(|&(_, t)| t != tid) {
            self.switches.push((m.icount(), tid));
        }
        self.switch_to == Some(tid)
    }
}

/// A session paused at its snapshot point ([`Session::drive`] with `pause`), as
/// [`Session::restore`] brings it back.
pub struct Snapshot {
    machine: emu::MachineSnapshot,
    kernel: Kernel,
    trace: blake3::Hasher,
    objects: usize,
    reported_unsupported: usize,
    max_threads_seen: usize,
    regions_seen: usize,
}

impl Session {
    /// Builds the machine and the kernel and starts the program, with `extra` passes besides
    /// the selected analyses and the probe's. `warm`: the machine will be restored from
    /// snapshots ([`emu::MachineConfig::warm`]). `images` makes the store for the crash images
    /// the passes capture, when some pass asks for them ([`analyses::PassInfo::wants_images`]).
    pub fn start(
        spec: &RunSpec,
        probe: Option<Box<dyn Probe>>,
        extra: Vec<Box<dyn Analysis>>,
        warm: bool,
        images: Option<&dyn crate::validation::Validator>,
    ) -> Result<Session, SessionError> {
        let name = spec.program.display().to_string();
        let (program, argv, bytes) = crate::spec::follow_scripts(&spec.program, &spec.argv)
            .map_err(|e| SessionError::Program(name.clone(), e))?;
        let cwd = std::env::current_dir().map_err(SessionError::Cwd)?;
        let exe = std::fs::canonicalize(&program).unwrap_or_else(|_| program.clone());
        let mut m = Machine::new(MachineConfig {
            max_instructions: spec.stop_at.map_or(spec.max_instructions, |(n, _)| n.min(spec.max_instructions)),
            rand_seed: spec.seed,
            strategy: spec.strategy,
            sched_seed: spec.sched_seed(),
            pm: spec.pm,
            warm,
            ..MachineConfig::default()
        })?;
        let track_durable = probe.as_ref().is_some_and(|p| p.tracks_durable_files());
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
            private_cwd: spec.private_cwd || track_durable,
            track_durable,
            trace_syscalls: spec.trace_syscalls,
            // A run on a private working directory recovers a crash image, whose files are
            // the image: not inputs worth reading whole at every recovery.
            hash_inputs: !spec.private_cwd,
        });
        m.set_main_tid(k.current);
        if let Some(l) = &spec.listen {
            k.set_listen(l)?;
        }
        m.scheduler().set_prefix(spec.schedule.clone());
        if let Some(h) = &spec.hold {
            k.privileged = h.privileged;
            m.set_hold(Some(h.clone()));
        }
        if let Some(d) = spec.delay {
            m.set_delays(d, spec.sched_seed());
        }
        if spec.preempt_all {
            m.preempt_all_accesses();
        }
        let mut passes = analyses::build(&spec.analyses).map_err(SessionError::Analyses)?;
        if let Some(p) = &probe {
            passes.push(p.pass());
        }
        passes.extend(extra);
        let mut passes = Passes::new(passes);
        let has_passes = !passes.is_empty();
        passes.configure(&spec.settings);
        // Crash images for post-failure validation, captured by the passes that want them.
        let images = match images {
            Some(v) if passes.wants_images() => Some(v.images(&spec.pm_dir)),
            _ => None,
        };
        if let Some(store) = &images {
            passes.set_image_sink(store.sink());
        }
        m.set_observer(Box::new(passes));
        let argv: Vec<Vec<u8>> = argv.into_iter().map(String::into_bytes).collect();
        let envp: Vec<Vec<u8>> = spec.env.iter().map(|a| a.clone().into_bytes()).collect();
        // The first thread's name is the file name the program was given by (Linux's
        // `kbasename(bprm->filename)`: `sh` for `/bin/sh`, though it is dash's link).
        k.name_first_thread(&spec.program.to_string_lossy());
        let started =
            syscalls::exec(&mut m, &mut k, &bytes, &argv, &envp).map_err(|e| SessionError::Exec(name.clone(), e))?;
        let mut symbols = Objects::new(&spec.debug_dirs);
        let im = &started.image;
        let hash = blake3::hash(&bytes);
        symbols.add_hashed(&exe.display().to_string(), &bytes, hash, im.load_bias, im.lowest, im.highest);
        // The interpreter of a dynamic executable.
        symbols.refresh(&m);
        give_code_info(&mut m, &mut symbols, &spec.custom_locks);
        let regions_seen = m.mem.regions().count();
        let program_hash = hash.to_hex().to_string();

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
            probe,
            images,
            syscall_pending: false,
            warm,
            debug: None,
            has_passes,
            pending_schedule: None,
            stop_at_decision: None,
            stop_at_choice: false,
            pending_choice: false,
        })
    }

    /// Runs the guest to its end, or with `pause` until the first system call where runs on
    /// different crash images may part ([`Kernel::snapshot_boundary`]): then `None`, with that
    /// call not handled yet.
    pub fn drive(&mut self, pause: bool) -> Option<GuestEnd> {
        loop {
            match self.drive_inner(pause) {
                Driven::End(end) => return Some(end),
                Driven::Paused => return None,
                // A debugger's stop: the run goes on (a debugger drives with `drive_debug`).
                Driven::Machine(_) | Driven::Fault(_) | Driven::Budget | Driven::Scheduled | Driven::Decision => {}
            }
        }
    }

    /// Runs the guest until it ends or stops for the debugger ([`Session::enable_debugging`]).
    pub fn drive_debug(&mut self) -> Driven {
        self.drive_inner(false)
    }

    /// From now on the run can stop for a debugger: breakpoints, watchpoints and stops at an
    /// instruction count ([`Session::machine_mut`]), faults and the budget's end before they
    /// are acted on, and a thread being scheduled. None of it changes the run.
    pub fn enable_debugging(&mut self) {
        self.m.enable_debugging();
        let d = Debugging { switches: vec![(self.m.icount(), self.m.tid())], ..Debugging::default() };
        self.debug = Some(Box::new(d));
    }

    /// Stop ([`Driven::Decision`], from [`Session::drive_debug`]) before the first scheduling
    /// call made once `n` decisions have been made (`None`: no more), so that a snapshot taken
    /// there is one from which any schedule that agrees with this run on its first `n` decisions
    /// goes on (an exploration's branches).
    pub fn stop_before_decision(&mut self, n: Option<usize>) {
        self.stop_at_decision = n;
    }

    /// Stop ([`Driven::Decision`], from [`Session::drive_debug`]) at the first optional
    /// scheduling point after a system call at which another thread could run (the first
    /// `clone` of a thread, in practice), before the scheduler is asked anything there. Up to
    /// it, runs that differ only in their schedule seed are the same run: a snapshot taken
    /// there serves them all ([`Session::reseed`]).
    pub fn stop_before_first_choice(&mut self) {
        self.stop_at_choice = true;
    }

    /// Seeds the scheduler with `seed` (and the findings to come with it) as a run whose
    /// schedule seed is `seed` would have it here; false, with nothing changed, if the run's
    /// schedule already depended on its seed ([`Machine::reseed_schedule`]).
    pub fn reseed(&mut self, seed: u64) -> bool {
        if !self.m.reseed_schedule(seed) {
            return false;
        }
        self.spec.schedule_seed = Some(seed);
        for f in &mut self.findings {
            f.seed = seed;
        }
        true
    }

    /// The decisions to follow from now on, by index from the run's first (`--strategy
    /// exhaustive`; those already made are not made again).
    pub fn set_schedule(&mut self, prefix: Vec<u32>) {
        self.m.scheduler().set_prefix(prefix.clone());
        self.spec.schedule = prefix;
    }

    /// From now on the guest's output is discarded and the run says nothing (an exploration's
    /// later runs, restored from a snapshot of an earlier one).
    pub fn quiet_from_now(&mut self) {
        self.spec.quiet = true;
        self.spec.discard_output = true;
        self.k.cfg.discard_output = true;
    }

    /// Stop when thread `tid` is scheduled (`None`: no more).
    pub fn stop_when_scheduled(&mut self, tid: Option<u32>) {
        if let Some(d) = self.debug.as_deref_mut() {
            d.switch_to = tid;
        }
    }

    /// The last instruction before `before` that thread `tid` ran, by retired count.
    pub fn last_ran_by(&self, tid: u32, before: u64) -> Option<u64> {
        let s = &self.debug.as_deref()?.switches;
        let mut end = before;
        for &(from, t) in s.iter().rev() {
            if from >= end {
                continue;
            }
            if t == tid {
                return Some(end - 1);
            }
            end = from;
        }
        None
    }

    /// The machine.
    pub fn machine(&self) -> &Machine {
        &self.m
    }

    /// The machine, for a debugger's breakpoints, registers and memory.
    pub fn machine_mut(&mut self) -> &mut Machine {
        &mut self.m
    }

    /// The kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.k
    }

    /// The program's and its libraries' symbols.
    pub fn symbols(&self) -> &Objects {
        &self.symbols
    }

    fn drive_inner(&mut self, pause: bool) -> Driven {
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
            probe,
            debug,
            pending_schedule,
            stop_at_decision,
            stop_at_choice,
            pending_choice,
            ..
        } = self;
        let spec = &*spec;
        let end = loop {
            if std::mem::take(pending_choice) {
                let others = m.runnable_others();
                if m.scheduler().wants_switch(others) {
                    *pending_schedule = Some((Point::Optional, false));
                }
                continue;
            }
            if let Some((point, exited)) = pending_schedule.take() {
                if stop_at_decision.is_some_and(|n| m.scheduler().decisions.len() >= n) {
                    *stop_at_decision = None;
                    *pending_schedule = Some((point, exited));
                    return Driven::Decision;
                }
                if let Err(d) = k.schedule(m, point, exited) {
                    findings.push(deadlock_finding(symbols, &d, spec.sched_seed()));
                    break GuestEnd::Deadlock;
                }
                // A signal sent to the thread now running, perhaps while it was blocked.
                if let Err(e) = k.deliver_pending(m) {
                    match k.signal_death(m, e) {
                        Some(e) => break GuestEnd::Exited(e),
                        None => {
                            *pending_schedule = Some((Point::Forced, true));
                            continue;
                        }
                    }
                }
                if !k.current_runnable() {
                    // A stop signal stopped its process: another thread runs.
                    *pending_schedule = Some((Point::Forced, false));
                    continue;
                }
                // Another process's program: its code information for the passes.
                if symbols.has_images() && symbols.switch_to(m.tid()) {
                    give_code_info(m, symbols, &spec.custom_locks);
                }
                if debug.as_deref_mut().is_some_and(|d| d.scheduled(m)) {
                    return Driven::Scheduled;
                }
                continue;
            }
            let held = debug.as_deref_mut().and_then(|d| d.held_exit.take());
            let exit = match held {
                Some(e) => e,
                None if std::mem::take(syscall_pending) => Exit::Syscall,
                None => {
                    let e = m.run();
                    match (&e, debug.as_deref_mut()) {
                        (Exit::Fault(f), Some(d)) => {
                            d.held_exit = Some(e.clone());
                            return Driven::Fault(f.signal);
                        }
                        (Exit::Limit, Some(d)) => {
                            d.held_exit = Some(Exit::Limit);
                            return Driven::Budget;
                        }
                        _ => e,
                    }
                }
            };
            match exit {
                Exit::Syscall => {
                    // Linux reads the number as an `int` (`do_syscall_64(regs, int nr)`): the
                    // upper half of RAX is ignored, so 2^32 + 39 is getpid and -1 no call.
                    m.set_reg(Reg::RAX, m.reg(Reg::RAX) & 0xffff_ffff);
                    if pause && k.snapshot_boundary(m) {
                        *syscall_pending = true;
                        return Driven::Paused;
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
                    if let Some(p) = probe {
                        p.after_syscall(k);
                    }
                    // The dynamic linker mapped a library: learn its symbols and sync functions.
                    let mapped = nr == libc::SYS_mmap as u64 || nr == libc::SYS_mprotect as u64;
                    if mapped && m.mem.regions().count() != *regions_seen {
                        *regions_seen = m.mem.regions().count();
                        if symbols.refresh(m) {
                            give_code_info(m, symbols, &spec.custom_locks);
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
                                "ferrite: warning: unsupported system call {} (number {}) at {:#x} in {}; it returned {}",
                                u.name,
                                u.nr,
                                u.pc,
                                at.unwrap_or_default(),
                                u.returned
                            );
                        }
                    }
                    *max_threads_seen = (*max_threads_seen).max(k.live_threads());
                    for ex in k.execs.drain(..) {
                        // The new program and its interpreter; its libraries come as they are mapped.
                        symbols.exec(ex.tid, &ex.path, &ex.bytes, ex.load_bias, ex.lowest, ex.highest);
                        symbols.refresh(m);
                        *regions_seen = m.mem.regions().count();
                        give_code_info(m, symbols, &spec.custom_locks);
                    }
                    for (tid, handle, forked) in std::mem::take(&mut k.created) {
                        symbols.thread_created(tid);
                        if forked {
                            m.emit_fork_event(handle, tid);
                        } else {
                            m.emit_thread_event(emu::events::EventKind::ThreadCreate, handle, u64::from(tid));
                        }
                    }
                    // Drained, not taken: the list keeps its capacity (no allocation per wake).
                    for (tid, addr) in k.woken.drain(..) {
                        m.emit_futex_wake(tid, addr);
                    }
                    for (key, post) in k.handoffs.drain(..) {
                        let kind =
                            if post { emu::events::EventKind::FutexWake } else { emu::events::EventKind::FutexWoken };
                        m.emit_thread_event(kind, key, 0);
                    }
                    for t in k.reaped.drain(..) {
                        m.emit_thread_event(emu::events::EventKind::ProcessReaped, 0, u64::from(t));
                    }
                    if outcome == Outcome::ThreadExit {
                        m.emit_thread_event(emu::events::EventKind::ThreadExit, 0, 0);
                    }
                    // Signals the call raised (raise, abort with a handler, SIGPIPE), another
                    // thread or process sent, or the call unblocked.
                    let mut killed = None;
                    if matches!(outcome, Outcome::Continue | Outcome::Yield) {
                        killed = k.deliver_pending(m).err();
                    }
                    if let Some(e) = killed {
                        match k.signal_death(m, e) {
                            Some(e) => break GuestEnd::Exited(e),
                            None => {
                                *pending_schedule = Some((Point::Forced, true));
                                continue;
                            }
                        }
                    }
                    if matches!(outcome, Outcome::Continue | Outcome::Yield) && !k.current_runnable() {
                        // The call, or a signal it let through, stopped the caller's process.
                        *pending_schedule = Some((Point::Forced, false));
                        continue;
                    }
                    let point = match outcome {
                        Outcome::Exit(e) => break GuestEnd::Exited(e),
                        Outcome::Continue => {
                            let others = k.runnable_count().saturating_sub(1);
                            m.set_runnable_others(others);
                            if others > 0 && std::mem::take(stop_at_choice) {
                                *pending_choice = true;
                                return Driven::Decision;
                            }
                            if others == 0 || !m.scheduler().wants_switch(others) {
                                continue;
                            }
                            (Point::Optional, false)
                        }
                        Outcome::Yield => (Point::Yield, false),
                        Outcome::Block => (Point::Forced, false),
                        Outcome::ThreadExit => (Point::Forced, true),
                    };
                    *pending_schedule = Some(point);
                }
                Exit::Hold => {
                    // A reader at a sync-point load waits for the matching store.
                    k.hold(m, None);
                    *pending_schedule = Some((Point::Forced, false));
                }
                Exit::Timer => {
                    // A timer's instant passed: its signal is pending now, for this thread or
                    // another (woken if it waits in a call the signal interrupts).
                    k.fire_timers(m);
                    if k.wait_deadline_passed(m) {
                        // Or a sleeper is due while this thread computes alone: it wakes at
                        // this scheduling point.
                        *pending_schedule = Some((Point::Optional, false));
                        continue;
                    }
                    if let Err(e) = k.deliver_pending(m) {
                        match k.signal_death(m, e) {
                            Some(e) => break GuestEnd::Exited(e),
                            None => {
                                *pending_schedule = Some((Point::Forced, true));
                                continue;
                            }
                        }
                    }
                    if !k.current_runnable() {
                        *pending_schedule = Some((Point::Forced, false));
                        continue;
                    }
                    m.set_runnable_others(k.runnable_count().saturating_sub(1));
                }
                Exit::Quantum | Exit::Yield => {
                    let point = if exit == Exit::Yield { Point::Yield } else { Point::Quantum };
                    *pending_schedule = Some((point, false));
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
                    *pending_schedule = Some((point, false));
                }
                Exit::Fault(f) => {
                    if k.fault_repeats(m, &f) > FAULT_LOOP {
                        let bt = symbols.frames(&m.backtrace());
                        let what = format!(
                            "the guest took {} ({}) at the same instruction with the same registers \
                             {FAULT_LOOP} times in a row, with no system call in between: its handler \
                             returns to the fault without removing its cause, which repeats forever",
                            sig::name(f.signal),
                            f.what
                        );
                        let at = symbols.location("running", m.tid(), bt);
                        findings.push(run_finding("hang", "fault-loop", what, spec.sched_seed(), vec![at]));
                        break GuestEnd::Hang;
                    }
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
                    if let Some(bytes) = k.memory_refused().filter(|_| !spec.quiet) {
                        driver_say_refused(name, bytes, spec.max_memory);
                    }
                    let at = symbols.location("fault", m.tid(), bt);
                    findings.push(run_finding("fault", name, format!("{name}: {what}"), spec.sched_seed(), vec![at]));
                    break GuestEnd::Exited(exit);
                }
                Exit::Debug(stop) => return Driven::Machine(stop),
                Exit::Interrupted => break GuestEnd::Interrupted(emu::interrupt::requested().unwrap_or(sig::SIGINT)),
                Exit::Limit => {
                    if let Some((_, s)) = spec.stop_at.filter(|&(n, _)| n == m.icount()) {
                        // The replay of an interrupted run reached the instruction it stopped at.
                        break GuestEnd::Interrupted(s);
                    }
                    let bt = symbols.frames(&m.backtrace());
                    // Says how to stop a spinning guest sooner: at the default budget a tight loop
                    // takes minutes to get here.
                    let what = format!(
                        "the guest did not finish within {} instructions (--max-instructions; a \
                         lower budget, or an interrupt with Ctrl-C or `timeout -s INT`, stops a \
                         guest sooner, with its report)",
                        spec.max_instructions
                    );
                    let at = symbols.location("running", m.tid(), bt);
                    findings.push(run_finding("hang", "instruction-budget", what, spec.sched_seed(), vec![at]));
                    break GuestEnd::Hang;
                }
            }
        };
        Driven::End(end)
    }

    /// Runs the guest to its end ([`Session::drive`] without pausing).
    pub fn drive_to_end(&mut self) -> GuestEnd {
        loop {
            if let Some(end) = self.drive(false) {
                return end;
            }
        }
    }

    /// What the run found, once it has ended: the passes report what they saw (when the guest
    /// hung or deadlocked, which is no end of the program, only the passes whose findings stand
    /// without one: [`analyses::Analysis::reports_when_stopped`]), symbolised, in order.
    pub fn finish(&mut self, end: GuestEnd) -> Finished {
        let Session { spec, m, k, symbols, trace, findings, max_threads_seen, program_hash, probe, images, .. } = self;
        let spec = &*spec;
        if let Some(p) = probe {
            if p.at_end(end, m) && end == GuestEnd::Hang {
                // The budget was the probe's stop, not a hang of the workload.
                findings.retain(|f| f.analysis != "hang");
            }
            p.symbolise(m, k, symbols, &spec.pm_dir);
        }
        let mut pm_files = BTreeMap::new();
        for (host, id) in k.pm_files() {
            if let Ok(rel) = Path::new(host).strip_prefix(&spec.pm_dir) {
                pm_files.insert(*id, rel.to_path_buf());
            }
        }
        let mut stats = BTreeMap::new();
        if spec.delay.is_some() {
            stats.insert("scheduler.delays".to_string(), m.delays_injected());
        }
        let mut passes = Vec::new();
        if let Some(obs) = m.take_observer() {
            let any: Box<dyn std::any::Any> = obs;
            if let Ok(mut p) = any.downcast::<Passes>() {
                lock_stats(spec, symbols, &p, &mut stats);
                let stopped = matches!(end, GuestEnd::Hang | GuestEnd::Deadlock | GuestEnd::Interrupted(_));
                let raws: Vec<RawFinding> = if stopped { p.finish_stopped(m.pm()) } else { p.finish(m.pm()) };
                if !stopped {
                    stats.extend(p.stats());
                }
                for mut raw in raws {
                    let request = raw.validation.take();
                    for finding in symbols.findings(m, raw, spec.sched_seed()) {
                        passes.push(PassFinding { finding, request: request.clone() });
                    }
                }
            }
        }
        if self.warm {
            // The report took the (empty) passes; put an empty set back, which installs no
            // hooks and needs no code information, for the next restored run.
            m.set_observer(Box::new(Passes::new(Vec::new())));
        }
        // A guest that gave up with a failure status after `--max-memory` refused it a mapping
        // most likely gave up because of the refusal ("Cannot allocate memory"): say which limit
        // it met, as for a guest that died of a fault after one.
        if let (GuestEnd::Exited(ProcessExit::Code(c)), Some(bytes)) = (end, k.memory_refused()) {
            if c != 0 && !spec.quiet {
                driver_say_refused_exit(c, bytes, spec.max_memory);
            }
        }
        // A guest killed by a signal it sent itself (abort, assert) is a finding too, at the call
        // that raised it; not one `--listen` sent it for an interrupt of ferrite.
        let mut raised = None;
        if let GuestEnd::Exited(ProcessExit::Signal(s)) = end {
            if !findings.iter().any(|f| f.analysis == "fault") && !k.host_sent_signal(s) {
                let bt = symbols.frames(&m.backtrace());
                let name = sig::name(s);
                let tid = m.tid();
                // The run's end is the first process's: here another process killed it (a
                // child's `kill(getppid(), ...)`, `kill(-1, ...)`), from the call shown.
                let what = if k.pid() != syscalls::process::PID {
                    "the program was killed by another of its processes"
                } else if s == sig::SIGABRT {
                    "the program aborted (abort or a failed assert)"
                } else {
                    "the program killed itself"
                };
                let at = symbols.location("raised", tid, bt);
                raised = Some(run_finding("fault", name, format!("{name}: {what}"), spec.sched_seed(), vec![at]));
            }
        }
        let end_code: i64 = match end {
            GuestEnd::Exited(ProcessExit::Code(c)) => i64::from(c),
            GuestEnd::Exited(ProcessExit::Signal(s)) => -i64::from(s),
            GuestEnd::Hang => i64::MIN,
            GuestEnd::Deadlock => i64::MIN + 1,
            GuestEnd::Interrupted(s) => i64::MIN + 2 + i64::from(s),
        };
        let mut trace = trace.clone();
        trace.update(&end_code.to_le_bytes());
        trace.update(&m.pm_hash().to_le_bytes());
        trace.update(&m.icount().to_le_bytes());
        let switches = m.scheduler().switches;
        let decisions = std::mem::take(&mut m.scheduler().decisions);
        Finished {
            outcome: RunOutcome {
                end,
                decisions,
                threads: *max_threads_seen as u32,
                switches,
                instructions: m.icount(),
                trace_hash: trace.finalize().to_hex()[..32].to_string(),
                findings: std::mem::take(findings),
                inputs: k.take_inputs(),
                program_hash: program_hash.clone(),
                stats,
                pm_files,
                discarded: Vec::new(),
                pm_file_reads: k.pm_file_reads,
                translation: m.translation_stats(),
                branching: None,
                listen: k.take_listen(),
            },
            passes,
            raised,
            images: images.take(),
        }
    }

    /// The snapshot of a session paused at its snapshot point, unless the machine or the
    /// kernel cannot be captured there (more than one thread, an open host file or pipe) or a
    /// finding was already made.
    pub fn snapshot(&self) -> Option<Snapshot> {
        if !self.findings.is_empty() {
            return None;
        }
        let (machine, kernel) = self.m.snapshot().zip(self.k.fork_copy())?;
        Some(Snapshot {
            machine,
            kernel,
            trace: self.trace.clone(),
            objects: self.symbols.count(),
            reported_unsupported: self.reported_unsupported,
            max_threads_seen: self.max_threads_seen,
            regions_seen: self.regions_seen,
        })
    }

    /// Makes this run take PMRace's targeted interleaving `hold` from now on (a run restored
    /// from a snapshot taken before any of its loads could have been held).
    pub fn set_hold(&mut self, hold: Option<emu::sched::Hold>) {
        if let Some(h) = &hold {
            self.k.privileged = h.privileged;
        }
        self.m.set_hold(hold.clone());
        self.spec.hold = hold;
    }

    /// Brings a warm session back to `snap`, paused at its pending system call, with the
    /// kernel `k` ([`Snapshot::kernel_for`]) and `extra` passes (which see the run from there
    /// on).
    pub fn restore(&mut self, snap: &Snapshot, k: Kernel, extra: Vec<Box<dyn Analysis>>) -> Result<(), SessionError> {
        self.m.restore(&snap.machine)?;
        self.spec.pm_dir = k.cfg.pm_dir.clone();
        self.k = k;
        self.trace = snap.trace.clone();
        self.findings.clear();
        self.symbols.keep_first(snap.objects);
        self.reported_unsupported = snap.reported_unsupported;
        self.max_threads_seen = snap.max_threads_seen;
        self.regions_seen = snap.regions_seen;
        self.syscall_pending = true;
        if !extra.is_empty() {
            let mut passes = Passes::new(extra);
            passes.configure(&self.spec.settings);
            self.m.set_observer(Box::new(passes));
        }
        Ok(())
    }
}

impl Session {
    /// The whole run as it is now, at any stop (a debugger's, at any instruction), or `None`
    /// when it cannot be held: a probe that cannot be copied ([`Probe::save`]) follows the run, a
    /// pass cannot be copied ([`analyses::Analysis::fork`]; pmrace once it captured a crash image
    /// for validation) or watches all memory while the run is still single-threaded
    /// ([`Machine::memory_hooks_final`]), the machine cannot be (a forked guest), or a host file
    /// cannot be opened again or the PM directory holds something but files and directories.
    pub fn checkpoint(&self) -> Option<Checkpoint> {
        self.checkpoint_or_why().ok()
    }

    /// [`Session::checkpoint`], or why the run cannot be held here (for `--host-stats` and
    /// verbose output: why an exploration runs from the start).
    pub fn checkpoint_or_why(&self) -> Result<Checkpoint, &'static str> {
        let probe = match &self.probe {
            Some(p) => Some(p.save().ok_or("the run's probe cannot be copied")?),
            None => None,
        };
        let passes = match self.m.observer() {
            Some(obs) if self.has_passes => {
                let any: &dyn std::any::Any = obs;
                let passes = any.downcast_ref::<Passes>().ok_or("an observer that is not a pass watches the run")?;
                if !self.m.memory_hooks_final() {
                    return Err("a pass watches all memory before the second thread");
                }
                Some(passes.fork().ok_or("a pass cannot be copied")?)
            }
            _ => None,
        };
        let kernel = self.k.checkpoint_copy_or_why()?;
        let machine = self.m.checkpoint_spaces(&self.k.address_spaces())?;
        let files = crate::dir_image::DirImage::capture(&self.spec.pm_dir)
            .map_err(|_| "the PM directory holds something but files and directories")?;
        Ok(Checkpoint {
            machine,
            kernel,
            files,
            trace: self.trace.clone(),
            findings: self.findings.clone(),
            symbols: self.symbols.mark(),
            reported_unsupported: self.reported_unsupported,
            max_threads_seen: self.max_threads_seen,
            regions_seen: self.regions_seen,
            syscall_pending: self.syscall_pending,
            pending_schedule: self.pending_schedule,
            pending_choice: self.pending_choice,
            passes,
            images: self.images.as_ref().map(|s| s.fresh()),
            probe,
            debug: self.debug.as_deref().map(|d| (d.switches.len(), d.held_exit.clone())),
        })
    }

    /// Brings the session back to `c`, taken of this session earlier: the run goes on from
    /// there exactly as it went on the first time (same instructions, schedule and trace hash).
    pub fn rewind(&mut self, c: &Checkpoint) -> Result<(), SessionError> {
        // The files first: the machine writes the pages of shared mappings back into them,
        // which must be as long as they were.
        c.files.restore(&self.spec.pm_dir)?;
        let mut k = c
            .kernel
            .checkpoint_copy()
            .ok_or_else(|| SessionError::Io(std::io::Error::other("a file of the run cannot be opened again")))?;
        // The processes' address spaces are the machine's to restore: those of the processes
        // now go in, those of the snapshot's come out, for the copy's process table.
        let live = self.k.take_address_spaces();
        let spaces = self.m.restore_spaces(&c.machine, live)?;
        if !k.give_address_spaces(spaces) {
            return Err(SessionError::Io(std::io::Error::other("the snapshot's processes and address spaces differ")));
        }
        self.k = k;
        self.trace = c.trace.clone();
        self.findings = c.findings.clone();
        self.symbols.rewind(&c.symbols);
        self.reported_unsupported = c.reported_unsupported;
        self.max_threads_seen = c.max_threads_seen;
        self.regions_seen = c.regions_seen;
        self.syscall_pending = c.syscall_pending;
        self.pending_schedule = c.pending_schedule;
        self.pending_choice = c.pending_choice;
        self.stop_at_decision = None;
        self.stop_at_choice = false;
        if let Some(p) = &c.passes {
            let mut p =
                p.fork().ok_or_else(|| SessionError::Io(std::io::Error::other("a pass cannot be copied again")))?;
            // The run from here captures its crash images into a store of its own.
            self.images = c.images.as_ref().map(|s| s.fresh());
            if let Some(store) = &self.images {
                p.set_image_sink(store.sink());
            }
            self.m.set_observer(Box::new(p));
        }
        if let (Some(p), Some(saved)) = (self.probe.as_deref_mut(), c.probe.as_deref()) {
            p.restore(saved);
        }
        if let (Some(d), Some((n, held))) = (self.debug.as_deref_mut(), &c.debug) {
            d.switches.truncate(*n);
            d.held_exit = held.clone();
        }
        Ok(())
    }
}

impl Snapshot {
    /// A copy of the snapshot's kernel whose PM directory is `pm_dir`, for
    /// [`Session::restore`]; `None` when it cannot be copied again (run fresh instead).
    pub fn kernel_for(&self, pm_dir: &Path) -> Option<Kernel> {
        let mut k = self.kernel.fork_copy()?;
        k.cfg.pm_dir = pm_dir.to_path_buf();
        Some(k)
    }
}

/// The guest exited with failure status `code` after `--max-memory` refused it memory.
fn driver_say_refused_exit(code: i32, bytes: u64, max: u64) {
    crate::say!(
        "ferrite: warning: the guest exited with status {code} after a mapping of {bytes} bytes failed with ENOMEM: \
         it would have taken the guest past --max-memory ({max} bytes); raise --max-memory if the program needs \
         that much"
    );
}

/// The guest died of a fault after `--max-memory` refused it memory: most likely of the
/// refusal (a pointer from a failed mmap, unchecked), which the fault alone does not say.
fn driver_say_refused(signal: &str, bytes: u64, max: u64) {
    crate::say!(
        "ferrite: warning: the guest died of {signal} after a mapping of {bytes} bytes failed with ENOMEM: it would \
         have taken the guest past --max-memory ({max} bytes); raise --max-memory if the program needs that much"
    );
}
