//! The engine's hooks on code: the block hook (instruction count, call stack, synchronisation
//! functions, quantum ends), the code hooks of [`Special`] instructions, the raw CPUID/RDTSC
//! hooks, the observers' catch-all memory and taint hooks, interrupts and invalid accesses.

use super::state::PM_ONLY_AFTER;
use super::*;

pub(super) extern "C" fn cpuid_hook(uc: *mut ffi::uc_engine, user: *mut c_void) -> i32 {
    // SAFETY: `user` is the engine's HookState, alive as long as the engine (see Machine::new).
    let st = unsafe { &*(user as *const HookState) };
    let mut eax = 0u64;
    let mut ecx = 0u64;
    // SAFETY: `uc` is the live engine calling us; register ids are valid for x86.
    unsafe {
        ffi::uc_reg_read(uc, RegisterX86::RAX as i32, (&raw mut eax).cast());
        ffi::uc_reg_read(uc, RegisterX86::RCX as i32, (&raw mut ecx).cast());
    }
    let r = st.code.cpuid.query(eax as u32, ecx as u32);
    for (reg, v) in [RegisterX86::RAX, RegisterX86::RBX, RegisterX86::RCX, RegisterX86::RDX].iter().zip(r) {
        let v = u64::from(v);
        // SAFETY: as above.
        unsafe { ffi::uc_reg_write(uc, *reg as i32, (&raw const v).cast()) };
    }
    1
}

/// The guest's PC inside a hook. Not `Unicorn::pc_read`, which asks the engine for its mode
/// (`uc_ctl`) at every call: 2 % of a multi-threaded run under the all-memory passes.
#[inline]
pub(super) fn rip(uc: &Unicorn<'_, HookState>) -> u64 {
    uc.reg_read(RegisterX86::RIP).unwrap_or(0)
}

pub(super) fn tsc_now(uc: *mut ffi::uc_engine, st: &HookState) -> u64 {
    let mut rip = 0u64;
    // SAFETY: `uc` is the live engine calling us.
    unsafe { ffi::uc_reg_read(uc, RegisterX86::RIP as i32, (&raw mut rip).cast()) };
    st.count_at(rip).wrapping_mul(st.code.tsc_per_insn)
}

pub(super) fn write_edx_eax(uc: *mut ffi::uc_engine, v: u64) {
    let (lo, hi) = (v & 0xffff_ffff, v >> 32);
    // SAFETY: `uc` is the live engine calling us.
    unsafe {
        ffi::uc_reg_write(uc, RegisterX86::RAX as i32, (&raw const lo).cast());
        ffi::uc_reg_write(uc, RegisterX86::RDX as i32, (&raw const hi).cast());
    }
}

pub(super) extern "C" fn rdtsc_hook(uc: *mut ffi::uc_engine, user: *mut c_void) -> i32 {
    // SAFETY: see cpuid_hook.
    let st = unsafe { &*(user as *const HookState) };
    write_edx_eax(uc, tsc_now(uc, st));
    1
}

pub(super) extern "C" fn rdtscp_hook(uc: *mut ffi::uc_engine, user: *mut c_void) -> i32 {
    // SAFETY: see cpuid_hook.
    let st = unsafe { &*(user as *const HookState) };
    write_edx_eax(uc, tsc_now(uc, st));
    let zero = 0u64; // IA32_TSC_AUX: CPU 0
                     // SAFETY: `uc` is the live engine calling us.
    unsafe { ffi::uc_reg_write(uc, RegisterX86::RCX as i32, (&raw const zero).cast()) };
    1
}

pub(super) fn add_raw_insn_hook(
    uc: &mut Unicorn<'static, HookState>,
    insn: X86Insn,
    cb: extern "C" fn(*mut ffi::uc_engine, *mut c_void) -> i32,
) -> Result<(), EmuError> {
    let user = (uc.get_data() as *const HookState).cast_mut().cast::<c_void>();
    let mut hh: ffi::uc_hook = 0;
    // SAFETY: the callback has the signature Unicorn expects for CPUID/RDTSC hooks and `user`
    // points at the engine's own data, which outlives the hook.
    let err = unsafe {
        ffi::uc_hook_add(uc.get_handle(), &mut hh, HookType::INSN.0 as i32, cb as *mut c_void, user, 1, 0, insn as i32)
    };
    if err != uc_error::OK {
        return Err(engine(err));
    }
    Ok(())
}

pub(super) fn on_block(uc: &mut Unicorn<'_, HookState>, addr: u64, size: u32) {
    if uc.get_data().stop.is_some() {
        return;
    }
    settle_words(uc, addr);
    let st = uc.get_data_mut();
    // Synchronisation functions are looked up only when someone listens: passes off cost nothing.
    let watch = st.obs.interest.has(Interest::SYNC) || st.steer.delays.is_some();
    match std::mem::replace(&mut st.clock.prev_term, Term::Other) {
        Term::Call { pc, ret } => match if watch { st.code.sync_fns.get(&addr).copied() } else { None } {
            None => st.callstack.push(pc, ret),
            Some(kind) => enter_sync(uc, kind, addr, Some((pc, ret))),
        },
        Term::Ret => {
            // A body's tail-called function returns first, then the body.
            for (kind, obj, aux) in st.callstack.returned_to(addr).into_iter().flatten() {
                let rax = uc.reg_read(Reg::RAX).unwrap_or(0);
                let result = kind.result(rax, aux, &mut |a, buf| read_guest(uc, a, buf).is_ok());
                let st = uc.get_data_mut();
                // An allocation's object, where it is in PM (`pop + off`).
                let dev = match kind {
                    SyncKind::PmemobjAlloc if result != 0 => st.device_of(obj.wrapping_add(result)).unwrap_or(0),
                    _ => 0,
                };
                let ev = st.emit(EventKind::SyncReturn(kind), addr, obj, dev, 0, 0, result);
                st.tell(&ev);
            }
        }
        Term::Other => {
            // A jump (or fall-through) to a recognised function: a PLT stub's jump, ld.so's
            // lazy-binding resolver jumping to the function it just bound, a tail call. The
            // function runs in the innermost frame. A frame already in a synchronisation
            // function is left alone: that is this very entry seen again (the block hook fires
            // twice for a block the engine stopped before, or re-translated with its hooks) or
            // a function jumping to another inside its own implementation; except an outlined
            // OpenMP body, which is the program's code and may end with a tail call
            // ([`crate::callstack::CallStack::jump_enters`]).
            if watch
                && st.callstack.depth() > 0
                && st.callstack.top_sync().is_none_or(|(k, _, _)| k == SyncKind::OmpBody)
            {
                if let Some(kind) = st.code.sync_fns.get(&addr).copied() {
                    // A function entered by a jump returns to the word at the top of the stack:
                    // frames above the one returning there were left by a C++ exception caught
                    // (or a `longjmp`) since, and must not take this entry (its return would
                    // never be seen: a lock's release lost, the thread's accesses taken for the
                    // lock's own from then on).
                    let rsp = uc.reg_read(Reg::RSP).unwrap_or(0);
                    let mut word = [0u8; 8];
                    if read_guest(uc, rsp, &mut word).is_ok() {
                        uc.get_data_mut().callstack.unwound_to(u64::from_le_bytes(word));
                    }
                    let st = uc.get_data_mut();
                    if st.callstack.jump_enters(kind) {
                        enter_sync(uc, kind, addr, None);
                    }
                }
            }
        }
    }
    if uc.get_data().code.decoder.in_writable_code(addr, size) && forget_if_rewritten(uc, addr, size) {
        return;
    }
    let st = uc.get_data_mut();
    let found = st.code.decoder.slot(addr, size).and_then(|slot| Some((slot, st.code.decoder.at(slot)?)));
    let (slot, n, term) = match found {
        Some((slot, b)) => (slot, b.insns.len() as u64, b.term),
        None => {
            let mut bytes = vec![0u8; size as usize];
            if read_guest(uc, addr, &mut bytes).is_err() {
                bytes.clear();
            }
            let st = uc.get_data_mut();
            let (slot, b) = st.code.decoder.insert(addr, size, &bytes);
            let (n, term) = (b.insns.len() as u64, b.term);
            let mut specials = b.specials.to_vec();
            if st.obs.interest.has(Interest::ATOMICS) && overlaps(&st.obs.atomic_code, addr, size) {
                let (atomic, pm) = (&st.obs.atomic_code, &st.code.atomic_pm);
                let wanted = |pc| {
                    super::state::within(atomic, pc) && pm.get(&pc).is_none_or(|&n| n < PM_ONLY_AFTER || n == u32::MAX)
                };
                specials.extend(st.code.decoder.atomic_accesses(addr, &bytes, wanted));
            }
            if st.obs.interest.has(Interest::ATOMICS)
                && !st.obs.atomic_objects.is_empty()
                && overlaps(&st.obs.atomic_object_code, addr, size)
                && !st.obs.words.in_library(addr)
            {
                // C11 `_Atomic` objects the program's own code names (not already hooked as
                // C++ atomic code's).
                let found = st.code.decoder.object_accesses(addr, &bytes, &st.obs.atomic_objects);
                for (pc, special) in found {
                    if !specials.iter().any(|s| s.0 == pc) {
                        specials.push((pc, special));
                    }
                }
            }
            for &(pc, special) in &specials {
                st.code.own.insert(pc, special);
            }
            if st.obs.taint_hooked {
                // The taint hook runs before every instruction and acts for the specials
                // (`on_taint_insn`): no hook of their own, no second translation.
                return finish_block(uc, addr, size, slot, n, term);
            }
            let fresh: Vec<(u64, Special)> =
                specials.into_iter().filter(|(pc, _)| !st.code.hooked.contains(pc)).collect();
            if !fresh.is_empty() {
                // Hook the specials, then leave this translation before it runs anything: writing
                // RIP from a hook exits the block, and it is translated again with the hooks.
                st.code.to_hook = fresh;
                st.clock.prev_term = Term::Other;
                install_special_hooks(uc);
                uc.get_data_mut().tcg.ranges_removed += 1;
                let _ = uc.ctl_remove_cache(addr, addr + u64::from(size));
                let _ = uc.set_pc(addr);
                return;
            }
            (slot, n, term)
        }
    };
    finish_block(uc, addr, size, slot, n, term);
}

/// Whether the block at `addr` of `size` bytes overlaps one of `ranges` (sorted, disjoint).
fn overlaps(ranges: &[(u64, u64)], addr: u64, size: u32) -> bool {
    let end = addr + u64::from(size.max(1));
    let i = ranges.partition_point(|r| r.1 <= addr);
    ranges.get(i).is_some_and(|r| r.0 < end)
}

/// If the guest's own stores rewrote the block at `addr` of `size` bytes, in writable code (a
/// JIT's code cache), since it was decoded, Unicorn translated it again, and what was known of the
/// old instructions goes: the block is then decoded as a new one. In a shared file's executable
/// view the stores went through another view (or `write(2)`), which Unicorn does not connect
/// with this one: its translation is stale, so it is dropped and the block left before it runs
/// (true: the caller returns), to be translated from the new bytes. Out of line: its buffer
/// would otherwise sit in the block hook's frame.
#[cold]
#[inline(never)]
fn forget_if_rewritten(uc: &mut Unicorn<'_, HookState>, addr: u64, size: u32) -> bool {
    let dec = &uc.get_data().code.decoder;
    let Some(slot) = dec.slot(addr, size) else { return false };
    if !dec.rewritten(slot, |buf| read_guest(uc, addr, buf).is_ok()) {
        return false;
    }
    let end = addr + u64::from(size);
    let st = uc.get_data_mut();
    st.code.decoder.invalidate(addr, end);
    st.code.own.forget(addr, end);
    if let Some(t) = st.obs.taint.as_deref_mut() {
        t.forget_code(addr, end);
    }
    if !st.code.decoder.in_aliased_code(addr) {
        return false;
    }
    st.clock.prev_term = Term::Other;
    st.tcg.ranges_removed += 1;
    let _ = uc.ctl_remove_cache(addr, end);
    let _ = uc.set_pc(addr);
    true
}

/// The rest of [`on_block`] once the block is decoded (`slot`, `n` instructions, ending in
/// `term`): the budget, holds and quantum ends, then the clock moves to the block.
#[inline]
fn finish_block(uc: &mut Unicorn<'_, HookState>, addr: u64, size: u32, slot: u32, n: u64, term: Term) {
    let st = uc.get_data_mut();
    let base = st.clock.block_base + st.clock.block.2;
    // The budget's hook, once armed, serves only the block it was armed in: if a scheduling
    // point switched threads before the hooked instruction ran, the budget ends in another
    // thread's block, where it is armed again (the hook stops nothing at another count).
    let armed_here = st.clock.limit_pc.is_some_and(|at| at >= addr && at < addr + u64::from(size));
    let stop = if crate::interrupt::pending() && !armed_here {
        Some(Stop::Interrupted)
    } else if base + n > st.clock.limit && !armed_here {
        // The budget ends inside (or at the start of) this block. At its start, stop here;
        // otherwise stop here, hook the first instruction past the budget, and run up to it.
        let k = st.clock.limit - base;
        match st.code.decoder.at(slot).and_then(|b| b.insns.get(k as usize).copied()) {
            Some(pc) if k > 0 => Some(Stop::ArmLimit(pc)),
            _ => Some(Stop::Limit),
        }
    } else if st.steer.release_pending || st.steer.delay_pending.is_some() {
        // Stop before this block runs: the hold's writer or a delayed thread waits here.
        st.clock.last_point = base;
        Some(Stop::Preempt)
    } else if base + n > st.steer.timer_at && base != st.clock.last_point {
        // Stop before this block runs: a timer of the guest may expire in it.
        st.clock.last_point = base;
        Some(Stop::Timer)
    } else if (st.steer.runnable_others > 0 || st.steer.held > 0)
        && base + n > st.steer.quantum_end
        && base != st.clock.last_point
    {
        // Stop before this block runs: the quantum ended. A check of a counter the hook keeps
        // anyway: arming or ending a quantum changes no translation. With readers held by the
        // targeted interleaving the quantum ends even for a lone runnable thread, so that the
        // kernel sees their patience run out while it spins on a lock one of them holds.
        st.clock.last_point = base;
        Some(Stop::Quantum)
    } else if st.obs.memory_due && st.obs.memory_want != crate::events::MemoryWant::No {
        // Not a scheduling point either: the all-memory hooks go in, and the block runs with them.
        Some(Stop::Memory)
    } else if base >= st.clock.sweep_at {
        // Not a scheduling point: `last_point` stays, and the machine goes on at once.
        Some(Stop::Sweep)
    } else {
        None
    };
    if let Some(stop) = stop {
        st.clock.block_base = base;
        st.clock.block = (addr, size, 0);
        st.clock.slot = super::state::NO_SLOT;
        st.stop = Some(stop);
        let _ = uc.emu_stop();
        let _ = uc.set_pc(addr);
        return;
    }
    st.clock.block_base = base;
    st.clock.block = (addr, size, n);
    st.clock.slot = slot;
    st.clock.cursor.set(0);
    st.clock.prev_term = term;
}

/// The recognised synchronisation function `kind` at `addr` is entered: called from `call =
/// (call site, return address)`, or reached by a jump and run in the innermost frame. Reports
/// its [`EventKind::SyncEnter`] and marks the frame, whose return reports the `SyncReturn`.
pub(super) fn enter_sync(uc: &mut Unicorn<'_, HookState>, kind: SyncKind, addr: u64, call: Option<(u64, u64)>) {
    let args = [Reg::RDI, Reg::RSI, Reg::RDX, Reg::RCX, Reg::R8, Reg::R9].map(|r| uc.reg_read(r).unwrap_or(0));
    let rsp = uc.reg_read(Reg::RSP).unwrap_or(0);
    let e = kind.entry_at(args, rsp, &mut |a, buf| read_guest(uc, a, buf).is_ok());
    let freed = if kind == SyncKind::PmemobjFree { pmemobj_object(uc, args[0]) } else { None };
    let st = uc.get_data_mut();
    st.consider_delay(kind, call.map_or(addr, |(pc, _)| pc));
    match call {
        Some((pc, ret)) => st.callstack.push_sync(pc, ret, Some((kind, e.obj, e.aux))),
        None => st.callstack.enter_by_jump((kind, e.obj, e.aux)),
    }
    if let Some((va, dev, size)) = freed {
        let ev = st.emit(EventKind::Free, addr, va, dev, 0, 0, size);
        st.tell(&ev);
    }
    let ev = st.emit(EventKind::SyncEnter(kind), addr, e.obj, 0, 0, e.old, e.new);
    st.tell(&ev);
}

/// libpmemobj's pool header (`struct pool_hdr`): the signature of an obj pool, and where its
/// `poolset_uuid` is (after the 8-byte signature, the major version and the three feature words).
const PMEMOBJ_SIGNATURE: &[u8; 8] = b"PMEMOBJ\0";
const POOLSET_UUID_AT: usize = 24;
/// libpmemobj's compact allocation header (`struct allocation_header_compact { size; extra; }`,
/// the header of every object of its default allocation classes): 16 bytes just before the
/// object, the chunk's size (header included) in the low 48 bits of `size`.
const ALLOC_HEADER: u64 = 16;
const ALLOC_SIZE_MASK: u64 = (1 << 48) - 1;

/// The object `pmemobj_free(oidp)` is about to free: its guest address, device address and
/// usable size (`pmemobj_alloc_usable_size`'s: the chunk less its header), or `None` when it
/// cannot be told (a NULL oid, a pool not mapped from the start of a PM file, a header that does
/// not fit its window). The `PMEMoid` names its pool by `pool_uuid_lo`, which libpmemobj computes
/// from the pool header's `poolset_uuid` (`pmemobj_get_uuid_lo`: byte i of the high half xored
/// with byte i + 8, most significant first); the pool is the PM window that starts a PM file
/// with that header, and the object is at `pool + off`.
fn pmemobj_object(uc: &Unicorn<'_, HookState>, oidp: u64) -> Option<(u64, u64, u64)> {
    let mut oid = [0u8; 16];
    read_guest(uc, oidp, &mut oid).ok()?;
    let uuid_lo = u64::from_le_bytes(oid[..8].try_into().ok()?);
    let off = u64::from_le_bytes(oid[8..].try_into().ok()?);
    if off < ALLOC_HEADER {
        return None;
    }
    let st = uc.get_data();
    for &(start, end, dev) in &st.pm.windows {
        if dev & ((1 << crate::pm::FILE_SHIFT) - 1) != 0 || end - start <= off {
            continue;
        }
        let mut hdr = [0u8; POOLSET_UUID_AT + 16];
        if read_guest(uc, start, &mut hdr).is_err() || &hdr[..8] != PMEMOBJ_SIGNATURE {
            continue;
        }
        let u = &hdr[POOLSET_UUID_AT..];
        let lo = (0..8).fold(0u64, |acc, i| acc << 8 | u64::from(u[i] ^ u[8 + i]));
        if lo != uuid_lo {
            continue;
        }
        let va = start + off;
        let chunk = read_word(uc, va - ALLOC_HEADER, 8) & ALLOC_SIZE_MASK;
        let size = chunk.checked_sub(ALLOC_HEADER).filter(|&s| s > 0 && s <= end - va)?;
        return Some((va, dev + off, size));
    }
    None
}

/// Every [`Special`] seen, by PC, behind a bit filter: the taint hook asks at every instruction
/// whether it is one, and almost none is, so the answer is mostly one bit test instead of a hash
/// probe.
#[derive(Default)]
pub(super) struct Specials {
    map: rustc_hash::FxHashMap<u64, Special>,
    /// A bit per hash of the PCs in `map` (2048 bits).
    filter: [u64; 32],
}

impl Specials {
    fn bit(pc: u64) -> (usize, u64) {
        let h = ((pc ^ (pc >> 11)) & 2047) as usize;
        (h >> 6, 1 << (h & 63))
    }

    /// Forgets the specials in `[start, end)` (code that changed there is decoded again, which
    /// inserts what it has; the filter's bits stay, a filter may say yes wrongly).
    pub(super) fn forget(&mut self, start: u64, end: u64) {
        if !self.map.is_empty() {
            self.map.retain(|&pc, _| pc < start || pc >= end);
        }
    }

    pub(super) fn insert(&mut self, pc: u64, special: Special) {
        let (i, b) = Specials::bit(pc);
        self.filter[i] |= b;
        self.map.insert(pc, special);
    }

    #[inline]
    pub(super) fn get(&self, pc: u64) -> Option<Special> {
        let (i, b) = Specials::bit(pc);
        if self.filter[i] & b == 0 {
            return None;
        }
        self.map.get(&pc).copied()
    }
}

pub(super) fn install_special_hooks(uc: &mut Unicorn<'_, HookState>) {
    let list = std::mem::take(&mut uc.get_data_mut().code.to_hook);
    for (pc, _) in list {
        let code = &mut uc.get_data_mut().code;
        code.hooked.insert(pc);
        let slot = code.free_hook_slots.pop().unwrap_or(code.special_hooks.len());
        // What the running process has at `pc` (`own`, which the block hook filled when it
        // decoded the block): with processes, or after an `execve`, another program may have
        // other code there.
        let res = uc.add_code_hook(pc, pc, move |uc, at, _| {
            let code = &mut uc.get_data_mut().code;
            if let Some(h) = code.special_hits.get_mut(slot) {
                *h = h.saturating_add(1);
            }
            if let Some(special) = code.own.get(at) {
                on_special(uc, at, special);
            }
        });
        if let Ok(id) = res {
            let code = &mut uc.get_data_mut().code;
            if slot == code.special_hooks.len() {
                code.special_hooks.push(None);
                code.special_hits.push(0);
            }
            code.special_hooks[slot] = Some((pc, id));
            code.special_hits[slot] = 0;
        } else {
            uc.get_data_mut().code.free_hook_slots.push(slot);
            let st = uc.get_data_mut();
            st.error = Some(format!("cannot hook the instruction at {pc:#x}"));
            st.stop = Some(Stop::Error);
            let _ = uc.emu_stop();
        }
    }
}

/// Special hooks are kept without a sweep up to this many.
const SWEEP_ABOVE: usize = 8;

/// Removes the code hooks of the specials that did not run since the last sweep (the machine
/// calls it after 1 M instructions, then at intervals doubling to [`SWEEP_EVERY`]), and forgets the
/// decoded blocks that hold them.
///
/// Unicorn walks the list of every code hook at each hooked instruction it executes (and at each
/// instruction it translates): a program's start-up alone hooks dozens of locked instructions in
/// libc that never run again, which every later flush and fence then pays for (`pm_bench`: 43
/// hooks, `helper_uc_tracecode` a tenth of plain emulation; `node`: 609). A special whose hook is
/// gone is hooked again when it runs: its blocks are decoded anew at their next execution
/// ([`on_block`]), which finds it unhooked, hooks it and has the block translated again, as at
/// its first execution. What a translation still calls for the removed hook finds nothing to
/// run, and no such translation runs without that new decoding first. Not with processes: a hook
/// serves every address space, and the other processes' decoders are out of reach here.
pub(super) fn sweep_special_hooks(uc: &mut Unicorn<'_, HookState>) {
    let code = &mut uc.get_data_mut().code;
    if code.special_hooks.len() - code.free_hook_slots.len() <= SWEEP_ABOVE {
        code.special_hits.iter_mut().for_each(|h| *h = 0);
        return;
    }
    let mut gone = Vec::new();
    for (slot, hook) in code.special_hooks.iter_mut().enumerate() {
        let Some((pc, id)) = *hook else { continue };
        if std::mem::take(&mut code.special_hits[slot]) == 0 {
            *hook = None;
            code.free_hook_slots.push(slot);
            code.hooked.remove(&pc);
            gone.push((pc, id));
        }
    }
    if gone.is_empty() {
        return;
    }
    let mut pcs: Vec<u64> = gone.iter().map(|g| g.0).collect();
    pcs.sort_unstable();
    code.decoder.invalidate_at(&pcs);
    uc.get_data_mut().tcg.hooks_swept += pcs.len() as u64;
    for (_, id) in gone {
        let _ = uc.remove_hook(id);
    }
}

/// Removes the code hooks of the atomic accesses that found their object in PM only
/// ([`super::state::PM_ONLY_AFTER`] times): the PM hooks report them, and their blocks are
/// decoded and translated again without them at their next execution. Called at a sweep's
/// time (a PC reaching the count brings the sweep forward to the next block's start).
pub(super) fn unhook_pm_atomics(uc: &mut Unicorn<'_, HookState>) {
    let code = &mut uc.get_data_mut().code;
    if code.atomic_unhook.is_empty() {
        return;
    }
    let mut pcs = std::mem::take(&mut code.atomic_unhook);
    pcs.sort_unstable();
    let n = pcs.len() as u64;
    let mut gone = Vec::new();
    for (slot, hook) in code.special_hooks.iter_mut().enumerate() {
        if let Some((pc, id)) = *hook {
            if pcs.binary_search(&pc).is_ok() {
                *hook = None;
                code.free_hook_slots.push(slot);
                code.hooked.remove(&pc);
                gone.push(id);
            }
        }
    }
    code.decoder.invalidate_at(&pcs);
    for &pc in &pcs {
        code.own.forget(pc, pc + 1);
    }
    for id in gone {
        let _ = uc.remove_hook(id);
    }
    uc.get_data_mut().tcg.atomic_pm_pcs += n;
    for &pc in &pcs {
        uc.get_data_mut().tcg.ranges_removed += 1;
        let _ = uc.ctl_remove_cache(pc, pc + 1);
    }
}

/// Most guest instructions between two sweeps of the specials' hooks ([`sweep_special_hooks`]).
pub(super) const SWEEP_EVERY: u64 = 1 << 24;
/// Guest instructions before the first sweep, and fewest between two.
pub(super) const SWEEP_FIRST: u64 = SWEEP_EVERY >> 4;

pub(super) fn effective_address(uc: &Unicorn<'_, HookState>, m: &MemRef) -> u64 {
    let r = |x: Option<Reg>| x.map(|x| uc.reg_read(x).unwrap_or(0)).unwrap_or(0);
    let base = m.next_pc.unwrap_or_else(|| r(m.base));
    let seg = match m.segment {
        Some(Reg::FS) => uc.reg_read(Reg::FS_BASE).unwrap_or(0),
        Some(Reg::GS) => uc.reg_read(Reg::GS_BASE).unwrap_or(0),
        _ => 0,
    };
    base.wrapping_add(r(m.index).wrapping_mul(u64::from(m.scale))).wrapping_add(m.disp as u64).wrapping_add(seg)
}

/// Reads guest memory of the running process at guest address `va`, as the hooks see it (Unicorn's
/// `mem_read` takes a physical address, see [`state::Phys`]).
#[inline]
pub(super) fn read_guest(uc: &Unicorn<'_, HookState>, va: u64, buf: &mut [u8]) -> Result<(), uc_error> {
    match uc.mem_read(uc.get_data().phys.pa(va), buf) {
        Err(e) => read_table(uc.get_data(), va, buf).map_err(|_| e),
        ok => ok,
    }
}

/// Reads guest memory from the running table where Unicorn does not hold the region (its
/// bounded working set, [`Memory::fault_in`]): what the hooks read must not depend on which
/// regions it holds.
#[cold]
fn read_table(st: &HookState, va: u64, buf: &mut [u8]) -> Result<(), MemError> {
    // SAFETY: the machine's table lives as long as the machine, and hooks run while the
    // machine holds no mutable reference to it.
    unsafe { &*st.table }.read_held(va, buf)
}

/// Reads the value of the `size`-byte word at `addr` (0 when it cannot be read).
fn read_word(uc: &Unicorn<'_, HookState>, addr: u64, size: u8) -> u64 {
    let mut b = [0u8; 8];
    match read_guest(uc, addr, &mut b[..usize::from(size)]) {
        Ok(()) => u64::from_le_bytes(b),
        Err(_) => 0,
    }
}

/// Reports what the running thread did to DRAM lock words since its last event
/// ([`super::state::LockWords`]): the word its last locked instruction took from 0, and the
/// words it holds that are 0 again. Called before each of its events and before it is switched
/// out, so every other event sees the words as they are. `pc` is where the thread is. On every
/// block and PM access: the common case (no word pending or held) is one inlined test.
#[inline]
pub(super) fn settle_words(uc: &mut Unicorn<'_, HookState>, pc: u64) {
    let st = uc.get_data();
    if st.obs.words.active(st.tid) {
        settle_words_now(uc, pc);
    }
}

#[cold]
#[inline(never)]
fn settle_words_now(uc: &mut Unicorn<'_, HookState>, pc: u64) {
    let tid = uc.get_data().tid;
    if let Some((t, at, addr, size, before)) = uc.get_data().obs.words.pending {
        let now = read_word(uc, addr, size);
        let st = uc.get_data_mut();
        st.obs.words.pending = None;
        let taken = t == tid && before == 0 && now != 0;
        if taken && !st.obs.words.held.iter().any(|h| h.0 == tid && h.1 == addr) {
            st.obs.words.held.push((tid, addr, size, now));
            let ev = st.emit(EventKind::WordAcquire, at, addr, 0, u32::from(size), before, now);
            st.tell(&ev);
        }
    }
    let mut i = 0;
    while i < uc.get_data().obs.words.held.len() {
        let (t, addr, size, taken) = uc.get_data().obs.words.held[i];
        if t != tid || read_word(uc, addr, size) != 0 {
            i += 1;
            continue;
        }
        let st = uc.get_data_mut();
        st.obs.words.held.swap_remove(i);
        let ev = st.emit(EventKind::WordRelease, pc, addr, 0, u32::from(size), taken, 0);
        st.tell(&ev);
    }
}

/// An access to an atomic object by the instruction at `pc` (`how`: bit 0 reads, bit 1 writes),
/// if it is program code the machine was told is atomic, or its address is one of the program's
/// C11 `_Atomic` objects, and the object is in DRAM: reported as
/// [`EventKind::AtomicAccess`] before the instruction runs, which no other thread can come
/// between. On PM the access is reported by the PM hooks as what it is.
fn atomic_access(uc: &mut Unicorn<'_, HookState>, pc: u64, mem: &MemRef, size: u8, how: u64) {
    let st = uc.get_data();
    if st.pm.windows.is_empty() {
        return;
    }
    let code = super::state::within(&st.obs.atomic_code, pc);
    if !code && st.obs.atomic_objects.is_empty() {
        return;
    }
    let addr = effective_address(uc, mem);
    // Outside C++'s atomic code, only the program's C11 `_Atomic` objects (the block's decoding
    // found the address; a locked instruction's word may be anything).
    if !code && !super::state::within(&uc.get_data().obs.atomic_objects, addr) {
        return;
    }
    if uc.get_data().device_of(addr).is_some() {
        let st = uc.get_data_mut();
        let hits = st.code.atomic_pm.entry(pc).or_insert(0);
        if *hits < PM_ONLY_AFTER {
            *hits += 1;
            if *hits == PM_ONLY_AFTER {
                st.code.atomic_unhook.push(pc);
                // Unhooked at the next block's start ([`unhook_pm_atomics`]).
                st.clock.sweep_at = 0;
            }
        }
        return;
    }
    let st = uc.get_data_mut();
    if st.code.atomic_pm.insert(pc, u32::MAX) != Some(u32::MAX) {
        st.tcg.atomic_dram_pcs += 1;
    }
    settle_words(uc, pc);
    let st = uc.get_data_mut();
    let ev = st.emit(EventKind::AtomicAccess, pc, addr, 0, u32::from(size), 0, how);
    st.tell(&ev);
}

pub(super) fn on_special(uc: &mut Unicorn<'_, HookState>, pc: u64, special: Special) {
    taint_first(uc, pc);
    let special = match special {
        Special::LockedRmw { word, size } => {
            let st = uc.get_data();
            if st.obs.interest.has(Interest::LOCK_WORDS) && !st.pm.windows.is_empty() && !st.obs.words.in_library(pc) {
                settle_words(uc, pc);
                let addr = effective_address(uc, &word);
                if uc.get_data().device_of(addr).is_none() {
                    let before = read_word(uc, addr, size);
                    let st = uc.get_data_mut();
                    st.obs.words.pending = Some((st.tid, pc, addr, size, before));
                }
            }
            if uc.get_data().obs.interest.has(Interest::ATOMICS) {
                atomic_access(uc, pc, &word, size, 3);
            }
            Special::Fence(FenceOp::Locked)
        }
        Special::Flush(..) | Special::Fence(_) => {
            settle_words(uc, pc);
            special
        }
        other => other,
    };
    let delay_here = matches!(special, Special::Fence(FenceOp::Locked)) && uc.get_data().steer.delay_pending.is_some();
    if delay_here || matches!(special, Special::Flush(..) | Special::Fence(_)) && uc.get_data().steer.release_pending {
        // The hold's writer reached a flush or fence: the readers go first.
        let st = uc.get_data_mut();
        if st.stop.is_none() {
            st.stop = Some(Stop::PreemptBefore);
            let _ = uc.emu_stop();
        }
        return;
    }
    match special {
        Special::Flush(op, mref) => {
            if uc.get_data().pm.windows.is_empty() {
                return;
            }
            let ea = effective_address(uc, &mref);
            let st = uc.get_data_mut();
            let Some(dev) = st.device_of(ea) else { return };
            let kind = match op {
                FlushOp::Clflush => FlushKind::Clflush,
                FlushOp::Clflushopt => FlushKind::Clflushopt,
                FlushOp::Clwb => FlushKind::Clwb,
            };
            if st.obs.interest.has(Interest::CRASH) && kind == FlushKind::Clflush {
                st.crash_point(pc);
            }
            let out = st.pm.device.flush(st.tid, dev, kind);
            st.mix([1, dev, op as u64, u64::from(st.tid)]);
            if st.obs.interest.has(Interest::PERSIST) {
                let mut ev = st.emit(EventKind::Flush(op), pc, ea, dev, 64, 0, 0);
                ev.flush = Some(out);
                st.tell(&ev);
            }
        }
        Special::Fence(op) => {
            let st = uc.get_data_mut();
            if op == FenceOp::Locked && st.point(pc) {
                // Switch before the locked instruction runs; it is a point only once.
                st.stop = Some(Stop::PreemptBefore);
                let _ = uc.emu_stop();
                return;
            }
            if st.pm.windows.is_empty() {
                return;
            }
            let kind = match op {
                FenceOp::Sfence => FenceKind::Sfence,
                FenceOp::Mfence => FenceKind::Mfence,
                FenceOp::Locked => FenceKind::Locked,
            };
            if st.obs.interest.has(Interest::CRASH) && st.pm.device.threads_with_pending().contains(&st.tid) {
                st.crash_point(pc);
            }
            let out = st.pm.device.fence(st.tid, kind);
            st.mix([2, op as u64, u64::from(st.tid), 0]);
            let tid = st.tid;
            st.steer.dirty.retain(|&t| t != tid);
            if st.obs.interest.has(Interest::PERSIST) {
                let mut ev = st.emit(EventKind::Fence(op), pc, 0, 0, 0, 0, 0);
                ev.fence = Some(out);
                st.tell(&ev);
            }
        }
        Special::Privileged | Special::Rand { .. } => {
            let st = uc.get_data_mut();
            if st.stop.is_none() {
                st.stop = Some(Stop::Special(pc, special));
                let _ = uc.emu_stop();
            }
        }
        Special::ClientRequest => on_client_request(uc, pc),
        Special::LockedRmw { .. } => {}
        Special::AtomicAccess { mem, size, store } => atomic_access(uc, pc, &mem, size, if store { 2 } else { 1 }),
        Special::Pause => {
            let st = uc.get_data_mut();
            if st.stop.is_none() && st.steer.runnable_others > 0 {
                st.stop = Some(Stop::Special(pc, special));
                let _ = uc.emu_stop();
            }
        }
    }
}

/// The `xchg rbx, rbx` of a Valgrind client request ([`crate::client`]), before it executes
/// (it is a no-op): answers it in RDX and tells the observer what the program declared. The
/// answer never depends on the observer. Not a request unless the 16 bytes before `pc` are the
/// preamble and RAX points to readable memory.
pub(super) fn on_client_request(uc: &mut Unicorn<'_, HookState>, pc: u64) {
    if uc.get_data().stop.is_some() {
        // The engine stops before this instruction; it is handled when it runs.
        return;
    }
    let mut pre = [0u8; 16];
    if pc < 16 || read_guest(uc, pc - 16, &mut pre).is_err() || !client::is_preamble(&pre) {
        return;
    }
    let mut raw = [0u8; 48];
    let rax = uc.reg_read(Reg::RAX).unwrap_or(0);
    if read_guest(uc, rax, &mut raw).is_err() {
        return;
    }
    let mut args = [0u64; 6];
    for (a, w) in args.iter_mut().zip(raw.chunks_exact(8)) {
        *a = u64::from_le_bytes(w.try_into().unwrap_or_default());
    }
    let req = Request::decode(&args);
    let st = uc.get_data_mut();
    let answer = st.pm.client.answer(&req);
    let (sync, persist) = (st.obs.interest.has(Interest::SYNC), st.obs.interest.has(Interest::PERSIST));
    match req {
        Request::SetClean { addr, len } if persist => st.emit_range(EventKind::SetClean, pc, addr, len, 0),
        Request::RegisterPmemMapping { addr, len } if persist => st.emit_range(EventKind::PmRegister, pc, addr, len, 0),
        Request::RemovePmemMapping { addr, len } if persist => st.emit_range(EventKind::PmUnregister, pc, addr, len, 0),
        Request::StartTx { txn } | Request::EndTx { txn } if sync => {
            let kind = if matches!(req, Request::StartTx { .. }) { EventKind::TxBegin } else { EventKind::TxEnd };
            let ev = st.emit(kind, pc, 0, 0, 0, 0, txn.unwrap_or(0));
            st.tell(&ev);
        }
        Request::AddToTx { txn, addr, len } if sync => st.emit_range(EventKind::TxAdd, pc, addr, len, txn.unwrap_or(0)),
        Request::RemoveFromTx { txn, addr, len } if sync => {
            st.emit_range(EventKind::TxRemove, pc, addr, len, txn.unwrap_or(0))
        }
        Request::AddToGlobalTxIgnore { addr, len } if sync => st.emit_range(EventKind::TxIgnore, pc, addr, len, 0),
        _ => {}
    }
    if let Some(v) = answer {
        if uc.reg_write(Reg::RDX, v).is_err() {
            let st = uc.get_data_mut();
            st.error = Some(format!("cannot answer the client request at {pc:#x}"));
            st.stop = Some(Stop::Error);
            let _ = uc.emu_stop();
        }
    }
}

/// Decodes the instruction at `pc` for the taint engine.
pub(super) fn learn_insn(uc: &mut Unicorn<'_, HookState>, pc: u64, size: usize) {
    let mut bytes = [0u8; 16];
    let n = size.clamp(1, 16);
    if read_guest(uc, pc, &mut bytes[..n]).is_err() && read_guest(uc, pc, &mut bytes[..1]).is_err() {
        return;
    }
    if let Some(t) = uc.get_data_mut().obs.taint.as_deref_mut() {
        t.learn(pc, &bytes[..n]);
    }
}

/// Before every instruction, with taint tracking: the previous one is complete. Then, if the
/// instruction is a [`Special`], what its own code hook did before the taint hook went in.
///
/// Why the specials move here: Unicorn calls code hooks by walking its whole list of them for
/// every instruction that has any (`helper_uc_tracecode`), so with a hook on every instruction,
/// each per-PC hook of a special (hundreds in a program with libc's locks) cost every instruction
/// a list step: 39 % of a racy PM program's time under `pmrace`. One hash probe here replaces it.
pub(super) fn on_taint_insn(uc: &mut Unicorn<'_, HookState>, pc: u64, size: u32) {
    let st = uc.get_data_mut();
    if st.obs.taint_began == Some((pc, true)) {
        // A code hook older than this one began the instruction (`taint_first`).
        st.obs.taint_began = Some((pc, false));
    } else {
        st.obs.taint_began = Some((pc, false));
        taint_begin(uc, pc, size);
    }
    if let Some(special) = uc.get_data().code.own.get(pc) {
        on_special(uc, pc, special);
    }
}

/// Called first by the code hooks that act at one PC (specials, the budget's, breakpoints): the
/// taint engine completes the previous instruction before they act or stop. Unicorn calls code
/// hooks in the order they were added, and the taint hook goes in only at the first taint source
/// ([`Machine::hook_taint`]), after the hooks of code translated before it; without this those
/// would report a flush or a fence before the taint engine reported the store before it, and a
/// hook stopping the engine would throw the previous instruction's effect away. Special
/// instructions never jump to themselves, so a taint hook seen at this very PC already ran for
/// this execution of it; the run loop forgets what began at every stop.
pub(super) fn taint_first(uc: &mut Unicorn<'_, HookState>, pc: u64) {
    let st = uc.get_data_mut();
    if !st.obs.taint_hooked || st.obs.taint_began.is_some_and(|(at, _)| at == pc) {
        return;
    }
    st.obs.taint_began = Some((pc, true));
    taint_begin(uc, pc, 16);
}

fn taint_begin(uc: &mut Unicorn<'_, HookState>, pc: u64, size: u32) {
    // With nothing tainted the instruction needs no decoding (unless it loads a source, see
    // `learn_insn`).
    let decode = uc.get_data_mut().obs.taint.as_deref_mut().is_some_and(|t| !t.is_quiet() && !t.knows(pc));
    if decode {
        learn_insn(uc, pc, size as usize);
    }
    let st = uc.get_data_mut();
    if let Some(t) = st.obs.taint.as_deref_mut() {
        t.begin(pc);
        if !t.applied().is_empty() {
            st.report_tainted();
        }
    }
}

/// The guest's PC inside a raw hook (`uc` is the engine calling it).
#[inline]
pub(super) fn raw_rip(uc: *mut ffi::uc_engine) -> u64 {
    let mut rip = 0u64;
    // SAFETY: `uc` is the live engine calling the hook; RIP is a valid x86 register id.
    unsafe { ffi::uc_reg_read(uc, RegisterX86::RIP as i32, (&raw mut rip).cast()) };
    rip
}

/// Reads guest virtual memory at `va` from a raw hook, as [`read_guest`] does.
pub(super) fn raw_read_guest(uc: *mut ffi::uc_engine, st: &HookState, va: u64, buf: &mut [u8]) -> Result<(), uc_error> {
    // SAFETY: `uc` is the live engine calling the hook and `buf` is writable for its length.
    let err = unsafe { ffi::uc_mem_read(uc, st.phys.pa(va), buf.as_mut_ptr().cast(), buf.len() as u64) };
    if err == uc_error::OK || read_table(st, va, buf).is_ok() {
        Ok(())
    } else {
        Err(err)
    }
}

/// Puts the all-memory hook of `kind` (`MEM_WRITE` or `MEM_READ`) into the engine, calling
/// [`on_dram_access`] straight from Unicorn.
///
/// Why not `Unicorn::add_mem_hook`: the binding's proxy (`mem_hook_proxy`) rebuilds a `Unicorn`
/// handle for every call (an `Rc` upgrade and drop) and then calls the boxed closure, which
/// translated the address: 2.4 % of an `hmtrace` run on `thr_cpu_bound` for a hook on every
/// access. The raw callback gets the engine's [`HookState`] as its user pointer, as the
/// CPUID/RDTSC hooks do ([`add_raw_insn_hook`]). The hook lives as long as the engine.
pub(super) fn add_raw_dram_hook(
    uc: &mut Unicorn<'static, HookState>,
    kind: HookType,
) -> Result<ffi::uc_hook, EmuError> {
    add_raw_mem_hook(uc, kind, if kind == HookType::MEM_WRITE { dram_write_hook } else { dram_read_hook })
}

/// A raw memory hook's callback (Unicorn's `uc_cb_hookmem_t`): engine, access type
/// ([`MemType`] as an `int`), address, size, value, user data (the engine's [`HookState`]).
pub(super) type RawMemHook = extern "C" fn(*mut ffi::uc_engine, i32, u64, i32, i64, *mut c_void) -> bool;

/// Puts a raw memory hook of `kind` on every address into the engine ([`add_raw_dram_hook`]
/// says why raw).
pub(super) fn add_raw_mem_hook(
    uc: &mut Unicorn<'static, HookState>,
    kind: HookType,
    cb: RawMemHook,
) -> Result<ffi::uc_hook, EmuError> {
    let user = (uc.get_data() as *const HookState).cast_mut().cast::<c_void>();
    let mut hh: ffi::uc_hook = 0;
    // SAFETY: the callback has Unicorn's memory-hook signature (`uc_cb_hookmem_t`: engine, access
    // type, address, size, value, user data) and `user` points at the engine's own data, which
    // outlives the hook. `begin > end` hooks every address.
    let err = unsafe { ffi::uc_hook_add(uc.get_handle(), &mut hh, kind.0 as i32, cb as *mut c_void, user, 1, 0) };
    if err != uc_error::OK {
        return Err(engine(err));
    }
    Ok(hh)
}

extern "C" fn dram_write_hook(
    uc: *mut ffi::uc_engine,
    _t: i32,
    addr: u64,
    size: i32,
    value: i64,
    user: *mut c_void,
) -> bool {
    // SAFETY: `user` is the engine's HookState (add_raw_dram_hook), alive as long as the engine,
    // and nothing else holds a reference to it while Unicorn runs a hook.
    let st = unsafe { &mut *user.cast::<HookState>() };
    let addr = st.phys.va(addr);
    on_dram_access(uc, st, addr, size as usize, Some(value));
    true
}

extern "C" fn dram_read_hook(
    uc: *mut ffi::uc_engine,
    _t: i32,
    addr: u64,
    size: i32,
    _v: i64,
    user: *mut c_void,
) -> bool {
    // SAFETY: as in `dram_write_hook`.
    let st = unsafe { &mut *user.cast::<HookState>() };
    let addr = st.phys.va(addr);
    on_dram_access(uc, st, addr, size as usize, None);
    true
}

/// The taint engine's hook on every access ([`Machine::hook_taint`]), raw as the all-memory
/// hooks are ([`add_raw_dram_hook`]).
pub(super) extern "C" fn taint_mem_hook(
    uc: *mut ffi::uc_engine,
    t: i32,
    pa: u64,
    size: i32,
    v: i64,
    user: *mut c_void,
) -> bool {
    // SAFETY: as in `dram_write_hook`.
    let st = unsafe { &mut *user.cast::<HookState>() };
    let addr = st.phys.va(pa);
    let size = size as usize;
    let Some(taint) = st.obs.taint.as_deref_mut() else { return true };
    if taint.access(addr, size, t == MemType::WRITE as i32) && size <= 8 {
        // A compare-exchange's write: whether it failed (Unicorn writes a failed one's
        // unchanged value back, after this hook) decides where its taint goes. Read from the
        // table if Unicorn does not hold the region yet (a write hook runs before the fault).
        let mut old = [0u8; 8];
        let read = raw_read_guest(uc, st, addr, &mut old[..size]).is_ok();
        let failed = read && old[..size] == v.to_le_bytes()[..size];
        if let Some(taint) = st.obs.taint.as_deref_mut() {
            taint.cmpxchg_outcome(failed);
        }
    }
    true
}

/// Any access outside the PM windows, for observers that want all memory (PM accesses are
/// reported by the window hooks). Called from the raw hooks ([`add_raw_dram_hook`]).
pub(super) fn on_dram_access(uc: *mut ffi::uc_engine, st: &mut HookState, addr: u64, size: usize, value: Option<i64>) {
    if size == 0
        || size > 8
        || st.device_of(addr).is_some()
        || (st.debug.is_some() && debug::debug_watch_raw(uc, st, addr, size, value.is_some()))
    {
        return;
    }
    // A store's event carries the bytes it overwrites when a pass asks (oscs drops writes that
    // change nothing); a load's carries no value: no pass wants it, and reading it back costs a
    // tenth of the hook (Unicorn's address translation).
    let mut cur = [0u8; 8];
    if value.is_some() && st.obs.interest.has(Interest::DRAM_OLD) {
        // From ferrite's table, whose host memory is Unicorn's (a tenth of Unicorn's read, which
        // translates the address through its flat view); Unicorn's read only where the table
        // cannot answer.
        if read_table(st, addr, &mut cur[..size]).is_err() {
            let _ = raw_read_guest(uc, st, addr, &mut cur[..size]);
        }
    }
    if st.stop.is_some() {
        return;
    }
    let pc = raw_rip(uc);
    let cur = u64::from_le_bytes(cur);
    let ev = match value {
        Some(v) => {
            let kind = match st.access_kind(pc) {
                AccessKind::Locked | AccessKind::LockedCmpxchg => EventKind::RmwStore,
                _ => EventKind::Store,
            };
            let mask = if size == 8 { u64::MAX } else { (1u64 << (8 * size)) - 1 };
            st.emit(kind, pc, addr, 0, size as u32, cur, v as u64 & mask)
        }
        None => st.emit(EventKind::Load, pc, addr, 0, size as u32, cur, 0),
    };
    st.tell(&ev);
}

pub(super) fn on_interrupt(uc: &mut Unicorn<'_, HookState>, intno: u32) {
    let st = uc.get_data_mut();
    if st.stop.is_none() {
        st.stop = Some(Stop::Interrupt(intno));
    }
    let _ = uc.emu_stop();
}

pub(super) fn on_syscall(uc: &mut Unicorn<'_, HookState>) {
    let st = uc.get_data_mut();
    if st.stop.is_none() {
        st.stop = Some(Stop::Syscall);
    }
    let _ = uc.emu_stop();
}

pub(super) fn on_invalid(uc: &mut Unicorn<'_, HookState>, t: MemType, addr: u64, _size: usize, _v: i64) -> bool {
    let st = uc.get_data_mut();
    let va = st.phys.va(addr);
    if matches!(t, MemType::READ_UNMAPPED | MemType::WRITE_UNMAPPED | MemType::FETCH_UNMAPPED) {
        // SAFETY: as in `read_table`; the table is not inside the engine's data, so it and `uc`
        // do not alias.
        let mem = unsafe { &mut *st.table };
        // A region the table maps and Unicorn does not hold: mapped in, and the access goes on
        // (Unicorn looks the address up again), with no stop and nothing else changed.
        if mem.fault_in(uc, va) {
            if mem.far_over_bound() {
                // A loop reaching many regions without a stop: trimmed at the next block start.
                let st = uc.get_data_mut();
                if st.trim_due.is_none() {
                    st.trim_due = Some(st.clock.sweep_at);
                    st.clock.sweep_at = 0;
                }
            }
            return true;
        }
    }
    let st = uc.get_data_mut();
    st.invalid = Some((t, va));
    false
}
