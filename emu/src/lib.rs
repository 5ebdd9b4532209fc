//! ferrite's machine: the Unicorn engine, guest memory, instruction classification and the
//! emulator's side of everything the guest executes.
//!
//! Nothing here knows about Linux system calls (the `syscalls` crate) or about any detector (the
//! `analyses` crate): the machine runs guest code until it needs the outside world and says why.

#![deny(missing_docs)]

pub mod callstack;
pub mod client;
pub mod cpuid;
pub mod decode;
pub mod dirty;
pub mod events;
mod excp;
pub mod interrupt;
pub mod machine;
pub mod memory;
pub mod pm;
pub mod sched;
pub mod sync;
pub mod taint;

pub use machine::{
    sig, AddressSpace, DebugStop, EmuError, Exit, Fault, Machine, MachineConfig, MachineSnapshot, Reg, ThreadRegisters,
    WatchKind, GP_ORDER,
};
pub use memory::{Backing, HostBlock, MemError, Perm, Region, PAGE};
