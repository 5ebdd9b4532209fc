//! Clearing QEMU's "exception in flight" after ferrite took a CPU exception itself.
//!
//! QEMU's x86 CPU remembers the exception it is delivering (`CPUX86State::old_exception`) so that
//! a second contributory exception (#DE, #TS, #NP, #SS, #GP) or page fault raised while the first
//! is delivered becomes a double fault (#DF, vector 8), and forgets it once delivery succeeds.
//! Unicorn hands the exception to ferrite's interrupt hook instead of delivering it, so QEMU never
//! forgets it: the guest's *next* #DE, after a handled SIGFPE, came out as exception 8
//! (`SIGSEGV: CPU exception 8`). Linux, having delivered the first, raises SIGFPE again.
//!
//! Unicorn has no register for the field. It lies in the CPU context [`uc_context_save`] copies,
//! 96 bytes after the debug registers `dr[0..8]` (8 × 8 bytes, then 4 pointers of break- and
//! watchpoints, then `int old_exception`: `qemu/target/i386/cpu.h`). The debug registers can be
//! set through Unicorn, so they mark the place: write four distinctive values into DR0..DR3,
//! save the context, find them, put -1 ("none") at the field, restore the context and the debug
//! registers. Should the layout ever differ (the marker not found, or the field holding
//! something other than an exception number), nothing is changed.
//!
//! [`uc_context_save`]: ffi::uc_context_save

use unicorn_engine::{RegisterX86, Unicorn};
use unicorn_engine_sys as ffi;

/// Distinct values unlikely anywhere else in the CPU state.
const MARKS: [u64; 4] = [0x7e1e_c0de_0000_0d00, 0x7e1e_c0de_0000_0d01, 0x7e1e_c0de_0000_0d02, 0x7e1e_c0de_0000_0d03];
/// Bytes from `dr[0]` to `old_exception`: `dr[8]`, then the union of four pointers.
const DR_TO_OLD_EXCEPTION: usize = 8 * 8 + 4 * 8;

/// Forgets the exception the CPU last raised, as a delivered one is forgotten. Called when an
/// exception stopped the engine (rare: a fault the guest may handle), never on a hot path.
pub(crate) fn forget_exception<D>(uc: &mut Unicorn<'_, D>) {
    let drs = [RegisterX86::DR0, RegisterX86::DR1, RegisterX86::DR2, RegisterX86::DR3];
    let saved: Vec<u64> = drs.iter().map(|r| uc.reg_read(*r).unwrap_or(0)).collect();
    for (r, v) in drs.iter().zip(MARKS) {
        if uc.reg_write(*r, v).is_err() {
            return;
        }
    }
    let handle = uc.get_handle();
    // SAFETY: `handle` is the live engine; the context is allocated by Unicorn for it, is
    // `uc_context_size` bytes long, and is freed before returning.
    unsafe {
        let mut ctx: *mut ffi::uc_context = std::ptr::null_mut();
        if ffi::uc_context_alloc(handle, &mut ctx) == ffi::uc_error::OK && !ctx.is_null() {
            let size = ffi::uc_context_size(handle);
            if ffi::uc_context_save(handle, ctx) == ffi::uc_error::OK {
                let bytes = std::slice::from_raw_parts_mut(ctx as *mut u8, size);
                let mark: Vec<u8> = MARKS.iter().flat_map(|m| m.to_le_bytes()).collect();
                if let Some(at) = bytes.windows(mark.len()).position(|w| w == &mark[..]) {
                    let field = at + DR_TO_OLD_EXCEPTION;
                    if field + 4 <= size {
                        let old = i32::from_le_bytes(bytes[field..field + 4].try_into().expect("4 bytes"));
                        if (-1..32).contains(&old) {
                            bytes[field..field + 4].copy_from_slice(&(-1i32).to_le_bytes());
                            ffi::uc_context_restore(handle, ctx);
                        }
                    }
                }
            }
            ffi::uc_context_free(ctx);
        }
    }
    for (r, v) in drs.iter().zip(saved) {
        let _ = uc.reg_write(*r, v);
    }
}
