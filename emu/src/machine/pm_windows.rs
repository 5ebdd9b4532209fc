//! PM windows: the memory hooks of the guest's PM mappings, which feed the device, and the
//! kernel's own accesses to PM (`read()` into PM, `write()` from it, `msync`, `fsync`, truncation).

use super::*;

/// A guest store into a PM window (`start` maps to device address `dev_base`), before Unicorn
/// performs it. Accesses wider than 8 bytes arrive split into 8-byte hooks.
pub(super) fn on_pm_write(
    uc: &mut Unicorn<'_, HookState>,
    addr: u64,
    size: usize,
    value: i64,
    start: u64,
    dev_base: u64,
) {
    if size == 0 || size > 8 || !window_active(uc, start, dev_base) || debug::debug_watch(uc, addr, size, true) {
        return;
    }
    hooks::settle_words(uc, uc.get_data().clock.block.0);
    // A store running off the end of the window into unmapped memory faults after Unicorn has
    // written its first part; on Linux it would write nothing. Its events are discarded.
    let last = addr + size as u64 - 1;
    if uc.get_data().device_of(last).is_none() {
        let mut probe = [0u8; 1];
        if hooks::read_guest(uc, last, &mut probe).is_err() {
            // Keep the bytes it is about to overwrite, to put them back when it faults.
            let mapped = (((addr | 0xfff) + 1) - addr).min(size as u64) as usize;
            let mut old = [0u8; 8];
            let _ = hooks::read_guest(uc, addr, &mut old[..mapped]);
            uc.get_data_mut().pm.torn = Some((addr, old, mapped));
            return;
        }
    }
    let mut old = [0u8; 8];
    let _ = hooks::read_guest(uc, addr, &mut old[..size]);
    // The lines the store touches, as memory holds them now, for lines the device does not
    // track yet.
    let first = addr & !63;
    let mut lines = [0u8; 128];
    let _ = hooks::read_guest(uc, first, &mut lines[..64]);
    if (addr + size as u64 - 1) & !63 != first {
        let _ = hooks::read_guest(uc, first + 64, &mut lines[64..]);
    }
    let pc = rip(uc);
    let st = uc.get_data_mut();
    if matches!(st.stop, Some(Stop::PreemptBefore | Stop::Debug(_) | Stop::Taint)) {
        // Another hook stopped before this instruction: it runs again, whole, later.
        return;
    }
    let access = st.access_kind(pc);
    let new = (value as u64).to_le_bytes();
    if access == AccessKind::LockedCmpxchg && old[..size] == new[..size] {
        // A failed `lock cmpxchg` writes its unchanged value back: no store for the model.
        return;
    }
    if st.stop.is_none() && st.point(pc) {
        // A switch before the store, never after it: Unicorn performs the store on its way out of
        // the instruction, and the machine writes the old bytes back, so the instruction runs
        // whole when the thread is scheduled again. Nothing of it reached the device.
        let mut keep = [0u8; 8];
        keep[..size].copy_from_slice(&old[..size]);
        st.pm.undo = Some((addr, keep, size));
        st.stop = Some(Stop::PreemptBefore);
        let _ = uc.emu_stop();
        return;
    }
    let dev = dev_base + (addr - start);
    let kind = match access {
        AccessKind::NonTemporal => StoreKind::NonTemporal,
        AccessKind::RepString => StoreKind::RepString { seq: st.count_at(pc) },
        _ => StoreKind::Cached,
    };
    let first_dev = dev & !63;
    let id = st.pm.device.store(st.tid, dev, &old[..size], &new[..size], kind, |line| {
        let off = (line * 64).wrapping_sub(first_dev) as usize;
        let mut out = [0u8; 64];
        if off <= 64 {
            out.copy_from_slice(&lines[off..off + 64]);
        }
        out
    });
    let oldv = u64::from_le_bytes(old);
    let mut newb = [0u8; 8];
    newb[..size].copy_from_slice(&new[..size]);
    let newv = u64::from_le_bytes(newb);
    st.mix([3, dev, size as u64, newv]);
    if st.steer.delays.is_some() && !st.steer.dirty.contains(&st.tid) {
        st.steer.dirty.push(st.tid);
    }
    if st.steer.held > 0
        && !st.steer.hold_signalled
        && st.steer.hold.as_ref().is_some_and(|h| {
            h.signals(pc, dev, size as u64)
                && (h.stores.is_empty() || (size == 8 && names_pm(&st.pm.windows, start, dev_base, newv)))
        })
    {
        st.steer.hold_signalled = true;
        st.steer.hold_signals += 1;
        st.steer.hold_rearm_at = st.count_at(pc) + crate::sched::WRITER_WAIT;
        st.steer.release_pending = true;
    }
    if st.obs.interest.has(Interest::STORES) {
        let ek = match access {
            AccessKind::NonTemporal => EventKind::NtStore,
            AccessKind::Locked | AccessKind::LockedCmpxchg => EventKind::RmwStore,
            _ => EventKind::Store,
        };
        let mut ev = st.emit(ek, pc, addr, dev, size as u32, oldv, newv);
        ev.store = Some(id);
        st.tell(&ev);
    }
}

/// Whether an 8-byte value stored through the window at `start` (onto device address `dev_base`)
/// names PM of that window's file: an address inside a PM window, or an offset into the file no
/// further than this window maps it (PMDK's `PMEMoid.off`, a hand-made pool's offsets). A
/// publication hold's store signals only with such a value: a helper that stores pointers and
/// plain data alike (P-CLHT's `movnt64`, FAST_FAIR's `insert_key` in leaves and inner nodes)
/// publishes only when it stores a reference.
fn names_pm(windows: &[(u64, u64, u64)], start: u64, dev_base: u64, v: u64) -> bool {
    let mask = (1u64 << crate::pm::FILE_SHIFT) - 1;
    let Some(&(_, end, _)) = windows.iter().find(|w| w.0 == start && w.2 == dev_base) else { return false };
    let extent = (dev_base & mask) + (end - start);
    v != 0 && (windows.iter().any(|w| v >= w.0 && v < w.1) || v < extent)
}

/// Whether the window at `start` onto device address `dev` is the running process's: the hooks
/// of another process's windows stay installed while it does not run, and do nothing.
#[inline]
pub(super) fn window_active(uc: &Unicorn<'_, HookState>, start: u64, dev: u64) -> bool {
    uc.get_data().pm.windows.iter().any(|w| w.0 == start && w.2 == dev)
}

pub(super) fn on_pm_read(uc: &mut Unicorn<'_, HookState>, addr: u64, size: usize, start: u64, dev_base: u64) {
    if size == 0 || size > 8 || !window_active(uc, start, dev_base) || debug::debug_watch(uc, addr, size, false) {
        return;
    }
    hooks::settle_words(uc, uc.get_data().clock.block.0);
    let st = uc.get_data();
    // Reading RIP inside a memory hook makes QEMU search for the translated block: skip it (and
    // the value) for a load that is no point, no hold, no delay site and no event, as every load of
    // a single-threaded recovery is.
    let wanted = st.steer.hold.is_some()
        || st.steer.runnable_others > 0
        || st.steer.delays.is_some()
        || st.obs.interest.has(Interest::LOADS);
    if st.stop.is_some() || !wanted {
        return;
    }
    let pc = rip(uc);
    let st = uc.get_data_mut();
    if st.obs.taint.is_some() && taint_gate(st, pc, addr, size, dev_base + (addr - start)) {
        if st.stop == Some(Stop::Taint) {
            let _ = uc.emu_stop();
        }
        return;
    }
    if st.steer.hold_signalled
        && st.steer.hold.as_ref().is_some_and(|h| !h.stores.is_empty())
        && st.steer.hold_signals < crate::sched::PUBLICATION_SIGNALS
        && st.count_at(pc) >= st.steer.hold_rearm_at
    {
        // A publication hold re-arms once its writer's wait is over: the same helper may have
        // published another object first (an overflow bucket's link before the resize's root).
        st.steer.hold_signalled = false;
    }
    if let Some(h) = &st.steer.hold {
        let dev = dev_base + (addr - start);
        let tid = st.tid;
        if !st.steer.hold_signalled && h.holds(pc, dev, size as u64) && !st.steer.hold_bypass.contains(&tid) {
            if let Some(i) = st.steer.hold_pass.iter().position(|&t| t == tid) {
                // Released to run this load once.
                st.steer.hold_pass.swap_remove(i);
            } else {
                // Unicorn rewinds RIP to the load, which runs again when the thread is released.
                st.stop = Some(Stop::Hold);
                let _ = uc.emu_stop();
                return;
            }
        }
    }
    if st.point(pc) {
        // Unicorn leaves the instruction before the loaded value reaches a register: the switch
        // falls before the load, which runs when the thread is scheduled again.
        st.stop = Some(Stop::PreemptBefore);
        let _ = uc.emu_stop();
        return;
    }
    if st.steer.delays.is_some() {
        let dev = dev_base + (addr - start);
        if let Some(info) = st.pm.device.persist_info(dev).filter(|i| !i.durable_hw) {
            let at = st.count_at(pc);
            let tid = st.tid;
            if let Some(d) = st.steer.delays.as_mut() {
                d.observe(tid, info.writer, at);
            }
        }
    }
    if !st.obs.interest.has(Interest::LOADS) {
        return;
    }
    let mut v = [0u8; 8];
    let _ = hooks::read_guest(uc, addr, &mut v[..size]);
    let st = uc.get_data_mut();
    let dev = dev_base + (addr - start);
    let ev = st.emit(EventKind::Load, pc, addr, dev, size as u32, u64::from_le_bytes(v), 0);
    if !st.obs.taint_hooked {
        st.obs.replay.reported(ev.icount, addr);
    }
    if let Some(o) = st.obs.observer.as_mut() {
        o.on_event(&ev, &st.pm.device);
        if let Some(t) = st.obs.taint.as_deref_mut() {
            let id = o.taint_source(&ev, &st.pm.device);
            if id != 0 {
                t.source(addr, size as u32, id);
                if !t.knows(pc) {
                    learn_insn(uc, pc, 16);
                }
            }
        }
    }
}

/// A PM load with taint tracking on: whether it must go no further. Before the taint engine's
/// hooks are in ([`Machine::hook_taint`]), a load the observer may name as a source stops the
/// engine before it (Unicorn leaves a load's instruction before it completes), to run again with
/// the hooks; once they are in, the loads of that instruction already reported before the stop
/// are not reported again.
fn taint_gate(st: &mut HookState, pc: u64, addr: u64, size: usize, dev: u64) -> bool {
    if st.obs.taint_hooked {
        if st.obs.replay.is_empty() {
            return false;
        }
        let at = st.count_at(pc);
        return st.obs.replay.replayed(at, addr);
    }
    let ev = st.emit(EventKind::Load, pc, addr, dev, size as u32, 0, 0);
    if st.obs.observer.as_ref().is_some_and(|o| o.may_taint(&ev, &st.pm.device)) {
        st.stop = Some(Stop::Taint);
        return true;
    }
    false
}

impl Machine {
    /// Accesses to `[start, end)` raise SIGBUS (a mapping's pages past the end of its file).
    pub fn add_sigbus_range(&mut self, start: u64, end: u64) {
        let ids = self.hook_sigbus(start, end, self.uc.get_data().phys);
        self.sigbus.push((start, end, ids));
    }

    /// The hooks of a SIGBUS range of the process whose addresses `phys` maps.
    pub(super) fn hook_sigbus(&mut self, start: u64, end: u64, phys: state::Phys) -> Vec<unicorn_engine::UcHookId> {
        let mut ids = Vec::new();
        let raw = self.raw_begin();
        for t in [HookType::MEM_READ, HookType::MEM_WRITE] {
            let h = self.uc.add_mem_hook(t, phys.pa(start), phys.pa(end - 1), |uc, _t, addr, _size, _v| {
                let st = uc.get_data_mut();
                if st.stop.is_none() {
                    st.stop = Some(Stop::Bus(st.phys.va(addr)));
                    let _ = uc.emu_stop();
                }
                true
            });
            ids.extend(h);
        }
        self.raw_end(raw);
        if !self.warm {
            self.flush_translations();
        }
        ids
    }

    /// Starts watching a PM window: stores always, loads if an observer wants them.
    pub(super) fn add_window(&mut self, w: (u64, u64, u64)) {
        let ids = self.hook_window(w, self.uc.get_data().phys);
        self.pm_hooks.push((w.0, ids));
        let st = self.uc.get_data_mut();
        st.pm.windows.push(w);
        st.pm.windows.sort_unstable();
    }

    /// The hooks of a PM window of the process whose addresses `phys` maps (with processes,
    /// each process's windows are hooked at its own physical slot, and fire only while it runs).
    pub(super) fn hook_window(
        &mut self,
        (start, end, dev): (u64, u64, u64),
        phys: state::Phys,
    ) -> Vec<unicorn_engine::UcHookId> {
        let mut ids = Vec::new();
        let (lo, hi) = (phys.pa(start), phys.pa(end - 1));
        let raw = self.raw_begin();
        let w = self.uc.add_mem_hook(HookType::MEM_WRITE, lo, hi, move |uc, _t, addr, size, value| {
            let addr = uc.get_data().phys.va(addr);
            on_pm_write(uc, addr, size, value, start, dev);
            true
        });
        ids.extend(w);
        // Loads are scheduling points whatever the analyses, so they are always hooked.
        let r = self.uc.add_mem_hook(HookType::MEM_READ, lo, hi, move |uc, _t, addr, size, _v| {
            let addr = uc.get_data().phys.va(addr);
            on_pm_read(uc, addr, size, start, dev);
            true
        });
        ids.extend(r);
        self.raw_end(raw);
        // Code translated before the hooks existed would not call them (a warm machine's code
        // calls every memory hook already).
        if !self.warm {
            self.flush_translations();
        }
        ids
    }

    /// Stops watching `[start, end)`; windows that straddle it keep their outer parts.
    pub(super) fn cut_windows(&mut self, start: u64, end: u64) {
        let affected: Vec<(u64, u64, u64)> =
            self.uc.get_data().pm.windows.iter().copied().filter(|w| w.0 < end && w.1 > start).collect();
        for w in &affected {
            if let Some(i) = self.pm_hooks.iter().position(|h| h.0 == w.0) {
                for id in self.pm_hooks.remove(i).1 {
                    let _ = self.uc.remove_hook(id);
                }
            }
            self.uc.get_data_mut().pm.windows.retain(|x| x != w);
        }
        for (s, e, d) in affected {
            if s < start {
                self.add_window((s, start, d));
            }
            if e > end {
                self.add_window((end, e, d + (end - s)));
            }
        }
    }

    /// Feeds the device the parts of a kernel write `[addr, addr + new.len())` that land in PM
    /// windows, in 8-byte pieces like the guest's own stores.
    pub(super) fn kernel_pm_stores(&mut self, addr: u64, old: &[u8], new: &[u8]) {
        let pc = self.pc().wrapping_sub(2);
        for (i, (o, n)) in old.chunks(8).zip(new.chunks(8)).enumerate() {
            let va = addr + 8 * i as u64;
            let Some(dev) = self.pm_device_addr(va) else { continue };
            let mut lines = [0u8; 128];
            self.mem.read_unchecked(va & !63, &mut lines);
            let first = dev & !63;
            let st = self.uc.get_data_mut();
            let id = st.pm.device.store(st.tid, dev, o, n, StoreKind::Cached, |line| {
                let off = (line * 64).wrapping_sub(first) as usize;
                let mut out = [0u8; 64];
                if off <= 64 {
                    out.copy_from_slice(&lines[off..off + 64]);
                }
                out
            });
            let mut nb = [0u8; 8];
            nb[..n.len()].copy_from_slice(n);
            let newv = u64::from_le_bytes(nb);
            st.mix([3, dev, n.len() as u64, newv]);
            if st.obs.interest.has(Interest::STORES) {
                let mut ob = [0u8; 8];
                ob[..o.len()].copy_from_slice(o);
                let mut ev = st.emit(EventKind::Store, pc, va, dev, n.len() as u32, u64::from_le_bytes(ob), newv);
                ev.store = Some(id);
                if let Some(obs) = st.obs.observer.as_mut() {
                    obs.on_event(&ev, &st.pm.device);
                }
            }
        }
    }

    /// The kernel reading PM on the guest's behalf (`write()` from a PM buffer): loads by the
    /// calling thread at the system call, for observers that want loads.
    pub fn kernel_pm_loads(&mut self, addr: u64, len: u64) {
        let end = addr.saturating_add(len);
        if !self.uc.get_data().obs.interest.has(Interest::LOADS)
            || !self.uc.get_data().pm.windows.iter().any(|w| w.0 < end && w.1 > addr)
        {
            return;
        }
        let pc = self.pc().wrapping_sub(2);
        let mut va = addr;
        while va < end {
            let n = (end - va).min(8);
            if let Some(dev) = self.pm_device_addr(va) {
                let mut b = [0u8; 8];
                self.mem.read_unchecked(va, &mut b[..n as usize]);
                let st = self.uc.get_data_mut();
                let ev = st.emit(EventKind::Load, pc, va, dev, n as u32, u64::from_le_bytes(b), 0);
                st.tell(&ev);
            }
            va += n;
        }
    }

    /// The kernel reading a mapped PM file's bytes on the guest's behalf (`read()`, `pread`,
    /// `sendfile` or `splice` from a PM file: a DAX file's `read` copies from the media): loads
    /// of the device range `[dev, dev + len)` by the calling thread at the system call, as
    /// [`Machine::kernel_pm_loads`] makes them, each at the guest address of the lowest mapping
    /// that shows it. Bytes no mapping of the running process shows give no event (they are no
    /// line any access of the guest can race with).
    pub fn kernel_pm_file_loads(&mut self, dev: u64, len: u64) {
        if !self.uc.get_data().obs.interest.has(Interest::LOADS) || len == 0 {
            return;
        }
        let end = dev.saturating_add(len);
        let mut d = dev;
        while d < end {
            // The lowest window (by guest address) showing device byte `d`.
            let w = self.uc.get_data().pm.windows.iter().find(|w| w.2 <= d && d < w.2 + (w.1 - w.0)).copied();
            match w {
                Some((start, wend, wdev)) => {
                    let va = start + (d - wdev);
                    let n = (end - d).min(wend - va);
                    self.kernel_pm_loads(va, n);
                    d += n;
                }
                None => {
                    // Up to the next window's first byte, if any shows a later part of the range.
                    let next = self.uc.get_data().pm.windows.iter().map(|w| w.2).filter(|&b| b > d && b < end).min();
                    d = next.unwrap_or(end);
                }
            }
        }
    }

    /// msync of `[start, end)`: every PM line mapped there becomes durable.
    pub fn pm_persist_mapped(&mut self, start: u64, end: u64) {
        let windows: Vec<(u64, u64, u64)> = self.uc.get_data().pm.windows.clone();
        for (ws, we, dev) in windows {
            let (lo, hi) = (ws.max(start), we.min(end));
            if lo < hi {
                self.pm_persist_device(dev + (lo - ws), hi - lo);
            }
        }
    }

    /// The device forgets `[dev, dev + len)`: the file was truncated there or removed.
    pub fn pm_discard_device(&mut self, dev: u64, len: u64) {
        let st = self.uc.get_data_mut();
        st.pm.device.discard_range(dev, len);
        st.mix([5, dev, len, 0]);
    }

    /// fsync of a PM file, or the durable part of a `pwrite`: device range `[dev, dev + len)`.
    pub fn pm_persist_device(&mut self, dev: u64, len: u64) {
        let pc = self.pc().wrapping_sub(2);
        let st = self.uc.get_data_mut();
        if st.obs.interest.has(Interest::CRASH) {
            st.crash_point(pc);
        }
        let out = st.pm.device.persist_range(st.tid, dev, len);
        st.mix([4, dev, len, u64::from(st.tid)]);
        if !out.redundant && st.obs.interest.has(Interest::PERSIST) {
            let mut ev = st.emit(EventKind::Persist, pc, 0, dev, 0, 0, len);
            ev.fence = Some(out);
            st.tell(&ev);
        }
    }

    /// A `pwrite` into a PM file changed `[dev, dev + new.len())` behind the guest's mappings:
    /// a store of those bytes, durable at once. Only lines of mapped files are tracked.
    pub fn pm_file_written(&mut self, dev: u64, old: &[u8], new: &[u8]) {
        let windows: Vec<(u64, u64, u64)> = self.uc.get_data().pm.windows.clone();
        for (ws, we, wdev) in windows {
            let wlen = we - ws;
            let (lo, hi) = (wdev.max(dev), (wdev + wlen).min(dev + new.len() as u64));
            if lo >= hi {
                continue;
            }
            let (a, b) = ((lo - dev) as usize, (hi - dev) as usize);
            let va = ws + (lo - wdev);
            self.kernel_pm_stores(va, &old[a..b], &new[a..b]);
            self.pm_persist_device(lo, hi - lo);
        }
    }

    /// The parts of device range `[dev, dev + len)` that a PM mapping of the running process
    /// shows, as `(dev, len)` pairs in device order (overlaps of two mappings merged): what a
    /// kernel change of the file's bytes must tell the device about.
    pub fn pm_mapped_ranges(&self, dev: u64, len: u64) -> Vec<(u64, u64)> {
        let end = dev.saturating_add(len);
        let mut parts: Vec<(u64, u64)> = self
            .uc
            .get_data()
            .pm
            .windows
            .iter()
            .map(|&(ws, we, wdev)| (wdev.max(dev), (wdev + (we - ws)).min(end)))
            .filter(|(lo, hi)| lo < hi)
            .collect();
        parts.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (lo, hi) in parts {
            match merged.last_mut() {
                Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        merged.into_iter().map(|(lo, hi)| (lo, hi - lo)).collect()
    }

    /// The PM device: what is durable and which crash images the run allows now.
    pub fn pm(&self) -> &PmDevice {
        &self.uc.get_data().pm.device
    }

    /// The PM device, mutable. Feeding it directly bypasses the machine's events, windows and hash;
    /// guest and kernel stores should go through the machine.
    pub fn pm_mut(&mut self) -> &mut PmDevice {
        &mut self.uc.get_data_mut().pm.device
    }

    /// The device address of a guest address in a PM window.
    pub fn pm_device_addr(&self, va: u64) -> Option<u64> {
        self.uc.get_data().device_of(va)
    }

    /// Hash of every PM store, flush and fence so far.
    pub fn pm_hash(&self) -> u64 {
        self.uc.get_data().pm.hash
    }
}
