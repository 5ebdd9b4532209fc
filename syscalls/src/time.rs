//! The virtual clock and the seeded randomness.
//!
//! The guest's CPU runs at a virtual 1 GHz retiring one instruction per nanosecond: every clock
//! (`CLOCK_REALTIME` from the virtual epoch 2030-01-01T00:00:00Z, the monotonic and CPU-time
//! clocks from boot) is a function of the retired-instruction count, as RDTSC is in the machine.
//! Sleeping advances a per-process offset instead of waiting, so a sleep costs no host time and
//! a run takes the same virtual time on any host.
//!
//! Randomness (getrandom, /dev/urandom, AT_RANDOM, UUIDs) comes from one xoshiro256** stream
//! seeded from the run's seed: a different seed gives different bytes, the same seed the same.

use emu::Machine;

use crate::fs::EPOCH;
use crate::{err, Kernel, SysResult};

/// The guest's randomness: the machine's seeded xoshiro256** stream ([`emu::sched::Rng`]), and
/// the virtual time sleeps added.
#[derive(Clone, Debug)]
pub struct SeededRng {
    rng: emu::sched::Rng,
    /// Virtual nanoseconds added by sleeps.
    pub slept_ns: u64,
}

impl SeededRng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SeededRng {
        SeededRng { rng: emu::sched::Rng::new(seed), slept_ns: 0 }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

const CLOCK_REALTIME: i32 = 0;
const CLOCK_MONOTONIC: i32 = 1;
const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
const CLOCK_MONOTONIC_RAW: i32 = 4;
const CLOCK_REALTIME_COARSE: i32 = 5;
const CLOCK_MONOTONIC_COARSE: i32 = 6;
const CLOCK_BOOTTIME: i32 = 7;
const TIMER_ABSTIME: i32 = 1;

/// A CPU-time clock: a process's (its threads' instructions together) or one thread's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuClock {
    /// Process `pid`'s: the instructions its threads retired.
    Process(u32),
    /// Thread `tid`'s.
    Thread(u32),
}

/// The guest has been "up" for this long when it starts (seconds), so monotonic time is never 0.
pub(crate) const BOOT_UPTIME_S: u64 = 1000;

impl Kernel {
    /// Nanoseconds since boot on the virtual clock.
    pub(crate) fn now_ns(&self, m: &Machine) -> u64 {
        BOOT_UPTIME_S * 1_000_000_000 + m.icount() + self.rng.slept_ns
    }

    /// CLOCK_REALTIME minus the boot clock, in ns.
    pub(crate) fn realtime_offset_ns(&self) -> u64 {
        (EPOCH as u64 - BOOT_UPTIME_S) * 1_000_000_000
    }

    /// The guest's wall clock (`CLOCK_REALTIME`) now, in ns since the Unix epoch.
    pub(crate) fn wall_ns(&self, m: &Machine) -> i64 {
        self.clock_ns(m, CLOCK_REALTIME).unwrap_or(0) as i64
    }

    fn clock_ns(&self, m: &Machine, clock: i32) -> Option<u64> {
        let boot = self.now_ns(m);
        Some(match clock {
            CLOCK_REALTIME | CLOCK_REALTIME_COARSE => {
                EPOCH as u64 * 1_000_000_000 + boot - BOOT_UPTIME_S * 1_000_000_000
            }
            CLOCK_MONOTONIC | CLOCK_MONOTONIC_RAW | CLOCK_MONOTONIC_COARSE | CLOCK_BOOTTIME => boot,
            c => match self.cpu_clock(c, true)? {
                CpuClock::Process(pid) => self.process_cpu_ns(m, pid)?,
                CpuClock::Thread(tid) => self.thread_cpu_ns(m, tid)?,
            },
        })
    }

    /// The process or thread whose CPU time clock id `clock` reads, as Linux's `pid_for_clock`
    /// finds it (kernel/time/posix-cpu-timers.c): `CLOCK_PROCESS_CPUTIME_ID` and
    /// `CLOCK_THREAD_CPUTIME_ID` are the caller's; a negative id (`clock_getcpuclockid`,
    /// `pthread_getcpuclockid`) encodes `CPUCLOCK_PID` as `~(clock >> 3)` (0: the caller), bit 2
    /// for a thread's, and in the low two bits which time (`PROF`, `VIRT`, `SCHED`: all one
    /// here, there being no system time; a fourth kind is invalid). A thread must be in the
    /// caller's process; a process must exist (a zombie does); for `clock_gettime`
    /// (`gettime`) the caller's own tid names its process too. `None`: EINVAL.
    pub(crate) fn cpu_clock(&self, clock: i32, gettime: bool) -> Option<CpuClock> {
        match clock {
            CLOCK_PROCESS_CPUTIME_ID => return Some(CpuClock::Process(self.pid)),
            CLOCK_THREAD_CPUTIME_ID => return Some(CpuClock::Thread(self.current)),
            c if c >= 0 || c & 3 == 3 => return None,
            _ => {}
        }
        let id = !(clock >> 3) as u32;
        if clock & 4 != 0 {
            if id == 0 {
                return Some(CpuClock::Thread(self.current));
            }
            return self.threads.get(&id).filter(|t| t.pid == self.pid).map(|_| CpuClock::Thread(id));
        }
        if id == 0 || (gettime && id == self.current) {
            return Some(CpuClock::Process(self.pid));
        }
        self.procs.contains_key(&id).then_some(CpuClock::Process(id))
    }

    pub(crate) fn write_timespec(m: &mut Machine, addr: u64, ns: u64) -> Result<(), crate::Errno> {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&(ns / 1_000_000_000).to_le_bytes());
        b[8..].copy_from_slice(&(ns % 1_000_000_000).to_le_bytes());
        m.write(addr, &b, false)?;
        Ok(())
    }

    pub(crate) fn read_timespec(m: &Machine, addr: u64) -> Result<u64, crate::Errno> {
        let s = m.read_u64(addr)? as i64;
        let ns = m.read_u64(addr + 8)? as i64;
        if s < 0 || !(0..1_000_000_000).contains(&ns) {
            return err(libc::EINVAL);
        }
        Ok((s as u64).saturating_mul(1_000_000_000).saturating_add(ns as u64))
    }

    pub(crate) fn clock_gettime(&mut self, m: &mut Machine, clock: i32, ts: u64) -> SysResult {
        let ns = self.clock_ns(m, clock).ok_or(crate::Errno(libc::EINVAL))?;
        Self::write_timespec(m, ts, ns)?;
        Ok(0)
    }

    /// clock_getres(2): 1 ns for every clock `clock_gettime` reads; EINVAL for any other (glibc's
    /// `clock_getcpuclockid` asks it whether a process's CPU clock exists).
    pub(crate) fn clock_getres(&mut self, m: &mut Machine, clock: i32, ts: u64) -> SysResult {
        if self.clock_ns(m, clock).is_none() {
            return err(libc::EINVAL);
        }
        if ts != 0 {
            Self::write_timespec(m, ts, 1)?;
        }
        Ok(0)
    }

    pub(crate) fn gettimeofday(&mut self, m: &mut Machine, tv: u64) -> SysResult {
        if tv != 0 {
            let ns = self.clock_ns(m, CLOCK_REALTIME).unwrap_or(0);
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&(ns / 1_000_000_000).to_le_bytes());
            b[8..].copy_from_slice(&((ns % 1_000_000_000) / 1000).to_le_bytes());
            m.write(tv, &b, false)?;
        }
        Ok(0)
    }

    pub(crate) fn time(&mut self, m: &mut Machine, out: u64) -> SysResult {
        let s = self.clock_ns(m, CLOCK_REALTIME).unwrap_or(0) / 1_000_000_000;
        if out != 0 {
            m.write_u64(out, s)?;
        }
        Ok(s)
    }

    pub(crate) fn nanosleep(&mut self, m: &mut Machine, req: u64, rem: u64) -> Result<Option<u64>, crate::Errno> {
        let ns = Self::read_timespec(m, req)?;
        // `rem` is written only when a signal interrupts the sleep (signal.rs), as on Linux.
        let _ = rem;
        // Made again after a signal no handler took: the time it had left.
        let deadline = self.take_restart_deadline().unwrap_or(self.now_ns(m).saturating_add(ns));
        Ok(self.sleep_until(m, deadline))
    }

    pub(crate) fn clock_nanosleep(
        &mut self,
        m: &mut Machine,
        clock: i32,
        flags: i32,
        req: u64,
        rem: u64,
    ) -> Result<Option<u64>, crate::Errno> {
        // Linux has no sleep on `CLOCK_THREAD_CPUTIME_ID` nor on a descriptor's clock (a
        // negative id whose low bits are 3, `CLOCKFD`): EOPNOTSUPP (glibc says EINVAL for the
        // first before asking).
        if clock == CLOCK_THREAD_CPUTIME_ID || (clock < 0 && clock & 7 == 3) {
            return err(libc::EOPNOTSUPP);
        }
        let abs = flags & TIMER_ABSTIME != 0;
        let _ = rem;
        let restarted = self.take_restart_deadline();
        if clock < 0 || clock == CLOCK_PROCESS_CPUTIME_ID {
            let t = Self::read_timespec(m, req)?;
            // `posix_cpu_nsleep` refuses the caller's own thread clock by id: it would not
            // advance while the caller sleeps.
            if clock < 0 && clock & 4 != 0 && [0, self.current].contains(&(!(clock >> 3) as u32)) {
                return err(libc::EINVAL);
            }
            let cpu = self.cpu_clock(clock, false).ok_or(crate::Errno(libc::EINVAL))?;
            return Ok(self.cpu_sleep(m, cpu, t, abs));
        }
        let now = self.clock_ns(m, clock).ok_or(crate::Errno(libc::EINVAL))?;
        let t = Self::read_timespec(m, req)?;
        let ns = if abs { t.saturating_sub(now) } else { t };
        // A relative sleep made again after a signal no handler took: the time it had left.
        let deadline = restarted.filter(|_| !abs).unwrap_or(self.now_ns(m).saturating_add(ns));
        Ok(self.sleep_until(m, deadline))
    }

    /// `clock_nanosleep` on CPU clock `cpu` (another thread's of the caller's process, or a
    /// process's, its own included) until it reads `t` (`abs`) or for `t` of that CPU time, as
    /// Linux's `do_cpu_nanosleep`: the clock moves only while its thread or process runs, so
    /// the sleeper waits for those instructions to retire, not for the boot clock. An instant
    /// passed already (or a zero length) returns at once. `None`: the caller blocks.
    fn cpu_sleep(&mut self, m: &Machine, cpu: CpuClock, t: u64, abs: bool) -> Option<u64> {
        let now = match cpu {
            CpuClock::Process(pid) => self.process_cpu_ns(m, pid),
            CpuClock::Thread(tid) => self.thread_cpu_ns(m, tid),
        }?;
        let until = if abs { t } else { now.saturating_add(t) };
        if until <= now {
            return Some(0);
        }
        let cur = self.current;
        self.block(m, crate::thread::Wait::CpuSleep);
        self.timers.add_sleep(cur, cpu, until);
        None
    }

    pub(crate) fn getrandom(&mut self, m: &mut Machine, buf: u64, len: u64) -> SysResult {
        let len = len.min(33_554_431);
        let mut b = vec![0u8; len as usize];
        self.rng.fill(&mut b);
        m.write(buf, &b, false)?;
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::SeededRng;

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let (mut a, mut b, mut c) = (SeededRng::new(1), SeededRng::new(1), SeededRng::new(2));
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..4).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }
}
