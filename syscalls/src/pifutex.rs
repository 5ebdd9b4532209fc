//! Priority-inheritance futexes: `FUTEX_LOCK_PI`, `FUTEX_LOCK_PI2`, `FUTEX_TRYLOCK_PI`,
//! `FUTEX_UNLOCK_PI`, `FUTEX_WAIT_REQUEUE_PI` and `FUTEX_CMP_REQUEUE_PI`, as Linux's
//! `kernel/futex/pi.c` and `requeue.c` (and futex(2)) define them. glibc's
//! `PTHREAD_PRIO_INHERIT` mutexes (and its robust ones with that protocol) lock through them.
//!
//! The futex word holds the owner's thread id (`FUTEX_TID_MASK`), `FUTEX_WAITERS` when someone
//! waits in the kernel (the owner's unlock must then come here) and `FUTEX_OWNER_DIED`. User
//! space takes a free lock with a `cmpxchg` of 0 to its tid and releases one without waiters
//! the same way; the kernel sees the rest:
//!
//! - `LOCK_PI`: a word without an owner is taken (`OWNER_DIED` kept, `WAITERS` dropped, as
//!   `futex_lock_pi_atomic`); the caller's own tid is EDEADLK; otherwise `WAITERS` is set and the
//!   caller waits behind the owner, which must exist (else ESRCH, the word keeping `WAITERS`).
//!   A wait that would close a cycle of PI waits (A waits for B's lock, B for A's) is EDEADLK,
//!   as the `rt_mutex` chain walk Linux makes for futexes (`RT_MUTEX_FULL_CHAINWALK`) finds it.
//!   The timeout is absolute: `CLOCK_REALTIME` for `LOCK_PI`, `CLOCK_MONOTONIC` for `LOCK_PI2`
//!   unless `FUTEX_CLOCK_REALTIME`. A signal does not end the wait: it is made again after the
//!   handler (`-ERESTARTNOINTR`).
//! - `TRYLOCK_PI`: as `LOCK_PI` without waiting: EAGAIN (`EWOULDBLOCK`) for a lock held, the
//!   word keeping the `WAITERS` bit the attempt set.
//! - `UNLOCK_PI`: EPERM unless the word names the caller. With waiters the lock goes to the
//!   first of them at once (the word becomes its tid with `WAITERS`, as `wake_futex_pi`), else
//!   the word becomes 0.
//! - `WAIT_REQUEUE_PI(uaddr, val, timeout, uaddr2)`: waits on the ordinary futex `uaddr` (EAGAIN
//!   if it no longer holds `val`; EINVAL when both are one futex) until `CMP_REQUEUE_PI` on it
//!   either takes the PI futex `uaddr2` for it (it returns 0 owning it) or moves it to wait for
//!   `uaddr2` as a `LOCK_PI` would. A signal before the move makes the call again; after it, the
//!   call ends with EAGAIN (as Linux, which saves the restart that would find `val` changed).
//! - `CMP_REQUEUE_PI(uaddr, 1, nr_requeue, uaddr2, val3)`: EINVAL unless `nr_wake` is 1, for a
//!   negative `nr_requeue`, one futex on both sides, or a waiter on `uaddr` that is not a
//!   `WAIT_REQUEUE_PI` waiter for `uaddr2`; EAGAIN if `uaddr` no longer holds `val3`. The first
//!   waiter takes `uaddr2` if it is free (its tid with `WAITERS`); the others (the first too if
//!   the lock is held), up to `nr_requeue`, then wait for `uaddr2`. Returns how many were woken
//!   or moved.
//!
//! Ordinary `FUTEX_WAKE`, `FUTEX_REQUEUE` and `FUTEX_CMP_REQUEUE` on a futex with PI waiters
//! are EINVAL, as Linux's `futex_wake` finds a waiter with PI state.
//!
//! Waiters are the futex waits of [`crate::thread::WaitIndex`] with no bitset ([`PI`]), so a
//! deadlock among them is reported as any other, and which waiter gets a released lock is the
//! first to have come: Linux's `rt_mutex` orders waiters by priority, and every guest thread
//! has the same (ferrite has no real-time scheduling classes), then by arrival. The kernel's
//! state is which thread owns each futex that has waiters ([`crate::thread::WaitIndex`]'s
//! `pi_owner`), kept only while it has some, as Linux keeps its `pi_state`.
//!
//! A thread that ends owning such a futex hands it to the first waiter, as Linux's
//! `exit_pi_state_list`: after its robust list has been walked (which, for a PI entry, leaves
//! the word `WAITERS | OWNER_DIED` and wakes no one), the waiter is made to run its call again
//! and finds the lock granted: it writes its tid with `WAITERS` and the `OWNER_DIED` bit it
//! found, and returns 0 (glibc then answers EOWNERDEAD for a robust mutex). The waiter writes
//! the word itself, in its own address space, as Linux's waiter fixes the word up
//! (`fixup_pi_owner`).
//!
//! Left out: priorities themselves (no thread is boosted: every thread runs at one priority
//! under the seeded scheduler, so there is nothing to boost); Linux's checks that the word and
//! its `pi_state` agree (a word user space corrupts behind the kernel's back is trusted here
//! where Linux may answer EINVAL); `FUTEX_WAKE` on the first futex of a `WAIT_REQUEUE_PI`
//! waiter is EINVAL as Linux, but the order in which Linux would have woken ordinary waiters
//! queued before it is not kept.

use emu::{Machine, Reg};

use crate::thread::{Wait, FUTEX_OWNER_DIED, FUTEX_TID_MASK, FUTEX_WAITERS};
use crate::{err, Errno, Kernel};

/// The bitset of a PI wait: no ordinary wake (whose bitset is never 0) matches it.
pub(crate) const PI: u32 = 0;

/// How far Linux's `rt_mutex` chain walk goes (`max_lock_depth`).
const MAX_LOCK_DEPTH: usize = 1024;

/// What a thread's PI wait is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PiWait {
    /// `FUTEX_LOCK_PI`/`LOCK_PI2`: it waits for the futex's owner to release it.
    Lock,
    /// `FUTEX_WAIT_REQUEUE_PI` still on its first futex: `target` is the key of the PI futex it
    /// may be moved to.
    Requeue {
        /// The PI futex's key.
        target: u64,
    },
    /// `FUTEX_WAIT_REQUEUE_PI` moved to the PI futex: it waits as `Lock` does, but a signal
    /// ends the call with EAGAIN.
    Requeued,
}

impl Kernel {
    /// The first thread waiting to own PI futex `key` (by arrival), if any.
    fn pi_top(&self, key: u64) -> Option<u32> {
        self.waits
            .futex
            .get(&key)?
            .iter()
            .filter(|x| x.2 == PI)
            .map(|x| x.1)
            .find(|t| self.threads.get(t).is_some_and(|t| matches!(t.pi_wait, PiWait::Lock | PiWait::Requeued)))
    }

    /// The owner of PI futex `key` as the kernel knows it: only while it has waiters, or a
    /// waiter it was handed to has not run yet. A stale entry is dropped.
    fn pi_owner(&mut self, key: u64) -> Option<u32> {
        let o = *self.waits.pi_owner.get(&key)?;
        if self.pi_top(key).is_some() || self.waits.pi_grants.iter().any(|g| g.1 == key) {
            Some(o)
        } else {
            self.waits.pi_owner.remove(&key);
            None
        }
    }

    /// Whether ordinary waiters on `key` may not be woken or requeued: a PI waiter is there.
    pub(crate) fn has_pi_waiters(&self, key: u64) -> bool {
        self.waits.futex.get(&key).is_some_and(|q| q.iter().any(|x| x.2 == PI))
    }

    /// The absolute deadline of a PI wait, in virtual ns since boot: `timeout` points to a
    /// `timespec` on `CLOCK_REALTIME` (`realtime`) or `CLOCK_MONOTONIC`.
    fn pi_deadline(&self, m: &Machine, timeout: u64, realtime: bool) -> Result<Option<u64>, Errno> {
        if timeout == 0 {
            return Ok(None);
        }
        let t = Self::read_timespec(m, timeout)?;
        Ok(Some(if realtime { t.saturating_sub(self.realtime_offset_ns()) } else { t }))
    }

    /// A lock the thread that owned it left at its end was handed to the running thread (see
    /// the module doc): takes it. `None` if there is no such grant for `key`.
    fn take_grant(&mut self, m: &mut Machine, addr: u64, key: u64) -> Result<Option<u64>, Errno> {
        let cur = self.current;
        let Some(i) = self.waits.pi_grants.iter().position(|&g| g == (cur, key)) else { return Ok(None) };
        self.waits.pi_grants.remove(i);
        // Linux's `fixup_pi_state_owner` for a lock whose owner died (`pi_state->owner` NULL):
        // the new owner's tid with FUTEX_WAITERS and FUTEX_OWNER_DIED, robust or not (glibc
        // then asserts on a lock that is not robust, as natively).
        m.write(addr, &(FUTEX_OWNER_DIED | cur | FUTEX_WAITERS).to_le_bytes(), false)?;
        self.pi_owner(key);
        Ok(Some(0))
    }

    /// `FUTEX_LOCK_PI` (`realtime` timeout), `FUTEX_LOCK_PI2` and `FUTEX_TRYLOCK_PI` (`trylock`) on
    /// the word at `addr`, whose key is `key`. `Ok(None)`: the caller waits.
    pub(crate) fn futex_lock_pi(
        &mut self,
        m: &mut Machine,
        addr: u64,
        key: u64,
        timeout: u64,
        realtime: bool,
        trylock: bool,
    ) -> Result<Option<u64>, Errno> {
        if !addr.is_multiple_of(4) {
            return err(libc::EINVAL);
        }
        let deadline = if trylock { None } else { self.pi_deadline(m, timeout, realtime)? };
        if let Some(r) = self.take_grant(m, addr, key)? {
            return Ok(Some(r));
        }
        let cur = self.current;
        let uval = m.read_u32(addr)?;
        if uval & FUTEX_TID_MASK == cur {
            return err(libc::EDEADLK);
        }
        let known = self.pi_owner(key);
        if known == Some(cur) {
            return err(libc::EDEADLK);
        }
        if known.is_none() && uval & FUTEX_TID_MASK == 0 {
            // No owner: taken, the owner-died bit kept for the new owner to see.
            m.write(addr, &((uval & FUTEX_OWNER_DIED) | cur).to_le_bytes(), false)?;
            return Ok(Some(0));
        }
        // Contended: the owner's unlock must come to the kernel from now on.
        if uval & FUTEX_WAITERS == 0 {
            m.write(addr, &(uval | FUTEX_WAITERS).to_le_bytes(), false)?;
        }
        let owner = match known {
            Some(o) => o,
            None => {
                let tid = uval & FUTEX_TID_MASK;
                if !self.threads.contains_key(&tid) {
                    // handle_exit_race: the word names a thread that is gone.
                    return err(libc::ESRCH);
                }
                tid
            }
        };
        if trylock {
            return err(libc::EAGAIN);
        }
        self.pi_block(m, key, owner, deadline, PiWait::Lock)
    }

    /// The running thread waits to own PI futex `key`, owned by `owner`, unless that closes a
    /// cycle of PI waits (EDEADLK) or the deadline has passed (ETIMEDOUT).
    fn pi_block(
        &mut self,
        m: &mut Machine,
        key: u64,
        owner: u32,
        deadline: Option<u64>,
        how: PiWait,
    ) -> Result<Option<u64>, Errno> {
        let cur = self.current;
        let mut o = owner;
        for _ in 0..MAX_LOCK_DEPTH {
            if o == cur {
                return err(libc::EDEADLK);
            }
            let next = self.threads.get(&o).and_then(|t| match (t.wait, t.pi_wait) {
                (Some(Wait::Futex { addr, bitset: PI, .. }), PiWait::Lock | PiWait::Requeued) => Some(addr),
                _ => None,
            });
            match next.and_then(|k| self.waits.pi_owner.get(&k)) {
                Some(&n) => o = n,
                None => break,
            }
        }
        if deadline.is_some_and(|d| d <= self.now_ns(m)) {
            return err(libc::ETIMEDOUT);
        }
        self.waits.pi_owner.insert(key, owner);
        self.thread_mut(cur).pi_wait = how;
        self.block(m, Wait::Futex { addr: key, bitset: PI, deadline });
        Ok(None)
    }

    /// `FUTEX_UNLOCK_PI` of the word at `addr` (key `key`).
    pub(crate) fn futex_unlock_pi(&mut self, m: &mut Machine, addr: u64, key: u64) -> Result<u64, Errno> {
        if !addr.is_multiple_of(4) {
            return err(libc::EINVAL);
        }
        let cur = self.current;
        let uval = m.read_u32(addr)?;
        if uval & FUTEX_TID_MASK != cur {
            return err(libc::EPERM);
        }
        match self.pi_top(key) {
            Some(w) => {
                // The lock goes to the first waiter at once; the word says so, with WAITERS
                // (its own unlock then comes here, and finds whether anyone is left).
                m.write(addr, &(w | FUTEX_WAITERS).to_le_bytes(), false)?;
                self.waits.pi_owner.insert(key, w);
                self.resume(m, w, 0);
                self.woken.push((w, addr));
                self.pi_owner(key);
            }
            None => {
                m.write(addr, &0u32.to_le_bytes(), false)?;
                self.waits.pi_owner.remove(&key);
            }
        }
        Ok(0)
    }

    /// `FUTEX_WAIT_REQUEUE_PI`: waits on `addr` (key `key`) while it holds `val`, to be given
    /// or moved to the PI futex `addr2` (key `key2`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn futex_wait_requeue_pi(
        &mut self,
        m: &mut Machine,
        addr: u64,
        key: u64,
        val: u64,
        timeout: u64,
        realtime: bool,
        addr2: u64,
        key2: u64,
    ) -> Result<Option<u64>, Errno> {
        if !addr.is_multiple_of(4) || !addr2.is_multiple_of(4) || key == key2 {
            return err(libc::EINVAL);
        }
        let deadline = self.pi_deadline(m, timeout, realtime)?;
        // Moved to the PI futex and handed it by an owner that ended: the call made again.
        if let Some(r) = self.take_grant(m, addr2, key2)? {
            return Ok(Some(r));
        }
        if m.read_u32(addr)? != val as u32 {
            return err(libc::EAGAIN);
        }
        if deadline.is_some_and(|d| d <= self.now_ns(m)) {
            return err(libc::ETIMEDOUT);
        }
        let cur = self.current;
        self.thread_mut(cur).pi_wait = PiWait::Requeue { target: key2 };
        self.block(m, Wait::Futex { addr: key, bitset: PI, deadline });
        Ok(None)
    }

    /// `FUTEX_CMP_REQUEUE_PI`: see the module doc.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn futex_cmp_requeue_pi(
        &mut self,
        m: &mut Machine,
        addr: u64,
        key: u64,
        nr_wake: u64,
        nr_requeue: u64,
        addr2: u64,
        key2: u64,
        val3: u64,
    ) -> Result<u64, Errno> {
        if nr_wake as i32 != 1 || (nr_requeue as i32) < 0 || key == key2 {
            return err(libc::EINVAL);
        }
        if !addr.is_multiple_of(4) || !addr2.is_multiple_of(4) {
            return err(libc::EINVAL);
        }
        if m.read_u32(addr)? != val3 as u32 {
            return err(libc::EAGAIN);
        }
        let mut queue: Vec<u32> =
            self.waits.futex.get(&key).map(|q| q.iter().map(|x| x.1).collect()).unwrap_or_default();
        // Every waiter must be a WAIT_REQUEUE_PI waiter for this PI futex (a plain waiter, or one
        // for another, is EINVAL, as `futex_requeue` finds).
        let fits = |k: &Kernel, t: &u32| {
            k.threads.get(t).is_some_and(|t| {
                matches!(t.wait, Some(Wait::Futex { bitset: PI, .. })) && t.pi_wait == PiWait::Requeue { target: key2 }
            })
        };
        if !queue.iter().all(|t| fits(self, t)) {
            return err(libc::EINVAL);
        }
        if queue.is_empty() {
            return Ok(0);
        }
        let mut count = 0;
        let top = queue[0];
        let uval = m.read_u32(addr2)?;
        if uval & FUTEX_TID_MASK == top {
            return err(libc::EDEADLK);
        }
        let mut owner = self.pi_owner(key2);
        if owner.is_none() && uval & FUTEX_TID_MASK == 0 {
            // Taken for the first waiter (`futex_proxy_trylock_atomic`, WAITERS set).
            m.write(addr2, &((uval & FUTEX_OWNER_DIED) | top | FUTEX_WAITERS).to_le_bytes(), false)?;
            self.resume(m, top, 0);
            self.woken.push((top, addr2));
            queue.remove(0);
            owner = Some(top);
            count += 1;
        } else {
            if uval & FUTEX_WAITERS == 0 {
                m.write(addr2, &(uval | FUTEX_WAITERS).to_le_bytes(), false)?;
            }
            if owner.is_none() {
                let tid = uval & FUTEX_TID_MASK;
                if !self.threads.contains_key(&tid) {
                    return err(libc::ESRCH);
                }
                owner = Some(tid);
            }
        }
        let moving: Vec<u32> = queue.into_iter().take(nr_requeue as usize).collect();
        if let (Some(o), false) = (owner, moving.is_empty()) {
            self.waits.pi_owner.insert(key2, o);
        }
        for tid in moving {
            let Some(Wait::Futex { deadline, .. }) = self.threads.get(&tid).and_then(|t| t.wait) else { continue };
            self.thread_mut(tid).pi_wait = PiWait::Requeued;
            self.set_wait(tid, Some(Wait::Futex { addr: key2, bitset: PI, deadline }), None);
            count += 1;
        }
        Ok(count)
    }

    /// Thread `tid` ends: every PI futex it owns with waiters goes to its first waiter, made to
    /// run its call again to take it ([`Kernel::take_grant`]), as Linux's
    /// `exit_pi_state_list`. Called after its robust list was walked.
    pub(crate) fn pi_exit(&mut self, m: &mut Machine, tid: u32) {
        if self.waits.pi_owner.is_empty() {
            return;
        }
        let owned: Vec<u64> = self.waits.pi_owner.iter().filter(|&(_, &o)| o == tid).map(|(&k, _)| k).collect();
        for key in owned {
            match self.pi_top(key) {
                Some(w) => {
                    self.waits.pi_owner.insert(key, w);
                    self.waits.pi_grants.push((w, key));
                    // Parked after its `syscall` with RAX still the call's number: back at the
                    // instruction, it makes the call again.
                    if let Some(pc) = m.parked_reg(w, Reg::RIP) {
                        m.set_parked_reg(w, Reg::RIP, pc.wrapping_sub(2));
                    }
                    self.set_wait(w, None, None);
                }
                None => {
                    self.waits.pi_owner.remove(&key);
                }
            }
        }
    }
}
