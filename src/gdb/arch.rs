//! The x86-64 register set gdb gets: `gdbstub_arch`'s (general, segment, x87, SSE) with the
//! Linux additions after it — `orig_rax`, `fs_base` and `gs_base` — so that thread-local
//! variables (`errno`, `__thread` data) print. The target description names the GNU/Linux OS
//! ABI and no registers of its own, so gdb takes its built-in amd64 Linux layout, in which those
//! three follow `mxcsr` (registers 57–59).

use gdbstub::arch::{Arch, Registers};
use gdbstub_arch::x86::reg::id::X86_64CoreRegId;
use gdbstub_arch::x86::reg::X86_64CoreRegs;

/// x86-64 for a Linux process.
pub enum X86_64Linux {}

impl Arch for X86_64Linux {
    type Usize = u64;
    type Registers = LinuxRegs;
    type RegId = X86_64CoreRegId;
    type BreakpointKind = usize;

    fn target_description_xml() -> Option<&'static str> {
        Some(
            r#"<target version="1.0"><architecture>i386:x86-64</architecture><osabi>GNU/Linux</osabi><feature name="org.gnu.gdb.i386.sse"></feature></target>"#,
        )
    }
}

/// The core registers and the Linux ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinuxRegs {
    /// rax..r15, rip, eflags, segments, x87, SSE.
    pub core: X86_64CoreRegs,
    /// The system call number the kernel was entered with (-1 outside one).
    pub orig_rax: u64,
    /// The FS segment base (a thread's TLS block).
    pub fs_base: u64,
    /// The GS segment base.
    pub gs_base: u64,
}

/// Bytes of the core registers in a `g` packet (`X86_64CoreRegs`' layout).
const CORE_BYTES: usize = 0x218;

impl Registers for LinuxRegs {
    type ProgramCounter = u64;

    fn pc(&self) -> u64 {
        self.core.rip
    }

    fn gdb_serialize(&self, mut write_byte: impl FnMut(Option<u8>)) {
        self.core.gdb_serialize(&mut write_byte);
        for r in [self.orig_rax, self.fs_base, self.gs_base] {
            r.to_le_bytes().iter().for_each(|b| write_byte(Some(*b)));
        }
    }

    fn gdb_deserialize(&mut self, bytes: &[u8]) -> Result<(), ()> {
        self.core.gdb_deserialize(bytes)?;
        let word = |i: usize| {
            bytes
                .get(CORE_BYTES + 8 * i..CORE_BYTES + 8 * i + 8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        };
        if let (Some(o), Some(f), Some(g)) = (word(0), word(1), word(2)) {
            (self.orig_rax, self.fs_base, self.gs_base) = (o, f, g);
        }
        Ok(())
    }
}
