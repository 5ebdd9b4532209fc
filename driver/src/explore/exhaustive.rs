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

/// Instructions a run goes past its last snapshot before it takes another (besides the one
/// where it leaves the path): a snapshot copies the pages written since the last one (and the
/// PM directory's files whole) and costs up to what running a million instructions does,
/// while the decisions of a multi-threaded stretch come every few hundred.
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
        let (report, out, children) = tree.step(&prefix, runs > 1, max_preemptions)?;
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

/// A snapshot on the exploration's current path: the session before its decision `at`, taken
/// in a run whose first `at` decisions chose `chosen`. Any schedule that agrees with them goes on
/// from it exactly as it would from the start.
struct Snap {
    at: usize,
    chosen: Vec<u32>,
    checkpoint: Checkpoint,
    /// Accesses the run had recorded for `--por` when it was taken.
    accesses: usize,
    bytes: u64,
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
pub(crate) struct Tree<'r, 'a> {
    runner: &'r Runner<'a>,
    spec: &'r RunSpec,
    por: bool,
    budget: Option<u64>,
    /// The session and the PM directory it runs on (the session's files are restored in place).
    session: Option<(Session, tempfile::TempDir)>,
    path: Vec<Snap>,
    held: u64,
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
        later: bool,
        max_preemptions: u32,
    ) -> Result<(RunReport, RunOutcome, Vec<Branch>), SessionError> {
        // The first decision this schedule may make differently from the path.
        let branch = prefix.len().saturating_sub(1);
        while self.path.last().is_some_and(|s| s.at > branch || s.chosen[..] != prefix[..s.at]) {
            let s = self.path.pop().expect("checked");
            self.held -= s.bytes;
        }
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
        // A snapshot where the schedule leaves the path (unless the path has one there), then
        // at decisions at least `SNAPSHOT_GAP` instructions after the last one, within the
        // budget.
        let mut want =
            self.budget.map(|_| if self.path.last().is_some_and(|p| p.at == branch) { branch + 1 } else { branch });
        let mut last = self.path.last().map(|p| p.checkpoint.icount());
        let end = loop {
            session.stop_before_decision(want);
            match session.drive_debug() {
                Driven::End(end) => break end,
                Driven::Decision => {
                    let at = session.machine_mut().scheduler().decisions.len();
                    let icount = session.machine().icount();
                    want = Some(at + 1);
                    if last.is_some_and(|l| at > branch && icount < l + SNAPSHOT_GAP) {
                        continue;
                    }
                    let c = match session.checkpoint_or_why() {
                        Ok(c) => c,
                        Err(why) => {
                            // Nothing changes that in this run (a pass, taint, validation, a
                            // socket), or not soon.
                            self.counts.refuse(why);
                            want = None;
                            continue;
                        }
                    };
                    let bytes = c.bytes() as u64;
                    if self.held + bytes > self.budget.unwrap_or(0) {
                        want = None;
                        continue;
                    }
                    let chosen = session.machine_mut().scheduler().decisions.iter().map(|d| d.chosen).collect();
                    let accesses = self.accesses.borrow().len();
                    self.path.push(Snap { at, chosen, checkpoint: c, accesses, bytes });
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
