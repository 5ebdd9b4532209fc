//! Processes' address spaces in one engine: `fork`'s copy of the running address space, and the
//! switch from one process's address space to another's at a scheduling decision.
//!
//! Why one engine and swapped mappings rather than an engine per process: the scheduler, the
//! PM device, the observer, the clock and the call-stack table live in the engine's hook state
//! and must be one for the whole machine (one seeded schedule over every thread of every
//! process; one line state of a PM file however many processes map it). A switch keeps in
//! Unicorn what both processes map identically (code and read-only data after a `fork`, shared
//! mappings, PM windows), so their translations survive; only the private writable regions
//! are unregistered and the other process's registered (docs/architecture.md, "Processes",
//! has the measured cost).

use super::*;

/// The address space of a process that is not running: its memory table (host memory stays
/// mapped on the host), its PM windows and its ranges past the end of a file.
pub struct AddressSpace {
    mem: Memory,
    windows: Vec<(u64, u64, u64)>,
    sigbus: Vec<(u64, u64)>,
}

impl AddressSpace {
    /// Bytes of guest memory it maps (what `--max-memory` counts).
    pub fn mapped_bytes(&self) -> u64 {
        self.mem.mapped_bytes()
    }
}

impl Machine {
    /// `fork`'s copy of the running address space (see [`Memory::fork_copy`]): private
    /// writable memory copied, shared mappings and PM windows the same. From now on the machine
    /// has several processes: a private region that cannot be written gets a copy of its own
    /// before it becomes writable ([`Machine::protect`]), and snapshots are refused.
    pub fn fork_address_space(&mut self) -> Result<AddressSpace, EmuError> {
        let mem = self.mem.fork_copy().map_err(EmuError::Host)?;
        self.processes = true;
        Ok(AddressSpace {
            mem,
            windows: self.uc.get_data().pm.windows.clone(),
            sigbus: self.sigbus.iter().map(|b| (b.0, b.1)).collect(),
        })
    }

    /// `execve`'s end of the running address space: every mapping goes (host memory another
    /// process still maps stays with it), PM windows and SIGBUS ranges with them, and the running
    /// thread's shadow call stack, whose frames named the old program. The caller loads the new
    /// program into the empty space. Snapshots are refused from now on, as after a `fork`: what
    /// the caller knows of the objects loaded is no longer one program's.
    pub fn exec_address_space(&mut self) {
        let mut empty = AddressSpace { mem: Memory::default(), windows: Vec::new(), sigbus: Vec::new() };
        self.swap_address_space(&mut empty);
        self.processes = true;
        self.uc.get_data_mut().callstack = CallStack::default();
    }

    /// Whether the machine has ever had more than one process.
    pub fn has_processes(&self) -> bool {
        self.processes
    }

    /// Makes `other` the running address space; `other` then holds the one that was running.
    /// Translations of regions both map identically survive; the decoder forgets code whose
    /// mapping changed; PM windows and SIGBUS ranges are re-hooked only if they differ.
    pub fn swap_address_space(&mut self, other: &mut AddressSpace) {
        let changed = self.mem.switch_to(&mut self.uc, &mut other.mem);
        std::mem::swap(&mut self.mem, &mut other.mem);
        for (s, e) in changed {
            let st = self.uc.get_data_mut();
            st.code.decoder.invalidate(s, e);
            if let Some(t) = st.obs.taint.as_deref_mut() {
                t.forget_code(s, e);
            }
        }
        let windows = self.uc.get_data().pm.windows.clone();
        if windows != other.windows {
            // The outgoing process's hooks are parked, not removed: a hook added later costs a
            // flush of every translation, and two processes of a server and its client switch
            // thousands of times.
            for (start, ids) in std::mem::take(&mut self.pm_hooks) {
                if let Some(w) = windows.iter().find(|w| w.0 == start) {
                    self.parked_windows.push((*w, ids));
                }
            }
            self.uc.get_data_mut().pm.windows.clear();
            for w in std::mem::replace(&mut other.windows, windows) {
                match self.parked_windows.iter().position(|p| p.0 == w) {
                    Some(i) => {
                        let (_, ids) = self.parked_windows.swap_remove(i);
                        self.pm_hooks.push((w.0, ids));
                        self.uc.get_data_mut().pm.windows.push(w);
                    }
                    None => self.add_window(w),
                }
            }
            self.uc.get_data_mut().pm.windows.sort_unstable();
        }
        let sigbus: Vec<(u64, u64)> = self.sigbus.iter().map(|b| (b.0, b.1)).collect();
        if sigbus != other.sigbus {
            for (_, _, ids) in std::mem::take(&mut self.sigbus) {
                for id in ids {
                    let _ = self.uc.remove_hook(id);
                }
            }
            for (s, e) in std::mem::replace(&mut other.sigbus, sigbus) {
                self.add_sigbus_range(s, e);
            }
        }
    }
}
