//! Shared test helpers: compiling C programs with the system `gcc` and
//! building ELF files by hand.
//!
//! Compiled programs are cached in Cargo's per-target scratch directory
//! under a name derived from the source and flags, so a second test run
//! (and every test in one run) reuses them instead of invoking gcc again.

#![allow(dead_code)]

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A C program with thread-locals, an inlined helper and a `main` whose
/// line the tests look for.
pub const PROGRAM: &str = r#"#include <stdio.h>

__thread int counter = 5;
__thread char buffer[4096];
volatile int sink;

static inline __attribute__((always_inline)) void bump(int x)
{
    sink += x;
    sink ^= 3;
}

__attribute__((noinline)) int helper(int x)
{
    return x * 3 + counter;
}

int main(int argc, char **argv)
{
    buffer[0] = (char)argc;
    bump(argc);
    printf("%d %s\n", helper(argc) + buffer[0], argv[0]);
    return 0;
}
"#;

/// A program without libc: a few kilobytes with full DWARF, so random
/// mutations often land in something that matters.
pub const TINY: &str = r#"static int twice(int x) { return x * 2; }

__attribute__((noreturn)) void _start(void)
{
    int code = twice(21);
    for (;;)
        __asm__ volatile("syscall" : : "a"(60), "D"(code));
}
"#;

/// The 1-based line of the first line of `source` containing `needle`.
pub fn line_of(source: &str, needle: &str) -> u32 {
    let index =
        source.lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle:?} not in the source"));
    index as u32 + 1
}

/// Compiles `source` (saved as `<name>.c`) with `gcc <flags>` and returns
/// the path of the output. Panics with gcc's message if it fails.
pub fn compile(name: &str, source: &str, flags: &[&str]) -> PathBuf {
    // Tests in one process share programs; compiling each once is faster.
    static LOCK: Mutex<()> = Mutex::new(());
    static UNIQUE: AtomicU64 = AtomicU64::new(0);
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());

    let mut hasher = DefaultHasher::new();
    (source, flags).hash(&mut hasher);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("loader-tests")
        .join(format!("{name}-{:016x}", hasher.finish()));
    let c_file = dir.join(format!("{name}.c"));
    let output = dir.join(name);
    if output.exists() {
        return output;
    }
    std::fs::create_dir_all(&dir).expect("cannot create the test scratch directory");
    // Other test processes may be compiling the same program: write under
    // unique names and rename, so nobody reads a half-written file.
    let unique = format!("{}-{}", std::process::id(), UNIQUE.fetch_add(1, Ordering::Relaxed));
    let partial_c = dir.join(format!("{name}.c.{unique}"));
    std::fs::write(&partial_c, source).expect("cannot write the C source");
    std::fs::rename(&partial_c, &c_file).expect("cannot move the C source into place");
    let partial = dir.join(format!("{name}.partial-{unique}"));
    let result = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(&partial)
        .arg(&c_file)
        .output()
        .expect("cannot run gcc: the loader tests need the system C compiler");
    assert!(result.status.success(), "gcc {flags:?} failed:\n{}", String::from_utf8_lossy(&result.stderr));
    std::fs::rename(&partial, &output).expect("cannot move the compiled program into place");
    output
}

pub fn compile_bytes(name: &str, source: &str, flags: &[&str]) -> Vec<u8> {
    std::fs::read(compile(name, source, flags)).expect("cannot read the compiled program")
}

pub fn static_program() -> Vec<u8> {
    compile_bytes("prog_static", PROGRAM, &["-static", "-g", "-O1"])
}

pub fn static_pie_program() -> Vec<u8> {
    compile_bytes("prog_static_pie", PROGRAM, &["-static-pie", "-fPIE", "-g", "-O1"])
}

pub fn tiny_program() -> Vec<u8> {
    compile_bytes("tiny", TINY, &["-static", "-nostdlib", "-g", "-O1", "-fno-asynchronous-unwind-tables"])
}

/// One program header for [`elf`].
#[derive(Clone, Copy, Debug)]
pub struct Ph {
    pub p_type: u32,
    pub flags: u32,
    pub offset: u64,
    pub vaddr: u64,
    pub filesz: u64,
    pub memsz: u64,
}

pub const PT_LOAD: u32 = 1;
pub const PF_X: u32 = 1;
pub const PF_W: u32 = 2;
pub const PF_R: u32 = 4;

/// A `PT_LOAD` of `size` bytes from file offset `offset`.
pub fn load(flags: u32, offset: u64, vaddr: u64, size: u64) -> Ph {
    Ph { p_type: PT_LOAD, flags, offset, vaddr, filesz: size, memsz: size }
}

/// A hand-made x86-64 ELF of `len` bytes: header, program headers at
/// offset 64, zeros after. No section headers (`e_shoff` is 0).
pub fn elf(e_type: u16, entry: u64, phdrs: &[Ph], len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len.max(64 + 56 * phdrs.len())];
    v[..4].copy_from_slice(b"\x7fELF");
    v[4] = 2; // ELFCLASS64
    v[5] = 1; // little endian
    v[6] = 1; // EV_CURRENT
    put16(&mut v, 16, e_type);
    put16(&mut v, 18, 62); // EM_X86_64
    put32(&mut v, 20, 1);
    put64(&mut v, 24, entry);
    put64(&mut v, 32, 64); // e_phoff
    put16(&mut v, 52, 64); // e_ehsize
    put16(&mut v, 54, 56); // e_phentsize
    put16(&mut v, 56, phdrs.len() as u16);
    put16(&mut v, 58, 64); // e_shentsize
    for (i, ph) in phdrs.iter().enumerate() {
        let o = 64 + 56 * i;
        put32(&mut v, o, ph.p_type);
        put32(&mut v, o + 4, ph.flags);
        put64(&mut v, o + 8, ph.offset);
        put64(&mut v, o + 16, ph.vaddr);
        put64(&mut v, o + 24, ph.vaddr);
        put64(&mut v, o + 32, ph.filesz);
        put64(&mut v, o + 40, ph.memsz);
        put64(&mut v, o + 48, 0x1000);
    }
    v
}

/// The smallest static executable the loader accepts: one read-execute
/// segment covering the whole 0x200-byte file at 0x400000.
pub fn minimal_static() -> Vec<u8> {
    elf(2, 0x400100, &[load(PF_R | PF_X, 0, 0x400000, 0x200)], 0x200)
}

pub fn put16(v: &mut [u8], off: usize, x: u16) {
    v[off..off + 2].copy_from_slice(&x.to_le_bytes());
}

pub fn put32(v: &mut [u8], off: usize, x: u32) {
    v[off..off + 4].copy_from_slice(&x.to_le_bytes());
}

pub fn put64(v: &mut [u8], off: usize, x: u64) {
    v[off..off + 8].copy_from_slice(&x.to_le_bytes());
}
