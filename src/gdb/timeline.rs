//! A replayed run as a line a debugger moves along, in both directions.
//!
//! A position is a retired-instruction count: position `n` is the machine just before the
//! instruction numbered `n` runs (counting from 0, all threads together), and the thread that
//! runs it is the one the debugger stops in. Because a run is a function of its inputs and seed,
//! every position is reached again, identically, by running the same program from its start to
//! it: going backwards is going forwards from the beginning, as rr does between its checkpoints.
//! Each incarnation of the run gets a fresh copy of the PM directory as it was before the first
//! one, so the files the run changed do not change the run.
//!
//! Stops never change the run (`emu::machine::debug`): a forward `continue` that stops at ten
//! breakpoints makes the same schedule, memory and trace hash as one that stops at none, so a
//! position found in one incarnation is the same in the next.
//!
//! The passes do not run: they change nothing of the run, and the report holds their findings.
//!
//! Snapshots along the way bound the cost of going back, as rr's checkpoints do: the timeline
//! snapshots the whole session ([`Session::checkpoint`]) before the first instruction and every
//! [`INTERVAL`] instructions as the run passes there, and a position behind is reached from the
//! last snapshot at or before it, so a step back re-runs at most one interval. The snapshots
//! hold at most [`MAX_BYTES`] of host memory: past it, every other one goes and the interval
//! doubles. Snapshot stops are the debugger's own stops at an instruction count, which change
//! nothing of the run. A session that cannot be snapshotted (a host file that cannot be opened
//! again) is run again from its start, as before.

use std::collections::BTreeSet;

use anyhow::{Context as _, Result};
use driver::session::Driven;
use driver::{GuestEnd, RunSpec, Session};
use emu::WatchKind;

/// Why the timeline stopped where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Halt {
    /// A single step of this thread ended.
    Stepped(u32),
    /// A breakpoint's instruction is next, in this thread.
    Breakpoint(u32),
    /// This thread's last instruction accessed the watch starting at `addr`.
    Watch { tid: u32, addr: u64, write: bool },
    /// This thread faulted with this signal (not delivered yet).
    Fault { tid: u32, signal: i32 },
    /// The instruction budget ran out in this thread.
    Budget(u32),
    /// The start of the run: nothing before it.
    Beginning,
    /// The end of the run: the guest ended as said, nothing after it.
    End(GuestEnd),
}

/// How long a forward run goes before it looks for the debugger's interrupt.
pub const SLICE: u64 = 20_000_000;

/// Instructions between two snapshots of the timeline, at first: a step back re-runs at most
/// this many (about 30 ms of plain emulation).
pub const INTERVAL: u64 = 5_000_000;

/// Host memory the timeline's snapshots may hold together.
pub const MAX_BYTES: usize = 512 << 20;

/// The replayed run and where the debugger is in it.
pub struct Timeline {
    spec: RunSpec,
    /// The PM directory as it was before the run, copied once.
    pristine: tempfile::TempDir,
    /// The PM directory of the current incarnation (dropped after the session).
    session: Session,
    live_pm: tempfile::TempDir,
    breakpoints: BTreeSet<u64>,
    watches: Vec<(u64, u64, WatchKind)>,
    /// How the run ended, once it has.
    ended: Option<GuestEnd>,
    /// Runs from the start made so far (the first one included).
    pub incarnations: u64,
    /// Snapshots of the current incarnation, by instruction count.
    checkpoints: Vec<driver::session::Checkpoint>,
    /// Host bytes the snapshots hold (pages two of them share counted once).
    held: usize,
    /// Instructions between two snapshots.
    interval: u64,
    /// Times the run went back to a snapshot.
    pub rewinds: u64,
    /// The instruction count of the snapshot the run last went back to.
    pub last_rewind: Option<u64>,
}

impl Timeline {
    /// The run of `spec`, stopped before its first instruction.
    pub fn new(spec: &RunSpec) -> Result<Timeline> {
        let pristine =
            tempfile::Builder::new().prefix("ferrite-pm-").tempdir().context("cannot create a PM directory")?;
        driver::explore::copy_dir(&spec.pm_dir, pristine.path()).context("cannot copy the PM directory")?;
        // The passes change nothing of the run (the schedule does not depend on them) and the
        // report already holds their findings: without them, a re-run from the start costs
        // what plain emulation does.
        let mut spec = spec.clone();
        spec.analyses = Vec::new();
        let (session, live_pm) = Self::incarnate(&spec, pristine.path())?;
        let mut t = Timeline {
            spec,
            pristine,
            session,
            live_pm,
            breakpoints: BTreeSet::new(),
            watches: Vec::new(),
            ended: None,
            incarnations: 1,
            checkpoints: Vec::new(),
            held: 0,
            interval: INTERVAL,
            rewinds: 0,
            last_rewind: None,
        };
        t.take_checkpoint();
        Ok(t)
    }

    /// Snapshots the session here, unless there is one here already; thins the snapshots out
    /// when they hold too much.
    fn take_checkpoint(&mut self) {
        let now = self.now();
        let i = self.checkpoints.partition_point(|c| c.icount() < now);
        if self.checkpoints.get(i).is_some_and(|c| c.icount() == now) {
            return;
        }
        // Without one at the start, none is of use: every way back is a run from the start.
        if i == 0 && now != 0 {
            return;
        }
        let Some(c) = self.session.checkpoint() else { return };
        // The pages it copied are its own; those it shares are counted with the snapshots
        // holding them already.
        self.held += c.bytes();
        self.checkpoints.insert(i, c);
        while self.held > MAX_BYTES && self.checkpoints.len() > 1 {
            // Every other one goes, the start's stays: the interval doubles. One at a time, each
            // freeing the pages no other one still holds (those it shared with a neighbour stay
            // with it).
            self.interval = self.interval.saturating_mul(2);
            let interval = self.interval;
            let mut k = 0;
            while k < self.checkpoints.len() {
                if self.checkpoints[k].icount().is_multiple_of(interval) {
                    k += 1;
                } else {
                    let c = self.checkpoints.remove(k);
                    self.held = self.held.saturating_sub(c.unshared_bytes());
                }
            }
        }
    }

    /// Where the next snapshot is due: the next multiple of the interval past here.
    fn next_checkpoint(&self) -> u64 {
        (self.now() / self.interval).saturating_add(1).saturating_mul(self.interval)
    }

    /// Goes back to the last snapshot at or before `target` (to the start, re-running it, if
    /// there is none). Returns the position reached.
    fn rewind_to(&mut self, target: u64) -> Result<u64> {
        let i = self.checkpoints.partition_point(|c| c.icount() <= target);
        match i.checked_sub(1) {
            Some(i) => {
                self.session.rewind(&self.checkpoints[i])?;
                self.ended = None;
                self.rewinds += 1;
                self.last_rewind = Some(self.checkpoints[i].icount());
            }
            None => self.restart()?,
        }
        Ok(self.now())
    }

    fn incarnate(spec: &RunSpec, pristine: &std::path::Path) -> Result<(Session, tempfile::TempDir)> {
        let live = tempfile::Builder::new().prefix("ferrite-pm-").tempdir().context("cannot create a PM directory")?;
        driver::explore::copy_dir(pristine, live.path()).context("cannot copy the PM directory")?;
        let mut s = spec.clone();
        s.pm_dir = live.path().to_path_buf();
        let mut session = Session::start(&s, None, Vec::new(), false, None)?;
        session.enable_debugging();
        Ok((session, live))
    }

    /// Starts the run again from its first instruction, with the debugger's breakpoints.
    fn restart(&mut self) -> Result<()> {
        let (session, live) = Self::incarnate(&self.spec, self.pristine.path())?;
        // The old session goes before its PM directory.
        self.session = session;
        self.live_pm = live;
        self.ended = None;
        self.incarnations += 1;
        // The snapshots were of the old incarnation's machine.
        self.checkpoints.clear();
        self.held = 0;
        let m = self.session.machine_mut();
        for &pc in &self.breakpoints {
            m.add_breakpoint(pc);
        }
        for &(a, l, k) in &self.watches {
            m.add_watchpoint(a, l, k);
        }
        Ok(())
    }

    /// The session at the current position.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The session, for memory and register writes.
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// The current position.
    pub fn now(&self) -> u64 {
        self.session.machine().icount()
    }

    /// The thread that runs next (the one the debugger is stopped in).
    pub fn current_thread(&self) -> u32 {
        self.session.machine().tid()
    }

    /// How the run ended, if it has.
    pub fn ended(&self) -> Option<GuestEnd> {
        self.ended
    }

    pub fn add_breakpoint(&mut self, pc: u64) -> bool {
        self.breakpoints.insert(pc);
        self.session.machine_mut().add_breakpoint(pc)
    }

    pub fn remove_breakpoint(&mut self, pc: u64) -> bool {
        self.breakpoints.remove(&pc);
        self.session.machine_mut().remove_breakpoint(pc)
    }

    pub fn add_watchpoint(&mut self, addr: u64, len: u64, kind: WatchKind) -> bool {
        if !self.watches.contains(&(addr, len, kind)) {
            self.watches.push((addr, len, kind));
        }
        self.session.machine_mut().add_watchpoint(addr, len, kind)
    }

    pub fn remove_watchpoint(&mut self, addr: u64, len: u64, kind: WatchKind) -> bool {
        self.watches.retain(|w| *w != (addr, len, kind));
        self.session.machine_mut().remove_watchpoint(addr, len, kind)
    }

    /// One step of the session towards `target` (`None`: as far as it goes), resuming from the
    /// current stop: a breakpoint at the current instruction does not stop it, a watchpoint
    /// does (unless `stepping`: the instruction is being completed after its watchpoint stop).
    /// Snapshots are taken on the way.
    fn drive_from(&mut self, target: Option<u64>, stepping: bool) -> Driven {
        self.session.machine_mut().debug_skip_current(stepping);
        self.drive_on(target)
    }

    /// [`drive_from`](Self::drive_from) without ignoring anything at the current instruction.
    fn drive_on(&mut self, target: Option<u64>) -> Driven {
        loop {
            if let Some(end) = self.ended {
                return Driven::End(end);
            }
            let due = self.next_checkpoint();
            let stop = target.map_or(due, |t| t.min(due));
            self.session.machine_mut().stop_at(Some(stop));
            let d = self.session.drive_debug();
            if let Driven::End(end) = d {
                self.ended = Some(end);
            }
            if d == Driven::Machine(emu::DebugStop::Reached) && self.now() == due {
                self.take_checkpoint();
                if target != Some(due) {
                    // A stop of the timeline's own: the run goes on, and the instruction here
                    // has had no stop yet.
                    continue;
                }
            }
            return d;
        }
    }

    fn drive(&mut self, target: Option<u64>) -> Driven {
        self.drive_from(target, false)
    }

    /// Moves to position `target`, from the start if it lies behind, stopping for nothing on the
    /// way. Stops early at the end of the run.
    pub fn goto(&mut self, target: u64) -> Result<()> {
        // At the end, the last position is after the guest's last act (a fault delivered, the
        // exit), not before it.
        if target < self.now() || self.ended.is_some() {
            self.rewind_to(target)?;
        }
        while self.now() < target {
            // Past every stop on the way, a watchpoint's too.
            match self.drive_from(Some(target), true) {
                Driven::End(_) => break,
                Driven::Fault(_) | Driven::Budget if self.now() == target => break,
                _ => {}
            }
        }
        Ok(())
    }

    /// Runs forward until a breakpoint, a watchpoint, a fault, the budget or the end;
    /// `interrupted` is asked every [`SLICE`] instructions and ends the run with `None`.
    pub fn cont(&mut self, mut interrupted: impl FnMut() -> bool) -> Result<Option<Halt>> {
        self.session.stop_when_scheduled(None);
        loop {
            let slice_end = self.now().saturating_add(SLICE);
            match self.drive(Some(slice_end)) {
                Driven::Machine(emu::DebugStop::Reached) | Driven::Scheduled | Driven::Paused | Driven::Decision => {
                    if interrupted() {
                        return Ok(None);
                    }
                }
                Driven::Machine(emu::DebugStop::Breakpoint(_)) => {
                    return Ok(Some(Halt::Breakpoint(self.current_thread())))
                }
                Driven::Machine(emu::DebugStop::Watch { addr, write }) => {
                    let tid = self.current_thread();
                    // Report it after the access, as a data breakpoint does.
                    if let Some(h) = self.step_thread(tid)? {
                        return Ok(Some(h));
                    }
                    return Ok(Some(Halt::Watch { tid, addr, write }));
                }
                Driven::Fault(signal) => return Ok(Some(Halt::Fault { tid: self.current_thread(), signal })),
                Driven::Budget => return Ok(Some(Halt::Budget(self.current_thread()))),
                Driven::End(e) => return Ok(Some(Halt::End(e))),
            }
        }
    }

    /// Runs until thread `tid` has run one instruction (other threads may run first). Returns a
    /// halt that came first and is not that step's (a fault, the end), if any.
    pub fn step_thread(&mut self, tid: u32) -> Result<Option<Halt>> {
        let start = self.now();
        loop {
            if self.current_thread() != tid {
                self.session.stop_when_scheduled(Some(tid));
                let d = self.drive_from(None, true);
                self.session.stop_when_scheduled(None);
                match d {
                    Driven::End(e) => return Ok(Some(Halt::End(e))),
                    Driven::Fault(signal) => return Ok(Some(Halt::Fault { tid: self.current_thread(), signal })),
                    Driven::Budget => return Ok(Some(Halt::Budget(self.current_thread()))),
                    _ => continue,
                }
            }
            let at = self.now();
            match self.drive_from(Some(at + 1), true) {
                Driven::End(e) => return Ok(Some(Halt::End(e))),
                Driven::Fault(signal) if self.now() == at => return Ok(Some(Halt::Fault { tid, signal })),
                Driven::Budget if self.now() == at => return Ok(Some(Halt::Budget(tid))),
                _ => {}
            }
            if self.now() > start && self.session.last_ran_by(tid, self.now()).is_some_and(|q| q >= start) {
                return Ok(None);
            }
        }
    }

    /// Moves back to just before the last instruction thread `tid` ran. `false`: it ran none
    /// (the timeline is then at the start).
    pub fn reverse_step(&mut self, tid: u32) -> Result<bool> {
        match self.session.last_ran_by(tid, self.now()) {
            Some(q) => {
                self.goto(q)?;
                Ok(true)
            }
            None => {
                self.goto(0)?;
                Ok(false)
            }
        }
    }

    /// Moves back to the last stop a forward `continue` would have made before the current
    /// position, or to the start if there is none. A watchpoint's stop is before its access
    /// (forwards it is after). Searched one stretch between snapshots at a time, the latest
    /// first.
    pub fn reverse_cont(&mut self) -> Result<Halt> {
        let mut upto = self.now();
        loop {
            let from = self.rewind_to(upto.saturating_sub(1))?;
            if let Some((at, halt)) = self.last_stop_before(upto)? {
                self.goto(at)?;
                return Ok(halt);
            }
            if from == 0 {
                self.goto(0)?;
                return Ok(Halt::Beginning);
            }
            upto = from;
        }
    }

    /// From here, the last stop a forward `continue` would make before position `here`; the
    /// timeline is then at `here` or the end.
    fn last_stop_before(&mut self, here: u64) -> Result<Option<(u64, Halt)>> {
        let mut last: Option<(u64, Halt)> = None;
        if self.now() >= here {
            return Ok(None);
        }
        // A stop at the instruction the search starts from counts (unless it is the start of
        // the run, where a forward run starts past it).
        let mut first = self.now() != 0;
        loop {
            let d = if std::mem::take(&mut first) {
                self.session.machine_mut().debug_skip_nothing();
                self.drive_on(Some(here))
            } else {
                self.drive(Some(here))
            };
            match d {
                Driven::Machine(emu::DebugStop::Reached) | Driven::End(_) => break,
                Driven::Machine(emu::DebugStop::Breakpoint(_)) => {
                    last = Some((self.now(), Halt::Breakpoint(self.current_thread())));
                }
                Driven::Machine(emu::DebugStop::Watch { addr, write }) => {
                    // Going backwards, the stop is before the access, as in gdb's own
                    // record-and-replay: gdb compares the value there with the later one.
                    let (at, tid) = (self.now(), self.current_thread());
                    last = Some((at, Halt::Watch { tid, addr, write }));
                    self.step_thread(tid)?;
                }
                Driven::Fault(signal) if self.now() < here => {
                    last = Some((self.now(), Halt::Fault { tid: self.current_thread(), signal }));
                }
                _ => {}
            }
            if self.now() >= here {
                break;
            }
        }
        Ok(last)
    }

    /// Runs to the first time thread `tid` is about to run the instruction at `pc` (a finding's
    /// place), from the start. `false`: it never does (the timeline is then at the end).
    pub fn run_to_first(&mut self, pc: u64, tid: u32) -> Result<bool> {
        let had = self.breakpoints.contains(&pc);
        self.session.machine_mut().add_breakpoint(pc);
        let found = loop {
            match self.drive_from(None, true) {
                Driven::Machine(emu::DebugStop::Breakpoint(at)) if at == pc && self.current_thread() == tid => {
                    break true
                }
                Driven::End(_) => break false,
                _ => {}
            }
        };
        if !had {
            self.session.machine_mut().remove_breakpoint(pc);
        }
        Ok(found)
    }

    /// Runs to the end of the run, stopping for nothing; returns where it last faulted or ran
    /// out of budget.
    pub fn run_to_end(&mut self) -> Option<u64> {
        let mut at = None;
        loop {
            match self.drive_from(None, true) {
                Driven::Fault(_) | Driven::Budget => at = Some(self.now()),
                Driven::End(_) => return at,
                _ => {}
            }
        }
    }

    /// Runs to just before the last fault of the run (the instruction that faults is next), or
    /// to the budget's end: the place of a `fault` or `hang` finding. `false`: there is none
    /// (the timeline is then at the end).
    pub fn run_to_last_fault(&mut self) -> Result<bool> {
        match self.run_to_end() {
            Some(n) => {
                self.goto(n)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}
