//! `ferrite crash`: every crash image the PM model allows at every crash point, recovered by
//! running the program (or `--recover CMD`) on a private copy of the PM files.
//!
//! 1. **Workload run.** The program runs once, deterministically, with a recorder among its
//!    passes. At every crash point (just before a fence or locked instruction with flushes or
//!    NT stores pending, a clflush, msync/fsync or a durable write, and at exit; with
//!    `--crash-points stores`, also after every PM store) the recorder takes the device's crash
//!    space (each non-durable line's allowed versions, each pending NT chunk), the PM files'
//!    bytes, and what a crash keeps of the files the workload changed in its working directory:
//!    their content as of their last fsync (`syscalls::fs::Durable`, handed over by the run
//!    loop whenever it changes; each such change is a crash point too). Consecutive identical
//!    states are recorded once. The workload's working directory is private
//!    (`syscalls::vfs::PRIVATE_CWD`): it never writes the user's files.
//! 2. **Images.** A point whose space has at most `--max-images` images is enumerated
//!    exhaustively; a larger one is sampled, targeted images first: each line alone left at each
//!    older version (a store persisted without the stores after it), then pairs of lines, up to
//!    the limit, and the covered fraction is reported (log2 of the space).
//! 3. **Recovery.** Each image is materialised as files (the point's PM files with the chosen
//!    line versions written in, and the working directory's files as of their last fsync, in the
//!    private working directory the recovery gets over the user's, which it only reads),
//!    deduplicated by the hash of those bytes, and recovered once,
//!    in parallel (`--jobs`), by a fresh deterministic run. It fails on a non-zero exit, a
//!    signal (fault, abort), a deadlock, or a hang (an instruction budget from the workload's).
//!    `--check CMD` runs a checker on the recovered files afterwards.
//! 4. **Minimisation.** For a failing image, ddmin finds a smallest set of lines that must be
//!    left unpersisted for recovery to fail; the finding names the crash point, those lines'
//!    lost stores, and where recovery failed, and carries the point and image so that
//!    `ferrite replay --finding` rebuilds it.
//!
//! Not yet: Jaaru-style constraint refinement (recovery reading open lines lazily), snapshots
//! (recovery re-runs the program from its start).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use analyses::{Analysis, CrashImageRef, Finding, Frame, Location, RawFinding};
use emu::callstack::StackId;
use emu::events::{Event, EventKind, Interest};
use emu::pm::{CrashSpace, DimKind, PmDevice};
use rustc_hash::FxHashMap;

/// The PM files' contents in a crash image, by path relative to the PM directory.
pub type PmFiles = BTreeMap<PathBuf, Vec<u8>>;

/// A PM file's contents at a crash point, in pages shared with the points before it where they
/// did not change: a point costs the pages written since the last one, not the whole pool (an
/// 8 MiB libpmemobj pool at 50 crash points took 400 MiB as copies).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PagedFile {
    len: usize,
    pages: Vec<Arc<[u8]>>,
}

/// Bytes per shared page of a [`PagedFile`].
const FILE_PAGE: usize = 4096;

impl PagedFile {
    /// `bytes`, sharing the pages equal to `prev`'s.
    fn new(bytes: &[u8], prev: Option<&PagedFile>) -> PagedFile {
        let pages = bytes
            .chunks(FILE_PAGE)
            .enumerate()
            .map(|(i, chunk)| match prev.and_then(|p| p.pages.get(i)) {
                Some(old) if **old == *chunk => old.clone(),
                _ => Arc::from(chunk),
            })
            .collect();
        PagedFile { len: bytes.len(), pages }
    }

    /// Whether `self` shares every page with `other` (then they are equal).
    fn same_pages(&self, other: &PagedFile) -> bool {
        self.len == other.len
            && self.pages.len() == other.pages.len()
            && self.pages.iter().zip(&other.pages).all(|(a, b)| Arc::ptr_eq(a, b))
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for p in &self.pages {
            out.extend_from_slice(p);
        }
        out
    }
}

/// The PM files at a crash point.
pub type PointFiles = BTreeMap<PathBuf, PagedFile>;

/// What a crash image keeps of the regular files the workload changed in its working directory,
/// by path relative to it: their content as of their last fsync, or `None` where the image has
/// no such file (files the workload never changed are the user's, as they are).
pub type CwdFiles = BTreeMap<PathBuf, Option<Vec<u8>>>;

/// A crash image's files: the PM files, and the working directory's files the workload changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Files {
    pub pm: PmFiles,
    pub cwd: Arc<CwdFiles>,
}

pub struct CrashPoint {
    /// Instructions retired before the crash.
    pub icount: u64,
    pub pc: u64,
    pub stack: StackId,
    pub tid: u32,
    /// Symbolised after the run.
    pub frames: Vec<Frame>,
    pub files: Arc<PointFiles>,
    /// The changed working-directory files a crash here keeps (only those changed so far).
    pub cwd: Arc<CwdFiles>,
    pub space: CrashSpace,
}

/// What the recorder collects during the workload run.
pub struct CrashLog {
    pm_dir: PathBuf,
    every_store: bool,
    /// `--crash-at`: only the point the session records when the workload stops.
    pub at_end_only: bool,
    /// `--dedup-points`: one point per (PC, call stack), Mumak-style.
    pub dedup_sites: bool,
    sites: rustc_hash::FxHashSet<(u64, StackId)>,
    /// The session is recording the end point.
    pub recording_end: bool,
    pub points: Vec<CrashPoint>,
    /// Where each store came from, by store id: PC, stack, thread.
    pub store_sites: FxHashMap<u64, (u64, StackId, u32)>,
    /// Symbolised store sites and their threads, filled after the run.
    pub store_frames: FxHashMap<u64, (Vec<Frame>, u32)>,
    /// PM file id → path relative to the PM directory.
    pub file_paths: BTreeMap<u32, PathBuf>,
    pub duplicates: u64,
    /// What a crash now keeps of the working-directory files changed so far (from the kernel).
    cwd_now: Arc<CwdFiles>,
    /// The kernel's [`syscalls::Kernel::durable_generation`] `cwd_now` was taken at.
    cwd_generation: u64,
    /// Every changed working-directory file's content when the workload started: what a crash
    /// before its first change keeps of it. Set after the run.
    pub initial_files: CwdFiles,
}

impl CrashLog {
    pub fn new(pm_dir: &Path, every_store: bool) -> Rc<RefCell<CrashLog>> {
        Rc::new(RefCell::new(CrashLog {
            pm_dir: pm_dir.to_path_buf(),
            every_store,
            at_end_only: false,
            recording_end: false,
            dedup_sites: false,
            sites: rustc_hash::FxHashSet::default(),
            points: Vec::new(),
            store_sites: FxHashMap::default(),
            store_frames: FxHashMap::default(),
            file_paths: BTreeMap::new(),
            duplicates: 0,
            cwd_now: Arc::new(CwdFiles::new()),
            cwd_generation: 0,
            initial_files: CwdFiles::new(),
        }))
    }

    /// Takes the kernel's durable working-directory files when they changed (after each system
    /// call: only `fsync`, O_SYNC writes, creations, renames, links and removals change them).
    pub fn note_durable(log: &RefCell<CrashLog>, k: &syscalls::Kernel) {
        if log.borrow().cwd_generation != k.durable_generation() {
            let mut log = log.borrow_mut();
            log.cwd_generation = k.durable_generation();
            log.cwd_now = Arc::new(k.durable_files().clone());
        }
    }

    /// The PM files now, sharing unchanged pages with the last point's.
    fn snapshot_files(&self) -> PointFiles {
        let prev = self.points.last().map(|p| p.files.clone());
        let mut out = PointFiles::new();
        let mut stack = vec![self.pm_dir.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&dir) else { continue };
            for e in rd.flatten() {
                let p = e.path();
                // The workload's private working directory is not PM.
                if dir == self.pm_dir && e.file_name() == syscalls::vfs::PRIVATE_CWD {
                    continue;
                }
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(p),
                    Ok(t) if t.is_file() => {
                        if let (Ok(rel), Ok(bytes)) = (p.strip_prefix(&self.pm_dir), std::fs::read(&p)) {
                            let old = prev.as_ref().and_then(|f| f.get(rel));
                            out.insert(rel.to_path_buf(), PagedFile::new(&bytes, old));
                        }
                    }
                    _ => {}
                }
            }
        }
        out
    }

    /// Records the device's state as a crash point; its index (that of the last point when the
    /// state has not changed since).
    pub fn record(&mut self, icount: u64, pc: u64, stack: StackId, tid: u32, device: &PmDevice) -> usize {
        if self.dedup_sites && !self.recording_end && !self.sites.insert((pc, stack)) && !self.points.is_empty() {
            self.duplicates += 1;
            return self.points.len() - 1;
        }
        let space = device.crash_space();
        let files = self.snapshot_files();
        let unchanged = |last: &CrashPoint| {
            last.files.len() == files.len()
                && last.files.iter().zip(&files).all(|((p, a), (q, b))| p == q && a.same_pages(b))
        };
        if let Some(last) = self.points.last() {
            if unchanged(last) && last.space == space && Arc::ptr_eq(&last.cwd, &self.cwd_now) {
                self.duplicates += 1;
                return self.points.len() - 1;
            }
        }
        let files = match self.points.last() {
            Some(last) if unchanged(last) => last.files.clone(),
            _ => Arc::new(files),
        };
        let cwd = self.cwd_now.clone();
        self.points.push(CrashPoint { icount, pc, stack, tid, frames: Vec::new(), files, cwd, space });
        self.points.len() - 1
    }
}

/// Crash images captured for a pass's post-failure validation (PMRace).
impl analyses::ImageSink for CrashLog {
    fn capture(&mut self, ev: &Event, device: &PmDevice) -> Option<u32> {
        Some(self.record(ev.icount, ev.pc, ev.stack, ev.tid, device) as u32)
    }
}

/// Whether every PM store is a crash point: with `--crash-points stores`, and under eADR, where
/// each store is durable when it executes (no fence raises the floor, so crashing only at fences
/// would test nothing but the end).
pub fn every_store(mode: &str, pm: emu::pm::PmConfig) -> bool {
    mode == "stores" || pm.persistency == emu::pm::Persistency::Eadr
}

/// The recorder, run as one more pass over the workload.
pub struct Recorder(pub Rc<RefCell<CrashLog>>);

impl Analysis for Recorder {
    fn name(&self) -> &'static str {
        "crash-recorder"
    }

    fn interest(&self) -> Interest {
        Interest::CRASH.union(Interest::STORES)
    }

    fn on_event(&mut self, ev: &Event, device: &PmDevice) {
        let mut log = self.0.borrow_mut();
        match ev.kind {
            EventKind::CrashPoint if !log.at_end_only || log.recording_end => {
                log.record(ev.icount, ev.pc, ev.stack, ev.tid, device);
            }
            EventKind::Store | EventKind::NtStore | EventKind::RmwStore if ev.dev != 0 => {
                if let Some(id) = ev.store {
                    log.store_sites.entry(id.0).or_insert((ev.pc, ev.stack, ev.tid));
                }
                if log.every_store && !log.at_end_only {
                    log.record(ev.icount + 1, ev.pc, ev.stack, ev.tid, device);
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self, _device: &PmDevice) -> Vec<RawFinding> {
        Vec::new()
    }
}

/// One image of one crash point: a value per dimension of its space.
#[derive(Clone, Debug)]
pub struct Image {
    pub point: usize,
    pub choice: Vec<u32>,
}

/// The choice where everything is persisted (every dimension at its newest value).
fn persisted(space: &CrashSpace) -> Vec<u32> {
    space.dims().iter().map(|d| d.size - 1).collect()
}

/// The images to try at one point: all of them if there are at most `max`, else targeted
/// ones. Returns the images and whether the space was covered exhaustively.
pub fn images_of(space: &CrashSpace, max: usize) -> (Vec<Vec<u32>>, bool) {
    if space.is_empty() {
        return (Vec::new(), true);
    }
    if let Some(n) = space.count() {
        if n <= max as u128 {
            return (space.enumerate().map(|(c, _)| c).collect(), true);
        }
    }
    let full = persisted(space);
    let mut out: Vec<Vec<u32>> = Vec::new();
    let mut seen: BTreeSet<Vec<u32>> = BTreeSet::new();
    let mut push = |c: Vec<u32>, out: &mut Vec<Vec<u32>>| {
        if out.len() < max && seen.insert(c.clone()) {
            out.push(c);
        }
    };
    // Single dimensions at each older value: a line whose newest stores are lost while every
    // other line persisted (a store persisted without the store it depends on).
    for (i, d) in space.dims().iter().enumerate() {
        for v in 0..d.size - 1 {
            let mut c = full.clone();
            c[i] = v;
            push(c, &mut out);
        }
    }
    // Pairs of dimensions at their oldest values.
    'pairs: for i in 0..space.dims().len() {
        for j in i + 1..space.dims().len() {
            if out.len() >= max {
                break 'pairs;
            }
            let mut c = full.clone();
            c[i] = 0;
            c[j] = 0;
            push(c, &mut out);
        }
    }
    push(space.oldest_choice(), &mut out);
    (out, false)
}

/// What recovery needs of a crash point, shareable across worker threads.
#[derive(Clone)]
pub struct PointData {
    pub files: Arc<PointFiles>,
    /// Every working-directory file the workload changed, as a crash here leaves it.
    pub cwd: Arc<CwdFiles>,
    pub space: CrashSpace,
}

impl CrashLog {
    /// The points as plain data for the recovery workers (files shared between equal points).
    pub fn point_data(&self) -> Vec<PointData> {
        // A file changed only later is at its initial state here.
        let mut last: Option<(Arc<CwdFiles>, Arc<CwdFiles>)> = None;
        self.points
            .iter()
            .map(|p| {
                let cwd = match &last {
                    Some((at, full)) if Arc::ptr_eq(at, &p.cwd) => full.clone(),
                    _ => {
                        let mut full = self.initial_files.clone();
                        full.extend(p.cwd.iter().map(|(k, v)| (k.clone(), v.clone())));
                        let full = Arc::new(full);
                        last = Some((p.cwd.clone(), full.clone()));
                        full
                    }
                };
                PointData { files: p.files.clone(), cwd, space: p.space.clone() }
            })
            .collect()
    }
}

/// The point's files with the image's line versions written in.
pub fn image_files(point: &PointData, choice: &[u32], file_paths: &BTreeMap<u32, PathBuf>) -> Option<Files> {
    let mut files: PmFiles = point.files.iter().map(|(p, f)| (p.clone(), f.to_vec())).collect();
    for (line, content) in point.space.image(choice).ok()? {
        let dev = line * 64;
        let id = (dev >> emu::pm::FILE_SHIFT) as u32;
        let off = (dev & ((1 << emu::pm::FILE_SHIFT) - 1)) as usize;
        if let Some(bytes) = file_paths.get(&id).and_then(|p| files.get_mut(p)) {
            if off < bytes.len() {
                let n = (bytes.len() - off).min(64);
                bytes[off..off + n].copy_from_slice(&content[..n]);
            }
        }
    }
    Some(Files { pm: files, cwd: point.cwd.clone() })
}

/// Writes an image's files into `dir`, the recovery's PM directory: the PM files, and the
/// working-directory files into the private working directory it holds
/// ([`syscalls::vfs::PRIVATE_CWD`]: `files/` for the files the image has, an empty mark in
/// `hidden/` for each it lacks), which a run with [`crate::session::RunSpec::private_cwd`] sees
/// as its working directory over the user's.
pub fn materialise(files: &Files, dir: &Path) -> std::io::Result<()> {
    let write = |p: PathBuf, bytes: &[u8]| -> std::io::Result<()> {
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, bytes)
    };
    for (rel, bytes) in &files.pm {
        write(dir.join(rel), bytes)?;
    }
    let private = dir.join(syscalls::vfs::PRIVATE_CWD);
    for (rel, content) in files.cwd.iter() {
        match content {
            Some(bytes) => write(private.join("files").join(rel), bytes)?,
            // A mark below a marked directory is implied by it.
            None if !rel.ancestors().skip(1).any(|a| files.cwd.get(a) == Some(&None)) => {
                write(private.join("hidden").join(rel), &[])?
            }
            None => {}
        }
    }
    Ok(())
}

/// The hash of an image's files: equal hashes recover identically.
pub fn files_key(files: &Files) -> String {
    let mut h = blake3::Hasher::new();
    for (rel, bytes) in &files.pm {
        h.update(rel.as_os_str().as_encoded_bytes());
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    if !files.cwd.is_empty() {
        h.update(b"\0cwd");
        for (rel, content) in files.cwd.iter() {
            h.update(rel.as_os_str().as_encoded_bytes());
            match content {
                Some(bytes) => {
                    h.update(&(bytes.len() as u64).to_le_bytes());
                    h.update(bytes);
                }
                None => {
                    h.update(&u64::MAX.to_le_bytes());
                }
            }
        }
    }
    h.finalize().to_hex().to_string()
}

/// Lines of an image that are not at their newest version, as dimension indices.
pub fn stale_dims(space: &CrashSpace, choice: &[u32]) -> Vec<usize> {
    space.dims().iter().enumerate().filter(|(i, d)| choice[*i] != d.size - 1).map(|(i, _)| i).collect()
}

/// The image with only `keep` of its stale dimensions left stale.
pub fn with_only(space: &CrashSpace, choice: &[u32], keep: &[usize]) -> Vec<u32> {
    let mut c = persisted(space);
    for &i in keep {
        c[i] = choice[i];
    }
    c
}

/// ddmin (Zeller & Hildebrandt): a 1-minimal subset of `items` on which `fails` holds, given
/// that it holds on all of them; `budget` bounds the number of tests.
pub fn ddmin(items: Vec<usize>, budget: usize, mut fails: impl FnMut(&[usize]) -> bool) -> Vec<usize> {
    let mut cur = items;
    let mut n = 2usize;
    let mut tests = 0;
    while cur.len() >= 2 && tests < budget {
        let chunk = cur.len().div_ceil(n);
        let parts: Vec<Vec<usize>> = cur.chunks(chunk).map(|c| c.to_vec()).collect();
        let mut reduced = false;
        for p in &parts {
            tests += 1;
            if fails(p) {
                cur = p.clone();
                n = 2;
                reduced = true;
                break;
            }
        }
        if !reduced {
            for i in 0..parts.len() {
                let complement: Vec<usize> =
                    parts.iter().enumerate().filter(|(j, _)| *j != i).flat_map(|(_, p)| p.clone()).collect();
                tests += 1;
                if fails(&complement) {
                    cur = complement;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if n >= cur.len() {
                break;
            }
            n = (2 * n).min(cur.len());
        }
    }
    cur
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
        locations,
        schedule: None,
        interleaving: None,
        crash_image: Some(CrashImageRef {
            point: image.point as u32,
            choice: with_only(&point.space, &image.choice, minimal),
        }),
    }
}

/// How to test: the recovery and checker commands and the limits.
pub struct Plan {
    pub recover: Vec<String>,
    pub check: Option<Vec<String>>,
    /// The workload's run specification; recoveries change program, arguments and PM directory.
    pub base: crate::session::RunSpec,
    /// Instruction budget of one recovery (beyond it: a hang).
    pub budget: u64,
    pub jobs: usize,
    pub max_images: usize,
    pub quiet: bool,
    /// Recovery maps the PM files elsewhere (`--remap`).
    pub remap: bool,
    /// Report recovery reads of bytes whose value depends on the crash (`--xfd`).
    pub xfd: bool,
    /// Run every recovery from the program's start in a fresh machine (`--fresh-recoveries`)
    /// instead of restoring a snapshot ([`crate::warm`]).
    pub fresh: bool,
    /// Explore images lazily (`--lazy`, [`crate::lazy`]).
    pub lazy: bool,
}

/// What testing found and covered.
#[derive(Default)]
pub struct Tested {
    pub findings: Vec<Finding>,
    pub images: u64,
    pub unique_images: u64,
    pub recoveries: u64,
    pub failures: u64,
    pub sampled_points: u64,
    pub max_space_log2: f64,
    /// Recoveries restored from a snapshot rather than run fresh (depends on `--jobs`: each
    /// worker runs a command fresh once).
    pub restored: u64,
    /// `--lazy`: log2 of the images of the points explored to the end, every one covered by a
    /// recovery.
    pub covered_log2: Option<f64>,
}

/// How one recovery ended.
#[derive(Clone, Debug)]
pub enum Verdict {
    Passed,
    Failed {
        what: String,
        locations: Vec<Location>,
    },
    /// It passed, but read PM bytes whose value depended on the crash before writing them
    /// (`--xfd`): `file` and `offset` of the first, and the load.
    ReadOpen {
        file: PathBuf,
        offset: u64,
        location: Location,
    },
}

impl Verdict {
    pub(crate) fn failed(&self) -> bool {
        matches!(self, Verdict::Failed { .. })
    }
}

pub(crate) fn recovery_spec(plan: &Plan, argv: &[String], dir: &Path) -> crate::session::RunSpec {
    let mut spec = plan.base.clone();
    spec.program = PathBuf::from(&argv[0]);
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

fn run_on(plan: &Plan, argv: &[String], dir: &Path) -> Result<crate::session::RunOutcome, crate::Fatal> {
    let spec = recovery_spec(plan, argv, dir);
    Ok(if plan.fresh { crate::session::run(&spec)? } else { crate::warm::run(&spec)? })
}

pub(crate) fn verdict_of(out: &crate::session::RunOutcome, who: &str) -> Verdict {
    use crate::session::GuestEnd;
    use syscalls::ProcessExit;
    let what = match out.end {
        GuestEnd::Exited(ProcessExit::Code(0)) => return Verdict::Passed,
        GuestEnd::Exited(ProcessExit::Code(c)) => format!("{who} exited with status {c}"),
        GuestEnd::Exited(ProcessExit::Signal(s)) => format!("{who} was killed by {}", emu::sig::name(s)),
        GuestEnd::Hang => format!("{who} hung"),
        GuestEnd::Deadlock => format!("{who} deadlocked"),
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
fn read_open_finding(log: &CrashLog, point: usize, file: &Path, offset: u64, read: Location, seed: u64) -> Finding {
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
        locations,
        schedule: None,
        interleaving: None,
        crash_image: None,
    }
}

/// Recovers one image's files in a private directory; runs the checker if recovery passed.
/// `open` lists the PM bytes whose value depends on the crash (`--xfd`: a recovery that reads
/// one before writing it is reported even if it passes).
pub fn recover(plan: &Plan, files: &Files, open: &[(PathBuf, u64, u64)]) -> Result<Verdict, crate::Fatal> {
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

/// Tests every crash point of the workload run. Images whose files are in `seen` (recovered for
/// another schedule of the same workload) are not recovered again; the new ones are added.
pub fn test_all(
    log: &CrashLog,
    plan: &Plan,
    seen: &mut std::collections::BTreeSet<String>,
) -> Result<Tested, crate::Fatal> {
    use rayon::prelude::*;
    let points = log.point_data();
    let mut tested = Tested::default();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(plan.jobs.max(1))
        .build()
        .map_err(|e| crate::Fatal(format!("cannot start {} recovery workers: {e}", plan.jobs)))?;
    let restored = std::sync::atomic::AtomicU64::new(0);
    for p in &points {
        tested.max_space_log2 = tested.max_space_log2.max(p.space.count_log2());
    }
    // Every recovered image: its key (the hash of its files), point, choice and verdict.
    let mut recovered: Vec<(String, usize, Vec<u32>, Verdict)> = Vec::new();
    // `--lazy`: points explored by Jaaru's refinement, each distinct point once; the others are
    // enumerated eagerly below.
    let mut eager: Vec<usize> = (0..points.len()).collect();
    if plan.lazy {
        eager.clear();
        let mut todo: Vec<(usize, String)> = Vec::new();
        for (i, p) in points.iter().enumerate() {
            let key = point_key(p, &log.file_paths);
            if !p.space.is_empty() && !seen.contains(&key) && !todo.iter().any(|(_, k)| *k == key) {
                todo.push((i, key));
            }
        }
        let bar = progress(plan, todo.len(), "exploring {pos}/{len} crash points lazily [{bar:30}] {msg}");
        let explored: Vec<Result<crate::lazy::Explored, crate::Fatal>> = pool.install(|| {
            todo.par_iter()
                .map(|(i, _)| {
                    let e = crate::lazy::explore(&points[*i], &log.file_paths, plan);
                    restored.fetch_add(crate::warm::take_counts().restored, std::sync::atomic::Ordering::Relaxed);
                    bar.inc(1);
                    e
                })
                .collect()
        });
        bar.finish_and_clear();
        for ((i, key), e) in todo.into_iter().zip(explored) {
            let e = e?;
            tested.recoveries += e.runs.len() as u64;
            if e.bypassed {
                eager.push(i);
                continue;
            }
            seen.insert(key);
            if !e.exhaustive {
                tested.sampled_points += 1;
            }
            if e.exhaustive {
                let n = points[i].space.count_log2();
                tested.covered_log2 = Some(tested.covered_log2.map_or(n, |c| log2_add(c, n)));
            }
            for crate::lazy::LazyRun { choice, verdict: v, .. } in e.runs {
                tested.images += 1;
                let Some(files) = image_files(&points[i], &choice, &log.file_paths) else { continue };
                let key = files_key(&files);
                if !recovered.iter().any(|r| r.0 == key) {
                    recovered.push((key, i, choice, v));
                }
            }
        }
        tested.unique_images = recovered.len() as u64;
    }
    // Every image of every eager point, deduplicated by the bytes it leaves in the files.
    // Only the point and choice are kept: an image's files (a copy of every PM file) are built
    // again when it is recovered, so memory does not grow with the number of images.
    let mut unique: BTreeMap<String, (usize, Vec<u32>)> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for &i in &eager {
        let p = &points[i];
        let (images, exhaustive) = images_of(&p.space, plan.max_images);
        if !exhaustive {
            tested.sampled_points += 1;
        }
        // The image where nothing was lost is the point's own state: recovery must pass on it
        // too (it is what a crash right there with everything flushed leaves).
        let mut all = images;
        all.push(persisted(&p.space));
        for choice in all {
            tested.images += 1;
            let Some(files) = image_files(p, &choice, &log.file_paths) else { continue };
            let key = files_key(&files);
            if seen.contains(&key) || recovered.iter().any(|r| r.0 == key) {
                continue;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = unique.entry(key.clone()) {
                order.push(key);
                e.insert((i, choice));
            }
        }
    }
    tested.unique_images += unique.len() as u64;
    seen.extend(order.iter().cloned());
    let bar = progress(plan, order.len(), "recovering {pos}/{len} crash images [{bar:30}] {msg}");
    let failing = std::sync::atomic::AtomicU64::new(0);
    let log_paths = log.file_paths.clone();
    let open: Vec<Vec<(PathBuf, u64, u64)>> =
        points.iter().map(|p| if plan.xfd { open_bytes(&p.space, &log.file_paths) } else { Vec::new() }).collect();
    let verdicts: Vec<Result<Verdict, crate::Fatal>> = pool.install(|| {
        order
            .par_iter()
            .map(|key| {
                let (point, choice) = &unique[key];
                let v = match image_files(&points[*point], choice, &log_paths) {
                    Some(files) => recover(plan, &files, &open[*point]),
                    None => Ok(Verdict::Passed),
                };
                restored.fetch_add(crate::warm::take_counts().restored, std::sync::atomic::Ordering::Relaxed);
                if matches!(v, Ok(Verdict::Failed { .. })) {
                    let n = failing.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    bar.set_message(format!("{n} failing"));
                }
                bar.inc(1);
                v
            })
            .collect()
    });
    bar.finish_and_clear();
    tested.recoveries += order.len() as u64;
    tested.restored = restored.into_inner();
    for (key, v) in order.into_iter().zip(verdicts) {
        let (point, choice) = unique.remove(&key).expect("ordered keys are unique images");
        recovered.push((key, point, choice, v?));
    }
    for (_, point, choice, v) in recovered {
        let (what, locations) = match v {
            Verdict::Failed { what, locations } => (what, locations),
            Verdict::ReadOpen { file, offset, location } => {
                tested.findings.push(read_open_finding(log, point, &file, offset, location, plan.base.seed));
                continue;
            }
            Verdict::Passed => continue,
        };
        tested.failures += 1;
        let p = &points[point];
        // The smallest set of lines that must stay unpersisted for recovery to fail.
        let stale = stale_dims(&p.space, &choice);
        let mut errors = None;
        let mut fails = |keep: &[usize]| {
            let c = with_only(&p.space, &choice, keep);
            let Some(files) = image_files(p, &c, &log.file_paths) else { return false };
            tested.recoveries += 1;
            match recover(plan, &files, &[]) {
                Ok(v) => v.failed(),
                Err(e) => {
                    errors = Some(e);
                    false
                }
            }
        };
        // Nothing need be lost if the point's own state (everything persisted) fails too.
        let minimal = if !stale.is_empty() && fails(&[]) { Vec::new() } else { ddmin(stale.clone(), 24, &mut fails) };
        tested.restored += crate::warm::take_counts().restored;
        if let Some(e) = errors {
            return Err(e);
        }
        let image = Image { point, choice };
        tested.findings.push(finding_for(log, &image, &minimal, &what, locations, plan.base.seed));
    }
    Ok(tested)
}

/// A progress bar (hidden with `--quiet`).
fn progress(plan: &Plan, len: usize, template: &str) -> indicatif::ProgressBar {
    let bar = if plan.quiet { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(len as u64) };
    bar.set_style(
        indicatif::ProgressStyle::with_template(template).unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// What identifies a crash point for lazy exploration: its persisted files and its space.
fn point_key(p: &PointData, file_paths: &BTreeMap<u32, PathBuf>) -> String {
    let mut h = blake3::Hasher::new();
    h.update(b"lazy");
    if let Some(files) = image_files(p, &persisted(&p.space), file_paths) {
        h.update(files_key(&files).as_bytes());
    }
    h.update(format!("{:?}", p.space).as_bytes());
    h.finalize().to_hex().to_string()
}

/// log2(2^a + 2^b), for adding image counts too large for integers.
pub fn log2_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    hi + (1.0 + (lo - hi).exp2()).log2()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_points_files_share_the_pages_that_did_not_change() {
        let mut bytes: Vec<u8> = (0..3 * FILE_PAGE + 100).map(|i| (i % 251) as u8).collect();
        let first = PagedFile::new(&bytes, None);
        assert_eq!(first.to_vec(), bytes);
        let same = PagedFile::new(&bytes, Some(&first));
        assert!(same.same_pages(&first));
        bytes[FILE_PAGE + 7] ^= 1;
        let changed = PagedFile::new(&bytes, Some(&first));
        assert_eq!(changed.to_vec(), bytes);
        assert!(!changed.same_pages(&first));
        let shared: Vec<bool> = changed.pages.iter().zip(&first.pages).map(|(a, b)| Arc::ptr_eq(a, b)).collect();
        assert_eq!(shared, vec![true, false, true, true]);
        // A file that grew keeps its old pages too.
        bytes.extend_from_slice(&[9; FILE_PAGE]);
        let grown = PagedFile::new(&bytes, Some(&changed));
        assert_eq!(grown.to_vec(), bytes);
        assert!(Arc::ptr_eq(&grown.pages[0], &changed.pages[0]));
    }
}
