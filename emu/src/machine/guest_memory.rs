//! Guest memory as the kernel sees it: mapping, protection, and reads and writes checked like
//! `copy_from_user`/`copy_to_user`, keeping Unicorn's translations in step with code the host
//! writes.

use super::*;

impl Machine {
    /// Maps a region (see [`Memory::map`]). A PM region becomes a window of the device.
    pub fn map(&mut self, region: Region) -> Result<(), MemError> {
        let pm = match &region.backing {
            Backing::Pm { file_id, offset, .. } => Some((region.start, region.end, device_addr(*file_id, *offset))),
            _ => None,
        };
        let wx = region.perm.write() && region.perm.exec() || shared_code(&region);
        let raw = self.raw_begin();
        let mapped = self.mem.map(&mut self.uc, region);
        self.raw_end(raw);
        mapped?;
        if let Some(w) = pm {
            self.add_window(w);
        }
        self.note_writable_code(wx);
        Ok(())
    }

    /// Tells the decoder which code may change without a system call (memory writable and
    /// executable, and shared files' executable views), after a change of mappings or
    /// protections that may have changed it (`maybe`: the change made some; or the space had
    /// some before). Nothing to do for programs that never map such code. Code that has
    /// just become such was decoded without its bytes, and may have been translated from
    /// bytes since rewritten through another view: both are forgotten.
    pub(super) fn note_writable_code(&mut self, maybe: bool) {
        if maybe || self.uc.get_data().code.decoder.has_writable_code() {
            let (ranges, aliased) = writable_code(&self.mem);
            let old = self.uc.get_data().code.decoder.writable_code();
            let new: Vec<(u64, u64)> =
                ranges.iter().copied().filter(|r| !old.iter().any(|o| o.0 <= r.0 && r.1 <= o.1)).collect();
            self.uc.get_data_mut().code.decoder.set_writable_code(ranges, aliased);
            for (start, end) in new {
                self.code_changed(start, end);
            }
        }
    }

    /// Unmaps `[start, end)` (see [`Memory::unmap`]) and returns the regions removed.
    /// Translations of code there are forgotten, PM windows and `SIGBUS` ranges in it go, and its
    /// taint is dropped.
    pub fn unmap(&mut self, start: u64, end: u64) -> Vec<Region> {
        let raw = self.raw_begin();
        let removed = self.mem.unmap(&mut self.uc, start, end);
        self.raw_end(raw);
        if removed.iter().any(|r| r.perm.exec()) {
            self.code_changed(start, end);
        }
        self.note_writable_code(false);
        if removed.iter().any(|r| matches!(r.backing, Backing::Pm { .. })) {
            self.cut_windows(start, end);
        }
        if let Some(t) = self.uc.get_data_mut().obs.taint.as_deref_mut() {
            t.unmapped(start, end);
        }
        let (gone, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.sigbus).into_iter().partition(|b| b.0 < end && b.1 > start);
        self.sigbus = kept;
        for (_, _, ids) in gone {
            for id in ids {
                let _ = self.uc.remove_hook(id);
            }
        }
        removed
    }

    /// Changes the protection of `[start, end)` (see [`Memory::protect`]); every page must be
    /// mapped.
    /// Translations there are forgotten, since code may have become executable or stopped being so.
    pub fn protect(&mut self, start: u64, end: u64, perm: Perm) -> Result<(), MemError> {
        let raw = self.raw_begin();
        let done = self.protect_raw(start, end, perm);
        self.raw_end(raw);
        done?;
        // Code may become executable, or stop being so: forget translations either way.
        self.code_changed(start, end);
        let shared = perm.exec() && self.mem.regions().any(|r| r.start < end && r.end > start && shared_code(r));
        self.note_writable_code(perm.write() && perm.exec() || shared);
        Ok(())
    }

    /// Sets what `fork` does with `[start, end)`, which must be mapped (`madvise`'s fork
    /// advice; [`crate::memory::OnFork`]).
    pub fn set_on_fork(&mut self, start: u64, end: u64, set: impl Fn(&mut crate::memory::OnFork)) {
        let raw = self.raw_begin();
        self.mem.set_on_fork(&mut self.uc, start, end, set);
        self.raw_end(raw);
    }

    fn protect_raw(&mut self, start: u64, end: u64, perm: Perm) -> Result<(), MemError> {
        if self.processes && perm.write() && self.mem.first_hole(start, end).is_none() {
            // Read-only private memory may be shared with another process since a fork.
            self.mem.unshare(&mut self.uc, start, end).map_err(|_| MemError::Engine)?;
        }
        self.mem.protect(&mut self.uc, start, end, perm)
    }

    /// Reads as the kernel would: every byte must be mapped readable, as for `copy_from_user`.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemError> {
        self.mem.read(addr, buf)
    }

    /// Writes as the kernel would (requires write permission unless `force`).
    pub fn write(&mut self, addr: u64, data: &[u8], force: bool) -> Result<(), MemError> {
        let end = addr.saturating_add(data.len() as u64);
        let into_pm = self.uc.get_data().pm.windows.iter().any(|w| w.0 < end && w.1 > addr);
        if into_pm {
            // The kernel storing into PM (read() into a PM buffer): unpersisted stores, made
            // by the calling thread at the system call, as the guest's own would be.
            let mut old = vec![0u8; data.len()];
            self.mem.read_unchecked(addr, &mut old);
            self.kernel_pm_stores(addr, &old, data);
        }
        if self.mem.write(addr, data, force)? {
            self.code_changed(addr, end);
        }
        if let Some(t) = self.uc.get_data_mut().obs.taint.as_deref_mut() {
            t.clean(addr, data.len() as u64);
        }
        Ok(())
    }

    /// Reads a little-endian `u64` as the kernel would (see [`read`](Self::read)).
    pub fn read_u64(&self, addr: u64) -> Result<u64, MemError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Writes a little-endian `u64` as the kernel would, honouring write permission.
    pub fn write_u64(&mut self, addr: u64, v: u64) -> Result<(), MemError> {
        self.write(addr, &v.to_le_bytes(), false)
    }

    /// Reads a little-endian `u32` as the kernel would (see [`read`](Self::read)).
    pub fn read_u32(&self, addr: u64) -> Result<u32, MemError> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// A NUL-terminated string of at most `max` bytes (without the NUL).
    pub fn read_cstr(&self, addr: u64, max: usize) -> Result<Vec<u8>, MemError> {
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < max {
            let chunk = (4096 - (at % 4096)) as usize;
            let mut buf = vec![0u8; chunk.min(max - out.len()).max(1)];
            self.read(at, &mut buf)?;
            if let Some(i) = buf.iter().position(|b| *b == 0) {
                out.extend_from_slice(&buf[..i]);
                return Ok(out);
            }
            out.extend_from_slice(&buf);
            at += buf.len() as u64;
        }
        Err(MemError::Protection(at))
    }

    /// Host-side writes to code (the loader, `read()` into code, MAP_FIXED) must drop stale
    /// translations: Unicorn does not notice them.
    pub fn code_changed(&mut self, start: u64, end: u64) {
        self.remove_translations(start, end.max(start + 1));
        let st = self.uc.get_data_mut();
        st.code.decoder.invalidate(start, end);
        st.code.own.forget(start, end);
        if let Some(t) = st.obs.taint.as_deref_mut() {
            t.forget_code(start, end);
        }
    }
}

/// Sorted, disjoint `[start, end)` address ranges.
type Ranges = Vec<(u64, u64)>;

/// Whether `r` is an executable view of a shared file, whose code another view, another
/// process or `write(2)` may change while Unicorn sees no store to it (a JIT's dual mapping).
/// Shared libraries are mapped private: only programs that ask for it have such code.
fn shared_code(r: &Region) -> bool {
    r.perm.exec() && !r.perm.write() && matches!(r.backing, Backing::SharedFile { .. })
}

/// The code of `mem` that may change without a system call, as sorted, disjoint ranges: what
/// is writable and executable, and shared files' executable views; and those views alone.
pub(super) fn writable_code(mem: &Memory) -> (Ranges, Ranges) {
    let add = |out: &mut Vec<(u64, u64)>, r: &Region| match out.last_mut() {
        Some(last) if last.1 == r.start => last.1 = r.end,
        _ => out.push((r.start, r.end)),
    };
    let (mut all, mut aliased) = (Vec::new(), Vec::new());
    for r in mem.regions() {
        if shared_code(r) {
            add(&mut aliased, r);
            add(&mut all, r);
        } else if r.perm.write() && r.perm.exec() {
            add(&mut all, r);
        }
    }
    (all, aliased)
}
