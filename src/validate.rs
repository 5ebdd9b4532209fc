//! Post-failure validation (PMRace §4.4): run the program's recovery on a crash image a pass
//! captured and see whether recovery repairs what the finding is about.
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

use analyses::{Analysis, Location, RawFinding, RawLocation, Validation};
use emu::events::{Event, EventKind, Interest};
use emu::pm::{PmDevice, FILE_SHIFT};

use crate::crash::{self, CrashLog};
use crate::session::{GuestEnd, RunSpec};

/// What validation concluded.
pub enum Verdict {
    /// Recovery repairs it: not a bug.
    FalsePositive(String),
    /// Recovery does not repair it; the extra location (a recovery load) if there is one.
    Confirmed(String, Option<Location>),
    /// Validation could not run.
    NotRun(String),
}

/// Watched bytes of one PM file, by offset.
#[derive(Default)]
struct Watched {
    /// `(offset, overwritten)` per watched byte.
    bytes: BTreeMap<u64, bool>,
    /// The first load of a byte not yet overwritten.
    read: Option<RawLocation>,
}

/// The observer inside the recovery run.
struct Watcher {
    /// Watched offsets (the same in every file until the file is known).
    offsets: Vec<(u64, u32)>,
    /// State per device file id of the recovery run.
    files: Rc<RefCell<BTreeMap<u32, Watched>>>,
}

impl Analysis for Watcher {
    fn name(&self) -> &'static str {
        "validation"
    }

    fn interest(&self) -> Interest {
        Interest::LOADS.union(Interest::STORES)
    }

    fn on_event(&mut self, ev: &Event, _device: &PmDevice) {
        if ev.dev == 0 {
            return;
        }
        let load = match ev.kind {
            EventKind::Load => true,
            EventKind::Store | EventKind::NtStore | EventKind::RmwStore => false,
            _ => return,
        };
        let id = (ev.dev >> FILE_SHIFT) as u32;
        let off = ev.dev & ((1 << FILE_SHIFT) - 1);
        let end = off + u64::from(ev.size);
        if !self.offsets.iter().any(|&(o, n)| o < end && off < o + u64::from(n)) {
            return;
        }
        let mut files = self.files.borrow_mut();
        let w = files.entry(id).or_insert_with(|| Watched {
            bytes: self.offsets.iter().flat_map(|&(o, n)| (o..o + u64::from(n)).map(|b| (b, false))).collect(),
            read: None,
        });
        for (_, done) in w.bytes.range_mut(off..end) {
            if load && !*done && w.read.is_none() {
                w.read = Some(RawLocation { role: "recovery read", pc: ev.pc, stack: ev.stack, tid: ev.tid });
            }
            if !load {
                *done = true;
            }
        }
    }

    fn finish(&mut self, _device: &PmDevice) -> Vec<RawFinding> {
        // The first inconsistent read, as a finding of the recovery run so that its session
        // symbolises it.
        self.files
            .borrow()
            .values()
            .filter_map(|w| w.read.clone())
            .take(1)
            .map(|l| RawFinding {
                analysis: "validation",
                kind: "recovery-read",
                message: String::new(),
                occurrences: 1,
                locations: vec![l],
                validation: None,
            })
            .collect()
    }
}

/// Validates one finding of the workload run `spec` on image `v.image` of `images`.
pub fn validate(spec: &RunSpec, images: &CrashLog, v: &Validation, budget: u64) -> Verdict {
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
    let Some(files) = crash::image_files(point, &choice, &images.file_paths) else {
        return Verdict::NotRun("its crash image cannot be built".into());
    };
    let path_of = |dev: u64| images.file_paths.get(&((dev >> FILE_SHIFT) as u32)).cloned();
    let dir = match tempfile::Builder::new().prefix("ferrite-validate-").tempdir() {
        Ok(d) => d,
        Err(e) => return Verdict::NotRun(format!("no temporary directory: {e}")),
    };
    if let Err(e) = crash::materialise(&files, dir.path()) {
        return Verdict::NotRun(format!("the crash image cannot be written: {e}"));
    }
    let offsets: Vec<(u64, u32)> = v.overwritten.iter().map(|&(dev, n)| (dev & ((1 << FILE_SHIFT) - 1), n)).collect();
    let watched_file: Option<PathBuf> = v.overwritten.first().and_then(|&(dev, _)| path_of(dev));
    let state = Rc::new(RefCell::new(BTreeMap::new()));
    let watcher = Watcher { offsets, files: state.clone() };
    let rspec = RunSpec {
        program: PathBuf::from(&recover[0]),
        argv: recover.clone(),
        pm_dir: dir.path().to_path_buf(),
        max_instructions: budget,
        analyses: vec!["none".into()],
        discard_output: true,
        quiet: true,
        recover: None,
        hold: None,
        schedule: Vec::new(),
        ..spec.clone()
    };
    let out = match crate::session::run_with(&rspec, None, vec![Box::new(watcher)]) {
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
    // The recovery run's file id of the watched file.
    let id = watched_file.as_ref().and_then(|rel| out.pm_files.iter().find(|(_, p)| *p == rel).map(|(id, _)| *id));
    let files = state.borrow();
    let w = id.and_then(|id| files.get(&id));
    let read = out.findings.iter().find(|f| f.analysis == "validation").and_then(|f| f.locations.first().cloned());
    match w {
        Some(w) if w.read.is_some() => {
            Verdict::Confirmed("recovery reads the inconsistent bytes before overwriting them".into(), read)
        }
        Some(w) if w.bytes.values().all(|d| *d) => Verdict::FalsePositive(format!(
            "recovery overwrites all {} inconsistent bytes before reading them",
            w.bytes.len()
        )),
        _ => match failed {
            Some(why) => Verdict::Confirmed(format!("{why} on the crash image"), None),
            None => Verdict::Confirmed("recovery leaves the inconsistent bytes in place".into(), None),
        },
    }
}
