//! `--strategy exhaustive`: runs schedules depth first, each following a prefix of decisions of
//! an earlier run with one decision changed, as long as the prefix has at most `max_preemptions`
//! preemptions, until `limit` runs or none is left. Sequential: each run's decisions decide the
//! next runs. Each finding keeps the decisions that reproduce it. With `--por` only the
//! alternatives dynamic partial-order reduction asks for are tried ([`super::por`]).
//!
//! What waits to run is kept small: a run with `n` decisions can leave up to `n` times the
//! threads alternatives behind (with `--preempt all`, hundreds of thousands), and each used to
//! be a copy of its whole prefix (quadratic: 21 GB for a 0.9 M-instruction program). A pending
//! schedule is now the run's decisions, shared by all its alternatives, a length and the
//! alternative ([`Branch`]); the run's decisions are freed with its last alternative. Without
//! reduction the prefixes form a tree, so no two are equal and none is remembered; with it, a
//! 128-bit hash of each prefix tried keeps duplicates out.

use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::rc::Rc;

use crate::report::RunReport;
use crate::session::{Checkpoint, Driven};
use crate::spec::{Branching, RunOutcome, RunSpec, SessionError};
use crate::{Runner, Session};

use super::por;

/// A schedule still to run: the first `len` decisions of an earlier run, then `alt` (none for
/// the first run).
pub(crate) struct Branch {
    base: Rc<[u32]>,
    len: usize,
    alt: Option<u32>,
}

impl Branch {
    pub(crate) fn prefix(&self) -> Vec<u32> {
        self.base[..self.len].iter().copied().chain(self.alt).collect()
    }

    /// Two independent 64-bit hashes of the prefix (deterministic: fixed keys).
    fn key(&self) -> (u64, u64) {
        #[allow(deprecated)]
        let mut a = std::hash::SipHasher::new_with_keys(0, 0);
        #[allow(deprecated)]
        let mut b = std::hash::SipHasher::new_with_keys(0x9e37_79b9_7f4a_7c15, 0xf39c_c060_5ced_c834);
        self.base[..self.len].hash(&mut a);
        self.alt.hash(&mut a);
        self.base[..self.len].hash(&mut b);
        self.alt.hash(&mut b);
        (a.finish(), b.finish())
    }
}

/// How many bytes of snapshots an exploration keeps by default (`--max-host-memory` lowers it).
pub const SNAPSHOT_BUDGET: u64 = 1 << 30;

/// Snapshots a run takes at most, evenly spaced, besides those where it leaves the path and
/// where waiting schedules leave it: a schedule that DPOR asks for at any decision of a run
/// re-runs at most a 32nd of a run before it (its new decision; everything after it must run
/// anyway), for a cost per run of 32 snapshots (each copies the pages written since the last
/// one, the kernel and the passes). The spacing is a 32nd of the longest run so far (in the
/// first run, of how far it has gone), within [`MIN_GAP`] and [`SNAPSHOT_GAP`].
const SNAPSHOTS_PER_RUN: u64 = 32;

/// Instructions between two evenly spaced snapshots of a run at least: below it a snapshot
/// costs more than re-running to it does, and may serve no schedule.
const MIN_GAP: u64 = 10_000;

/// Snapshots at the decisions where schedules waiting on the stack leave a run (each serves at
/// least one of them) are a 64th of the longest run apart at least, within [`MIN_WANTED_GAP`]
/// and [`MIN_GAP`]: in runs of tens of thousands of instructions, DPOR's alternatives are a few
/// hundred instructions apart, and with `MIN_GAP` between them the schedules re-ran most of the
/// way from the snapshot before (`thr_lost_update`: 2.9× fewer instructions than from the start,
/// 3.1× now). Runs of 640,000 instructions or more space them as before.
const WANTED_PER_RUN: u64 = 64;

/// Instructions between two snapshots where waiting schedules leave a run at least.
const MIN_WANTED_GAP: u64 = 100;

/// Instructions between two evenly spaced snapshots at most: a snapshot copies the PM
/// directory's files (all but their all-zero chunks), which a large pool makes cost what
/// running a million instructions does.
const SNAPSHOT_GAP: u64 = 1_000_000;

/// Explores up to `limit` schedules of `spec` with at most `max_preemptions` preemptions each.
/// `snapshot_budget`: the bytes of snapshots the exploration may hold, to branch from (`None`:
/// every schedule runs from the program's start, `--no-snapshots`).
pub fn explore(
    runner: &Runner,
    spec: &RunSpec,
    limit: u32,
    max_preemptions: u32,
    por: bool,
    snapshot_budget: Option<u64>,
) -> Result<(RunReport, RunOutcome), SessionError> {
    let mut pending = vec![Branch { base: Rc::from(Vec::new()), len: 0, alt: None }];
    let mut seen: std::collections::BTreeSet<(u64, u64)> = std::collections::BTreeSet::new();
    let mut first: Option<(RunReport, RunOutcome)> = None;
    let mut findings = Vec::new();
    let mut runs = 0u32;
    let mut tree = Tree::new(runner, spec, por, snapshot_budget);
    while let Some(branch) = pending.pop() {
        // ferrite's interrupt (emu::interrupt) starts no schedule after it; a schedule it
        // stopped is left out (its findings' replay would need its stop point), but the first,
        // whose report says where it stopped.
        if runs >= limit || (runs > 0 && emu::interrupt::requested().is_some()) {
            pending.push(branch);
            break;
        }
        runs += 1;
        let prefix = branch.prefix();
        drop(branch);
        let wanted = if snapshot_budget.is_some() { branch_points(&pending, &prefix) } else { Vec::new() };
        let mut live = || live_points_of(pending.iter().rev().map(|b| (&b.base[..], b.len)), &prefix);
        let (report, out, children) = tree.step(&prefix, &wanted, &mut live, runs > 1, max_preemptions)?;
        if runs > 1 && report.run.exit.interrupted.is_some() {
            runs -= 1;
            break;
        }
        findings.extend(report.findings.clone());
        // Depth first: the deepest alternatives are tried first.
        for c in children {
            if !por || seen.insert(c.key()) {
                pending.push(c);
            }
        }
        if first.is_none() {
            first = Some((report, out));
        }
    }
    let (mut report, mut out) = first.ok_or(SessionError::NoRun)?;
    report.findings = analyses::Finding::merge(findings);
    report.run.schedules = runs;
    if let Some(sig) = emu::interrupt::requested() {
        report.run.interrupted = Some(sig);
    }
    let b = tree.counts;
    if !spec.quiet {
        say!(
            "ferrite: exhaustive exploration: {runs} schedule(s) with at most {max_preemptions} preemption(s){}{}",
            if por { " (partial-order reduced)" } else { "" },
            if pending.is_empty() {
                ", every one"
            } else if report.run.interrupted.is_some() {
                "; interrupted, more remain"
            } else {
                "; more remain (raise --explore)"
            }
        );
        if snapshot_budget.is_some() && runs > 1 {
            say!("{}", b.summary("schedule"));
        }
    }
    out.branching = Some(b);
    Ok((report, out))
}

/// Pending schedules of at most this many runs (the top of the stack, next to run) are looked at
/// for the decisions a run should be snapshotted at on its way to its own ([`branch_points`]):
/// comparing a run's decisions with the schedule's costs their length, and deeper in the stack
/// schedules wait behind others that drop the snapshots anyway (depth first).
const BRANCH_POINT_RUNS: usize = 16;

/// The decisions before `prefix`'s own new one (its last) at which schedules waiting on the stack
/// `pending` leave the decisions `prefix` follows: a snapshot there, taken on the way, is one
/// they go on from instead of a shallower one (without them, every schedule that DPOR asks for at
/// decisions of a run made far from its snapshots re-runs that stretch). Sorted, each once.
fn branch_points(pending: &[Branch], prefix: &[u32]) -> Vec<usize> {
    branch_points_of(pending.iter().rev().map(|b| (&b.base[..], b.len)), prefix)
}

/// [`branch_points`] of waiting schedules given as the decisions they follow and where they
/// leave them (`(decisions, len)`: they follow `decisions[..len]`), next to run first.
pub(crate) fn branch_points_of<'p>(pending: impl Iterator<Item = (&'p [u32], usize)>, prefix: &[u32]) -> Vec<usize> {
    let branch = prefix.len().saturating_sub(1);
    let mut out = Vec::new();
    // The stack holds each run's alternatives together: the common length is computed once per
    // run (the schedules of one run share its decisions).
    let mut last: Option<(*const u32, usize)> = None;
    let mut runs = 0;
    for (base, len) in pending {
        let common = match last {
            Some((p, c)) if std::ptr::eq(p, base.as_ptr()) => c,
            _ => {
                runs += 1;
                if runs > BRANCH_POINT_RUNS {
                    break;
                }
                let c = base.iter().zip(prefix).take_while(|(x, y)| x == y).count();
                last = Some((base.as_ptr(), c));
                c
            }
        };
        if len < branch && len <= common {
            out.push(len);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Where the waiting schedules given as in [`branch_points_of`] that follow the decisions of
/// `prefix` as far as they go leave them (all of them, not only the next few): each goes on from
/// the path's deepest snapshot at or before its point. Sorted, each once.
pub(crate) fn live_points_of<'p>(pending: impl Iterator<Item = (&'p [u32], usize)>, prefix: &[u32]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut last: Option<(*const u32, usize)> = None;
    for (base, len) in pending {
        let common = match last {
            Some((p, c)) if std::ptr::eq(p, base.as_ptr()) => c,
            _ => {
                let c = base.iter().zip(prefix).take_while(|(x, y)| x == y).count();
                last = Some((base.as_ptr(), c));
                c
            }
        };
        if len <= common {
            out.push(len);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A snapshot on the exploration's current path: the session before its decision `at`, taken
/// in a run whose first `at` decisions chose `chosen`. Any schedule that agrees with them goes on
/// from it exactly as it would from the start.
struct Snap {
    at: usize,
    chosen: Vec<u32>,
    checkpoint: Checkpoint,
    /// Accesses the run had recorded for `--por` when it was taken.
    accesses: usize,
}

/// What [`evict`] needs of a held snapshot: the decision it is before, and the bytes dropping it
/// frees (the pages no other snapshot shares).
trait Held {
    fn at(&self) -> usize;
    fn unshared_bytes(&self) -> u64;
}

impl Held for Snap {
    fn at(&self) -> usize {
        self.at
    }

    fn unshared_bytes(&self) -> u64 {
        self.checkpoint.unshared_bytes() as u64
    }
}

/// The runs of an exploration: one session, brought back to the snapshot nearest a schedule's
/// first new decision instead of started again.
///
/// Which snapshots are kept: those along the path of the depth-first search only. A run that
/// starts at decision `b` (where its schedule leaves the path) snapshots itself before its
/// decisions from `b` on (from `b + 1` if the path already has one at `b`), while the snapshots
/// held stay under the budget; before a run, every snapshot past its first new decision, or of
/// a run that chose otherwise before it, is dropped: depth first, no later schedule agrees with
/// it (with `--por` a later one may, and then goes on from an earlier snapshot). So the
/// snapshots held are at most one per decision of the current path, and never more bytes than
/// the budget.
///
/// When a snapshot would take the held ones past the budget, room is made before refusing it
/// ([`evict`]): first the path's snapshots before the run's new decision that no waiting
/// schedule would go on from (a schedule goes on from the deepest snapshot at or before where it
/// leaves the path, so a snapshot with no waiting schedule leaving between it and the next one
/// serves none; the one the run itself went on from stays, for the schedules its run leads to
/// that no snapshot of its own serves), then every other one of the run's own evenly spaced
/// snapshots after its new decision, its spacing doubled for the rest of the run (the
/// snapshots stay evenly spaced, half as dense). Only if that is not room enough is the
/// snapshot refused, and the run takes no more. Dropping snapshots changes where schedules go
/// on from, never what they run: the same schedules, reports and trace hashes.
pub(crate) struct Tree<'r, 'a> {
    runner: &'r Runner<'a>,
    spec: &'r RunSpec,
    por: bool,
    budget: Option<u64>,
    /// The session and the PM directory it runs on (the session's files are restored in place).
    session: Option<(Session, tempfile::TempDir)>,
    path: Vec<Snap>,
    held: u64,
    /// The most instructions a run of the exploration took (what spaces its snapshots).
    longest: u64,
    accesses: Rc<RefCell<Vec<por::Access>>>,
    counts: Branching,
}

impl<'r, 'a> Tree<'r, 'a> {
    pub(crate) fn new(runner: &'r Runner<'a>, spec: &'r RunSpec, por: bool, budget: Option<u64>) -> Tree<'r, 'a> {
        Tree {
            runner,
            spec,
            por,
            budget,
            session: None,
            path: Vec::new(),
            held: 0,
            longest: 0,
            accesses: Rc::new(RefCell::new(Vec::new())),
            counts: Branching::default(),
        }
    }

    /// The spec of the run of `prefix` on the PM directory `dir`.
    fn spec_of(spec: &RunSpec, prefix: &[u32], later: bool, dir: &std::path::Path) -> RunSpec {
        let mut s = spec.clone();
        s.pm_dir = dir.to_path_buf();
        s.schedule = prefix.to_vec();
        // Each schedule is a run of its own: it must not see the files an earlier one left in
        // the working directory (as `--explore`'s runs, each writes its own overlay).
        s.private_cwd = true;
        s.discard_output |= later;
        s.quiet |= later;
        s
    }

    /// Runs the schedule `prefix`, from the nearest usable snapshot or from the start; its
    /// report and outcome (its findings keep the schedule), and the schedules it leads to, in
    /// the order they are pushed on the stack. `later` runs discard their output.
    pub(crate) fn step(
        &mut self,
        prefix: &[u32],
        wanted: &[usize],
        live: &mut dyn FnMut() -> Vec<usize>,
        later: bool,
        max_preemptions: u32,
    ) -> Result<(RunReport, RunOutcome, Vec<Branch>), SessionError> {
        // The first decision this schedule may make differently from the path.
        let branch = prefix.len().saturating_sub(1);
        while self.path.last().is_some_and(|s| s.at > branch || s.chosen[..] != prefix[..s.at]) {
            let last = self.path.len() - 1;
            drop_snapshot(&mut self.path, &mut self.held, last);
        }
        // Where the waiting schedules leave the path, asked for once the budget is full.
        let mut live_points: Option<Vec<usize>> = None;
        // The run's spacing of its evenly spaced snapshots, doubled each time they are thinned.
        let mut spread = 1u64;
        let mut started_at = 0;
        let restored = match (self.path.last(), self.session.as_mut()) {
            (Some(snap), Some((session, _))) => match session.rewind(&snap.checkpoint) {
                Ok(()) => {
                    session.set_schedule(prefix.to_vec());
                    session.quiet_from_now();
                    self.accesses.borrow_mut().truncate(snap.accesses);
                    started_at = snap.checkpoint.icount();
                    true
                }
                // A host file that cannot be opened again now: the path's other snapshots hold
                // it too.
                Err(_) => {
                    self.counts.refuse("a snapshot could not be restored (a host file cannot be opened again)");
                    false
                }
            },
            _ => false,
        };
        if restored {
            self.counts.from_snapshot += 1;
        } else {
            self.path.clear();
            self.held = 0;
            self.session = None;
            self.accesses.borrow_mut().clear();
            let dir = super::pm_copy(self.spec)?;
            let s = Tree::spec_of(self.spec, prefix, later, dir.path());
            let extra: Vec<Box<dyn analyses::Analysis>> =
                if self.por { vec![Box::new(por::Footprint(self.accesses.clone()))] } else { Vec::new() };
            let session = Session::start(&s, None, extra, false, self.runner.validator_for(&s))?;
            self.session = Some((session, dir));
            self.counts.from_start += 1;
        }
        let (session, dir) = self.session.as_mut().expect("just made");
        let s = Tree::spec_of(self.spec, prefix, later, dir.path());
        // Snapshots where the schedule leaves the path (unless the path has one there), at
        // decisions on the way there where waiting schedules leave it (`wanted`, a `wanted_gap`
        // after the last one), and at decisions a `gap` after the last one, within the budget.
        let from = self.path.last().map_or(0, |p| p.at + 1);
        let points: Vec<usize> = wanted.iter().copied().filter(|&k| k >= from && k < branch).collect();
        let longest = self.longest;
        let gap = |icount: u64| (longest.max(icount) / SNAPSHOTS_PER_RUN).clamp(MIN_GAP, SNAPSHOT_GAP);
        let wanted_gap = (longest / WANTED_PER_RUN).clamp(MIN_WANTED_GAP, MIN_GAP);
        let mut want = self.budget.map(|_| from.min(branch));
        let mut last = self.path.last().map(|p| p.checkpoint.icount());
        let mut refused = false;
        let end = loop {
            session.stop_before_decision(want);
            match session.drive_debug() {
                Driven::End(end) => break end,
                Driven::Decision => {
                    let at = session.machine_mut().scheduler().decisions.len();
                    let icount = session.machine().icount();
                    want = Some(at + 1);
                    let after = if at == branch {
                        0
                    } else if points.binary_search(&at).is_ok() {
                        wanted_gap
                    } else {
                        gap(icount).saturating_mul(spread)
                    };
                    if last.is_some_and(|l| icount < l + after) {
                        continue;
                    }
                    let c = match session.checkpoint_or_why() {
                        Ok(c) => c,
                        Err(why) => {
                            // Some reasons pass (a pass that watches all memory until the
                            // second thread starts), others do not (a pass that cannot be
                            // copied, a socket): tried again a gap later, counted once a run.
                            if !refused {
                                self.counts.refuse(why);
                                refused = true;
                            }
                            last = Some(icount);
                            continue;
                        }
                    };
                    let bytes = c.bytes() as u64;
                    let budget = self.budget.unwrap_or(0);
                    if self.held + bytes > budget {
                        let live = live_points.get_or_insert_with(&mut *live);
                        let need = self.held + bytes - budget;
                        evict(&mut self.path, &mut self.held, &mut self.counts, need, branch, live, &mut spread);
                    }
                    if self.held + bytes > budget {
                        want = None;
                        continue;
                    }
                    let chosen = session.machine_mut().scheduler().decisions.iter().map(|d| d.chosen).collect();
                    let accesses = self.accesses.borrow().len();
                    self.path.push(Snap { at, chosen, checkpoint: c, accesses });
                    self.held += bytes;
                    self.counts.snapshots += 1;
                    self.counts.peak_bytes = self.counts.peak_bytes.max(self.held);
                    last = Some(icount);
                }
                // Stops only a debugger asks for; none is set.
                _ => {}
            }
        };
        let out = crate::validation::complete(&s, session.finish(end));
        // How far the schedule ran before its first new decision (the first run has none).
        if let Some(d) = out.decisions.get(branch).filter(|_| !prefix.is_empty()) {
            self.counts.instructions_to_branch += d.at.saturating_sub(started_at);
        }
        self.longest = self.longest.max(out.instructions);
        self.counts.instructions += out.instructions - started_at;
        self.counts.instructions_from_start += out.instructions;
        self.counts.chain_trace(&out.trace_hash);
        let mut report = RunReport::of(&s, &out);
        for f in &mut report.findings {
            f.schedule = Some(prefix.to_vec());
        }
        let children =
            children(prefix, &out.decisions, self.por.then(|| self.accesses.borrow()).as_deref(), max_preemptions);
        Ok((report, out, children))
    }
}

/// Drops the path's snapshot `i`, and what it alone held from the bytes `held`.
fn drop_snapshot<S: Held>(path: &mut Vec<S>, held: &mut u64, i: usize) {
    let s = path.remove(i);
    *held = held.saturating_sub(s.unshared_bytes());
}

/// Makes room for `need` more bytes on `path` (holding `held`), if it can, in a run that left
/// the path at decision `branch`, with waiting schedules leaving the path at `live`: drops the
/// snapshots before `branch` no waiting schedule would go on from, then, while that is not
/// enough, every other one of the run's snapshots after `branch` (the newest kept), doubling
/// `spread`. Counts what it drops in `counts` (`evicted`, and `thinned` of those the second
/// step dropped).
fn evict<S: Held>(
    path: &mut Vec<S>,
    held: &mut u64,
    counts: &mut Branching,
    need: u64,
    branch: usize,
    live: &[usize],
    spread: &mut u64,
) {
    let target = held.saturating_sub(need);
    // A snapshot at `at` serves the schedules leaving the path from `at` up to the next
    // snapshot; the run's own branch counts as one (the schedules of its run that no snapshot
    // of its own serves go on from the one it went on from).
    let mut i = 0;
    while i < path.len() && *held > target {
        let at = path[i].at();
        let next = path.get(i + 1).map_or(usize::MAX, |n| n.at());
        let serves = |p: usize| p >= at && p < next;
        if at < branch && !serves(branch) && !live.iter().any(|&p| serves(p)) {
            drop_snapshot(path, held, i);
            counts.evicted += 1;
        } else {
            i += 1;
        }
    }
    while *held > target {
        let tail: Vec<usize> = (0..path.len()).filter(|&i| path[i].at() > branch).collect();
        if tail.len() < 2 {
            break;
        }
        // Every other one, the newest kept (the next snapshot shares the pages not written since
        // it, instead of copying them again); from the back, so the indices stay right.
        for &i in tail.iter().rev().skip(1).step_by(2) {
            drop_snapshot(path, held, i);
            counts.evicted += 1;
            counts.thinned += 1;
        }
        *spread = spread.saturating_mul(2);
    }
}

/// The schedules a run of `prefix` with `decisions` leads to, in the order they are pushed on
/// the stack: each decision past the prefix with each other thread (with `--por`, `accesses`:
/// only those dynamic partial-order reduction asks for, at any decision).
fn children(
    prefix: &[u32],
    d: &[emu::sched::Decision],
    accesses: Option<&Vec<por::Access>>,
    max_preemptions: u32,
) -> Vec<Branch> {
    let por = accesses.is_some();
    let backtrack = accesses.map(|a| por::backtracks(d, a));
    let chosen: Rc<[u32]> = d.iter().map(|x| x.chosen).collect();
    let mut preemptions = 0u32;
    let mut children = Vec::new();
    for (j, x) in d.iter().enumerate() {
        // Without reduction, decisions before the prefix's end were expanded by the runs
        // that led here. With it, a race found now can ask for an alternative at an earlier
        // decision (DPOR's backtrack sets along the path); `seen` keeps each prefix once.
        if j >= prefix.len() || por {
            let wanted = |t: &u32| backtrack.as_ref().is_none_or(|b| b[j].contains(t));
            for &alt in x.runnable.iter().filter(|t| **t != x.chosen && wanted(t)) {
                let cost = preemptions + u32::from(x.optional && alt != x.current);
                if cost <= max_preemptions {
                    children.push(Branch { base: chosen.clone(), len: j, alt: Some(alt) });
                }
            }
        }
        preemptions += u32::from(x.optional && x.chosen != x.current);
    }
    children
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_points_are_where_waiting_schedules_leave_the_decisions_followed() {
        // A run chose [1, 2, 1, 2, 1, 2]; the schedule to run leaves it at decision 4.
        let base: Rc<[u32]> = Rc::from(vec![1, 2, 1, 2, 1, 2]);
        let other: Rc<[u32]> = Rc::from(vec![1, 1, 1, 1]);
        let b = |base: &Rc<[u32]>, len| Branch { base: base.clone(), len, alt: Some(9) };
        // The stack, next to run last: waiting at 1 and 2 of the same run, at 3 of a run that
        // chose otherwise at 1, and at 4 and 5 (not before the schedule's new decision).
        let pending = vec![b(&base, 1), b(&other, 3), b(&base, 2), b(&base, 5), b(&base, 4)];
        let prefix = Branch { base: base.clone(), len: 4, alt: Some(7) }.prefix();
        assert_eq!(branch_points(&pending, &prefix), vec![1, 2]);
        // One that chose the same up to 1 only waits at 1 or before: counted if it leaves there.
        let pending = vec![b(&other, 1), b(&other, 2)];
        assert_eq!(branch_points(&pending, &prefix), vec![1]);
        // The first run (no prefix) has none.
        assert!(branch_points(&pending, &[]).is_empty());
    }

    /// A held snapshot of the eviction tests: its decision and 10 bytes no other holds.
    struct Fake(usize);

    impl Held for Fake {
        fn at(&self) -> usize {
            self.0
        }

        fn unshared_bytes(&self) -> u64 {
            10
        }
    }

    fn ats(path: &[Fake]) -> Vec<usize> {
        path.iter().map(|s| s.0).collect()
    }

    /// A run that left the path at decision 6, holding snapshots before it at 0 (which a waiting
    /// schedule leaving at 1 goes on from), 2 (which none does) and 5 (which the run went on
    /// from), and its own at 7, 9, 11, 13, 15.
    fn held_path() -> (Vec<Fake>, u64) {
        let path: Vec<Fake> = [0, 2, 5, 7, 9, 11, 13, 15].into_iter().map(Fake).collect();
        let held = 10 * path.len() as u64;
        (path, held)
    }

    #[test]
    fn eviction_drops_first_the_snapshots_no_waiting_schedule_goes_on_from() {
        let (mut path, mut held) = held_path();
        let (mut counts, mut spread) = (Branching::default(), 1);
        evict(&mut path, &mut held, &mut counts, 10, 6, &[1], &mut spread);
        assert_eq!(ats(&path), [0, 5, 7, 9, 11, 13, 15]);
        assert_eq!((held, counts.evicted, counts.thinned, spread), (70, 1, 0, 1));
    }

    #[test]
    fn eviction_then_thins_the_runs_own_snapshots_keeping_the_newest() {
        let (mut path, mut held) = held_path();
        let (mut counts, mut spread) = (Branching::default(), 1);
        // 40 bytes to free: 2 goes (10), then every other one of 7..15 but the newest, 13 and 9
        // (20), then every other one of what is left, 11 (10); the spacing doubled twice.
        evict(&mut path, &mut held, &mut counts, 40, 6, &[1], &mut spread);
        assert_eq!(ats(&path), [0, 5, 7, 15]);
        assert_eq!((held, counts.evicted, counts.thinned, spread), (40, 4, 3, 4));
        // The snapshots before the run's new decision that serve someone are never thinned: with
        // fewer than two of its own left, no room is made, and the snapshot is refused.
        let mut path: Vec<Fake> = [0, 5, 7].into_iter().map(Fake).collect();
        let (mut held, mut counts) = (30, Branching::default());
        evict(&mut path, &mut held, &mut counts, 20, 6, &[1], &mut spread);
        assert_eq!(ats(&path), [0, 5, 7]);
        assert_eq!((held, counts.evicted, counts.thinned), (30, 0, 0));
    }
}
