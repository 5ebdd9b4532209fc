//! Valgrind's client-request protocol: how a program annotated for Valgrind talks to ferrite.
//!
//! # The protocol (x86-64)
//! A client request is the 19-byte *magic sequence*
//!
//! ```text
//! rol rdi, 3; rol rdi, 13; rol rdi, 61; rol rdi, 51   (the 16-byte preamble: rdi unchanged)
//! xchg rbx, rbx                                        (the request itself)
//! ```
//!
//! with RAX pointing to six 64-bit words — the request code and five arguments — and RDX holding
//! the *default* result. Natively the sequence does nothing, so RDX keeps the default; under
//! Valgrind the core or the running tool answers by writing RDX. A request no one handles keeps
//! the default too. Codes below `0x10000` are Valgrind core requests (`RUNNING_ON_VALGRIND` is
//! `0x1001`); tool requests are `VG_USERREQ_TOOL_BASE(a, b)` = `a << 24 | b << 16` plus an
//! index: pmemcheck's are `'P','C'` (`0x5043_0000`), memcheck's `'M','C'`, helgrind's `'H','G'`,
//! DRD's `'D','R'`. ([`crate::decode`] finds the sequence; the machine handles it at the
//! `xchg rbx, rbx`, before it executes, and writes RDX when the answer differs from the default.)
//!
//! # What PMDK does with it
//! Debian's libpmem and libpmemobj (1.12) are built with Valgrind support. Their start-up
//! (`util_init` in PMDK's `common/util.c`) decides which tool is running:
//! - `On_valgrind = RUNNING_ON_VALGRIND`;
//! - memcheck if `VALGRIND_GET_VBITS` returns non-zero (default 0), DRD if
//!   `DRD_GET_DRD_THREADID` does (default 0), helgrind if `VALGRIND_HG_GET_ABITS` returns
//!   anything but its default −2;
//! - pmemcheck if, with Valgrind present, `VALGRIND_PMC_REGISTER_PMEM_MAPPING` of its own flag
//!   variable followed by `VALGRIND_PMC_CHECK_IS_PMEM_MAPPING` of it returns non-zero (then it
//!   removes the mapping again). `PMREORDER_EMIT_LOG` from the environment turns on pmreorder
//!   markers (`EMIT_LOG`), which ferrite ignores.
//!
//! With `On_pmemcheck` set, PMDK announces what it does: the pool mappings
//! (`REGISTER_PMEM_MAPPING`/`REMOVE_PMEM_MAPPING`, `REGISTER_PMEM_FILE`), every range it flushes
//! and every drain (`DO_FLUSH`, `DO_FENCE`), transactions (`START_TX`, `END_TX`), the ranges it
//! snapshots into a transaction or stops tracking (`ADD_TO_TX`, `REMOVE_FROM_TX`), ranges
//! excluded from transaction checking (`ADD_TO_GLOBAL_TX_IGNORE`), and — what matters most for
//! durability checking — the pool state it leaves unpersisted on purpose because it rebuilds it
//! at every open (`SET_CLEAN`: lock words and the runtime part of headers, lanes and heap).
//!
//! # What ferrite answers
//! Exactly what makes PMDK run as under pmemcheck and nothing else: `RUNNING_ON_VALGRIND` is 1,
//! and `CHECK_IS_PMEM_MAPPING` is answered as pmemcheck does (0: not registered, 1: wholly in a
//! registered mapping, 2: partly) from the set of ranges registered and removed through the
//! protocol, kept here exactly as pmemcheck keeps it (merged on register, split on remove).
//! Every other request — memcheck's, helgrind's and DRD's included, so PMDK sees neither of
//! those tools — keeps its default, which is also what pmemcheck returns when a request
//! succeeds. The answers never depend on the selected analyses, so a run's schedule and trace
//! hash do not either.
//!
//! What `On_valgrind` changes in PMDK besides the annotations (read from the disassembly of
//! Debian's libraries): the pool header is mapped at an address chosen by a probe mapping
//! (`util_map_hint`) rather than by the kernel, the heap keeps 1024 run locks instead of
//! 65528 (DRAM mutexes hashed by chunk), and error reporting is switched off and on around
//! `msync` (a request with no answer). None of it changes what the program computes or prints,
//! or what it stores in the pool (`tests/pmdk_client_requests.rs` checks the guests' output
//! against native runs).
//!
//! # What becomes an event
//! `SET_CLEAN`, `START_TX(_N)`, `END_TX(_N)`, `ADD_TO_TX(_N)`, `REMOVE_FROM_TX(_N)` and
//! `ADD_TO_GLOBAL_TX_IGNORE` become
//! [`EventKind::SetClean`](crate::events::EventKind::SetClean),
//! [`TxBegin`](crate::events::EventKind::TxBegin), [`TxEnd`](crate::events::EventKind::TxEnd),
//! [`TxAdd`](crate::events::EventKind::TxAdd), [`TxRemove`](crate::events::EventKind::TxRemove)
//! and [`TxIgnore`](crate::events::EventKind::TxIgnore).
//! `DO_FLUSH`/`DO_FENCE` do not: ferrite sees the `clwb` and `sfence` instructions themselves
//! (feeding the device an announced flush too would hide a library that announces a flush it
//! never executes). The mapping requests only feed the registry above: what is PM is decided by
//! the PM mount, not by the program's say-so.
//!
//! # Limits
//! The preamble is checked in guest memory just before the `xchg rbx, rbx`, so a sequence split
//! across translated blocks is still recognised; a jump straight to such an `xchg` (never done
//! by compiled client requests) would be taken for a request. `VALGRIND_PRINTF` and other core
//! requests that would print to Valgrind's log print nothing.

/// The 16-byte preamble: `rol rdi, 3; rol rdi, 13; rol rdi, 61; rol rdi, 51`.
pub const PREAMBLE: [u8; 16] =
    [0x48, 0xc1, 0xc7, 0x03, 0x48, 0xc1, 0xc7, 0x0d, 0x48, 0xc1, 0xc7, 0x3d, 0x48, 0xc1, 0xc7, 0x33];

/// The request instruction after the preamble: `xchg rbx, rbx`.
pub const XCHG_RBX: [u8; 3] = [0x48, 0x87, 0xdb];

/// `VG_USERREQ__RUNNING_ON_VALGRIND`.
pub const RUNNING_ON_VALGRIND: u64 = 0x1001;

/// `VG_USERREQ_TOOL_BASE(a, b)`.
pub const fn tool_base(a: u8, b: u8) -> u64 {
    ((a as u64) << 24) | ((b as u64) << 16)
}

/// pmemcheck's requests (`valgrind/pmemcheck.h`), as offsets from `tool_base('P', 'C')`.
pub mod pmc {
    /// Registers `[arg1, arg1 + arg2)` as a PM mapping; merged into the set of
    /// [`ClientState`](super::ClientState).
    pub const REGISTER_PMEM_MAPPING: u64 = 0;
    /// Registers a mapped file: descriptor, address, length and file offset. Decoded, then ignored.
    pub const REGISTER_PMEM_FILE: u64 = 1;
    /// Removes `[arg1, arg1 + arg2)` from the registered mappings, splitting what it cuts.
    pub const REMOVE_PMEM_MAPPING: u64 = 2;
    /// Asks whether `[arg1, arg1 + arg2)` is registered: 0 no, 1 wholly, 2 partly.
    pub const CHECK_IS_PMEM_MAPPING: u64 = 3;
    /// Prints pmemcheck's mapping set to its log; ferrite prints nothing.
    pub const PRINT_PMEM_MAPPINGS: u64 = 4;
    /// Announces a flush of `[arg1, arg1 + arg2)`; ferrite watches the `clwb` itself instead.
    pub const DO_FLUSH: u64 = 5;
    /// Announces a drain (fence); ferrite watches the `sfence` itself instead.
    pub const DO_FENCE: u64 = 6;
    /// Asks pmemcheck to print its statistics; ferrite ignores it.
    pub const WRITE_STATS: u64 = 8;
    /// Marks `[arg1, arg1 + arg2)` as needing no persistence (state rebuilt at every open).
    pub const SET_CLEAN: u64 = 0x11;
    /// Starts the running thread's transaction.
    pub const START_TX: u64 = 0x12;
    /// Starts transaction `arg1`.
    pub const START_TX_N: u64 = 0x13;
    /// Ends the running thread's transaction.
    pub const END_TX: u64 = 0x14;
    /// Ends transaction `arg1`.
    pub const END_TX_N: u64 = 0x15;
    /// Adds `[arg1, arg1 + arg2)` to the running thread's transaction.
    pub const ADD_TO_TX: u64 = 0x16;
    /// Adds `[arg2, arg2 + arg3)` to transaction `arg1`.
    pub const ADD_TO_TX_N: u64 = 0x17;
    /// Stops tracking `[arg1, arg1 + arg2)` in the running thread's transaction.
    pub const REMOVE_FROM_TX: u64 = 0x18;
    /// Stops tracking `[arg2, arg2 + arg3)` in transaction `arg1`.
    pub const REMOVE_FROM_TX_N: u64 = 0x19;
    /// Makes the running thread a participant of transaction `arg1`.
    pub const ADD_THREAD_TO_TX_N: u64 = 0x1a;
    /// Takes the running thread out of transaction `arg1`.
    pub const REMOVE_THREAD_FROM_TX_N: u64 = 0x1b;
    /// Excludes `[arg1, arg1 + arg2)` from transaction checking altogether.
    pub const ADD_TO_GLOBAL_TX_IGNORE: u64 = 0x1c;
    /// A pmreorder marker (`PMREORDER_EMIT_LOG`); ferrite ignores it.
    pub const EMIT_LOG: u64 = 0x1e;
}

/// Whether `bytes`, the 16 bytes before an `xchg rbx, rbx`, are the preamble.
pub fn is_preamble(bytes: &[u8; 16]) -> bool {
    *bytes == PREAMBLE
}

/// A decoded client request. Transaction ids are `Some` for the `_N` forms (an id chosen by the
/// program) and `None` for the running thread's own transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// `RUNNING_ON_VALGRIND`: answered 1.
    RunningOnValgrind,
    /// `REGISTER_PMEM_MAPPING`: `[addr, addr + len)` joins the registered ranges (and becomes a
    /// [`PmRegister`](crate::events::EventKind::PmRegister) event).
    RegisterPmemMapping {
        /// First byte of the range.
        addr: u64,
        /// Length in bytes.
        len: u64,
    },
    /// `REGISTER_PMEM_FILE`: a file mapped at `addr`; decoded for completeness, otherwise ignored.
    RegisterPmemFile {
        /// The guest's descriptor of the mapped file.
        fd: u64,
        /// Where the file is mapped.
        addr: u64,
        /// Length of the mapping in bytes.
        len: u64,
        /// Offset in the file of the mapping's first byte.
        offset: u64,
    },
    /// `REMOVE_PMEM_MAPPING`: `[addr, addr + len)` is cut out of the registered ranges (and
    /// becomes a [`PmUnregister`](crate::events::EventKind::PmUnregister) event).
    RemovePmemMapping {
        /// First byte of the range.
        addr: u64,
        /// Length in bytes.
        len: u64,
    },
    /// `CHECK_IS_PMEM_MAPPING`: answered 0, 1 or 2 (see [`ClientState::answer`]).
    CheckIsPmemMapping {
        /// First byte of the range.
        addr: u64,
        /// Length in bytes.
        len: u64,
    },
    /// `DO_FLUSH`: the program says it flushed this range (not an event; the `clwb` is).
    DoFlush {
        /// First byte of the range.
        addr: u64,
        /// Length in bytes.
        len: u64,
    },
    /// `DO_FENCE`: the program says it drained (not an event; the `sfence` is).
    DoFence,
    /// `SET_CLEAN`: the range is deliberately left unpersisted (rebuilt at every open).
    SetClean {
        /// First byte of the range.
        addr: u64,
        /// Length in bytes.
        len: u64,
    },
    /// `START_TX` / `START_TX_N`: a transaction begins.
    StartTx {
        /// The program's transaction id, or `None` for the running thread's own.
        txn: Option<u64>,
    },
    /// `END_TX` / `END_TX_N`: a transaction ends.
    EndTx {
        /// The program's transaction id, or `None` for the running thread's own.
        txn: Option<u64>,
    },
    /// `ADD_TO_TX` / `ADD_TO_TX_N`: the range is snapshotted into a transaction.
    AddToTx {
        /// The program's transaction id, or `None` for the running thread's own.
        txn: Option<u64>,
        /// First byte of the range.
        addr: u64,
        /// Length in bytes.
        len: u64,
    },
    /// `REMOVE_FROM_TX` / `REMOVE_FROM_TX_N`: the transaction stops tracking the range.
    RemoveFromTx {
        /// The program's transaction id, or `None` for the running thread's own.
        txn: Option<u64>,
        /// First byte of the range.
        addr: u64,
        /// Length in bytes.
        len: u64,
    },
    /// `ADD_THREAD_TO_TX_N`: the running thread joins transaction `txn`.
    AddThreadToTx {
        /// The program's transaction id.
        txn: u64,
    },
    /// `REMOVE_THREAD_FROM_TX_N`: the running thread leaves transaction `txn`.
    RemoveThreadFromTx {
        /// The program's transaction id.
        txn: u64,
    },
    /// `ADD_TO_GLOBAL_TX_IGNORE`: the range is excluded from transaction checking.
    AddToGlobalTxIgnore {
        /// First byte of the range.
        addr: u64,
        /// Length in bytes.
        len: u64,
    },
    /// Any other request (another tool's, or a pmemcheck request ferrite has no use for):
    /// answered with the default.
    Other(u64),
}

impl Request {
    /// Decodes the six words RAX points to: the code and five arguments.
    pub fn decode(a: &[u64; 6]) -> Request {
        let code = a[0];
        if code == RUNNING_ON_VALGRIND {
            return Request::RunningOnValgrind;
        }
        let base = tool_base(b'P', b'C');
        if code & !0xffff != base {
            return Request::Other(code);
        }
        let (x, y, z) = (a[1], a[2], a[3]);
        match code & 0xffff {
            pmc::REGISTER_PMEM_MAPPING => Request::RegisterPmemMapping { addr: x, len: y },
            pmc::REGISTER_PMEM_FILE => Request::RegisterPmemFile { fd: x, addr: y, len: z, offset: a[4] },
            pmc::REMOVE_PMEM_MAPPING => Request::RemovePmemMapping { addr: x, len: y },
            pmc::CHECK_IS_PMEM_MAPPING => Request::CheckIsPmemMapping { addr: x, len: y },
            pmc::DO_FLUSH => Request::DoFlush { addr: x, len: y },
            pmc::DO_FENCE => Request::DoFence,
            pmc::SET_CLEAN => Request::SetClean { addr: x, len: y },
            pmc::START_TX => Request::StartTx { txn: None },
            pmc::START_TX_N => Request::StartTx { txn: Some(x) },
            pmc::END_TX => Request::EndTx { txn: None },
            pmc::END_TX_N => Request::EndTx { txn: Some(x) },
            pmc::ADD_TO_TX => Request::AddToTx { txn: None, addr: x, len: y },
            pmc::ADD_TO_TX_N => Request::AddToTx { txn: Some(x), addr: y, len: z },
            pmc::REMOVE_FROM_TX => Request::RemoveFromTx { txn: None, addr: x, len: y },
            pmc::REMOVE_FROM_TX_N => Request::RemoveFromTx { txn: Some(x), addr: y, len: z },
            pmc::ADD_THREAD_TO_TX_N => Request::AddThreadToTx { txn: x },
            pmc::REMOVE_THREAD_FROM_TX_N => Request::RemoveThreadFromTx { txn: x },
            pmc::ADD_TO_GLOBAL_TX_IGNORE => Request::AddToGlobalTxIgnore { addr: x, len: y },
            _ => Request::Other(code),
        }
    }
}

/// What ferrite remembers between requests: pmemcheck's set of registered PM mappings.
#[derive(Clone, Debug, Default)]
pub struct ClientState {
    /// `[start, end)` ranges registered through the protocol, sorted, disjoint and not adjacent
    /// (pmemcheck merges overlapping and neighbouring registrations).
    mappings: Vec<(u64, u64)>,
}

/// pmemcheck's `cmp_pmem_st`: whether `[a, a + al)` and `[b, b + bl)` overlap (a zero-length
/// range overlaps a range that contains its address, except at the range's first byte).
fn overlaps(a: u64, al: u64, b: u64, bl: u64) -> bool {
    !(a.saturating_add(al) <= b || a >= b.saturating_add(bl))
}

impl ClientState {
    /// Handles `req` and returns the value to put in RDX, or `None` to keep the default.
    pub fn answer(&mut self, req: &Request) -> Option<u64> {
        match *req {
            Request::RunningOnValgrind => Some(1),
            Request::RegisterPmemMapping { addr, len } => {
                self.register(addr, len);
                None
            }
            Request::RemovePmemMapping { addr, len } => {
                self.remove(addr, len);
                None
            }
            Request::CheckIsPmemMapping { addr, len } => Some(self.check(addr, len)),
            _ => None,
        }
    }

    /// The registered mappings, `[start, end)`, sorted.
    pub fn mappings(&self) -> &[(u64, u64)] {
        &self.mappings
    }

    /// pmemcheck's `add_region`: merged with every overlapping or adjacent registration.
    fn register(&mut self, addr: u64, len: u64) {
        let (mut lo, mut hi) = (addr, addr.saturating_add(len));
        if lo == hi {
            return;
        }
        self.mappings.retain(|&(s, e)| {
            // Overlapping or touching (pmemcheck searches one byte wider on each side).
            let touch = overlaps(s, e - s, lo.saturating_sub(1), (hi - lo).saturating_add(2));
            if touch {
                lo = lo.min(s);
                hi = hi.max(e);
            }
            !touch
        });
        let i = self.mappings.partition_point(|m| m.0 < lo);
        self.mappings.insert(i, (lo, hi));
    }

    /// pmemcheck's `remove_region`: what overlaps `[addr, addr + len)` is cut out.
    fn remove(&mut self, addr: u64, len: u64) {
        let (lo, hi) = (addr, addr.saturating_add(len));
        let mut out = Vec::with_capacity(self.mappings.len() + 1);
        for &(s, e) in &self.mappings {
            if !overlaps(lo, hi - lo, s, e - s) {
                out.push((s, e));
                continue;
            }
            if s < lo {
                out.push((s, lo));
            }
            if e > hi {
                out.push((hi, e));
            }
        }
        self.mappings = out;
    }

    /// pmemcheck's `is_in_mapping_set`: 0 if `[addr, addr + len)` overlaps no registration,
    /// 1 if it lies wholly within one, 2 if it overlaps one only partly.
    fn check(&self, addr: u64, len: u64) -> u64 {
        let end = addr.saturating_add(len);
        match self.mappings.iter().find(|&&(s, e)| overlaps(addr, len, s, e - s)) {
            None => 0,
            Some(&(s, e)) if addr >= s && end <= e => 1,
            Some(_) => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(code: u64, args: [u64; 5]) -> Request {
        Request::decode(&[code, args[0], args[1], args[2], args[3], args[4]])
    }

    const PC: u64 = 0x5043_0000;

    #[test]
    fn decodes_pmemcheck_and_core_requests() {
        assert_eq!(req(0x1001, [0; 5]), Request::RunningOnValgrind);
        assert_eq!(req(PC + 0x11, [0x1000, 64, 0, 0, 0]), Request::SetClean { addr: 0x1000, len: 64 });
        assert_eq!(req(PC + 0x12, [0; 5]), Request::StartTx { txn: None });
        assert_eq!(req(PC + 0x13, [7, 0, 0, 0, 0]), Request::StartTx { txn: Some(7) });
        assert_eq!(req(PC + 0x14, [0; 5]), Request::EndTx { txn: None });
        assert_eq!(req(PC + 0x16, [0x2000, 8, 0, 0, 0]), Request::AddToTx { txn: None, addr: 0x2000, len: 8 });
        assert_eq!(req(PC + 0x17, [3, 0x2000, 8, 0, 0]), Request::AddToTx { txn: Some(3), addr: 0x2000, len: 8 });
        assert_eq!(req(PC + 0x18, [0x2000, 8, 0, 0, 0]), Request::RemoveFromTx { txn: None, addr: 0x2000, len: 8 });
        assert_eq!(req(PC + 0x1c, [0x3000, 16, 0, 0, 0]), Request::AddToGlobalTxIgnore { addr: 0x3000, len: 16 });
        assert_eq!(req(PC + 5, [0x3000, 16, 0, 0, 0]), Request::DoFlush { addr: 0x3000, len: 16 });
        // memcheck's GET_VBITS, helgrind's GET_ABITS, a reserved pmemcheck code.
        for code in [0x4d43_0008, 0x4847_012e, PC + 7] {
            assert_eq!(req(code, [0; 5]), Request::Other(code));
        }
    }

    #[test]
    fn answers_only_what_enables_pmdk_annotations() {
        let mut c = ClientState::default();
        assert_eq!(c.answer(&Request::RunningOnValgrind), Some(1));
        // Other tools' detection requests keep their defaults: PMDK sees neither memcheck,
        // helgrind nor DRD.
        for code in [0x4d43_0008, 0x4847_012e, 0x4452_0001] {
            assert_eq!(c.answer(&Request::Other(code)), None);
        }
        for r in [
            Request::SetClean { addr: 1, len: 2 },
            Request::StartTx { txn: None },
            Request::EndTx { txn: None },
            Request::AddToTx { txn: None, addr: 1, len: 2 },
            Request::DoFlush { addr: 1, len: 2 },
            Request::DoFence,
        ] {
            assert_eq!(c.answer(&r), None, "{r:?}");
        }
    }

    #[test]
    fn pmdk_detects_pmemcheck_by_registering_its_flag() {
        // util_init: register &_On_pmemcheck (4 bytes), check it, remove it.
        let mut c = ClientState::default();
        let flag = 0x7fff_f7dd_b18c;
        assert_eq!(c.answer(&Request::CheckIsPmemMapping { addr: flag, len: 4 }), Some(0));
        assert_eq!(c.answer(&Request::RegisterPmemMapping { addr: flag, len: 4 }), None);
        assert_eq!(c.answer(&Request::CheckIsPmemMapping { addr: flag, len: 4 }), Some(1));
        assert_eq!(c.answer(&Request::RemovePmemMapping { addr: flag, len: 4 }), None);
        assert_eq!(c.answer(&Request::CheckIsPmemMapping { addr: flag, len: 4 }), Some(0));
        assert!(c.mappings().is_empty());
    }

    #[test]
    fn registrations_merge_and_split_like_pmemchecks() {
        let mut c = ClientState::default();
        c.register(0x1000, 0x1000);
        c.register(0x2000, 0x1000); // adjacent: merged
        c.register(0x5000, 0x100);
        assert_eq!(c.mappings(), &[(0x1000, 0x3000), (0x5000, 0x5100)]);
        assert_eq!(c.check(0x1800, 0x1000), 1);
        assert_eq!(c.check(0x2800, 0x1000), 2);
        assert_eq!(c.check(0x3000, 0x100), 0);
        c.remove(0x1800, 0x100);
        assert_eq!(c.mappings(), &[(0x1000, 0x1800), (0x1900, 0x3000), (0x5000, 0x5100)]);
        c.register(0x1700, 0x300); // overlaps both halves: one range again
        assert_eq!(c.mappings(), &[(0x1000, 0x3000), (0x5000, 0x5100)]);
        c.remove(0, u64::MAX);
        assert!(c.mappings().is_empty());
    }
}
