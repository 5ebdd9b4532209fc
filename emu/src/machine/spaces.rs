//! Processes' address spaces in one engine: `fork`'s copy of the running address space, and the
//! switch from one process's address space to another's at a scheduling decision.
//!
//! Why one engine: the scheduler, the PM device, the observer, the clock and the call-stack table
//! live in the engine's hook state and must be one for the whole machine (one seeded schedule
//! over every thread of every process; one line state of a PM file however many processes map
//! it). Why processes stay registered: once a second process exists, Unicorn runs in its
//! virtual-TLB mode, each process's regions registered at a physical slot of their own
//! ([`state::Phys`]), so a switch is a TLB flush and translated code, which Unicorn keys by the
//! physical page, survives switches, however many programs sit at the same addresses (every
//! static guest at 0x400000). At most [`REGISTERED`] are registered at once: Unicorn's cost of a
//! registration grows with what it holds. docs/architecture.md, "Processes", has the design and
//! its cost.

use super::*;
use unicorn_engine::{Prot, TlbEntry, TlbType};

/// The address space of a process that is not running: its memory table (registered with
/// Unicorn at its slot unless evicted, see [`REGISTERED`]), its PM windows and their hooks, its
/// ranges past the end of a file, and what the hooks know of its code.
pub struct AddressSpace {
    pub(super) mem: Memory,
    /// Whether its regions are registered with Unicorn now (see [`REGISTERED`]).
    pub(super) registered: bool,
    pub(super) windows: Vec<(u64, u64, u64)>,
    pub(super) pm_hooks: Vec<(u64, Vec<unicorn_engine::UcHookId>)>,
    pub(super) sigbus: Vec<(u64, u64, Vec<unicorn_engine::UcHookId>)>,
    pub(super) decoder: crate::decode::Decoder,
    pub(super) own: hooks::Specials,
}

/// Address spaces registered with Unicorn at once, at most: Unicorn's cost of registering a
/// region grows with the number of regions it holds (its search for a RAM offset and its
/// rebuilt address map), so with many processes alive, the one a switch leaves is unregistered
/// while more than this many are (its translations go; it is registered again when it next runs).
/// Most-recently-run eviction: under round-robin scheduling of many processes it keeps the others.
const REGISTERED: usize = 8;

impl AddressSpace {
    /// An empty address space at physical base `base`, registered (it holds nothing).
    pub(super) fn empty(base: u64) -> AddressSpace {
        AddressSpace {
            mem: Memory::at_base(base),
            registered: true,
            windows: Vec::new(),
            pm_hooks: Vec::new(),
            sigbus: Vec::new(),
            decoder: crate::decode::Decoder::default(),
            own: hooks::Specials::default(),
        }
    }

    /// Bytes of guest memory it maps (what `--max-memory` counts).
    pub fn mapped_bytes(&self) -> u64 {
        self.mem.mapped_bytes()
    }

    /// Copies its memory into `buf` as [`Memory::read`] does (while another space runs: a
    /// process reading another's `/proc/PID/cmdline`).
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), crate::MemError> {
        self.mem.read(addr, buf)
    }
}

impl Machine {
    /// From here until [`Machine::raw_end`], Unicorn's TLB maps addresses to themselves: Unicorn
    /// looks the physical addresses of a range it unregisters (or hooks) up through the TLB to
    /// drop their translated code. Returns what to give `raw_end`.
    pub(super) fn raw_begin(&mut self) -> bool {
        let p = &mut self.uc.get_data_mut().phys;
        let was = p.raw;
        p.raw = p.virt;
        was
    }

    /// Ends [`Machine::raw_begin`]: the TLB entries made meanwhile, and any of the registrations
    /// that changed, go.
    pub(super) fn raw_end(&mut self, was: bool) {
        let p = &mut self.uc.get_data_mut().phys;
        let flush = p.virt && !was;
        p.raw = was;
        if flush {
            let _ = self.uc.ctl_flush_tlb();
        }
    }

    /// Unicorn's virtual-TLB mode, once: the first process keeps slot 0, where physical and
    /// guest addresses are the same, so its registrations, hooks and translations stay as they
    /// are.
    pub(super) fn enter_virtual_tlb(&mut self) -> Result<(), EmuError> {
        if self.uc.get_data().phys.virt {
            return Ok(());
        }
        self.uc
            .add_tlb_hook(1, 0, |uc, va, _t| {
                let p = uc.get_data().phys;
                let paddr = if p.raw { va } else { p.pa(va) };
                // Every permission: the registered region's own protection decides, as in the
                // default mode (an access it forbids raises the same protection fault).
                Some(TlbEntry { paddr, perms: Prot::ALL })
            })
            .map_err(EmuError::Engine)?;
        self.uc.ctl_set_tlb_type(TlbType::VIRTUAL).map_err(EmuError::Engine)?;
        self.uc.get_data_mut().phys.virt = true;
        let _ = self.uc.ctl_flush_tlb();
        Ok(())
    }

    /// `fork`'s copy of the running address space (see [`Memory::fork_copy`]): private
    /// writable memory copied, shared mappings and PM windows the same, registered at a free
    /// slot. From now on the machine has several processes: a private region that cannot be
    /// written gets a copy of its own before it becomes writable ([`Machine::protect`]), and
    /// snapshots must be given the other processes' spaces ([`Machine::checkpoint_spaces`]). `None` when every slot is taken ([`state::SLOTS`] processes alive).
    pub fn fork_address_space(&mut self) -> Result<Option<AddressSpace>, EmuError> {
        let Some(slot) = (1..state::SLOTS).find(|&s| !self.slots.contains(&s)) else { return Ok(None) };
        self.enter_virtual_tlb()?;
        let base = u64::from(slot) << state::SLOT_SHIFT;
        let mut child = AddressSpace::empty(base);
        child.mem = self.mem.fork_copy(base).map_err(EmuError::Host)?;
        let (code, aliased) = guest_memory::writable_code(&child.mem);
        child.decoder.set_writable_code(code, aliased);
        // One raw section (and one TLB flush) for the registrations and the hooks.
        let raw = self.raw_begin();
        // Past the bound, the child is registered when it first runs.
        child.registered = self.registered < REGISTERED;
        if child.registered && !self.register(&child.mem) {
            self.raw_end(raw);
            return Err(EmuError::Memory(MemError::Engine));
        }
        self.slots.insert(slot);
        self.processes = true;
        let phys = state::Phys { virt: true, base, raw: false };
        child.windows = self.uc.get_data().pm.windows.clone();
        child.pm_hooks = child.windows.iter().map(|&w| (w.0, self.hook_window(w, phys))).collect();
        let ranges: Vec<(u64, u64)> = self.sigbus.iter().map(|b| (b.0, b.1)).collect();
        child.sigbus = ranges.into_iter().map(|(s, e)| (s, e, self.hook_sigbus(s, e, phys))).collect();
        self.raw_end(raw);
        Ok(Some(child))
    }

    /// An empty address space at a free slot, registered: what a process that ran in another's
    /// address space (a `clone(CLONE_VM)` child) gets at `execve`. `None` when every slot is
    /// taken ([`state::SLOTS`] processes alive).
    pub fn empty_address_space(&mut self) -> Result<Option<AddressSpace>, EmuError> {
        let Some(slot) = (1..state::SLOTS).find(|&s| !self.slots.contains(&s)) else { return Ok(None) };
        self.enter_virtual_tlb()?;
        let mut space = AddressSpace::empty(u64::from(slot) << state::SLOT_SHIFT);
        // Nothing to register yet; counted as registered, as every registered space is.
        space.registered = self.register(&space.mem);
        self.slots.insert(slot);
        self.processes = true;
        Ok(Some(space))
    }

    /// The end of a process that is not running: its registrations and hooks go, its slot is
    /// free again, its host memory goes with the table.
    pub fn release_address_space(&mut self, space: AddressSpace) {
        if space.registered {
            self.unregister(&space.mem);
        }
        self.remove_space_hooks(space.pm_hooks, space.sigbus);
        self.slots.remove(&((space.mem.base() >> state::SLOT_SHIFT) as u32));
    }

    /// `execve`'s end of the running address space: every mapping goes (host memory another
    /// process still maps stays with it), PM windows and SIGBUS ranges with them, what the hooks
    /// knew of the code, and the running thread's shadow call stack, whose frames named the old
    /// program. The caller loads the new program into the empty space, at the same slot.
    /// From now on, as after a `fork`, snapshots are [`Machine::checkpoint_spaces`]'s.
    pub fn exec_address_space(&mut self) {
        let mut old = AddressSpace::empty(self.mem.base());
        // One raw section (and one TLB flush) for the exchange and the releases.
        let raw = self.raw_begin();
        self.take_running(&mut old);
        if let Some(t) = self.uc.get_data_mut().obs.taint.as_deref_mut() {
            t.forget_code(0, u64::MAX);
        }
        // The slot stays the running process's: release only what the old space held.
        self.unregister(&old.mem);
        self.registered += 1;
        // Unregistering dropped the old program's translations (looked up through the raw TLB).
        self.remove_space_hooks(old.pm_hooks, old.sigbus);
        self.raw_end(raw);
        self.processes = true;
        self.uc.get_data_mut().callstack = CallStack::default();
    }

    /// Whether the machine has ever had more than one process.
    pub fn has_processes(&self) -> bool {
        self.processes
    }

    /// Makes `other` the running address space; `other` then holds the one that was running.
    /// Both stay registered at their slots, with their hooks: only the TLB is flushed.
    pub fn swap_address_space(&mut self, other: &mut AddressSpace) {
        // One raw section (and one TLB flush) for the registrations and the exchange.
        let raw = self.raw_begin();
        if !other.registered {
            // Registered (or not at all, if Unicorn refuses, which a consistent table never
            // makes it) before it runs.
            other.registered = self.register(&other.mem);
        }
        self.take_running(other);
        other.registered = true;
        if self.registered > REGISTERED {
            self.unregister(&other.mem);
            other.registered = false;
        }
        self.raw_end(raw);
        if let Some(t) = self.uc.get_data_mut().obs.taint.as_deref_mut() {
            // What taint learnt of an instruction is by address: another program may be there.
            t.forget_code(0, u64::MAX);
        }
    }

    /// Exchanges the running process's address space with `other`, inside a raw section (whose
    /// end flushes the TLB). `other.registered` is left as it was.
    pub(super) fn take_running(&mut self, other: &mut AddressSpace) {
        debug_assert!(self.uc.get_data().phys.raw || !self.uc.get_data().phys.virt);
        std::mem::swap(&mut *self.mem, &mut other.mem);
        std::mem::swap(&mut self.pm_hooks, &mut other.pm_hooks);
        std::mem::swap(&mut self.sigbus, &mut other.sigbus);
        let base = self.mem.base();
        let st = self.uc.get_data_mut();
        std::mem::swap(&mut st.pm.windows, &mut other.windows);
        std::mem::swap(&mut st.code.decoder, &mut other.decoder);
        std::mem::swap(&mut st.code.own, &mut other.own);
        // The block under way was named by its slot in the other decoder.
        st.clock.slot = state::NO_SLOT;
        st.phys.base = base;
    }

    /// Removes the hooks of an address space's PM windows and SIGBUS ranges.
    pub(super) fn remove_space_hooks(
        &mut self,
        pm_hooks: Vec<(u64, Vec<unicorn_engine::UcHookId>)>,
        sigbus: Vec<(u64, u64, Vec<unicorn_engine::UcHookId>)>,
    ) {
        let raw = self.raw_begin();
        for id in pm_hooks.into_iter().map(|h| h.1).chain(sigbus.into_iter().map(|b| b.2)).flatten() {
            let _ = self.uc.remove_hook(id);
        }
        self.raw_end(raw);
    }

    /// Registers a table with Unicorn at its slot (counted in `registered`); false, with
    /// nothing registered, if Unicorn refuses.
    pub(super) fn register(&mut self, mem: &Memory) -> bool {
        let raw = self.raw_begin();
        let done = mem.register(&mut self.uc);
        if done.is_err() {
            mem.unregister(&mut self.uc);
        }
        self.raw_end(raw);
        self.registered += usize::from(done.is_ok());
        done.is_ok()
    }

    /// Takes a registered table away from Unicorn (uncounted from `registered`).
    fn unregister(&mut self, mem: &Memory) {
        let raw = self.raw_begin();
        mem.unregister(&mut self.uc);
        self.raw_end(raw);
        self.registered -= 1;
    }
}
