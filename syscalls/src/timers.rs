//! Timers on the virtual clock: `alarm`, `setitimer`/`getitimer`, and POSIX per-process timers
//! (`timer_create`, `timer_settime`, `timer_gettime`, `timer_getoverrun`, `timer_delete`).
//!
//! Follows Linux. Every timer belongs to a process, is not inherited by `fork`, and expires on
//! one of two clocks:
//!
//! - the *boot* clock (`ITIMER_REAL`, `alarm`, POSIX timers on `CLOCK_REALTIME`,
//!   `CLOCK_MONOTONIC`, `CLOCK_BOOTTIME`): virtual nanoseconds since boot ([`Kernel::now_ns`]),
//!   which advance with retired instructions and jump when every thread waits. A timer's expiry
//!   is a deadline like a sleep's: when nothing can run, the clock jumps to the earliest one
//!   ([`Kernel::schedule`]), so a program that waits for its timer is never reported as hung;
//! - a *CPU* clock: a process's (`ITIMER_VIRTUAL`, `ITIMER_PROF`, POSIX timers on
//!   `CLOCK_PROCESS_CPUTIME_ID` or another process's `clock_getcpuclockid` id, as
//!   [`Kernel::process_cpu_ns`] reads it: the instructions its own threads retired) or a
//!   thread's (`CLOCK_THREAD_CPUTIME_ID`, a `pthread_getcpuclockid` id of a thread of the
//!   caller's process, [`Kernel::thread_cpu_ns`]). It does not advance while its threads wait
//!   or others run. Only the running process's and thread's CPU clocks move, so only timers
//!   on those are armed in the machine's timer stop, at the instruction count where the clock
//!   reaches them; every switch re-arms it. A timer on the clock of a thread or process that
//!   is gone never fires, reads as disarmed and cannot be set (ESRCH), as Linux's. Its signal
//!   goes to the timer's owner (or its `SIGEV_THREAD_ID` thread), not to the clock's.
//!
//! A timer expires at a recorded point only: a system call, a scheduling decision, or the first
//! block start past its instant (the machine's timer stop, [`emu::Machine::set_timer_stop`]),
//! so a thread computing without system calls is interrupted as on Linux, and the same seed
//! gives the same expiries. Its signal is made pending for the process (a thread that does not
//! block it takes it) or, with `SIGEV_THREAD_ID`, for one thread, and wakes a thread that waits
//! in a call a signal interrupts. A POSIX timer whose signal is still pending when it expires
//! again counts an overrun (`si_overrun`, `timer_getoverrun`), as Linux queues one signal per
//! timer. `SIGEV_THREAD` is glibc's (a helper thread waiting in `sigtimedwait` for a
//! `SIGEV_THREAD_ID` timer's signal); the kernel refuses it, as Linux does.
//!
//! `execve` deletes the process's POSIX timers and keeps its interval timers; the end of a
//! process deletes all of them.
//!
//! A `clock_nanosleep` on a CPU clock is kept here too ([`CpuSleep`]), as Linux's
//! `do_cpu_nanosleep` sets a timer without a signal: armed and expired as a timer on that clock
//! is, it wakes its sleeper instead of sending a signal.

use std::collections::BTreeMap;

use emu::Machine;

use crate::signal::SigInfo;
use crate::time::CpuClock;
use crate::{err, Errno, Kernel, SysResult};

const SIGEV_SIGNAL: i32 = 0;
const SIGEV_NONE: i32 = 1;
const SIGEV_THREAD_ID: i32 = 4;
/// `si_code` of a POSIX timer's signal.
pub(crate) const SI_TIMER: i32 = -2;
/// `si_code` of an interval timer's signal (Linux sends it as the kernel).
const SI_KERNEL: i32 = 0x80;
const TIMER_ABSTIME: i32 = 1;
const SIGALRM: i32 = 14;
const SIGVTALRM: i32 = 26;
const SIGPROF: i32 = 27;
/// Linux's DELAYTIMER_MAX: overrun counts stop there.
const DELAYTIMER_MAX: i32 = i32::MAX;

/// The clock a timer runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimerClock {
    /// Virtual nanoseconds since boot.
    Boot,
    /// A process's or a thread's CPU time: the instructions it retired.
    Cpu(CpuClock),
}

/// One timer.
#[derive(Clone, Debug)]
pub(crate) struct Timer {
    clock: TimerClock,
    /// Absolute instants the guest gives or reads are on `CLOCK_REALTIME`.
    realtime: bool,
    /// When it expires next, on its clock; `None`: disarmed.
    deadline: Option<u64>,
    /// Its period (0: one shot).
    interval: u64,
    /// The signal it sends (0 for `SIGEV_NONE`).
    signo: i32,
    /// `SIGEV_THREAD_ID`'s thread; otherwise the process is signalled.
    tid: Option<u32>,
    /// `sigev_value`, given to the handler in `si_value`.
    value: u64,
    /// Its signal is pending and not yet taken: further expiries are overruns.
    queued: bool,
    /// Expiries since its pending signal was queued, beyond the first.
    overrun_pending: i32,
    /// What `timer_getoverrun` reports: the overrun count of the last signal taken.
    overrun: i32,
}

/// A thread in `clock_nanosleep` on a CPU clock ([`crate::thread::Wait::CpuSleep`]): as
/// Linux's `do_cpu_nanosleep`, a timer without a signal on that clock, which wakes the thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CpuSleep {
    /// The sleeper.
    pub(crate) tid: u32,
    /// The clock it sleeps on: another thread's of its process, or a process's.
    pub(crate) clock: CpuClock,
    /// The instant on that clock it wakes at.
    pub(crate) until: u64,
}

/// Every process's timers, keyed by (pid, id): POSIX timers have ids from 0, interval timers
/// the negative ids of [`itimer_id`].
#[derive(Clone, Debug)]
pub(crate) struct Timers {
    map: BTreeMap<(u32, i32), Timer>,
    /// Threads sleeping on a CPU clock, in the order they began (few: one per such sleeper).
    sleeps: Vec<CpuSleep>,
    /// The instruction count the machine's timer stop was last set to.
    armed: u64,
}

impl Default for Timers {
    fn default() -> Timers {
        Timers { map: BTreeMap::new(), sleeps: Vec::new(), armed: u64::MAX }
    }
}

impl Timers {
    /// Whether no timer exists.
    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// How many timers exist (armed or not).
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The earliest armed deadline on the boot clock.
    pub(crate) fn next_boot_deadline(&self) -> Option<u64> {
        self.map.values().filter(|t| t.clock == TimerClock::Boot).filter_map(|t| t.deadline).min()
    }

    /// Process `pid` ended: its timers go.
    pub(crate) fn drop_process(&mut self, pid: u32) {
        self.map.retain(|k, _| k.0 != pid);
    }

    /// Process `pid` executed a new program: its POSIX timers go, its interval timers stay.
    pub(crate) fn exec(&mut self, pid: u32) {
        self.map.retain(|k, _| k.0 != pid || k.1 < 0);
    }

    /// Thread `tid` no longer sleeps on a CPU clock (woken, interrupted or gone).
    pub(crate) fn forget_sleep(&mut self, tid: u32) {
        self.sleeps.retain(|s| s.tid != tid);
    }

    /// Thread `tid`'s sleep on a CPU clock, if it sleeps on one.
    pub(crate) fn sleep_of(&self, tid: u32) -> Option<CpuSleep> {
        self.sleeps.iter().find(|s| s.tid == tid).copied()
    }

    /// Thread `tid` sleeps on `clock` until it reads `until`.
    pub(crate) fn add_sleep(&mut self, tid: u32, clock: CpuClock, until: u64) {
        self.sleeps.push(CpuSleep { tid, clock, until });
    }
}

/// The table id of interval timer `which` (`ITIMER_REAL` 0, `ITIMER_VIRTUAL` 1, `ITIMER_PROF` 2).
fn itimer_id(which: i32) -> i32 {
    -1 - which
}

impl Kernel {
    /// Now, on a timer's clock; `None` for the CPU clock of a thread or process that is gone
    /// (reaped), which never advances again: Linux's timer on it never fires.
    fn timer_now(&self, m: &Machine, clock: TimerClock) -> Option<u64> {
        match clock {
            TimerClock::Boot => Some(self.now_ns(m)),
            TimerClock::Cpu(CpuClock::Process(pid)) => self.process_cpu_ns(m, pid),
            TimerClock::Cpu(CpuClock::Thread(tid)) => self.thread_cpu_ns(m, tid),
        }
    }

    /// Tells the machine the instruction count at which the earliest timer expires, if it
    /// changed, so that a thread computing without system calls stops there.
    ///
    /// The earliest deadline of a wait (a sleep, a timed futex or poll) is armed too when at
    /// most one thread can run: no quantum ends then, and a thread computing without system
    /// calls would otherwise keep a sleeper that is due from ever waking (a server's worker
    /// computing while its event loop sleeps). With others runnable, the quantum's end is the
    /// point where the sleeper wakes, as before.
    ///
    /// The end of a hold (`Wait::Held`: a writer held by PMRace's interleaving or by `--delay`,
    /// a reader's patience) is armed likewise: a held lock's holder waits there while the only
    /// thread that can run spins for the lock without a system call (`pthread_spin_lock`), and
    /// without a stop no scheduling point would ever come to end the hold.
    pub(crate) fn arm_timer_stop(&mut self, m: &mut Machine) {
        let alone = self.runnable_count() <= 1;
        let wait = self.waits.next_deadline().filter(|_| alone);
        let hold = self.waits.next_hold_end().filter(|_| alone);
        if self.timers.map.is_empty()
            && self.timers.sleeps.is_empty()
            && wait.is_none()
            && hold.is_none()
            && self.timers.armed == u64::MAX
        {
            return;
        }
        let icount = m.icount();
        let boot = self.now_ns(m).saturating_sub(icount);
        // The running process's and thread's CPU clocks advance with the machine's count from
        // here on.
        let cpu = self.process_cpu_ns(m, self.pid).unwrap_or(0);
        let thread_cpu = self.thread_cpu_ns(m, self.current).unwrap_or(0);
        let stop = |clock: TimerClock, d: u64| match clock {
            TimerClock::Boot => Some(d.saturating_sub(boot)),
            TimerClock::Cpu(CpuClock::Process(pid)) if pid == self.pid => {
                Some(icount.saturating_add(d.saturating_sub(cpu)))
            }
            TimerClock::Cpu(CpuClock::Thread(tid)) if tid == self.current => {
                Some(icount.saturating_add(d.saturating_sub(thread_cpu)))
            }
            // Another process's or thread's CPU clock stands still until it runs again.
            TimerClock::Cpu(_) => None,
        };
        let at = self
            .timers
            .map
            .values()
            .filter_map(|t| stop(t.clock, t.deadline?))
            .chain(self.timers.sleeps.iter().filter_map(|s| stop(TimerClock::Cpu(s.clock), s.until)))
            .chain(wait.map(|d| d.saturating_sub(boot)))
            .chain(hold)
            .min()
            .unwrap_or(u64::MAX);
        if at != self.timers.armed {
            self.timers.armed = at;
            m.set_timer_stop(at);
        }
    }

    /// Expires every timer whose instant has passed, in (process, id) order: each sends its
    /// signal, counts an overrun, or does nothing (`SIGEV_NONE`), and is re-armed for its next
    /// period or disarmed. Returns whether one did expire.
    pub fn fire_timers(&mut self, m: &mut Machine) -> bool {
        if self.timers.map.is_empty() && self.timers.sleeps.is_empty() {
            return false;
        }
        let mut fired = false;
        // Sleepers on a CPU clock that reached their instant wake (`clock_nanosleep` returns 0),
        // in the order they began.
        while let Some(s) = self
            .timers
            .sleeps
            .iter()
            .copied()
            .find(|s| self.timer_now(m, TimerClock::Cpu(s.clock)).is_some_and(|now| now >= s.until))
        {
            fired = true;
            self.timers.forget_sleep(s.tid);
            self.resume(m, s.tid, 0);
        }
        // Few timers exist; this looks at each, and collects nothing unless one is due.
        loop {
            let due = self.timers.map.iter().find_map(|(&k, t)| {
                let d = t.deadline?;
                let now = self.timer_now(m, t.clock)?;
                (d <= now).then_some((k, now))
            });
            let Some((key, now)) = due else { break };
            fired = true;
            self.expire(key, now);
        }
        if fired {
            self.arm_timer_stop(m);
        }
        fired
    }

    /// At the machine's timer stop: whether a wait's deadline has passed, so that the caller
    /// schedules and the waiter wakes ([`Kernel::arm_timer_stop`]).
    pub fn wait_deadline_passed(&self, m: &Machine) -> bool {
        self.waits.next_deadline().is_some_and(|d| d <= self.now_ns(m))
            || self.waits.next_hold_end().is_some_and(|n| n <= m.icount())
    }

    fn expire(&mut self, key: (u32, i32), now: u64) {
        let Some(t) = self.timers.map.get_mut(&key) else { return };
        let Some(d) = t.deadline else { return };
        let n = match (now - d).checked_div(t.interval) {
            None => {
                t.deadline = None;
                1
            }
            Some(q) => {
                let k = q + 1;
                t.deadline = Some(d.saturating_add(k.saturating_mul(t.interval)));
                k
            }
        };
        let n = i32::try_from(n).unwrap_or(DELAYTIMER_MAX);
        if t.signo == 0 {
            return;
        }
        let posix = key.1 >= 0;
        if posix && t.queued {
            t.overrun_pending = t.overrun_pending.saturating_add(n);
            return;
        }
        let info = SigInfo {
            signo: t.signo,
            code: if posix { SI_TIMER } else { SI_KERNEL },
            addr: t.value,
            from_kill: false,
            sender: key.1 as u32,
            status: 0,
        };
        let tid = t.tid;
        if posix {
            t.queued = true;
            t.overrun_pending = n - 1;
        }
        let sent = self.send_signal(key.0, tid, info);
        if !sent {
            if let Some(t) = self.timers.map.get_mut(&key) {
                t.queued = false;
                t.overrun_pending = 0;
            }
        }
    }

    /// A POSIX timer's signal is being taken (delivered or dequeued by `sigtimedwait`): its
    /// overrun count goes into the siginfo, and the timer may queue its signal again.
    pub(crate) fn timer_signal_taken(&mut self, info: &mut SigInfo) {
        if info.code != SI_TIMER {
            return;
        }
        if let Some(t) = self.timers.map.get_mut(&(self.pid, info.sender as i32)) {
            info.status = t.overrun_pending;
            t.overrun = t.overrun_pending;
            t.overrun_pending = 0;
            t.queued = false;
        }
    }

    /// Sets timer `key` (which exists) to expire at `value` (`abs`: on its clock, else from
    /// now; 0 disarms) and every `interval` after. Returns its old remaining time and interval;
    /// ESRCH when its clock's thread or process is gone, as Linux's `posix_cpu_timer_set`.
    fn set_timer(
        &mut self,
        m: &mut Machine,
        key: (u32, i32),
        value: u64,
        interval: u64,
        abs: bool,
    ) -> Result<(u64, u64), Errno> {
        let old = self.timer_remaining(m, key);
        let clock = self.timers.map[&key].clock;
        let realtime = self.timers.map[&key].realtime;
        let Some(now) = self.timer_now(m, clock) else { return err(libc::ESRCH) };
        let offset = if realtime { self.realtime_offset_ns() } else { 0 };
        let deadline = match (value, abs) {
            (0, _) => None,
            (v, true) => Some(v.saturating_sub(offset).max(now)),
            (v, false) => Some(now.saturating_add(v)),
        };
        if let Some(t) = self.timers.map.get_mut(&key) {
            t.deadline = deadline;
            t.interval = if deadline.is_some() { interval } else { 0 };
        }
        // An instant already past expires now, at this call (the stop for the next is armed
        // after every system call, `Kernel::syscall`).
        self.fire_timers(m);
        Ok(old)
    }

    /// Timer `key`'s remaining time (0: disarmed) and interval.
    fn timer_remaining(&self, m: &Machine, key: (u32, i32)) -> (u64, u64) {
        match self.timers.map.get(&key) {
            // A timer on the clock of a thread or process that is gone shows nothing armed
            // (Linux's `posix_cpu_timer_get` without its task).
            Some(t) => match self.timer_now(m, t.clock) {
                // An armed timer shows at least 1 ns left, as Linux never shows 0 for one.
                Some(now) => (t.deadline.map_or(0, |d| d.saturating_sub(now).max(1)), t.interval),
                None => (0, 0),
            },
            None => (0, 0),
        }
    }

    fn itimer_key(&mut self, which: i32) -> Result<(u32, i32), Errno> {
        let (clock, signo) = match which {
            0 => (TimerClock::Boot, SIGALRM),
            1 => (TimerClock::Cpu(CpuClock::Process(self.pid)), SIGVTALRM),
            2 => (TimerClock::Cpu(CpuClock::Process(self.pid)), SIGPROF),
            _ => return err(libc::EINVAL),
        };
        let key = (self.pid, itimer_id(which));
        self.timers.map.entry(key).or_insert(Timer {
            clock,
            realtime: false,
            deadline: None,
            interval: 0,
            signo,
            tid: None,
            value: 0,
            queued: false,
            overrun_pending: 0,
            overrun: 0,
        });
        Ok(key)
    }

    fn read_timeval(m: &Machine, addr: u64) -> Result<u64, Errno> {
        let s = m.read_u64(addr)? as i64;
        let us = m.read_u64(addr + 8)? as i64;
        if s < 0 || !(0..1_000_000).contains(&us) {
            return err(libc::EINVAL);
        }
        Ok((s as u64).saturating_mul(1_000_000_000).saturating_add(us as u64 * 1000))
    }

    fn write_itimerval(m: &mut Machine, addr: u64, (value, interval): (u64, u64)) -> Result<(), Errno> {
        let mut b = [0u8; 32];
        // Microseconds, rounded up so that an armed timer never reads as disarmed.
        for (i, ns) in [interval, value].into_iter().enumerate() {
            let us = ns.div_ceil(1000);
            b[16 * i..16 * i + 8].copy_from_slice(&(us / 1_000_000).to_le_bytes());
            b[16 * i + 8..16 * i + 16].copy_from_slice(&(us % 1_000_000).to_le_bytes());
        }
        m.write(addr, &b, false)?;
        Ok(())
    }

    /// setitimer(2): `new` is a `struct itimerval` (interval, then value).
    pub(crate) fn setitimer(&mut self, m: &mut Machine, which: i32, new: u64, old: u64) -> SysResult {
        let key = self.itimer_key(which)?;
        let (interval, value) =
            if new == 0 { (0, 0) } else { (Self::read_timeval(m, new)?, Self::read_timeval(m, new + 16)?) };
        let prev = self.set_timer(m, key, value, interval, false)?;
        if old != 0 {
            Self::write_itimerval(m, old, prev)?;
        }
        Ok(0)
    }

    /// getitimer(2).
    pub(crate) fn getitimer(&mut self, m: &mut Machine, which: i32, cur: u64) -> SysResult {
        let key = self.itimer_key(which)?;
        let now = self.timer_remaining(m, key);
        Self::write_itimerval(m, cur, now)?;
        Ok(0)
    }

    /// alarm(2): `ITIMER_REAL` as a one-shot in seconds; returns the seconds the previous alarm
    /// had left, rounded to the nearest (at least 1 if one was armed), as Linux does.
    pub(crate) fn alarm(&mut self, m: &mut Machine, secs: u32) -> SysResult {
        let key = self.itimer_key(0)?;
        let (left, _) = self.set_timer(m, key, u64::from(secs) * 1_000_000_000, 0, false)?;
        let us = left.div_ceil(1000);
        let (s, rest) = (us / 1_000_000, us % 1_000_000);
        Ok(if left == 0 {
            0
        } else if s == 0 || rest >= 500_000 {
            s + 1
        } else {
            s
        })
    }

    /// timer_create(2): `sevp` is a `struct sigevent` (value, signo, notify, thread id), or 0
    /// for `SIGEV_SIGNAL` with `SIGALRM` and the timer's id as the value.
    pub(crate) fn timer_create(&mut self, m: &mut Machine, clock: i32, sevp: u64, out: u64) -> SysResult {
        let (tclock, realtime) = match clock {
            0 => (TimerClock::Boot, true),
            1 | 7 => (TimerClock::Boot, false),
            // Clocks Linux has no timers on (`kc->timer_create` unset): the coarse and raw
            // clocks, and a negative id whose low three bits are `CLOCKFD` (a PTP clock's
            // descriptor, none here).
            4..=6 => return err(libc::EOPNOTSUPP),
            c if c < 0 && c & 7 == 3 => return err(libc::EOPNOTSUPP),
            // CLOCK_REALTIME_ALARM, CLOCK_BOOTTIME_ALARM need CAP_WAKE_ALARM.
            8 | 9 => return err(libc::EPERM),
            // A CPU clock: the caller's process or thread, another process's, or a thread of
            // the caller's process (`pid_for_clock` without `gettime`).
            c => match self.cpu_clock(c, false) {
                Some(cpu) => (TimerClock::Cpu(cpu), false),
                None => return err(libc::EINVAL),
            },
        };
        let pid = self.pid;
        let id = (0..).find(|i| !self.timers.map.contains_key(&(pid, *i))).unwrap_or(0);
        let (value, signo, tid) = if sevp == 0 {
            (id as u64, SIGALRM, None)
        } else {
            let value = m.read_u64(sevp)?;
            let signo = m.read_u32(sevp + 8)? as i32;
            let notify = m.read_u32(sevp + 12)? as i32;
            let tid = m.read_u32(sevp + 16)?;
            match notify {
                SIGEV_NONE => (value, 0, None),
                SIGEV_SIGNAL | SIGEV_THREAD_ID => {
                    if !(1..=64).contains(&signo) {
                        return err(libc::EINVAL);
                    }
                    let tid = if notify == SIGEV_THREAD_ID {
                        if self.threads.get(&tid).is_none_or(|t| t.pid != pid) {
                            return err(libc::EINVAL);
                        }
                        Some(tid)
                    } else {
                        None
                    };
                    (value, signo, tid)
                }
                _ => return err(libc::EINVAL),
            }
        };
        m.write(out, &id.to_le_bytes(), false)?;
        self.timers.map.insert(
            (pid, id),
            Timer {
                clock: tclock,
                realtime,
                deadline: None,
                interval: 0,
                signo,
                tid,
                value,
                queued: false,
                overrun_pending: 0,
                overrun: 0,
            },
        );
        Ok(0)
    }

    fn posix_key(&self, id: i32) -> Result<(u32, i32), Errno> {
        let key = (self.pid, id);
        if id < 0 || !self.timers.map.contains_key(&key) {
            return err(libc::EINVAL);
        }
        Ok(key)
    }

    /// timer_settime(2): `new` is a `struct itimerspec` (interval, then value); `TIMER_ABSTIME`
    /// makes the value an instant on the timer's clock.
    pub(crate) fn timer_settime(&mut self, m: &mut Machine, id: i32, flags: i32, new: u64, old: u64) -> SysResult {
        let key = self.posix_key(id)?;
        let interval = Self::read_timespec(m, new)?;
        let value = Self::read_timespec(m, new + 16)?;
        let prev = self.set_timer(m, key, value, interval, flags & TIMER_ABSTIME != 0)?;
        if old != 0 {
            Self::write_itimerspec(m, old, [prev.1, prev.0])?;
        }
        Ok(0)
    }

    /// timer_gettime(2).
    pub(crate) fn timer_gettime(&mut self, m: &mut Machine, id: i32, cur: u64) -> SysResult {
        let key = self.posix_key(id)?;
        let now = self.timer_remaining(m, key);
        Self::write_itimerspec(m, cur, [now.1, now.0])?;
        Ok(0)
    }

    /// timer_getoverrun(2).
    pub(crate) fn timer_getoverrun(&mut self, id: i32) -> SysResult {
        let key = self.posix_key(id)?;
        Ok(self.timers.map[&key].overrun as u64)
    }

    /// timer_delete(2): a signal of it still pending stays pending, without an overrun count.
    pub(crate) fn timer_delete(&mut self, id: i32) -> SysResult {
        let key = self.posix_key(id)?;
        self.timers.map.remove(&key);
        Ok(0)
    }
}
