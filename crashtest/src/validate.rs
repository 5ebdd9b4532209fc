//! Post-failure validation (Chen et al., "Efficiently Detecting Concurrency Bugs in Persistent
//! Memory Programs", ASPLOS 2022, §4.4): run the program's recovery on a crash image a pass
//! captured and see whether recovery repairs what the finding is about. This is the
//! [`driver::Validator`] the binary gives its runner; the driver decides which findings go
//! through it (those of passes that want images) and what a verdict does to them.
//!
//! The image is a true crash state: the pass captured the device when its finding became
//! observable (a side effect durable while its source was not; a lock durable while held), and
//! the image loses every line that was not durable then. The recovery command (`--recover`) runs
//! in a fresh deterministic emulation on a private copy of it, with one observer that watches the
//! finding's PM bytes by file and offset (device addresses differ between runs):
//!
//! - inconsistent bytes: a false positive if recovery overwrites every byte before it reads any
//!   of them (PMRace's rule, with the byte count its released validator meant to make); a read of
//!   a byte not yet overwritten confirms the finding, at that load;
//! - a synchronisation variable: a false positive if it holds its initial value when recovery
//!   ends; a recovery that hangs or deadlocks on it confirms the finding.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;

use analyses::{Analysis, ImageSink, Location, RawFinding, RawLocation, Validation};
use driver::{GuestEnd, ImageStore, RunOutcome, RunSpec, SessionError, Verdict};
use emu::events::{Event, EventKind, Interest};
use emu::pm::{PmDevice, FILE_SHIFT};

use crate::files::{image_files, materialise};
use crate::record::CrashLog;

/// Crash testing's validator: the images a run's passes capture are kept as crash points
/// ([`CrashLog`]) and each request is validated by running the recovery on one.
pub struct Validate;

impl driver::Validator for Validate {
    fn images(&self, pm_dir: &std::path::Path) -> Box<dyn ImageStore> {
        Box::new(Images(CrashLog::new(pm_dir, false), pm_dir.to_path_buf()))
    }
}

/// The crash images of one run, on its PM directory.
struct Images(Rc<RefCell<CrashLog>>, PathBuf);

impl ImageStore for Images {
    fn sink(&self) -> Rc<RefCell<dyn ImageSink>> {
        self.0.clone()
    }

    fn fresh(&self) -> Box<dyn ImageStore> {
        Box::new(Images(CrashLog::new(&self.1, false), self.1.clone()))
    }

    fn validate(&self, spec: &RunSpec, run: &RunOutcome, request: &Validation) -> Verdict {
        let mut log = self.0.borrow_mut();
        log.file_paths = run.pm_files.clone();
        validate(spec, &log, request, crate::recovery_budget(run.instructions, spec.max_instructions))
    }
}

/// Per watched byte of one PM file (of the recovery run): whether recovery wrote it, and the
/// instruction count of its first read before any write.
#[derive(Default)]
struct Byte {
    written: bool,
    read: Option<u64>,
}

/// The observer inside a recovery run: recovery's loads and stores of chosen PM bytes. Device
/// file ids differ between runs, so bytes are watched by offset in every file and sorted out by
/// path after the run ([`watched_run`]).
struct Watcher {
    /// Watched offsets `(offset, length)`, in any file.
    offsets: Vec<(u64, u64)>,
    state: Rc<RefCell<BTreeMap<(u32, u64), Byte>>>,
    /// The load behind each first read, by (file id, offset).
    reads: Vec<(u32, u64, RawLocation)>,
}

impl Watcher {
    fn watches(&self, b: u64) -> bool {
        self.offsets.iter().any(|&(o, n)| b >= o && b < o + n)
    }
}

impl Analysis for Watcher {
    fn name(&self) -> &'static str {
        "watch"
    }

    fn interest(&self) -> Interest {
        Interest::LOADS.union(Interest::STORES)
    }

    fn on_event(&mut self, ev: &Event, _device: &PmDevice) {
        let Some((load, id, off, end)) = pm_access(ev) else { return };
        if !self.offsets.iter().any(|&(o, n)| o < end && off < o + n) {
            return;
        }
        let mut state = self.state.borrow_mut();
        for b in off..end {
            if !self.watches(b) {
                continue;
            }
            let byte = state.entry((id, b)).or_default();
            if load && !byte.written && byte.read.is_none() {
                byte.read = Some(ev.icount);
                if self.reads.len() < 4096 {
                    let at = RawLocation { role: "recovery read", pc: ev.pc, stack: ev.stack, tid: ev.tid };
                    self.reads.push((id, b, at));
                }
            }
            if !load {
                byte.written = true;
            }
        }
    }

    fn finish(&mut self, _device: &PmDevice) -> Vec<RawFinding> {
        // As findings of the recovery run, so that its session symbolises the loads; the message
        // names the byte.
        self.reads
            .drain(..)
            .map(|(id, off, l)| RawFinding {
                analysis: "watch",
                kind: "read",
                message: format!("{id} {off}"),
                occurrences: 1,
                locations: vec![l],
                validation: None,
                group: None,
            })
            .collect()
    }
}

/// A PM load or store as (is a load, device file id, first offset, end offset in the file).
pub fn pm_access(ev: &Event) -> Option<(bool, u32, u64, u64)> {
    if ev.dev == 0 || ev.size == 0 {
        return None;
    }
    let load = match ev.kind {
        EventKind::Load => true,
        EventKind::Store | EventKind::NtStore | EventKind::RmwStore => false,
        _ => return None,
    };
    let off = ev.dev & ((1 << FILE_SHIFT) - 1);
    Some((load, (ev.dev >> FILE_SHIFT) as u32, off, off + u64::from(ev.size)))
}

/// What a recovery did with the watched bytes.
pub struct Watched {
    /// Watched bytes (in files the recovery opened) and how many of them it wrote.
    pub watched: usize,
    /// How many of the watched bytes recovery wrote.
    pub written: usize,
    /// The earliest load of a watched byte the recovery had not written: file, offset, load.
    pub first_read: Option<(PathBuf, u64, Location)>,
}

/// Runs `spec` (a recovery) watching `bytes`: `(file relative to the PM directory, offset,
/// length)`; from a snapshot ([`driver::warm`]) unless `fresh`.
pub fn watched_run(
    spec: &RunSpec,
    bytes: &[(PathBuf, u64, u64)],
    fresh: bool,
) -> Result<(RunOutcome, Watched), SessionError> {
    let state = Rc::new(RefCell::new(BTreeMap::new()));
    let offsets: Vec<(u64, u64)> = bytes.iter().map(|(_, o, n)| (*o, *n)).collect();
    let watcher = Watcher { offsets, state: state.clone(), reads: Vec::new() };
    let extra: Vec<Box<dyn Analysis>> = vec![Box::new(watcher)];
    let mut out = if fresh {
        driver::Runner::default().run_with(spec, None, extra)?
    } else {
        driver::warm::run_with(spec, extra)?
    };
    let ids: BTreeMap<&PathBuf, u32> = out.pm_files.iter().map(|(id, p)| (p, *id)).collect();
    let mut w = Watched { watched: 0, written: 0, first_read: None };
    let mut earliest: Option<(u64, u32, u64)> = None;
    {
        let state = state.borrow();
        for (path, off, len) in bytes {
            let Some(&id) = ids.get(path) else { continue };
            for b in *off..off + len {
                w.watched += 1;
                let Some(byte) = state.get(&(id, b)) else { continue };
                if byte.written {
                    w.written += 1;
                }
                if let Some(at) = byte.read {
                    if earliest.is_none_or(|e| at < e.0) {
                        earliest = Some((at, id, b));
                    }
                }
            }
        }
    }
    if let Some((_, id, b)) = earliest {
        let key = format!("{id} {b}");
        let at =
            out.findings.iter().find(|f| f.analysis == "watch" && f.message == key).and_then(|f| f.locations.first());
        if let (Some(l), Some(path)) = (at, out.pm_files.get(&id)) {
            w.first_read = Some((path.clone(), b, l.clone()));
        }
    }
    out.findings.retain(|f| f.analysis != "watch");
    Ok((out, w))
}

/// Validates one finding of the workload run `spec` on image `v.image` of `images`.
fn validate(spec: &RunSpec, images: &CrashLog, v: &Validation, budget: u64) -> Verdict {
    let Some(recover) = spec.recover.clone().filter(|r| !r.is_empty()) else {
        return Verdict::NotRun("no --recover command to validate it with".into());
    };
    let points = images.point_data();
    let Some(point) = points.get(v.image as usize) else { return Verdict::NotRun("its crash image is missing".into()) };
    // Everything not yet durable lost, except the lines the finding needs persisted.
    let mut choice = point.space.oldest_choice();
    for (i, d) in point.space.dims().iter().enumerate() {
        if v.newest_lines.contains(&d.line) {
            choice[i] = d.size - 1;
        }
    }
    let Some(files) = image_files(point, &choice, &images.file_paths) else {
        return Verdict::NotRun("its crash image cannot be built".into());
    };
    let path_of = |dev: u64| images.file_paths.get(&((dev >> FILE_SHIFT) as u32)).cloned();
    let dir = match tempfile::Builder::new().prefix("ferrite-validate-").tempdir() {
        Ok(d) => d,
        Err(e) => return Verdict::NotRun(format!("no temporary directory: {e}")),
    };
    if let Err(e) = materialise(&files, dir.path()) {
        return Verdict::NotRun(format!("the crash image cannot be written: {e}"));
    }
    let watch: Vec<(PathBuf, u64, u64)> = v
        .overwritten
        .iter()
        .filter_map(|&(dev, n)| Some((path_of(dev)?, dev & ((1 << FILE_SHIFT) - 1), u64::from(n))))
        .collect();
    let rspec = RunSpec {
        program: driver::spec::program_path(&recover[0], &spec.env),
        argv: recover.clone(),
        pm_dir: dir.path().to_path_buf(),
        max_instructions: budget,
        analyses: vec!["none".into()],
        discard_output: true,
        quiet: true,
        recover: None,
        hold: None,
        delay: None,
        schedule: Vec::new(),
        // A hypothetical run: what it writes in the working directory stays in `dir`.
        private_cwd: true,
        trace_syscalls: false,
        ..spec.clone()
    };
    let (out, watched) = match watched_run(&rspec, &watch, false) {
        Ok(o) => o,
        Err(e) => return Verdict::NotRun(format!("recovery could not run: {e}")),
    };
    let failed = match out.end {
        GuestEnd::Exited(syscalls::ProcessExit::Code(0)) => None,
        GuestEnd::Exited(syscalls::ProcessExit::Code(c)) => Some(format!("recovery exited with status {c}")),
        GuestEnd::Exited(syscalls::ProcessExit::Signal(s)) => {
            Some(format!("recovery was killed by {}", emu::sig::name(s)))
        }
        GuestEnd::Hang => Some("recovery hung".into()),
        GuestEnd::Deadlock => Some("recovery deadlocked".into()),
        GuestEnd::Interrupted(_) => return Verdict::NotRun("ferrite was interrupted".into()),
    };
    if let Some((dev, size, init)) = v.reset {
        if let Some(why) = failed {
            return Verdict::Confirmed(format!("{why} on a crash image where it is held"), None);
        }
        let Some(rel) = path_of(dev) else { return Verdict::NotRun("its PM file is unknown".into()) };
        let off = (dev & ((1 << FILE_SHIFT) - 1)) as usize;
        let bytes = std::fs::read(dir.path().join(&rel)).unwrap_or_default();
        let mut le = [0u8; 8];
        let n = (size as usize).min(8);
        if off + n > bytes.len() {
            return Verdict::NotRun("its PM file is gone after recovery".into());
        }
        le[..n].copy_from_slice(&bytes[off..off + n]);
        let value = u64::from_le_bytes(le);
        return if value == init {
            Verdict::FalsePositive(format!("recovery resets it to its initial value {init:#x}"))
        } else {
            Verdict::Confirmed(format!("recovery leaves it at {value:#x}, not its initial value {init:#x}"), None)
        };
    }
    match watched {
        Watched { first_read: Some((_, _, at)), .. } => {
            Verdict::Confirmed("recovery reads the inconsistent bytes before overwriting them".into(), Some(at))
        }
        Watched { written, watched, .. } if watched > 0 && written == watched => {
            Verdict::FalsePositive(format!("recovery overwrites all {watched} inconsistent bytes before reading them"))
        }
        _ => match failed {
            Some(why) => Verdict::Confirmed(format!("{why} on the crash image"), None),
            None => Verdict::Confirmed("recovery leaves the inconsistent bytes in place".into(), None),
        },
    }
}
