//! Property tests: no mutation or truncation of a real program makes
//! `load_elf` or the `Symbolizer` panic.
//!
//! Mutations are aimed at the parts of the file the code actually reads
//! (ELF header, program headers, section headers, symbol tables, DWARF),
//! since a byte changed in the middle of `.text` tests nothing.

mod common;

use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use object::{Object, ObjectSection};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

use loader::{load_elf, Symbolizer};

const BASE: u64 = 0x5555_5555_4000;

/// A program and the byte ranges worth mutating in it.
struct Target {
    bytes: Vec<u8>,
    regions: Vec<Range<usize>>,
    /// Addresses to look up: entry, `main`/`_start`, and around them.
    probes: Vec<u64>,
}

fn target(bytes: Vec<u8>) -> Target {
    let file = object::File::parse(&*bytes).unwrap();
    let mut regions: Vec<Range<usize>> = Vec::new();
    regions.push(0..64);
    let phoff = u64::from_le_bytes(bytes[32..40].try_into().unwrap()) as usize;
    let phnum = u16::from_le_bytes(bytes[56..58].try_into().unwrap()) as usize;
    regions.push(phoff..phoff + 56 * phnum);
    let shoff = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
    let shnum = u16::from_le_bytes(bytes[60..62].try_into().unwrap()) as usize;
    regions.push(shoff..shoff + 64 * shnum);
    for section in file.sections() {
        let name = section.name().unwrap_or("");
        let wanted = name.starts_with(".debug")
            || [".symtab", ".strtab", ".dynsym", ".dynstr", ".dynamic", ".interp", ".tdata"].contains(&name);
        if let (true, Some((off, size))) = (wanted, section.file_range()) {
            if size > 0 {
                regions.push(off as usize..(off + size) as usize);
            }
        }
    }
    regions.push(0..bytes.len());

    let image = load_elf(&bytes, BASE).unwrap();
    let symbolizer = Symbolizer::new(&bytes, image.load_bias);
    let mut probes = vec![image.entry, 0, u64::MAX];
    for name in ["main", "_start", "helper", "twice"] {
        if let Some(addr) = symbolizer.symbol_address(name) {
            probes.extend([addr, addr + 1, addr + 4, addr + 9]);
        }
    }
    Target { bytes, regions, probes }
}

fn static_target() -> &'static Target {
    static T: OnceLock<Target> = OnceLock::new();
    T.get_or_init(|| target(common::static_program()))
}

fn tiny_target() -> &'static Target {
    static T: OnceLock<Target> = OnceLock::new();
    T.get_or_init(|| target(common::tiny_program()))
}

#[derive(Clone, Debug)]
enum Edit {
    Byte(u8),
    FlipBit(u8),
    /// A 64-bit value, little endian, at the position.
    Word(u64),
}

#[derive(Clone, Debug)]
struct Mutation {
    /// Index into the target's regions (taken modulo their number).
    region: usize,
    /// Position inside the region (taken modulo its length).
    pos: usize,
    edit: Edit,
}

fn edit() -> impl Strategy<Value = Edit> {
    let word = prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        Just(1 << 63),
        Just(1 << 40),
        Just(0x1000),
        Just(0x7fff_ffff_f000),
        0u64..0x200,
        any::<u64>(),
    ];
    prop_oneof![any::<u8>().prop_map(Edit::Byte), (0u8..8).prop_map(Edit::FlipBit), word.prop_map(Edit::Word),]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    (any::<usize>(), any::<usize>(), edit()).prop_map(|(region, pos, edit)| Mutation { region, pos, edit })
}

fn apply(target: &Target, mutations: &[Mutation], truncate: Option<usize>) -> Vec<u8> {
    let mut bytes = target.bytes.clone();
    for m in mutations {
        let region = &target.regions[m.region % target.regions.len()];
        let pos = region.start + m.pos % region.len().max(1);
        match m.edit {
            Edit::Byte(b) => bytes[pos] = b,
            Edit::FlipBit(bit) => bytes[pos] ^= 1 << bit,
            Edit::Word(w) => {
                let end = (pos + 8).min(bytes.len());
                bytes[pos..end].copy_from_slice(&w.to_le_bytes()[..end - pos]);
            }
        }
    }
    if let Some(len) = truncate {
        bytes.truncate(len % (bytes.len() + 1));
    }
    bytes
}

/// Runs everything the emulator does with a file; a panic becomes a test
/// failure that names the inputs, which proptest then shrinks.
fn exercise(target: &Target, bytes: &[u8]) -> Result<(), TestCaseError> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let bias = match load_elf(bytes, BASE) {
            Ok(image) => {
                assert!(image.segments.iter().all(|s| s.data.len() as u64 <= s.memsz));
                image.load_bias
            }
            Err(e) => {
                let _ = e.to_string();
                BASE
            }
        };
        let symbolizer = Symbolizer::new(bytes, bias);
        for &pc in &target.probes {
            let _ = symbolizer.lookup(pc);
        }
        let _ = symbolizer.symbol_address("main");
        let _ = symbolizer.symbols().count();
    }));
    outcome.map_err(|panic| {
        let msg = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        TestCaseError::fail(format!("panicked: {msg}"))
    })
}

/// `PROPTEST_CASES` overrides the case count, for longer runs by hand.
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases);
    ProptestConfig {
        cases,
        // Failures are saved next to this file and replayed first.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(2500))]

    #[test]
    fn tiny_program_mutations_never_panic(
        mutations in prop::collection::vec(mutation(), 1..6),
        truncate in prop::option::weighted(0.2, any::<usize>()),
    ) {
        let target = tiny_target();
        exercise(target, &apply(target, &mutations, truncate))?;
    }
}

proptest! {
    #![proptest_config(config(400))]

    #[test]
    fn static_program_mutations_never_panic(
        mutations in prop::collection::vec(mutation(), 1..6),
        truncate in prop::option::weighted(0.2, any::<usize>()),
    ) {
        let target = static_target();
        exercise(target, &apply(target, &mutations, truncate))?;
    }
}

/// Every prefix of the small program, since cuts are the commonest damage.
#[test]
fn every_truncation_of_tiny_program() {
    let target = tiny_target();
    for len in 0..target.bytes.len() {
        exercise(target, &target.bytes[..len]).unwrap_or_else(|e| panic!("cut at {len}: {e}"));
    }
}
