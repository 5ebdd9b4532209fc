//! The workload run's recorder: at every crash point, the device's crash space, the PM files'
//! bytes and what a crash keeps of the files the workload changed in its working directory.
//!
//! The recorder is a pass ([`Recorder`]) over the workload's events and a [`driver::Probe`] of
//! its run: the session hands it every change of the kernel's durable working-directory files
//! (after each system call), makes the program's end a crash point, and gives it the run's
//! symbols at the end, when the points and the stores they lose are symbolised.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use analyses::{Analysis, Frame, RawFinding};
use driver::{GuestEnd, Objects};
use emu::callstack::StackId;
use emu::events::{Event, EventKind, Interest};
use emu::pm::{CrashSpace, PmDevice};
use emu::Machine;
use rustc_hash::FxHashMap;
use syscalls::Kernel;

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

    /// The file's bytes.
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

/// One crash point of the workload run: where it was and what a crash there may leave.
pub struct CrashPoint {
    /// Instructions retired before the crash.
    pub icount: u64,
    /// The instruction at the point.
    pub pc: u64,
    /// Its call stack.
    pub stack: StackId,
    /// The thread that ran it.
    pub tid: u32,
    /// Symbolised after the run.
    pub frames: Vec<Frame>,
    /// The PM files' bytes at the point (what is durable and what the cache holds).
    pub files: Arc<PointFiles>,
    /// The changed working-directory files a crash here keeps (only those changed so far).
    pub cwd: Arc<CwdFiles>,
    /// The device's crash space: each open line's versions, each pending NT chunk.
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
    /// The crash points, in order.
    pub points: Vec<CrashPoint>,
    /// Where each store came from, by store id: PC, stack, thread.
    pub store_sites: FxHashMap<u64, (u64, StackId, u32)>,
    /// Symbolised store sites and their threads, filled after the run.
    pub store_frames: FxHashMap<u64, (Vec<Frame>, u32)>,
    /// PM file id → path relative to the PM directory.
    pub file_paths: BTreeMap<u32, PathBuf>,
    /// Points not recorded because nothing changed since the previous one (or their site was seen).
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
    /// An empty log for a workload on the PM directory `pm_dir`; `every_store`: each PM store is a crash point too.
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

/// What recovery needs of a crash point, shareable across worker threads.
#[derive(Clone)]
pub struct PointData {
    /// The PM files' bytes at the point.
    pub files: Arc<PointFiles>,
    /// Every working-directory file the workload changed, as a crash here leaves it.
    pub cwd: Arc<CwdFiles>,
    /// The point's crash space.
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

/// The workload run's [`driver::Probe`]: the crash log, shared with the caller, who takes it
/// when the run is over.
pub struct Recording(pub Rc<RefCell<CrashLog>>);

impl driver::Probe for Recording {
    fn pass(&self) -> Box<dyn Analysis> {
        Box::new(Recorder(self.0.clone()))
    }

    fn tracks_durable_files(&self) -> bool {
        true
    }

    fn after_syscall(&mut self, k: &Kernel) {
        CrashLog::note_durable(&self.0, k);
    }

    fn at_end(&mut self, end: GuestEnd, m: &mut Machine) -> bool {
        let at_end_only = self.0.borrow().at_end_only;
        if matches!(end, GuestEnd::Exited(_)) || at_end_only && end == GuestEnd::Hang {
            // The program's end is a crash point too: what it left unpersisted may be lost. With
            // `--crash-at N` the workload stops after N instructions, and that is the one point.
            self.0.borrow_mut().recording_end = true;
            m.crash_point_here();
        }
        at_end_only
    }

    fn symbolise(&mut self, m: &Machine, k: &Kernel, symbols: &Objects, pm_dir: &Path) {
        let mut log = self.0.borrow_mut();
        for p in &mut log.points {
            let mut pcs = vec![p.pc];
            pcs.extend(m.stacks().call_sites(p.stack));
            p.frames = symbols.own_frames(&pcs);
        }
        let sites: Vec<(u64, (u64, StackId, u32))> = log.store_sites.iter().map(|(k, v)| (*k, *v)).collect();
        for (id, (pc, stack, tid)) in sites {
            let mut pcs = vec![pc];
            pcs.extend(m.stacks().call_sites(stack));
            log.store_frames.insert(id, (symbols.own_frames(&pcs), tid));
        }
        for (host, id) in k.pm_files() {
            if let Ok(rel) = Path::new(host).strip_prefix(pm_dir) {
                log.file_paths.insert(*id, rel.to_path_buf());
            }
        }
        log.initial_files = k.initial_files().clone();
    }
}
