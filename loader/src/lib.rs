//! Everything ferrite needs to know about a program before the first
//! instruction runs: where its segments go, what the initial stack holds,
//! and how to turn a guest address back into a function and a source line.
//!
//! The crate does the work of Linux's `load_elf_binary` and
//! `create_elf_tables` (fs/binfmt_elf.c) but stops short of touching guest
//! memory: [`load_elf`] returns an [`Image`] whose [`Segment`]s the emulator
//! maps and fills, and [`build_initial_stack`] returns the bytes the emulator
//! writes just below the stack top. [`Symbolizer`] reads `.symtab`,
//! `.dynsym` and DWARF so that reports can name functions and lines, from the
//! object itself or from its separate debug file ([`find_debug_file`]: by
//! build ID or `.gnu_debuglink`, as gdb finds it). That search is the one
//! place where the crate reads host files itself; [`input`] is how every file
//! ferrite takes as input is read (regular files only, with a size cap).
//!
//! What is left out, on purpose:
//! - Relocation and symbol binding. A static-PIE relocates itself and a
//!   dynamic executable is relocated by its interpreter (`ld.so`), which the
//!   emulator loads with a second [`load_elf`] call; the kernel does no more.
//! - Memory itself: no mmap, no page permissions, no zeroing of bss. Two
//!   segments may share a page (the kernel maps one over the other), so the
//!   emulator must merge permissions for such a page.
//! - Address-space randomisation: the caller picks the PIE base and the
//!   stack top, so runs are reproducible.
//! - The vDSO (`AT_SYSINFO_EHDR`), 32-bit programs, big-endian files and
//!   every architecture other than x86-64.
//! - Split DWARF (`.dwo`), dwz supplementary files (`.gnu_debugaltlink`)
//!   and debuginfod: only the debug information inside the object and its
//!   separate debug file is used.
//!
//! Every function here accepts arbitrary bytes without panicking; bad input
//! becomes a [`LoadError`] (loading) or an empty [`SourceLoc`] (symbols).

#![deny(missing_docs)]

mod atomics;
mod elf;
pub mod input;
pub mod script;
mod stack;
mod symbols;

pub use elf::{load_elf, ElfKind, Image, NotExecutableKind, Prot, Segment, TlsTemplate, PAGE_SIZE, USER_ADDRESS_LIMIT};
pub use stack::{
    build_initial_stack, InitialStack, StackSpec, AT_BASE, AT_BASE_PLATFORM, AT_CLKTCK, AT_EGID, AT_ENTRY, AT_EUID,
    AT_EXECFD, AT_EXECFN, AT_FLAGS, AT_GID, AT_HWCAP, AT_HWCAP2, AT_IGNORE, AT_MINSIGSTKSZ, AT_NOTELF, AT_NULL,
    AT_PAGESZ, AT_PHDR, AT_PHENT, AT_PHNUM, AT_PLATFORM, AT_RANDOM, AT_SECURE, AT_SYSINFO_EHDR, AT_UID,
};
pub use symbols::{
    find_debug_file, in_system_header, is_cxx_atomic_header, DebugFile, SourceLoc, Symbolizer, DEFAULT_DEBUG_DIR,
};

/// Why a file cannot be loaded.
///
/// Each message is one lowercase line without a trailing period, meant to
/// be printed after `error: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The file does not start with `\x7fELF`.
    #[error("not an ELF file: it does not start with the ELF magic bytes")]
    NotElf,
    /// The file ends before the data its own headers describe.
    #[error("the ELF file is truncated: it ends before the data its headers describe")]
    Truncated,
    /// An ELFCLASS32 file.
    #[error("32-bit ELF is not supported: ferrite runs x86-64 programs")]
    Class32,
    /// An ELF file for another architecture; holds `e_machine`.
    #[error("{} are not supported: ferrite runs x86-64 programs", elf::machine_description(*.0))]
    WrongMachine(u16),
    /// A valid ELF file that is not a program.
    #[error("not an executable: this is {0}")]
    NotExecutable(NotExecutableKind),
    /// Headers that contradict each other or the file; the string says how.
    #[error("corrupt ELF file: {0}")]
    Corrupt(String),
}
