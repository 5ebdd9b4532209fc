//! Bad input is ferrite's error, not a crash: programs that are not runnable x86-64 ELF files,
//! unknown report formats and unreadable or corrupt reports each end ferrite with status 2 and
//! exactly one `error: ` line on stderr, never a panic; `--help` documents the main options.

mod common;

use std::path::Path;

use common::*;

/// Asserts the run is a clean ferrite error: status 2, one `error: ` line, no panic.
#[track_caller]
fn assert_clean_error(run: &Run) {
    assert!(!run.stderr.contains("panicked"), "ferrite panicked\n{}", run.describe());
    run.assert_code(2);
    let errors = error_lines(&run.stderr);
    assert_eq!(errors.len(), 1, "expected exactly one `error: ` line\n{}", run.describe());
}

/// `ferrite run -- <program>` must fail cleanly, and mention `mention` in its error line.
#[track_caller]
fn assert_run_rejects(program: &Path, mention: &str) -> Run {
    let run = Ferrite::run(program).go();
    assert_clean_error(&run);
    assert!(error_lines(&run.stderr)[0].contains(mention), "the error should mention `{mention}`\n{}", run.describe());
    run
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn text_file_is_not_an_elf() {
    let hostname = Path::new("/etc/hostname");
    if hostname.is_file() {
        assert_run_rejects(hostname, "/etc/hostname");
    }
    let dir = scratch();
    let p = write_file(dir.path(), "script.txt", b"#!/bin/sh\necho hello\n");
    assert_run_rejects(&p, "script.txt");
}

#[test]
fn empty_file_is_not_an_elf() {
    let dir = scratch();
    let p = write_file(dir.path(), "empty", b"");
    assert_run_rejects(&p, "empty");
}

#[test]
fn missing_program() {
    let dir = scratch();
    assert_run_rejects(&dir.path().join("no-such-program"), "no-such-program");
}

#[test]
fn truncated_programs() {
    let bytes = std::fs::read(guest("null_deref")).unwrap();
    let dir = scratch();
    for (name, len) in
        [("first-16", 16), ("first-100", 100), ("first-half", bytes.len() / 2), ("all-but-one", bytes.len() - 1)]
    {
        let p = write_file(dir.path(), name, &bytes[..len]);
        let run = Ferrite::run(&p).go();
        // Cutting off the tail may leave a loadable program (the section headers and debug info
        // come last); then it must still not crash ferrite. Anything shorter than the headers
        // or the loadable data is an error.
        assert!(!run.stderr.contains("panicked"), "{name}: ferrite panicked\n{}", run.describe());
        if name != "all-but-one" {
            assert_clean_error(&run);
        }
    }
}

/// A 52-byte ELF32 header for i386 (ET_EXEC, no program headers).
fn elf32_header() -> Vec<u8> {
    let mut h = vec![0x7f, b'E', b'L', b'F', 1, 1, 1, 0];
    h.resize(16, 0);
    h.extend(2u16.to_le_bytes()); // e_type: ET_EXEC
    h.extend(3u16.to_le_bytes()); // e_machine: EM_386
    h.extend(1u32.to_le_bytes()); // e_version
    h.extend(0x0804_8000u32.to_le_bytes()); // e_entry
    h.extend(0u32.to_le_bytes()); // e_phoff
    h.extend(0u32.to_le_bytes()); // e_shoff
    h.extend(0u32.to_le_bytes()); // e_flags
    h.extend(52u16.to_le_bytes()); // e_ehsize
    h.extend(32u16.to_le_bytes()); // e_phentsize
    h.extend(0u16.to_le_bytes()); // e_phnum
    h.extend(40u16.to_le_bytes()); // e_shentsize
    h.extend(0u16.to_le_bytes()); // e_shnum
    h.extend(0u16.to_le_bytes()); // e_shstrndx
    assert_eq!(h.len(), 52);
    h
}

/// A 64-byte ELF64 header for `machine` (ET_EXEC, no program headers).
fn elf64_header(machine: u16) -> Vec<u8> {
    let mut h = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0];
    h.resize(16, 0);
    h.extend(2u16.to_le_bytes()); // e_type: ET_EXEC
    h.extend(machine.to_le_bytes()); // e_machine
    h.extend(1u32.to_le_bytes()); // e_version
    h.extend(0x40_0000u64.to_le_bytes()); // e_entry
    h.extend(0u64.to_le_bytes()); // e_phoff
    h.extend(0u64.to_le_bytes()); // e_shoff
    h.extend(0u32.to_le_bytes()); // e_flags
    h.extend(64u16.to_le_bytes()); // e_ehsize
    h.extend(56u16.to_le_bytes()); // e_phentsize
    h.extend(0u16.to_le_bytes()); // e_phnum
    h.extend(64u16.to_le_bytes()); // e_shentsize
    h.extend(0u16.to_le_bytes()); // e_shnum
    h.extend(0u16.to_le_bytes()); // e_shstrndx
    assert_eq!(h.len(), 64);
    h
}

#[test]
fn elf32_is_rejected() {
    let dir = scratch();
    let p = write_file(dir.path(), "elf32", &elf32_header());
    let run = assert_run_rejects(&p, "elf32");
    assert!(run.stderr.contains("32-bit"), "{}", run.describe());
}

#[test]
fn other_architecture_is_rejected() {
    let dir = scratch();
    let p = write_file(dir.path(), "aarch64", &elf64_header(183));
    assert_run_rejects(&p, "aarch64");
}

#[test]
fn x86_64_header_without_program_headers_is_rejected() {
    let dir = scratch();
    let p = write_file(dir.path(), "headless", &elf64_header(62));
    assert_run_rejects(&p, "headless");
}

#[test]
fn dynamic_program_with_a_missing_interpreter_is_rejected() {
    // A dynamically linked guest whose PT_INTERP names a file that does not exist.
    let mut bytes = std::fs::read(guest("setjmp_longjmp.dyn")).unwrap();
    let from = b"/lib64/ld-linux-x86-64.so.2";
    let at = bytes.windows(from.len()).position(|w| w == from).expect("the interpreter path is in the file");
    bytes[at..at + from.len()].copy_from_slice(b"/lib64/no-such-loader.so.22");
    let dir = scratch();
    let p = write_file(dir.path(), "lost_interp", &bytes);
    assert_run_rejects(&p, "no-such-loader");
}

#[test]
fn directory_is_rejected() {
    let dir = scratch();
    assert_run_rejects(dir.path(), &dir.path().display().to_string());
}

#[test]
fn unknown_report_extension_is_refused_before_the_run() {
    let run = Ferrite::run(&guest("exit_status")).opts(&["--report", "x.txt"]).go();
    assert_clean_error(&run);
    assert!(error_lines(&run.stderr)[0].contains("x.txt"));
    // The guest never ran and no report was written.
    assert_eq!(run.stdout, b"", "{}", run.describe());
    assert!(!run.path("x.txt").exists());
}

#[test]
fn unknown_report_out_extension_is_refused_before_the_replay() {
    // Like `run --report`, `replay --report-out` with an unknown format must fail before it
    // spends time re-running the guest (and without losing the replay's verdict after it).
    let run = Ferrite::run(&guest("exit_status")).opts(&["--report", "r.json"]).go();
    run.assert_code(7);
    let replay = Ferrite::replay(&run.path("r.json")).opts(&["--report-out", "out.txt"]).go();
    assert_clean_error(&replay);
    assert!(error_lines(&replay.stderr)[0].contains("out.txt"));
    assert_eq!(replay.stdout, b"", "the guest ran before the bad --report-out was refused\n{}", replay.describe());
}

#[test]
fn pm_dir_must_exist() {
    let dir = scratch();
    let run =
        Ferrite::run(&guest("exit_status")).opts(&["--pm-dir".as_ref(), dir.path().join("missing").as_os_str()]).go();
    assert_clean_error(&run);
}

#[test]
fn env_must_be_key_value() {
    let run = Ferrite::run(&guest("exit_status")).opts(&["--env", "NOEQUALS"]).go();
    assert_clean_error(&run);
    assert!(error_lines(&run.stderr)[0].contains("NOEQUALS"));
}

#[test]
fn bad_option() {
    let run = Ferrite::run(Path::new("x")).opts(&["--bogus"]).go();
    assert_clean_error(&run);
    assert!(run.stderr.contains("--bogus"));
}

#[test]
fn bad_size() {
    let run = Ferrite::run(&guest("exit_status")).opts(&["--max-memory", "lots"]).go();
    assert_clean_error(&run);
}

#[test]
fn replay_of_a_missing_report() {
    let dir = scratch();
    let p = dir.path().join("nonexistent.json");
    let run = Ferrite::replay(&p).go();
    assert_clean_error(&run);
    assert!(error_lines(&run.stderr)[0].contains("nonexistent.json"));
}

#[test]
fn replay_of_garbage_json() {
    let dir = scratch();
    let p = write_file(dir.path(), "garbage.json", b"{ this is not json ]\n");
    assert_clean_error(&Ferrite::replay(&p).go());
    let p = write_file(dir.path(), "binary.json", &[0xff, 0xfe, 0x00, 0x80]);
    assert_clean_error(&Ferrite::replay(&p).go());
    let p = write_file(dir.path(), "garbage.ron", b"Report(((\n");
    assert_clean_error(&Ferrite::replay(&p).go());
}

/// A real report of a null_deref run, as JSON.
fn real_report() -> serde_json::Value {
    let run = Ferrite::run(&guest("null_deref")).opts(&["--report", "r.json"]).go();
    run.assert_code(139);
    run.json("r.json")
}

#[test]
fn replay_of_a_report_with_a_missing_field() {
    let mut report = real_report();
    report["run"].as_object_mut().unwrap().remove("trace_hash").expect("the report has a trace_hash");
    let dir = scratch();
    let p = write_file(dir.path(), "r.json", serde_json::to_string(&report).unwrap().as_bytes());
    let run = Ferrite::replay(&p).go();
    assert_clean_error(&run);
    assert!(error_lines(&run.stderr)[0].contains("trace_hash"), "{}", run.describe());
}

#[test]
fn replay_of_a_sarif_report_is_refused() {
    let run = Ferrite::run(&guest("exit_status")).opts(&["--report", "r.sarif"]).go();
    run.assert_code(7);
    assert_clean_error(&Ferrite::replay(&run.path("r.sarif")).go());
}

#[test]
fn replay_of_an_unknown_finding() {
    let report = real_report();
    let dir = scratch();
    let p = write_file(dir.path(), "r.json", serde_json::to_string(&report).unwrap().as_bytes());
    let run = Ferrite::replay(&p).opts(&["--finding", "7"]).go();
    assert_clean_error(&run);
}

#[test]
fn replay_after_the_program_changed() {
    // Copy a guest, record a run of the copy, then change one byte of the copy.
    let dir = scratch();
    let mut bytes = std::fs::read(guest("exit_status")).unwrap();
    let prog = write_file(dir.path(), "exit_status", &bytes);
    let run = Ferrite::run(&prog).opts(&["--report", "r.json"]).go();
    run.assert_code(7);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&prog, &bytes).unwrap();
    let replay = Ferrite::replay(&run.path("r.json")).go();
    assert_clean_error(&replay);
    assert!(replay.stderr.contains("changed"), "{}", replay.describe());
}

#[test]
fn help_mentions_the_main_options() {
    for args in [&["--help"][..], &["run", "--help"][..]] {
        let out = ferrite().args(args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "ferrite {args:?}");
        for opt in ["--seed", "--report"] {
            assert!(stdout.contains(opt), "ferrite {args:?} lacks `{opt}`:\n{stdout}");
        }
    }
}
