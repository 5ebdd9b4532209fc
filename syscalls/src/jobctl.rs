//! Job control: stop signals (`SIGSTOP`, `SIGTSTP`, `SIGTTIN`, `SIGTTOU`) stopping a process,
//! `SIGCONT` continuing it, and what `wait4`/`waitid` and the parent's `SIGCHLD` say of both.
//!
//! Follows Linux's `kernel/signal.c`: `prepare_signal` (a stop signal sent discards the
//! process's pending `SIGCONT`; a `SIGCONT` sent discards its pending stop signals and continues
//! it, whatever becomes of the `SIGCONT` itself: blocked, ignored or handled), `do_signal_stop`
//! (the whole thread group stops, its `group_exit_code` the stop signal) and
//! `do_notify_parent_cldstop` (the parent gets `SIGCHLD` with `CLD_STOPPED` or `CLD_CONTINUED`,
//! unless its `SIGCHLD` action is `SIG_IGN` or has `SA_NOCLDSTOP`; its waits look again either
//! way). A default-action `SIGTSTP`, `SIGTTIN` or `SIGTTOU` to a process of an orphaned process
//! group is discarded (`is_current_pgrp_orphaned`); `SIGSTOP` always stops.
//!
//! A stop is a scheduling state: the stopped process's threads stay in whatever wait they were
//! in ([`crate::thread::WaitIndex`] parks those that could run), so a call a thread was blocked
//! in goes on waiting and completes once the process is continued, as Linux's restart of an
//! interrupted call with no handler to run does. As ferrite carries out a default action that
//! kills when the signal is sent ([`Kernel::post`]), a default stop takes effect when it is sent
//! to a thread that does not block it, or when a thread that blocked it takes it
//! ([`Kernel::deliver_pending`]); the same seed stops and continues at the same points.
//!
//! The `SIGCHLD` of a continue is sent when a thread of the child next runs (the scheduling
//! decision that switches to it), as Linux's first thread of the child to run again sends it
//! from `get_signal`; a waiting parent is woken by it, while a `WCONTINUED` wait made meanwhile
//! reports the continue at once (`SIGNAL_STOP_CONTINUED` is set by the `SIGCONT`).
//!
//! Left out: ptrace stops; terminal-driven stops (there is no
//! terminal: `SIGTTIN`/`SIGTTOU` come only from `kill`). A process whose parent is outside the
//! machine (the first process, and orphans) tells no one it stopped: stopping the first process
//! with no one to continue it ends the run as a deadlock, where the host's shell would report it
//! stopped.

use crate::signal::SigInfo;
use crate::Kernel;

pub(crate) const SIGCHLD: i32 = 17;
pub(crate) const SIGCONT: i32 = 18;
pub(crate) const SIGSTOP: i32 = 19;
/// `sa_flags`: no `SIGCHLD` when a child stops or continues.
const SA_NOCLDSTOP: u64 = 1;
/// `si_code` of a `SIGCHLD` for a child that stopped.
pub(crate) const CLD_STOPPED: i32 = 5;
/// `si_code` of a `SIGCHLD` for a child that continued.
pub(crate) const CLD_CONTINUED: i32 = 6;

/// Whether the default action of `sig` is to stop the process (Linux's `sig_kernel_stop`).
pub(crate) fn is_stop(sig: i32) -> bool {
    (19..=22).contains(&sig)
}

/// A process's job-control state (kept in [`crate::procs::Proc`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct JobState {
    /// It is stopped (Linux's `SIGNAL_STOP_STOPPED`): its threads do not run.
    pub(crate) stopped: bool,
    /// The stop signal of a stop its parent's `WUNTRACED`/`WSTOPPED` wait has not reported yet
    /// (Linux's `group_exit_code` while `task_stopped_code` sees it).
    pub(crate) stop_report: Option<i32>,
    /// A continue its parent's `WCONTINUED` wait has not reported yet (`SIGNAL_STOP_CONTINUED`).
    pub(crate) continued: bool,
    /// A continue its parent has not been sent `SIGCHLD` for yet (`SIGNAL_CLD_CONTINUED`): sent
    /// when a thread of it next runs ([`Kernel::tell_continued`]).
    pub(crate) tell_continued: bool,
}

impl Kernel {
    /// Linux's `prepare_signal` for a stop signal or `SIGCONT` sent to process `pid`: a stop
    /// signal discards a pending `SIGCONT`; `SIGCONT` discards pending stop signals and
    /// continues the process if it is stopped.
    pub(crate) fn prepare_job_signal(&mut self, pid: u32, sig: i32) {
        if is_stop(sig) {
            self.flush_signal(pid, SIGCONT);
        } else if sig == SIGCONT {
            for s in 19..=22 {
                self.flush_signal(pid, s);
            }
            self.continue_process(pid);
        }
    }

    /// Whether process `pid` belongs to an orphaned process group (Linux's
    /// `will_become_orphaned_pgrp`): no member has a parent in another group of its session. A
    /// parent outside the machine (pid 1: the first process's and orphans') counts as `init`,
    /// which Linux skips.
    fn pgrp_orphaned(&self, pid: u32) -> bool {
        let Some(pgid) = self.procs.get(&pid).map(|p| p.pgid) else { return true };
        !self.procs.values().any(|p| {
            p.ended.is_none()
                && p.pgid == pgid
                && p.ppid != 1
                && self.procs.get(&p.ppid).is_some_and(|q| q.ended.is_none() && q.pgid != pgid && q.sid == p.sid)
        })
    }

    /// The default action of stop signal `sig` taken in process `pid` (Linux's `get_signal` and
    /// `do_signal_stop`): the process stops and its parent is told, unless `sig` is not
    /// `SIGSTOP` and the process group is orphaned (the signal is discarded). Returns whether it
    /// stopped.
    pub(crate) fn stop_process(&mut self, pid: u32, sig: i32) -> bool {
        if sig != SIGSTOP && self.pgrp_orphaned(pid) {
            return false;
        }
        if self.procs.get(&pid).is_some_and(|p| p.ended.is_none() && p.job.stopped) {
            return true;
        }
        // A continue not yet told goes first, as Linux's `get_signal` tells it before it takes
        // the stop signal.
        self.tell_continued(pid);
        let Some(p) = self.procs.get_mut(&pid).filter(|p| p.ended.is_none()) else { return false };
        p.job = JobState { stopped: true, stop_report: Some(sig), continued: false, tell_continued: false };
        let ppid = p.ppid;
        let tids: Vec<u32> = self.threads.values().filter(|t| t.pid == pid).map(|t| t.tid).collect();
        for tid in tids {
            self.waits.set_stopped(tid, true);
        }
        self.notify_parent_cldstop(pid, ppid, CLD_STOPPED, sig);
        true
    }

    /// Process `pid` goes on if it is stopped: its threads run again, and its parent's waits
    /// may report the continue at once (`WCONTINUED`); the parent is sent `SIGCHLD` for it when
    /// a thread of the child next runs, as Linux's child sends it from `get_signal` once it is
    /// woken. Linux's stop takes every thread out of its call, where ferrite leaves them in
    /// their waits: if none can run, one blocked in a call it makes again is woken to run (and
    /// tell), and a child with none such (all in futex waits or sleeps) tells at once.
    fn continue_process(&mut self, pid: u32) {
        let Some(p) = self.procs.get_mut(&pid).filter(|p| p.ended.is_none() && p.job.stopped) else { return };
        p.job = JobState { stopped: false, stop_report: None, continued: true, tell_continued: true };
        let tids: Vec<u32> = self.threads.values().filter(|t| t.pid == pid).map(|t| t.tid).collect();
        let mut runs = false;
        for &tid in &tids {
            self.waits.set_stopped(tid, false);
            runs |= self.waits.is_runnable(tid);
        }
        if runs {
            return;
        }
        // Every thread waits. One blocked in a call it makes again when woken (a read, a wait,
        // a poll ...) is woken, as Linux's stop had taken it out of its call: it runs, tells, and
        // blocks again. With none such (futex waits, sleeps), the parent is told now.
        let restartable = tids.into_iter().find(|t| {
            self.threads.get(t).is_some_and(|t| t.in_call && matches!(t.wait, Some(crate::thread::Wait::Io { .. })))
        });
        match restartable {
            Some(tid) => self.set_wait(tid, None, None),
            None => self.tell_continued(pid),
        }
    }

    /// A thread of process `pid` runs (or it ends or stops again): its parent is sent the
    /// `SIGCHLD` of a continue not told yet (Linux's `SIGNAL_CLD_CONTINUED` in `get_signal`),
    /// and its waits look again.
    pub(crate) fn tell_continued(&mut self, pid: u32) {
        let Some(p) = self.procs.get_mut(&pid).filter(|p| p.job.tell_continued) else { return };
        p.job.tell_continued = false;
        let ppid = p.ppid;
        self.notify_parent_cldstop(pid, ppid, CLD_CONTINUED, SIGCONT);
    }

    /// Linux's `do_notify_parent_cldstop`: `SIGCHLD` with `code` and `status` to parent `ppid`
    /// unless it ignores `SIGCHLD` or set `SA_NOCLDSTOP`; its waits look again in any case.
    fn notify_parent_cldstop(&mut self, pid: u32, ppid: u32, code: i32, status: i32) {
        if ppid == 1 {
            return;
        }
        let tell = self.action_of(ppid, SIGCHLD).is_some_and(|a| a[0] != 1 && a[1] & SA_NOCLDSTOP == 0);
        if tell {
            let info = SigInfo { code, status, ..SigInfo::user(SIGCHLD, pid) };
            let _ = self.post(ppid, None, info);
        }
        self.io_ready(crate::procs::CHILD_KEY | u64::from(ppid));
    }
}
