//! Recovering crash images: each image's files in a private directory, recovered by a
//! deterministic run of the recovery command (from a warm snapshot unless `--fresh-recoveries`),
//! then the checker; and the findings a failed or cross-failure recovery makes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use analyses::{CrashImageRef, Finding, Group, Location};
use driver::{GuestEnd, RunOutcome, RunSpec};
use emu::pm::{CrashSpace, DimKind};
use syscalls::ProcessExit;

use crate::files::{materialise, Files};
use crate::record::CrashLog;
use crate::space::{with_only, Image};
use crate::Error;

/// How to test: the recovery and checker commands and the limits.
pub struct Plan {
    /// The recovery command.
    pub recover: Vec<String>,
    /// The checker run after each successful recovery.
    pub check: Option<Vec<String>>,
    /// The workload's run specification; recoveries change program, arguments and PM directory.
    pub base: RunSpec,
    /// Instruction budget of one recovery (beyond it: a hang).
    pub budget: u64,
    /// Recovery workers.
    pub jobs: usize,
    /// Images per point above which the point is sampled.
    pub max_images: usize,
    /// No progress bars.
    pub quiet: bool,
    /// Recovery maps the PM files elsewhere (`--remap`).
    pub remap: bool,
    /// Report recovery reads of bytes whose value depends on the crash (`--xfd`).
    pub xfd: bool,
    /// Run every recovery from the program's start in a fresh machine (`--fresh-recoveries`)
    /// instead of restoring a snapshot ([`driver::warm`]).
    pub fresh: bool,
    /// Explore images lazily (`--lazy`, [`crate::lazy`]).
    pub lazy: bool,
}

/// How one recovery ended.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// Recovery (and the checker) passed.
    Passed,
    /// Recovery or the checker failed.
    Failed {
        /// How (`recovery exited with status 1`).
        what: String,
        /// Where: the locations of the recovery's own findings.
        locations: Vec<Location>,
    },
    /// It passed, but read PM bytes whose value depended on the crash before writing them
    /// (`--xfd`): `file` and `offset` of the first, and the load.
    ReadOpen {
        /// The PM file, relative to the PM directory.
        file: PathBuf,
        /// The byte's offset in it.
        offset: u64,
        /// The load.
        location: Location,
    },
    /// Not run to its end: ferrite was interrupted (the user's SIGINT, SIGTERM or SIGHUP)
    /// before or while it ran. Neither a pass nor a failure.
    Interrupted,
}

impl Verdict {
    /// Whether recovery (or the checker) failed.
    pub fn failed(&self) -> bool {
        matches!(self, Verdict::Failed { .. })
    }
}

pub(crate) fn recovery_spec(plan: &Plan, argv: &[String], dir: &Path) -> RunSpec {
    let mut spec = plan.base.clone();
    spec.program = driver::spec::program_path(&argv[0], &spec.env);
    spec.argv = argv.to_vec();
    spec.pm_dir = dir.to_path_buf();
    // The working directory as the crash left it, over the user's, which it never writes.
    spec.private_cwd = true;
    spec.trace_syscalls = false;
    spec.max_instructions = plan.budget;
    spec.hold = None;
    spec.delay = None;
    spec.remap_pm = plan.remap;
    spec
}

pub(crate) fn run_on(plan: &Plan, argv: &[String], dir: &Path) -> Result<RunOutcome, Error> {
    let spec = recovery_spec(plan, argv, dir);
    Ok(if plan.fresh { driver::Runner::default().run(&spec)? } else { driver::warm::run(&spec)? })
}

pub(crate) fn verdict_of(out: &RunOutcome, who: &str) -> Verdict {
    let what = match out.end {
        GuestEnd::Exited(ProcessExit::Code(0)) => return Verdict::Passed,
        GuestEnd::Exited(ProcessExit::Code(c)) => format!("{who} exited with status {c}"),
        GuestEnd::Exited(ProcessExit::Signal(s)) => format!("{who} was killed by {}", emu::sig::name(s)),
        GuestEnd::Hang => format!("{who} hung"),
        GuestEnd::Deadlock => format!("{who} deadlocked"),
        GuestEnd::Interrupted(_) => return Verdict::Interrupted,
    };
    let locations = out
        .findings
        .iter()
        .flat_map(|f| f.locations.iter().cloned())
        .map(|mut l| {
            l.role = format!("{who} {}", l.role);
            l
        })
        .collect();
    Verdict::Failed { what, locations }
}

/// The bytes whose value a crash at this point decides: every line of its space, as
/// `(file, offset, 64)`.
pub fn open_bytes(space: &CrashSpace, file_paths: &BTreeMap<u32, PathBuf>) -> Vec<(PathBuf, u64, u64)> {
    space
        .lines()
        .iter()
        .filter_map(|l| {
            let dev = l.line * 64;
            let path = file_paths.get(&((dev >> emu::pm::FILE_SHIFT) as u32))?;
            Some((path.clone(), dev & ((1 << emu::pm::FILE_SHIFT) - 1), 64))
        })
        .collect()
}

/// A recovery that passed but read, before writing it, a byte whose value depended on the crash
/// (XFDetector's cross-failure race): the crash point, the read, and the newest store to the line.
pub(crate) fn read_open_finding(
    log: &CrashLog,
    point: usize,
    file: &Path,
    offset: u64,
    read: Location,
    seed: u64,
) -> Finding {
    let p = &log.points[point];
    let mut locations = vec![Location::from_backtrace("crash point", p.tid, p.frames.clone())];
    locations.push(read);
    let id = log.file_paths.iter().find(|(_, f)| f.as_path() == file).map(|(id, _)| *id);
    let line = id.map(|id| (emu::pm::device_addr(id, offset)) / 64);
    if let Some(ls) = p.space.lines().iter().find(|l| Some(l.line) == line) {
        if let Some(store) = ls.versions.last().and_then(|v| v.upto) {
            if let Some((frames, tid)) = log.store_frames.get(&store.0) {
                locations.push(Location::from_backtrace("unpersisted store", *tid, frames.clone()));
            }
        }
    }
    Finding {
        id: 0,
        analysis: "crash".into(),
        kind: "cross-failure-read".into(),
        message: format!(
            "recovery read {}+{offset:#x} before writing it, and its value depended on the crash at instruction {}: the line was not durable there, so another crash image holds another value (recovery passed on this one)",
            file.display(),
            p.icount
        ),
        seed,
        occurrences: 1,
        group: Some(Group::of_one(&locations, locations.len())),
        locations,
        schedule: None,
        interleaving: None,
        crash_image: None,
    }
}

/// Recovers one image's files in a private directory; runs the checker if recovery passed.
/// `open` lists the PM bytes whose value depends on the crash (`--xfd`: a recovery that reads
/// one before writing it is reported even if it passes).
pub fn recover(plan: &Plan, files: &Files, open: &[(PathBuf, u64, u64)]) -> Result<Verdict, Error> {
    if emu::interrupt::requested().is_some() {
        // The campaign is winding down: no recovery starts after an interrupt.
        return Ok(Verdict::Interrupted);
    }
    let dir = tempfile::Builder::new().prefix("ferrite-recovery-").tempdir()?;
    materialise(files, dir.path())?;
    let (out, read) = if open.is_empty() {
        (run_on(plan, &plan.recover, dir.path())?, None)
    } else {
        let (out, w) = crate::validate::watched_run(&recovery_spec(plan, &plan.recover, dir.path()), open, plan.fresh)?;
        (out, w.first_read)
    };
    let v = verdict_of(&out, "recovery");
    if let (Verdict::Passed, Some((file, offset, location))) = (&v, read) {
        return Ok(Verdict::ReadOpen { file, offset, location });
    }
    match (&v, &plan.check) {
        (Verdict::Passed, Some(check)) => Ok(verdict_of(&run_on(plan, check, dir.path())?, "check")),
        _ => Ok(v),
    }
}

/// The locations of a crash finding: the crash point, the newest lost store of each minimised
/// line, and where recovery failed.
pub fn finding_for(
    log: &CrashLog,
    image: &Image,
    minimal: &[usize],
    verdict: &str,
    recovery_locations: Vec<Location>,
    seed: u64,
) -> Finding {
    let point = &log.points[image.point];
    let mut locations = vec![Location::from_backtrace("crash point", point.tid, point.frames.clone())];
    let mut lines_desc = Vec::new();
    for &d in minimal {
        let dim = point.space.dims()[d];
        let ls = &point.space.lines()[dim.line_index];
        let (file_id, off) =
            ((dim.line * 64) >> emu::pm::FILE_SHIFT, (dim.line * 64) & ((1 << emu::pm::FILE_SHIFT) - 1));
        let file = log.file_paths.get(&(file_id as u32)).map(|p| p.display().to_string()).unwrap_or_default();
        let what = match dim.kind {
            DimKind::Version => {
                let lost = (ls.versions.len() - 1) as u32 - image.choice[d];
                format!("{file}+{off:#x} without its last {lost} version(s)")
            }
            DimKind::Word(w) => format!("{file}+{:#x} (word {w}) at an older version", off + 8 * u64::from(w)),
            DimKind::Chunk(_) => format!("{file}+{off:#x} without its pending non-temporal store"),
        };
        lines_desc.push(what);
        // The store the image lost: the line's newest cached store, or the pending NT store.
        let lost = match dim.kind {
            DimKind::Chunk(i) => ls.chunks.get(i as usize).map(|c| c.store),
            _ => ls.versions.last().and_then(|v| v.upto),
        };
        if let Some(store) = lost {
            if let Some((frames, tid)) = log.store_frames.get(&store.0) {
                locations.push(Location::from_backtrace("lost store", *tid, frames.clone()));
            }
        }
    }
    // The crash point and the lost stores identify the finding, at their source lines: crash
    // points inside one library call (libpmemobj's, at every fence of `pmemobj_create`) or one
    // helper called from several places are one finding with a call stack each, as the race
    // passes group theirs; where recovery failed is listed.
    let key_locations = locations.len();
    locations.extend(recovery_locations);
    let at = point
        .frames
        .iter()
        .find(|f| f.line.is_some())
        .or(point.frames.first())
        .map(|f| f.describe())
        .unwrap_or_default();
    // The working-directory files the image holds as of their last fsync, if the workload changed any.
    let mut cwd = log.initial_files.clone();
    cwd.extend(point.cwd.iter().map(|(k, v)| (k.clone(), v.clone())));
    let cwd_note = if cwd.is_empty() {
        String::new()
    } else {
        let mut names: Vec<String> = cwd
            .iter()
            .take(4)
            .map(|(p, c)| match c {
                Some(b) => format!("{} ({} bytes)", p.display(), b.len()),
                None => format!("{} (absent)", p.display()),
            })
            .collect();
        if cwd.len() > 4 {
            names.push(format!("{} more", cwd.len() - 4));
        }
        format!("; working-directory files as of their last fsync: {}", names.join(", "))
    };
    Finding {
        id: 0,
        analysis: "crash".into(),
        kind: "recovery-failed".into(),
        message: if minimal.is_empty() {
            format!(
                "recovery failed ({verdict}) after a crash at instruction {} in {at}, even with everything stored \
                 so far persisted: the durable state at that point is not recoverable{cwd_note}",
                point.icount
            )
        } else {
            format!(
                "recovery failed ({verdict}) after a crash at instruction {} in {at} that left {} unpersisted: {}{cwd_note}",
                point.icount,
                if minimal.len() == 1 { "one line".to_string() } else { format!("{} lines", minimal.len()) },
                lines_desc.join(", ")
            )
        },
        seed,
        occurrences: 1,
        group: Some(Group::of_one(&locations, key_locations)),
        locations,
        schedule: None,
        interleaving: None,
        crash_image: Some(CrashImageRef {
            point: image.point as u32,
            choice: with_only(&point.space, &image.choice, minimal),
        }),
    }
}
