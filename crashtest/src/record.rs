//! The workload run's recorder: at every crash point, the device's crash space, the PM files'
//! bytes and what a crash keeps of the files the workload changed in its working directory.
//!
//! The recorder is a pass ([`Recorder`]) over the workload's events and a [`driver::Probe`] of
//! its run: the session hands it every change of the kernel's durable working-directory files
//! (after each system call), makes the program's end a crash point, and gives it the run's
//! symbols at the end, when the points and the stores they lose are symbolised.
//!
//! A point's PM files are [`PagedFile`]s sharing every unchanged page with the point before, and
//! the recorder reads only what may have changed since that point: the pages the program stored
//! to (from the store events, by device address), and, after a system call (which may write,
//! grow, create or remove files), every file's data extents. So a point costs the pages written
//! since the last one, in time and memory, however big the pool: a 1 GiB pool is never read
//! whole, nor held.

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

use crate::paged::PAGE;
use rustc_hash::FxHashMap;
use syscalls::Kernel;

pub use crate::paged::PagedFile;

/// The PM files at a crash point.
pub type PointFiles = BTreeMap<PathBuf, PagedFile>;

/// What a crash image keeps of the regular files the workload changed in its working directory,
/// by path relative to it: their content as of their last fsync, or `None` where the image has
/// no such file (files the workload never changed are the user's, as they are).
pub type CwdFiles = BTreeMap<PathBuf, Option<Vec<u8>>>;

/// One crash point of the workload run: where it was and what a crash there may leave.
#[derive(Clone)]
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

/// What the recorder collects during the workload run. A copy is cheap: points share their
/// files' pages ([`PagedFile`]) and working-directory files.
#[derive(Clone)]
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
    /// A probe tells the log of every system call ([`Recording`]): between two, only the pages
    /// stored to can change. Without one, every point reads every file's data.
    tracked: bool,
    /// A system call ran since the last point: the next reads every file's data.
    rescan: bool,
    /// Pages stored to since the last point, as (PM file id, page index), in store order.
    dirty: Vec<(u32, u64)>,
    /// The pages stored to before the last point, read once more at the next: a store's bytes
    /// reach memory after its event, so a point recorded at a store event reads them next time.
    carried: Vec<(u32, u64)>,
    /// PM file ids the kernel handed out so far, with their paths relative to the PM directory.
    ids: BTreeMap<u32, PathBuf>,
}

impl CrashLog {
    /// An empty log for a workload on the PM directory `pm_dir`; `every_store`: each PM store is a crash point too.
    pub fn new(pm_dir: &Path, every_store: bool) -> Rc<RefCell<CrashLog>> {
        Rc::new(RefCell::new(CrashLog::empty(pm_dir, every_store)))
    }

    /// [`CrashLog::new`]'s log, unshared.
    pub fn empty(pm_dir: &Path, every_store: bool) -> CrashLog {
        CrashLog {
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
            tracked: false,
            rescan: false,
            dirty: Vec::new(),
            carried: Vec::new(),
            ids: BTreeMap::new(),
        }
    }

    /// Takes what the log holds out of `log` (shared with a run's recorder), leaving an empty
    /// log in its place.
    pub fn take(log: &RefCell<CrashLog>) -> CrashLog {
        let mut l = log.borrow_mut();
        let empty = CrashLog::empty(&l.pm_dir, l.every_store);
        std::mem::replace(&mut *l, empty)
    }

    /// After a system call: the files may have changed in any way, and the kernel may have
    /// handed out new PM file ids.
    fn after_syscall(&mut self, k: &syscalls::Kernel) {
        self.tracked = true;
        self.rescan = true;
        if k.pm_files().len() != self.ids.len() {
            for (host, id) in k.pm_files() {
                if let Ok(rel) = Path::new(host).strip_prefix(&self.pm_dir) {
                    self.ids.insert(*id, rel.to_path_buf());
                }
            }
        }
    }

    /// A PM store of `size` bytes at device address `dev`: its pages may have changed.
    fn stored(&mut self, dev: u64, size: u32) {
        let id = (dev >> emu::pm::FILE_SHIFT) as u32;
        let off = dev & ((1 << emu::pm::FILE_SHIFT) - 1);
        let (first, last) = (off / PAGE as u64, (off + u64::from(size.max(1)) - 1) / PAGE as u64);
        for page in first..=last {
            if self.dirty.last() != Some(&(id, page)) {
                self.dirty.push((id, page));
            }
        }
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

    /// The PM files now, sharing unchanged pages with the last point's: the pages stored to since
    /// then, or, after a system call (or with no probe to say when one ran), every file's data.
    fn snapshot_files(&mut self) -> std::io::Result<PointFiles> {
        let prev = self.points.last().map(|p| p.files.clone());
        let mut touched = std::mem::take(&mut self.dirty);
        let carried = std::mem::replace(&mut self.carried, touched.clone());
        let rescan = std::mem::take(&mut self.rescan) || !self.tracked;
        let Some(prev) = prev.filter(|_| !rescan) else { return Ok(self.read_all()) };
        touched.extend(carried);
        touched.sort_unstable();
        touched.dedup();
        let mut out = (*prev).clone();
        for group in touched.chunk_by(|a, b| a.0 == b.0) {
            let Some(rel) = self.ids.get(&group[0].0) else { return Ok(self.read_all()) };
            let Some(file) = prev.get(rel) else { return Ok(self.read_all()) };
            let pages: Vec<u64> = group.iter().map(|(_, p)| *p).collect();
            out.insert(rel.clone(), file.reread_pages(&self.pm_dir.join(rel), &pages)?);
        }
        Ok(out)
    }

    /// Every file in the PM directory, by its data, sharing the pages equal to the last point's.
    fn read_all(&self) -> PointFiles {
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
                        if let Ok(rel) = p.strip_prefix(&self.pm_dir) {
                            let old = prev.as_ref().and_then(|f| f.get(rel));
                            if let Ok(mut file) = PagedFile::read(&p, old) {
                                // Equal contents are the same version, as if only the changed
                                // pages had been read.
                                if let Some(o) = old.filter(|o| o.shares_pages(&file)) {
                                    file = o.clone();
                                }
                                out.insert(rel.to_path_buf(), file);
                            }
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
        // A file that cannot be read now (removed under the run) is left as it was.
        let files = self.snapshot_files().unwrap_or_else(|_| self.read_all());
        let unchanged = |last: &CrashPoint| {
            last.files.len() == files.len() && last.files.iter().zip(&files).all(|((p, a), (q, b))| p == q && a.same(b))
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
                log.stored(ev.dev, ev.size);
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

    /// The copy records into the same log: a checkpoint of the run holds what the log had
    /// gathered through the probe ([`Recording`]'s `save`), and rewinding puts it back.
    fn fork(&self) -> Option<Box<dyn Analysis>> {
        Some(Box::new(Recorder(self.0.clone())))
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
        self.0.borrow_mut().after_syscall(k);
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

    fn save(&self) -> Option<Box<dyn std::any::Any>> {
        Some(Box::new(self.0.borrow().clone()))
    }

    fn restore(&mut self, saved: &dyn std::any::Any) {
        if let Some(log) = saved.downcast_ref::<CrashLog>() {
            *self.0.borrow_mut() = log.clone();
        }
    }
}
