//! Files the loader must refuse, each with the right [`LoadError`] and a
//! message fit to print after `error: `.

mod common;

use common::*;
use loader::{load_elf, ElfKind, LoadError, NotExecutableKind};

const BASE: u64 = 0x5555_5555_4000;

fn err(bytes: &[u8]) -> LoadError {
    let e = load_elf(bytes, BASE).expect_err("the loader accepted a bad file");
    let msg = e.to_string();
    assert!(!msg.contains('\n') && !msg.ends_with('.'), "badly formed message: {msg:?}");
    assert!(!msg.starts_with(|c: char| c.is_uppercase()), "message not lowercase: {msg:?}");
    e
}

fn corrupt(bytes: &[u8], expected: &str) {
    match err(bytes) {
        LoadError::Corrupt(msg) => assert!(msg.contains(expected), "{msg:?} lacks {expected:?}"),
        other => panic!("expected Corrupt({expected:?}), got {other:?}"),
    }
}

#[test]
fn not_elf() {
    assert_eq!(err(b""), LoadError::NotElf);
    assert_eq!(err(b"hello world\n"), LoadError::NotElf);
    assert_eq!(err(b"myhost.example.org\n"), LoadError::NotElf);
    assert_eq!(err(b"\x7fEL"), LoadError::NotElf);
    assert_eq!(err(b"#!/bin/sh\necho hi\n"), LoadError::NotElf);
    if let Ok(hostname) = std::fs::read("/etc/hostname") {
        assert_eq!(err(&hostname), LoadError::NotElf);
    }
}

#[test]
fn truncated_real_program() {
    let bytes = static_program();
    for cut in [4, 5, 10, 63, 64, 200, bytes.len() / 2, bytes.len() - 1] {
        // Cutting off only section headers and debug info leaves a loadable
        // program, as it would for the kernel.
        match load_elf(&bytes[..cut], BASE) {
            Err(e) => assert_eq!(e, LoadError::Truncated, "cut at {cut}"),
            Ok(_) => assert!(cut > bytes.len() / 2, "cut at {cut} loaded"),
        }
    }
    assert_eq!(err(&bytes[..10]), LoadError::Truncated);
    assert_eq!(err(&bytes[..64]), LoadError::Truncated);
    assert_eq!(err(&bytes[..200]), LoadError::Truncated);
    assert_eq!(err(&bytes[..bytes.len() / 2]), LoadError::Truncated);
    // Cut one byte before the end of its last segment's file bytes: Linux runs it (the byte
    // lies in a page it maps anyway, and reads as zero), and so does the loader.
    let last = load_elf(&bytes, BASE).unwrap().segments.last().map(|s| s.file_offset + s.data.len() as u64).unwrap();
    let image = load_elf(&bytes[..last as usize - 1], BASE).expect("cut one byte into its last segment");
    let seg = image.segments.last().unwrap();
    assert_eq!(seg.data.len() as u64, last - 1 - seg.file_offset);
    assert_eq!(
        LoadError::Truncated.to_string(),
        "the ELF file is truncated: it ends before the data its headers describe"
    );
}

#[test]
fn class32() {
    // An i386 ELF header, as `gcc -m32` would start it.
    let mut v = vec![0u8; 52];
    v[..7].copy_from_slice(b"\x7fELF\x01\x01\x01");
    put16(&mut v, 16, 2);
    put16(&mut v, 18, 3);
    assert_eq!(err(&v), LoadError::Class32);
    assert_eq!(err(&v[..5]), LoadError::Class32);
    assert_eq!(LoadError::Class32.to_string(), "32-bit ELF is not supported: ferrite runs x86-64 programs");
}

#[test]
fn wrong_machine() {
    let mut v = minimal_static();
    put16(&mut v, 18, 183);
    assert_eq!(err(&v), LoadError::WrongMachine(183));
    assert_eq!(
        err(&v).to_string(),
        "programs for AArch64 (machine type 183) are not supported: ferrite runs x86-64 programs"
    );
    put16(&mut v, 18, 9999);
    assert_eq!(err(&v), LoadError::WrongMachine(9999));
    // Big-endian: a PowerPC64 header.
    let mut be = minimal_static();
    be[5] = 2;
    be[18..20].copy_from_slice(&21u16.to_be_bytes());
    assert_eq!(err(&be), LoadError::WrongMachine(21));
    be[18..20].copy_from_slice(&62u16.to_be_bytes());
    corrupt(&be, "big-endian");
    let mut odd = minimal_static();
    odd[4] = 7;
    corrupt(&odd, "unknown ELF class 7");
    let mut odd = minimal_static();
    odd[5] = 9;
    corrupt(&odd, "unknown ELF data encoding 9");
}

#[test]
fn not_executable() {
    let mut v = minimal_static();
    put16(&mut v, 16, 1);
    assert_eq!(err(&v), LoadError::NotExecutable(NotExecutableKind::Relocatable));
    assert_eq!(
        err(&v).to_string(),
        "not an executable: this is a relocatable object file (ET_REL); link it into a program first"
    );
    put16(&mut v, 16, 4);
    assert_eq!(err(&v), LoadError::NotExecutable(NotExecutableKind::Core));
    put16(&mut v, 16, 0);
    assert_eq!(err(&v), LoadError::NotExecutable(NotExecutableKind::Other(0)));
    let object = compile_bytes("object_err.o", "int f(void) { return 1; }\n", &["-c"]);
    assert_eq!(err(&object), LoadError::NotExecutable(NotExecutableKind::Relocatable));
}

#[test]
fn minimal_is_accepted() {
    let image = load_elf(&minimal_static(), BASE).unwrap();
    assert_eq!(image.kind, ElfKind::Static);
    assert_eq!(image.entry, 0x400100);
    assert_eq!(image.phdr_addr, 0x400040);
    assert_eq!((image.lowest, image.highest), (0x400000, 0x401000));
    // As ET_DYN without PT_DYNAMIC it is a static PIE at the base.
    let mut pie = minimal_static();
    put16(&mut pie, 16, 3);
    put64(&mut pie, 24, 0x100);
    put64(&mut pie, 64 + 16, 0);
    let image = load_elf(&pie, BASE).unwrap();
    assert_eq!(image.kind, ElfKind::StaticPie);
    assert_eq!((image.load_bias, image.entry), (BASE, BASE + 0x100));
}

#[test]
fn inconsistent_headers() {
    let rx = PF_R | PF_X;
    let rw = PF_R | PF_W;
    corrupt(&elf(2, 0x400100, &[], 0x200), "no program headers");
    corrupt(&elf(2, 0x400100, &[Ph { p_type: 4, ..load(rx, 0, 0x400000, 0x200) }], 0x200), "no non-empty PT_LOAD");
    corrupt(&elf(2, 0x400100, &[load(rx, 0, 0x400000, 0)], 0x200), "no non-empty PT_LOAD");
    corrupt(
        &elf(2, 0x400100, &[Ph { filesz: 0x300, ..load(rx, 0, 0x400000, 0x200) }], 0x400),
        "more bytes in the file",
    );
    corrupt(&elf(2, 0x400100, &[load(rx, 0, 0x400000, 0x200), load(rw, 0, 0x400100, 0x200)], 0x200), "overlaps");
    corrupt(
        &elf(2, 0x600100, &[load(rx, 0, 0x600000, 0x200), load(rw, 0, 0x400000, 0x200)], 0x200),
        "out of address order",
    );
    corrupt(&elf(2, 0x500000, &[load(rx, 0, 0x400000, 0x200)], 0x200), "entry point 0x500000");
    corrupt(
        &elf(2, 0x400100, &[load(rx, 0, 0x400000, 0x100), load(rw, 0, 0x400100, 0x100)], 0x200),
        "not inside any executable segment",
    );
    corrupt(&elf(2, 0x400100, &[Ph { memsz: 1 << 41, ..load(rx, 0, 0x400000, 0x200) }], 0x200), "absurd size");
    corrupt(
        &elf(2, 0x400100, &[Ph { memsz: 1 << 20, ..load(rx, 0, u64::MAX - 0x1000, 0x200) }], 0x200),
        "wraps around",
    );
    corrupt(&elf(2, 0x400100, &[load(rx, 0, 0xffff_8000_0000_0000, 0x200)], 0x200), "user address space");
    // An ET_DYN pushed past the top of user space by its base.
    let mut pie = elf(3, 0x100, &[load(rx, 0, 0, 0x200)], 0x200);
    assert!(load_elf(&pie, BASE).is_ok());
    assert!(matches!(load_elf(&pie, 0x7fff_ffff_f000), Err(LoadError::Corrupt(_))));
    assert!(matches!(load_elf(&pie, u64::MAX), Err(LoadError::Corrupt(_))));
    put16(&mut pie, 54, 32);
    corrupt(&pie, "32 bytes long instead of 56");

    let mut many = minimal_static();
    put16(&mut many, 56, 0xffff);
    corrupt(&many, "more than Linux accepts");
}

/// Go's linker gives a cgo program (a non-PIE executable) a `.tbss`-only PT_TLS at address 0,
/// below every segment. Linux never reads PT_TLS and such programs run: the loader keeps the
/// address as given instead of refusing the file.
#[test]
fn a_tls_segment_below_the_program_is_accepted() {
    let rx = PF_R | PF_X;
    let tls = Ph { p_type: 7, flags: PF_R, offset: 0, vaddr: 0, filesz: 0, memsz: 8 };
    let image = load_elf(&elf(2, 0x400100, &[load(rx, 0, 0x400000, 0x200), tls], 0x200), BASE).unwrap();
    let t = image.tls.expect("the PT_TLS template");
    assert_eq!((t.vaddr, t.filesz, t.memsz), (0, 0, 8));
}

#[test]
fn interp_checks() {
    let rx = PF_R | PF_X;
    let with_interp = |path: &[u8]| {
        let interp = Ph {
            p_type: 3,
            flags: PF_R,
            offset: 0x180,
            vaddr: 0x400180,
            filesz: path.len() as u64,
            memsz: path.len() as u64,
        };
        let mut v = elf(2, 0x400100, &[interp, load(rx, 0, 0x400000, 0x200)], 0x200);
        v[0x180..0x180 + path.len()].copy_from_slice(path);
        v
    };
    let image = load_elf(&with_interp(b"/lib/ld.so\0"), BASE).unwrap();
    assert_eq!(image.kind, ElfKind::Dynamic);
    assert_eq!(image.interp.as_deref(), Some("/lib/ld.so"));
    corrupt(&with_interp(b"/lib/ld.so"), "not NUL-terminated");
    // Linux opens the field as a C string: a NUL inside ends the path.
    let image = load_elf(&with_interp(b"/lib\0ld.so\0"), BASE).unwrap();
    assert_eq!(image.interp.as_deref(), Some("/lib"));
    corrupt(&with_interp(b"\0ld.so\0"), "is empty");
    corrupt(&with_interp(b"\0"), "not a valid path");
    corrupt(&with_interp(b"/lib/\xff\xfe\0"), "not valid UTF-8");
}

#[test]
fn past_end_of_file() {
    let rx = PF_R | PF_X;
    // Without section headers there is no telling, so it is truncation.
    let v = elf(2, 0x400100, &[load(rx, 0, 0x400000, 0x2000)], 0x200);
    assert_eq!(err(&v), LoadError::Truncated);
    // Bytes missing only in the file's last page read as zero, as Linux maps that page.
    let v = elf(2, 0x400100, &[load(rx, 0, 0x400000, 0x1000)], 0x200);
    let image = load_elf(&v, BASE).unwrap();
    assert_eq!((image.segments[0].data.len(), image.segments[0].memsz), (0x200, 0x1000));
    // With an intact section header table at the end of the file, an
    // offset past the end is corruption instead.
    let mut v = elf(2, 0x400100, &[load(rx, 0x100, 0x400000, 0x1000)], 0x200);
    put64(&mut v, 40, 0x1c0);
    put16(&mut v, 60, 1);
    corrupt(&v, "PT_LOAD segment 0 lies past the end of the file");
    let mut v = elf(2, 0x400100, &[load(rx, u64::MAX, 0x400000, 0x10)], 0x200);
    put64(&mut v, 40, 0x1c0);
    put16(&mut v, 60, 1);
    corrupt(&v, "past the end of the file");
    let mut v = minimal_static();
    put64(&mut v, 32, 0x1f0);
    assert_eq!(err(&v), LoadError::Truncated);
}
