//! Loading and symbolizing programs built by the system gcc: static,
//! static-PIE and dynamic executables, a shared library and `ld.so`.

mod common;

use common::*;
use loader::{load_elf, ElfKind, Image, LoadError, NotExecutableKind, Symbolizer, PAGE_SIZE};

const PIE_BASE: u64 = 0x5555_5555_4000;

/// Checks what must hold for every image, whatever its kind.
fn check_layout(bytes: &[u8], image: &Image) {
    assert!(!image.segments.is_empty());
    for pair in image.segments.windows(2) {
        assert!(
            pair[0].end() <= pair[1].vaddr,
            "segments overlap or are out of order: {:#x}..{:#x} then {:#x}",
            pair[0].vaddr,
            pair[0].end(),
            pair[1].vaddr
        );
    }
    for s in &image.segments {
        assert!(s.data.len() as u64 <= s.memsz);
        assert!(image.lowest <= s.vaddr && s.end() <= image.highest);
        assert!(image.brk_start >= s.end());
    }
    assert_eq!(image.lowest % PAGE_SIZE, 0);
    assert_eq!(image.highest % PAGE_SIZE, 0);
    assert_eq!(image.brk_start, image.highest);
    assert!(
        image.segments.iter().any(|s| s.prot.exec && s.vaddr <= image.entry && image.entry < s.end()),
        "entry {:#x} is not in an executable segment",
        image.entry
    );
    assert_eq!(image.phent, 56);
    // AT_PHDR must point at a copy of the file's program headers.
    let phoff = u64::from_le_bytes(bytes[32..40].try_into().unwrap()) as usize;
    let table = &bytes[phoff..phoff + 56 * image.phnum as usize];
    let segment = image
        .segments
        .iter()
        .find(|s| s.vaddr <= image.phdr_addr && image.phdr_addr < s.vaddr + s.data.len() as u64)
        .expect("AT_PHDR is not inside a segment's file data");
    let off = (image.phdr_addr - segment.vaddr) as usize;
    assert_eq!(segment.data.get(off..off + table.len()), Some(table));
}

/// Checks symbols and line lookups of a build of [`PROGRAM`].
fn check_symbols(bytes: Vec<u8>, image: &Image) {
    let symbolizer = Symbolizer::new(bytes, image.load_bias);
    let main = symbolizer.symbol_address("main").expect("no main symbol");
    assert!(image.segments.iter().any(|s| s.prot.exec && s.vaddr <= main && main < s.end()));

    let loc = symbolizer.lookup(main);
    assert_eq!(loc.function.as_deref(), Some("main"));
    let file = loc.file.expect("no file for main");
    assert!(file.ends_with("prog_static.c") || file.ends_with("prog_static_pie.c"), "{file}");
    assert!(file.starts_with('/'), "DWARF paths should be joined with comp_dir: {file}");
    let want = line_of(PROGRAM, "int main");
    let line = loc.line.expect("no line for main");
    assert!(line.abs_diff(want) <= 1, "main is on line {want}, lookup says {line}");

    // Without DWARF (libc is not built with it) the symbol table still
    // names the function.
    let printf = symbolizer.symbol_address("printf").expect("no printf symbol");
    let loc = symbolizer.lookup(printf + 1);
    assert_eq!(loc.function.as_deref(), Some("printf"));
    assert_eq!(loc.file, None);

    // Functions are listed with their guest addresses.
    let (_, addr, size) = symbolizer.symbols().find(|(name, _, _)| *name == "helper").expect("helper not listed");
    assert_eq!(Some(addr), symbolizer.symbol_address("helper"));
    assert!(size > 0);
    assert_eq!(symbolizer.lookup(addr).function.as_deref(), Some("helper"));

    // Somewhere in main's code is the inlined body of `bump`, reported as
    // the innermost function with its own lines.
    let (_, main_addr, main_size) = symbolizer.symbols().find(|(n, _, _)| *n == "main").unwrap();
    let bump_lines = line_of(PROGRAM, "sink += x")..=line_of(PROGRAM, "sink ^= 3");
    let inlined = (main_addr..main_addr + main_size)
        .map(|pc| symbolizer.lookup(pc))
        .find(|loc| loc.function.as_deref() == Some("bump"))
        .expect("no address in main is attributed to the inlined bump");
    assert!(bump_lines.contains(&inlined.line.unwrap()), "{inlined:?}");

    // Lookups are cached and give the same answer twice.
    assert_eq!(symbolizer.lookup(main), symbolizer.lookup(main));
    // Addresses outside the program know nothing.
    assert_eq!(symbolizer.lookup(0x10).function, None);
    assert_eq!(symbolizer.symbol_address("no_such_symbol_anywhere"), None);
}

fn check_tls(image: &Image) {
    let tls = image.tls.expect("no PT_TLS");
    // `counter` (initialised) and the 4 KiB `buffer` are in the template.
    assert!(tls.filesz >= 4 && tls.memsz >= 4096 + 4, "{tls:?}");
    assert!(tls.filesz <= tls.memsz);
    assert!(image.lowest <= tls.vaddr && tls.vaddr < image.highest);
}

#[test]
fn static_executable() {
    let bytes = static_program();
    let image = load_elf(&bytes, PIE_BASE).unwrap();
    assert_eq!(image.kind, ElfKind::Static);
    assert_eq!(image.load_bias, 0);
    assert_eq!(image.interp, None);
    assert!(!image.stack_exec);
    check_layout(&bytes, &image);
    check_tls(&image);
    check_symbols(bytes, &image);
}

#[test]
fn static_pie_executable() {
    let bytes = static_pie_program();
    let image = load_elf(&bytes, PIE_BASE).unwrap();
    assert_eq!(image.kind, ElfKind::StaticPie);
    assert_eq!(image.load_bias, PIE_BASE);
    assert_eq!(image.lowest, PIE_BASE);
    assert_eq!(image.interp, None);
    check_layout(&bytes, &image);
    check_tls(&image);
    check_symbols(bytes.clone(), &image);

    // Another base moves everything by the difference.
    let other = load_elf(&bytes, 0x7000_0000_0000).unwrap();
    assert_eq!(other.entry - other.load_bias, image.entry - image.load_bias);
    // An unaligned base is rounded down to a page.
    let unaligned = load_elf(&bytes, PIE_BASE + 123).unwrap();
    assert_eq!(unaligned.load_bias, PIE_BASE);
}

#[test]
fn dynamic_executables() {
    for (name, flags, e_type_is_dyn) in [
        ("prog_dyn_pie", &["-g", "-O1", "-pie", "-fPIE"][..], true),
        ("prog_dyn_nopie", &["-g", "-O1", "-no-pie"][..], false),
    ] {
        let bytes = compile_bytes(name, PROGRAM, flags);
        let image = load_elf(&bytes, PIE_BASE).unwrap();
        assert_eq!(image.kind, ElfKind::Dynamic, "{name}");
        assert_eq!(image.interp.as_deref(), Some("/lib64/ld-linux-x86-64.so.2"));
        assert_eq!(image.load_bias, if e_type_is_dyn { PIE_BASE } else { 0 });
        check_layout(&bytes, &image);
        // `main` is found through the symbol table and DWARF of a PIE too.
        let symbolizer = Symbolizer::new(&bytes, image.load_bias);
        let main = symbolizer.symbol_address("main").unwrap();
        assert_eq!(symbolizer.lookup(main).function.as_deref(), Some("main"));
    }
}

#[test]
fn interpreter_loads_as_shared_object() {
    let Ok(bytes) = std::fs::read("/lib64/ld-linux-x86-64.so.2") else {
        eprintln!("skipped: no /lib64/ld-linux-x86-64.so.2 on this machine");
        return;
    };
    let image = load_elf(&bytes, 0x7fff_f7fc_0000).unwrap();
    assert_eq!(image.kind, ElfKind::SharedObject);
    assert_eq!(image.interp, None);
    assert_eq!(image.lowest, 0x7fff_f7fc_0000);
    check_layout(&bytes, &image);
    // The dynamic symbol table is enough to find exported functions.
    let symbolizer = Symbolizer::new(&bytes, image.load_bias);
    let dl = symbolizer
        .symbol_address("_dl_catch_exception")
        .or_else(|| symbolizer.symbol_address("__tls_get_addr"))
        .expect("no exported symbol in ld.so");
    assert!(image.lowest <= dl && dl < image.highest);
}

#[test]
fn shared_library_without_entry_is_refused() {
    let bytes = compile_bytes("libshared.so", "int f(int x) { return x + 1; }\n", &["-shared", "-fPIC"]);
    let err = load_elf(&bytes, PIE_BASE).unwrap_err();
    assert_eq!(err, LoadError::NotExecutable(NotExecutableKind::SharedLibrary));
    assert_eq!(err.to_string(), "not an executable: this is a shared library without an entry point");
}

#[test]
fn object_file_is_refused() {
    let bytes = compile_bytes("object.o", PROGRAM, &["-c", "-g"]);
    let err = load_elf(&bytes, PIE_BASE).unwrap_err();
    assert_eq!(err, LoadError::NotExecutable(NotExecutableKind::Relocatable));
    // The symbolizer does not care what kind of ELF file it reads.
    let symbolizer = Symbolizer::new(&bytes, 0);
    assert!(symbolizer.symbol_address("main").is_some());
}

#[test]
fn stripped_program_has_no_names() {
    let bytes = compile_bytes("prog_stripped", PROGRAM, &["-static", "-O1", "-s"]);
    let image = load_elf(&bytes, PIE_BASE).unwrap();
    check_layout(&bytes, &image);
    let symbolizer = Symbolizer::new(bytes, image.load_bias);
    assert_eq!(symbolizer.symbol_address("main"), None);
    assert_eq!(symbolizer.lookup(image.entry), Default::default());
}

#[test]
fn executable_stack_is_reported() {
    let bytes = compile_bytes("tiny_execstack", TINY, &["-static", "-nostdlib", "-z", "execstack"]);
    let image = load_elf(&bytes, PIE_BASE).unwrap();
    assert!(image.stack_exec);
    assert_eq!(image.kind, ElfKind::Static);
    assert_eq!(image.tls, None);
}

#[test]
fn compressed_and_older_dwarf() {
    for (name, flag) in [("prog_gz", "-gz=zlib"), ("prog_dwarf4", "-gdwarf-4")] {
        let bytes = compile_bytes(name, PROGRAM, &["-static", "-g", "-O1", flag]);
        let image = load_elf(&bytes, PIE_BASE).unwrap();
        let symbolizer = Symbolizer::new(bytes, image.load_bias);
        let loc = symbolizer.lookup(symbolizer.symbol_address("main").unwrap());
        assert_eq!(loc.function.as_deref(), Some("main"), "{name}");
        assert!(loc.file.unwrap().ends_with(&format!("{name}.c")), "{name}");
        assert!(loc.line.unwrap().abs_diff(line_of(PROGRAM, "int main")) <= 1, "{name}");
    }
}

#[test]
fn cpp_names_are_demangled() {
    const CPP: &str = "namespace ns {\n\
        __attribute__((noinline)) int f(int x) { return x + 1; }\n\
        }\n\
        int main(int argc, char **) { return ns::f(argc); }\n";
    for (name, debug) in [("cpp_dwarf", "-g"), ("cpp_symtab", "-g0")] {
        let bytes = compile_bytes(name, CPP, &["-x", "c++", "-static", "-O1", debug]);
        let image = load_elf(&bytes, PIE_BASE).unwrap();
        let symbolizer = Symbolizer::new(bytes, image.load_bias);
        // Symbol names are looked up as they are in the symbol table.
        let f = symbolizer.symbol_address("_ZN2ns1fEi").expect("no ns::f symbol");
        let function = symbolizer.lookup(f).function.unwrap();
        assert!(function.starts_with("ns::f"), "{name}: {function}");
    }
}

/// `has_line` answers what `lookup(..).line.is_some()` does, from the line table alone, for every
/// function symbol's first and second byte and every address of `main` (which holds an inlined
/// body), with DWARF plain, compressed and version 4, and for libc's functions, which have none.
#[test]
fn has_line_agrees_with_lookup() {
    for (name, flag) in [("prog_lines", "-g"), ("prog_lines_gz", "-gz=zlib"), ("prog_lines_dwarf4", "-gdwarf-4")] {
        let bytes = compile_bytes(name, PROGRAM, &["-static", "-g", "-O1", flag]);
        let image = load_elf(&bytes, PIE_BASE).unwrap();
        // A symbolizer that has looked nothing up answers `has_line` without its lookup cache.
        let lines = Symbolizer::new(&bytes, image.load_bias);
        let lookups = Symbolizer::new(&bytes, image.load_bias);
        let (_, main, main_size) = lookups.symbols().find(|(n, _, _)| *n == "main").unwrap();
        let mut probes: Vec<u64> = lookups.symbols().flat_map(|(_, a, _)| [a, a + 1]).collect();
        probes.extend(main..main + main_size);
        let (mut with, mut without) = (0, 0);
        for pc in probes {
            let want = lookups.lookup(pc).line.is_some();
            assert_eq!(lines.has_line(pc), want, "{name}: {pc:#x}");
            assert_eq!(lookups.has_line(pc), want, "{name}: {pc:#x}, cached");
            if want {
                with += 1;
            } else {
                without += 1;
            }
        }
        assert!(with > 0 && without > 1000, "{name}: {with} with lines, {without} without");
        assert!(!lines.has_line(lines.symbol_address("printf").unwrap()), "{name}");
    }
}

/// The C11 `_Atomic` objects at fixed addresses, from DWARF: an atomic global and a function's
/// atomic static, the atomic member of a global structure and of each element of a global array,
/// an array of atomics, an atomic through a typedef; not a plain global, a pointer to an atomic,
/// nor a thread-local atomic. With a static-PIE's bias, and at -O0. (gcc's DWARF 4, `-gdwarf-4`,
/// has no `DW_TAG_atomic_type`: it describes `head` as a plain pointer, and nothing is found.)
#[test]
fn atomic_objects_are_the_declared_atomics() {
    const ATOMICS: &str = "#include <stdatomic.h>\n\
        struct node { long key; _Atomic(struct node *) next; };\n\
        typedef _Atomic int flag_t;\n\
        _Atomic(struct node *) head;\n\
        struct { long a; _Atomic long b; long c; } pair;\n\
        struct node nodes[3];\n\
        _Atomic unsigned counts[4];\n\
        flag_t ready;\n\
        long plain;\n\
        _Atomic int *pointer;\n\
        _Thread_local _Atomic int per_thread;\n\
        int bump(void) { static _Atomic int calls; return atomic_fetch_add(&calls, 1) + per_thread; }\n\
        int main(void) { plain = (long)&pointer; return bump() + (int)atomic_load(&head) + pair.a + nodes[0].key \
            + counts[1] + ready; }\n";
    for (name, flags) in [
        ("atomics_static", &["-static", "-g", "-O1"][..]),
        ("atomics_pie", &["-static-pie", "-fPIE", "-g", "-O1"][..]),
        ("atomics_o0", &["-static", "-g", "-O0"][..]),
    ] {
        let bytes = compile_bytes(name, ATOMICS, flags);
        let image = load_elf(&bytes, PIE_BASE).unwrap();
        let s = Symbolizer::new(&bytes, image.load_bias);
        let at = |sym: &str| s.symbol_address(sym).unwrap_or_else(|| panic!("{name}: no {sym}"));
        let mut want = vec![
            (at("head"), at("head") + 8),
            (at("pair") + 8, at("pair") + 16),
            (at("counts"), at("counts") + 16),
            (at("ready"), at("ready") + 4),
        ];
        want.extend((0..3).map(|i| (at("nodes") + 16 * i + 8, at("nodes") + 16 * i + 16)));
        let got = s.atomic_objects();
        for w in &want {
            assert!(got.iter().any(|g| g.0 <= w.0 && w.1 <= g.1), "{name}: {w:x?} not in {got:x?}");
        }
        for sym in ["plain", "pointer"] {
            let a = at(sym);
            assert!(!got.iter().any(|g| g.0 <= a && a < g.1), "{name}: {sym} in {got:x?}");
        }
        // head, pair.b, the three nodes' next, counts, ready and bump's static: adjacent ones merge.
        let total: u64 = got.iter().map(|g| g.1 - g.0).sum();
        assert_eq!(total, 8 + 8 + 3 * 8 + 16 + 4 + 4, "{name}: {got:x?}");
    }
}
