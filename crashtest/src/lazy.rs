//! Lazy exploration of a crash point's images, after Jaaru (Gorjiara, Xu and Demsky, ASPLOS '21:
//! "Jaaru: Efficiently Model Checking Persistent Memory Programs").
//!
//! Eager testing recovers every image of a point: the product of every unpersisted line's
//! candidate versions, 2^N for N lines with one pending store each. Most recoveries read few of
//! those lines, and a recovery's behaviour depends only on the bytes it reads. Jaaru therefore
//! leaves each line's value open and decides it only when recovery loads from it, branching there
//! over the line's versions. ferrite does the same by re-execution, as stateless model checkers do:
//!
//! 1. Recover the image where every open line holds its newest version, watching which open lines
//!    the recovery (and the `--check` command, for bytes recovery did not write) loads from before
//!    writing them, in the order of their first such load.
//! 2. That run stands for every image that agrees with it on the lines it read. For each line it
//!    read beyond those already decided (deepest first), and each other version of that line, the
//!    lines read before it keep the values this run saw, the line takes the other version, and
//!    the rest stay open: a new run, which behaves identically up to that load and then diverges.
//!
//! Every image agrees with exactly one run's decided lines, so the runs cover the whole space,
//! however large, with one recovery per distinct behaviour; a recovery that reads every line
//! costs as much as eager enumeration (the runs are the images). Re-execution is cheap because
//! recoveries restore a snapshot of the program ([`driver::warm`]). Versions are chosen per line
//! (under `--atomicity word8` a line's words are chosen together when the line is read).
//!
//! What this relies on, and what it does when that fails: the recovery must see PM only through
//! loads the machine observes. A recovery that reads a PM file with `read`/`pread` or maps it
//! privately ([`syscalls::Kernel::pm_file_reads`]; libpmemobj's `pmemobj_open` reads its pool's
//! header with `pread` before mapping it) makes the runs stand for less than every image: such a
//! point is enumerated eagerly when its images fit `--max-images`, and otherwise keeps its lazy
//! runs as its sample (counted as sampled), which follow what recovery loads where an eager
//! sample of a large space draws blind. More
//! than `--max-images` runs at a point end its exploration; the point then counts as sampled.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::rc::Rc;

use analyses::{Analysis, RawFinding};
use emu::events::{Event, Interest};
use emu::pm::{PmDevice, FILE_SHIFT};

use crate::files::{image_files, materialise, Files};
use crate::record::PointData;
use crate::recover::{recovery_spec, verdict_of, Plan, Verdict};
use crate::Error;

/// Per line of a PM file (by device file id and line offset): bytes written so far and bytes
/// loaded before being written, as masks.
#[derive(Default)]
struct Lines {
    masks: BTreeMap<(u32, u64), (u64, u64)>,
    /// Lines in the order of their first load of an unwritten byte.
    order: Vec<(u32, u64)>,
}

/// The observer inside a recovery: which lines it loads from before writing them.
struct LineReads(Rc<RefCell<Lines>>);

impl Analysis for LineReads {
    fn name(&self) -> &'static str {
        "line-reads"
    }

    fn interest(&self) -> Interest {
        Interest::LOADS.union(Interest::STORES)
    }

    fn on_event(&mut self, ev: &Event, _device: &PmDevice) {
        let Some((load, id, off, end)) = crate::validate::pm_access(ev) else { return };
        let mut lines = self.0.borrow_mut();
        let mut line = off & !63;
        while line < end {
            let lo = off.max(line) - line;
            let hi = end.min(line + 64) - line;
            let mask = if hi - lo == 64 { u64::MAX } else { ((1u64 << (hi - lo)) - 1) << lo };
            let Lines { masks, order } = &mut *lines;
            let m = masks.entry((id, line)).or_default();
            if load {
                let unwritten = mask & !m.0;
                if unwritten != 0 {
                    if m.1 == 0 {
                        order.push((id, line));
                    }
                    m.1 |= unwritten;
                }
            } else {
                m.0 |= mask;
            }
            line += 64;
        }
    }

    fn finish(&mut self, _device: &PmDevice) -> Vec<RawFinding> {
        Vec::new()
    }
}

/// A line of a PM file, by path relative to the PM directory and offset.
type LineKey = (PathBuf, u64);

/// One recovery (and checker) of an image, watched: its verdict, the lines it read before writing
/// them in order, and whether it read PM behind the machine's back.
fn watched_recovery(plan: &Plan, files: &Files) -> Result<(Verdict, Vec<LineKey>, bool), Error> {
    let dir = tempfile::Builder::new().prefix("ferrite-recovery-").tempdir()?;
    materialise(files, dir.path())?;
    let run = |argv: &[String]| -> Result<_, Error> {
        let lines = Rc::new(RefCell::new(Lines::default()));
        let spec = recovery_spec(plan, argv, dir.path());
        let extra: Vec<Box<dyn Analysis>> = vec![Box::new(LineReads(lines.clone()))];
        let out = if plan.fresh {
            driver::Runner::default().run_with(&spec, None, extra)?
        } else {
            driver::warm::run_with(&spec, extra)?
        };
        let lines = std::mem::take(&mut *lines.borrow_mut());
        let key = |(id, line): (u32, u64)| out.pm_files.get(&id).map(|p| (p.clone(), line));
        let masks: BTreeMap<LineKey, (u64, u64)> =
            lines.masks.into_iter().filter_map(|(k, v)| Some((key(k)?, v))).collect();
        let order: Vec<LineKey> = lines.order.into_iter().filter_map(key).collect();
        Ok((out, masks, order))
    };
    let (out, written, mut order) = run(&plan.recover)?;
    let mut bypass = out.pm_file_reads > 0;
    let mut verdict = verdict_of(&out, "recovery");
    if let (Verdict::Passed, Some(check)) = (&verdict, &plan.check) {
        let (cout, cmasks, corder) = run(check)?;
        bypass |= cout.pm_file_reads > 0;
        verdict = verdict_of(&cout, "check");
        // The checker reads what recovery left: a line recovery wrote entirely is decided.
        for l in corder {
            let read = cmasks.get(&l).map_or(0, |m| m.1);
            let by_recovery = written.get(&l).map_or(0, |m| m.0);
            if read & !by_recovery != 0 && !order.contains(&l) {
                order.push(l);
            }
        }
    }
    Ok((verdict, order, bypass))
}

/// One recovery of lazy exploration.
pub struct LazyRun {
    /// The image recovered.
    pub choice: Vec<u32>,
    /// How it ended.
    pub verdict: Verdict,
    /// The dimensions it decided (those of the lines it read): it stands for every image that
    /// agrees with `choice` on them. (The others are at their newest values.)
    pub decided: Vec<usize>,
}

/// What lazy exploration of one point found.
pub struct Explored {
    /// The recoveries made, in order.
    pub runs: Vec<LazyRun>,
    /// Every image of the point is covered by a run.
    pub exhaustive: bool,
    /// Recovery read PM behind the machine's back: the runs do not cover every image (the
    /// campaign enumerates the point eagerly if it is small enough).
    pub bypassed: bool,
}

/// Explores one point's images lazily (see the module doc), with at most `plan.max_images` runs.
pub fn explore(point: &PointData, file_paths: &BTreeMap<u32, PathBuf>, plan: &Plan) -> Result<Explored, Error> {
    let space = &point.space;
    let dims = space.dims();
    // The open lines, with the dimensions that choose their value.
    let mut by_line: BTreeMap<LineKey, Vec<usize>> = BTreeMap::new();
    for (d, dim) in dims.iter().enumerate() {
        let dev = dim.line * 64;
        let Some(path) = file_paths.get(&((dev >> FILE_SHIFT) as u32)) else { continue };
        by_line.entry((path.clone(), dev & ((1 << FILE_SHIFT) - 1))).or_default().push(d);
    }
    let newest: Vec<u32> = dims.iter().map(|d| d.size - 1).collect();
    // A node of the search: lines decided so far, in the order recovery read them, with the
    // values of their dimensions.
    type Node = Vec<(LineKey, Vec<u32>)>;
    let mut stack: Vec<Node> = vec![Vec::new()];
    let mut runs = Vec::new();
    let mut exhaustive = true;
    let mut bypassed = false;
    while let Some(node) = stack.pop() {
        if runs.len() >= plan.max_images.max(1) {
            exhaustive = false;
            break;
        }
        let mut choice = newest.clone();
        for (line, values) in &node {
            for (&d, &v) in by_line[line].iter().zip(values) {
                choice[d] = v;
            }
        }
        if emu::interrupt::requested().is_some() {
            // Interrupted: what was explored stands; the rest is not covered.
            exhaustive = false;
            break;
        }
        let Some(files) = image_files(point, &choice, file_paths) else { continue };
        let (verdict, order, bypass) = watched_recovery(plan, &files)?;
        if matches!(verdict, Verdict::Interrupted) {
            exhaustive = false;
            break;
        }
        // Recovery read PM bytes no load showed (PMDK reads its pool header with `pread` before
        // mapping it): the lines it read by loads still guide the search, but the runs no longer
        // stand for every image.
        bypassed |= bypass;
        let decided: BTreeSet<&LineKey> = node.iter().map(|(l, _)| l).collect();
        let mut path = node.clone();
        for line in order {
            if by_line.contains_key(&line) && !decided.contains(&line) && !path.iter().any(|(l, _)| *l == line) {
                let values = by_line[&line].iter().map(|&d| newest[d]).collect();
                path.push((line, values));
            }
        }
        let mut decided_dims: Vec<usize> = path.iter().flat_map(|(l, _)| by_line[l].iter().copied()).collect();
        decided_dims.sort_unstable();
        runs.push(LazyRun { choice, verdict, decided: decided_dims });
        for j in (node.len()..path.len()).rev() {
            let (line, seen) = &path[j];
            let sizes: Vec<u32> = by_line[line].iter().map(|&d| dims[d].size).collect();
            // Every other combination of the line's dimensions, in a fixed order.
            let mut values = vec![0u32; sizes.len()];
            loop {
                if values != *seen {
                    let mut child: Node = path[..j].to_vec();
                    child.push((line.clone(), values.clone()));
                    stack.push(child);
                }
                let Some(k) = (0..values.len()).find(|&k| values[k] + 1 < sizes[k]) else { break };
                values[k] += 1;
                values[..k].iter_mut().for_each(|v| *v = 0);
            }
        }
    }
    Ok(Explored { runs, exhaustive: exhaustive && !bypassed, bypassed })
}
