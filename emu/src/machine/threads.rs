//! Guest threads as parked Unicorn contexts, switching between them, and what steers the
//! scheduler from inside the engine (quanta, `--preempt all`, PMRace's hold, delay injection).

use super::*;

/// A thread that is not running: its registers and its shadow call stack.
pub(super) struct Parked {
    pub(super) ctx: unicorn_engine::Context,
    pub(super) callstack: CallStack,
}

impl Machine {
    /// Creates a guest thread `tid` with the running thread's registers changed by `regs` (clone:
    /// every register inherited, RAX = 0, a new stack and TLS). It starts parked.
    pub fn spawn_thread(&mut self, tid: u32, regs: &[(Reg, u64)]) -> Result<(), EmuError> {
        let mut ctx = self.uc.context_init().map_err(engine)?;
        for (r, v) in regs {
            ctx.reg_write(*r, *v).map_err(engine)?;
        }
        self.parked.insert(tid, Parked { ctx, callstack: CallStack::default() });
        self.uc.get_data_mut().steer.sched.thread_created(tid);
        self.hook_all_memory();
        Ok(())
    }

    /// Makes `tid` the running thread; the running one is parked (unless it `exited`, then it is
    /// dropped).
    pub fn switch_to(&mut self, tid: u32, exited: bool) -> Result<(), EmuError> {
        let cur = self.tid();
        if cur == tid {
            return Ok(());
        }
        let next = self.parked.remove(&tid).ok_or(EmuError::NoThread(tid))?;
        // What the outgoing thread did to DRAM lock words, before anything of the next one.
        if self.uc.get_data().obs.words.active(cur) {
            let pc = self.uc.pc_read().unwrap_or(0);
            hooks::settle_words(&mut self.uc, pc);
        }
        if exited {
            self.uc.get_data_mut().obs.words.held.retain(|h| h.0 != cur);
        } else {
            // Into the context the last switch freed, if any: a switch allocates nothing.
            let ctx = match self.spare_context.take() {
                Some(mut ctx) => {
                    self.uc.context_save(&mut ctx).map_err(engine)?;
                    ctx
                }
                None => self.uc.context_init().map_err(engine)?,
            };
            let callstack = std::mem::take(&mut self.uc.get_data_mut().callstack);
            self.parked.insert(cur, Parked { ctx, callstack });
        }
        self.uc.context_restore(&next.ctx).map_err(engine)?;
        self.spare_context = Some(next.ctx);
        let st = self.uc.get_data_mut();
        st.callstack = next.callstack;
        st.tid = tid;
        if let Some(t) = st.obs.taint.as_deref_mut() {
            if exited {
                t.forget_thread(cur);
            }
            t.switch_thread(tid);
        }
        st.clock.prev_term = Term::Other;
        Ok(())
    }

    /// Drops a parked thread (it exited while another ran, or the process is going).
    pub fn forget_thread(&mut self, tid: u32) {
        self.parked.remove(&tid);
        if let Some(t) = self.uc.get_data_mut().obs.taint.as_deref_mut() {
            t.forget_thread(tid);
        }
    }

    /// Sets a register of a parked thread (a blocked system call's result).
    pub fn set_parked_reg(&mut self, tid: u32, r: Reg, v: u64) {
        if tid == self.tid() {
            self.set_reg(r, v);
        } else if let Some(p) = self.parked.get_mut(&tid) {
            let _ = p.ctx.reg_write(r, v);
        }
    }

    /// A register of thread `tid`, running or parked; `None` for a thread the machine has not.
    pub fn parked_reg(&self, tid: u32, r: Reg) -> Option<u64> {
        if tid == self.tid() {
            return Some(self.reg(r));
        }
        self.parked.get(&tid).and_then(|p| p.ctx.reg_read(r).ok())
    }

    /// PC and call sites of any thread, innermost first.
    pub fn thread_backtrace(&self, tid: u32) -> Vec<u64> {
        if tid == self.tid() {
            return self.backtrace();
        }
        match self.parked.get(&tid) {
            Some(p) => std::iter::once(p.ctx.reg_read(Reg::RIP).unwrap_or(0)).chain(p.callstack.call_sites()).collect(),
            None => Vec::new(),
        }
    }

    /// The run's scheduler: the caller asks it which thread runs next at each scheduling point.
    pub fn scheduler(&mut self) -> &mut Scheduler {
        &mut self.uc.get_data_mut().steer.sched
    }

    /// Tells the hooks how many other threads could run now. The first time another thread
    /// can run (the first `clone`), the running thread's quantum starts: preemption is armed
    /// whenever two threads could run, whatever the strategy, and whether or not the running
    /// thread ever reaches another scheduling point.
    pub fn set_runnable_others(&mut self, n: usize) {
        let icount = self.icount;
        let st = self.uc.get_data_mut();
        st.steer.runnable_others = n;
        if n > 0 && st.steer.quantum_end == u64::MAX {
            st.steer.quantum_end = icount.saturating_add(st.steer.sched.first_quantum());
        }
    }

    /// How many other threads could run, as last told ([`Machine::set_runnable_others`]).
    pub fn runnable_others(&self) -> usize {
        self.uc.get_data().steer.runnable_others
    }

    /// Asks for an [`Exit::Timer`] at the first block start past `icount` retired instructions
    /// (`u64::MAX`: never), so that a timer expires in a thread that computes without making a
    /// system call. A comparison in the block hook, as the quantum's: arming translates nothing.
    pub fn set_timer_stop(&mut self, icount: u64) {
        self.uc.get_data_mut().steer.timer_at = icount;
    }

    /// Starts a new quantum for the running thread (after a scheduling decision).
    pub fn new_quantum(&mut self) {
        let icount = self.icount;
        let st = self.uc.get_data_mut();
        let q = st.steer.sched.quantum();
        st.steer.quantum_end = icount.saturating_add(q);
    }

    /// `--preempt all`: every access to memory that is not the running thread's own stack is a
    /// scheduling point (loads before they run, stores at the next block start), so races on
    /// plain DRAM variables are explored too. "Own stack" is the 1 MiB below and 64 KiB above the
    /// stack pointer; a thread reading another's stack is still a point.
    pub fn preempt_all_accesses(&mut self) {
        let near_stack = |uc: &Unicorn<'_, HookState>, addr: u64| {
            let sp = uc.reg_read(Reg::RSP).unwrap_or(0);
            addr < sp.wrapping_add(64 << 10) && addr >= sp.wrapping_sub(1 << 20)
        };
        let _ = self.uc.add_mem_hook(HookType::MEM_READ, 1, 0, move |uc, _t, addr, _size, _v| {
            let addr = uc.get_data().phys.va(addr);
            if uc.get_data().steer.runnable_others == 0 || near_stack(uc, addr) {
                return true;
            }
            let pc = uc.pc_read().unwrap_or(0);
            let st = uc.get_data_mut();
            if st.stop.is_none() && st.point(pc) {
                st.stop = Some(Stop::PreemptBefore);
                let _ = uc.emu_stop();
            }
            true
        });
        let _ = self.uc.add_mem_hook(HookType::MEM_WRITE, 1, 0, move |uc, _t, addr, size, _v| {
            let addr = uc.get_data().phys.va(addr);
            if uc.get_data().steer.runnable_others == 0 || near_stack(uc, addr) || size == 0 || size > 8 {
                return true;
            }
            let pc = uc.pc_read().unwrap_or(0);
            let mut old = [0u8; 8];
            let _ = hooks::read_guest(uc, addr, &mut old[..size]);
            let st = uc.get_data_mut();
            if st.stop.is_none() && st.point(pc) {
                // Before the store, undone on the way out (see `HookState::undo`).
                st.pm.undo = Some((addr, old, size));
                st.stop = Some(Stop::PreemptBefore);
                let _ = uc.emu_stop();
            }
            true
        });
        self.flush_translations();
    }

    /// Sets PMRace's targeted interleaving for this run (before it starts).
    pub fn set_hold(&mut self, hold: Option<crate::sched::Hold>) {
        let st = self.uc.get_data_mut();
        st.steer.hold = hold.map(|mut h| {
            h.loads.sort_unstable();
            h.stores.sort_unstable();
            h
        });
    }

    /// Whether the hold's store just happened (once): the caller releases the held readers.
    pub fn take_release(&mut self) -> bool {
        let st = self.uc.get_data_mut();
        if st.steer.release_pending {
            st.steer.held = 0;
        }
        std::mem::take(&mut st.steer.release_pending)
    }

    /// Turns on delay injection for this run (before it starts), seeded by `seed`.
    pub fn set_delays(&mut self, cfg: crate::sched::DelayInjection, seed: u64) {
        self.uc.get_data_mut().steer.delays = Some(crate::sched::Delays::new(cfg, seed));
    }

    /// A delay was decided for the running thread: its length in instructions, once. The caller
    /// holds the thread for that long; the delay's start is recorded here
    /// ([`Delays::started`](crate::sched::Delays::started)).
    pub fn take_delay(&mut self) -> Option<u64> {
        let st = self.uc.get_data_mut();
        let site = st.steer.delay_pending.take()?;
        let length = st.steer.delays.as_ref()?.cfg.length;
        let until = self.icount + length;
        let tid = st.tid;
        if let Some(d) = st.steer.delays.as_mut() {
            d.started(site, tid, until);
        }
        Some(length)
    }

    /// Delays injected so far.
    pub fn delays_injected(&self) -> u64 {
        self.uc.get_data().steer.delays.as_ref().map_or(0, |d| d.injected)
    }

    /// Whether this run's hold is a publication site (`Hold::stores`).
    pub fn hold_is_publication(&self) -> bool {
        self.uc.get_data().steer.hold.as_ref().is_some_and(|h| !h.stores.is_empty())
    }

    /// Thread `tid` is released to run its held load once: it may be held at its next one.
    pub fn pass_hold(&mut self, tid: u32) {
        let st = self.uc.get_data_mut();
        st.steer.hold_pass.push(tid);
        st.steer.held = st.steer.held.saturating_sub(1);
    }

    /// Thread `tid` is released as privileged: it is never held again in this run.
    pub fn bypass_hold(&mut self, tid: u32) {
        let st = self.uc.get_data_mut();
        st.steer.hold_bypass.push(tid);
        st.steer.held = st.steer.held.saturating_sub(1);
    }

    /// The running thread's id.
    pub fn tid(&self) -> u32 {
        self.uc.get_data().tid
    }

    /// Names the first thread (before the guest runs).
    pub fn set_main_tid(&mut self, tid: u32) {
        let st = self.uc.get_data_mut();
        st.tid = tid;
        st.steer.sched.thread_created(tid);
    }
}
