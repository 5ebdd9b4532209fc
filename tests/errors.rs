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
    // A script runs under its interpreter only with an execute bit, as execve runs one
    // (tests/exec.rs runs an executable one).
    let p = write_file(dir.path(), "script.txt", b"#!/bin/sh\necho hello\n");
    let run = assert_run_rejects(&p, "script.txt");
    assert!(run.stderr.contains("without execute permission"), "{}", run.describe());
}

/// A script whose `#!` interpreter is missing, or is a directory: the error names the
/// interpreter (it said only "cannot read program `s`: No such file or directory", of a script
/// that is there); a script that runs itself is ELOOP.
#[test]
fn a_scripts_missing_interpreter_is_named() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch();
    let cases: [(&str, String, &[&str]); 4] = [
        ("s_missing", "#!/nonexistent/interp\necho hi\n".into(), &["`/nonexistent/interp`", "No such file"]),
        // Linux reads 256 bytes of the file: a name the buffer may cut is ENOEXEC.
        ("s_long", format!("#!/{}\necho hi\n", "a".repeat(300)), &["255 bytes", "ENOEXEC"]),
        ("s_dir", "#!/tmp\n".into(), &["`/tmp`", "directory"]),
        ("s_self", format!("#!{}/s_self\n", dir.path().display()), &["ELOOP"]),
    ];
    for (name, text, mentions) in cases {
        let p = write_file(dir.path(), name, text.as_bytes());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let run = assert_run_rejects(&p, name);
        for m in mentions {
            assert!(run.stderr.contains(m), "{name}: {m}\n{}", run.describe());
        }
    }
}

/// A script whose `#!` interpreter name is longer than the 255 bytes Linux reads of the line:
/// `execve` is ENOEXEC (it was ENOENT, the name cut and looked up), and a shell then runs the
/// script itself, as natively.
#[test]
fn a_script_with_an_overlong_interpreter_is_enoexec_and_the_shell_runs_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch();
    let p = write_file(dir.path(), "long.sh", format!("#!/{}\necho ran by the shell\n", "a".repeat(300)).as_bytes());
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = format!("{}; echo status $?", p.display());
    let run = Ferrite::run(Path::new("/bin/sh")).args(&["-c", &script]).go();
    assert!(!run.stderr.contains("panicked"), "{}", run.describe());
    assert_eq!(run.stdout_str(), "ran by the shell\nstatus 0\n", "{}", run.describe());
    run.assert_code(0);
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

/// A program cut one byte before the end of its last segment's bytes in the file runs as on
/// Linux, which maps the file's last page whatever its length (the missing byte reads as zero):
/// the same output and status natively and under ferrite (the base refused it as truncated).
#[test]
fn a_program_cut_inside_its_last_page_runs_as_natively() {
    use std::os::unix::fs::PermissionsExt;
    let bytes = std::fs::read(guest("exit_status")).unwrap();
    let image = loader::load_elf(&bytes, 0x5555_5555_4000).unwrap();
    let last = image.segments.iter().map(|s| s.file_offset + s.data.len() as u64).max().unwrap();
    let dir = scratch();
    let p = write_file(dir.path(), "cut", &bytes[..last as usize - 1]);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    let nat = native(&p, &["5"], &[]);
    let emu = emulated(&p, &["5"], &[]);
    assert!(!emu.stderr.contains("panicked"), "{}", emu.describe());
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
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

// Hostile input (issue 20): numbers out of range, empty names and commands, special files and
// corrupt reports are each one `error:` line and status 2, at once: never a panic, an abort
// from a huge allocation, or a read that never ends.

/// A limit no refusal below comes near: a FIFO or a device read to its end would hang or
/// run out of memory long after this.
const QUICK: std::time::Duration = std::time::Duration::from_secs(20);

/// `ferrite ARGS` must fail cleanly within [`QUICK`], its error line mentioning each of
/// `mentions`.
#[track_caller]
fn assert_refused(args: &[&str], mentions: &[&str]) -> Run {
    let dir = scratch();
    let mut cmd = ferrite();
    cmd.args(args).current_dir(dir.path()).stdin(std::process::Stdio::null());
    let out = run_limited(cmd, QUICK);
    let run = Run {
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: shell_status(out.status),
        dir,
        cmdline: format!("ferrite {}", args.join(" ")),
    };
    assert_clean_error(&run);
    let line = error_lines(&run.stderr)[0];
    for m in mentions {
        assert!(line.contains(m), "the error should mention `{m}`\n{}", run.describe());
    }
    run
}

/// Runs `cmd` to its end, killing it (and failing) after `limit`.
fn run_limited(mut cmd: std::process::Command, limit: std::time::Duration) -> std::process::Output {
    let child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: kill(2) of the child this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("ferrite (pid {pid}) did not end within {limit:?}");
        }
    }
}

#[test]
fn numbers_out_of_range_are_refused_with_the_range() {
    let prog = guest("exit_status");
    let prog = prog.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--cpus", "0"], "1..=1024"),
        (&["--cpus", "100000"], "1..=1024"),
        (&["--cpus", "4294967295"], "1..=1024"),
        (&["--cpus", "99999999999999999999"], "1..=1024"),
        (&["--pct-depth", "4294967295"], "0..=10000"),
        (&["--max-open-files", "0"], "3..=4096"),
        (&["--max-open-files", "2"], "3..=4096"),
        (&["--max-open-files", "4097"], "3..=4096"),
        (&["--max-open-files=-5"], "3..=4096"),
        (&["--max-threads", "0"], "1..=32768"),
        (&["--findings-exit-code", "300"], "0..=255"),
        (&["--findings-exit-code=-1"], "0..=255"),
        (&["--delay-decay", "101"], "0..=100"),
        (&["--explore", "4294967295"], "0..=1000000"),
        (&["--max-memory", "0"], "1M..=128T"),
        (&["--max-memory", "200T"], "1M..=128T"),
    ];
    for (opts, range) in cases {
        let option = opts[0].split('=').next().unwrap();
        let mut args = vec!["run"];
        args.extend_from_slice(opts);
        args.extend(["--", prog]);
        assert_refused(&args, &[option, range]);
    }
    for (opts, range) in
        [(["--jobs", "0"], "1..=256"), (["--jobs", "100000"], "1..=256"), (["--max-images", "0"], "1..=1048576")]
    {
        let mut args = vec!["crash"];
        args.extend_from_slice(&opts);
        args.extend(["--", prog]);
        assert_refused(&args, &[opts[0], range]);
    }
    assert_refused(&["bench", "--runs", "0", "--", prog], &["--runs", "1..=1000"]);
    assert_refused(&["compare", "--jobs", "0"], &["--jobs", "1..=256"]);
}

#[test]
fn empty_names_and_commands_are_refused() {
    let prog = guest("exit_status");
    let prog = prog.to_str().unwrap();
    for (opts, mention) in [
        (["--env", "=x"], "--env"),
        (["--env", "="], "--env"),
        (["--recover", ""], "--recover"),
        (["--recover", "   "], "--recover"),
        (["--pm-mount", ""], "--pm-mount"),
        (["--pm-mount", "mnt/pmem0"], "absolute"),
        (["--pm-mount", "/"], "root"),
        (["--pm-mount", "/mnt/../etc"], ".."),
    ] {
        let mut args = vec!["run"];
        args.extend_from_slice(&opts);
        args.extend(["--", prog]);
        assert_refused(&args, &[mention]);
    }
    assert_refused(&["crash", "--check", "", "--", prog], &["--check"]);
    assert_refused(&["bench", "--recover", " ", "--", prog], &["--recover"]);
}

#[test]
fn pm_dir_on_a_pseudo_file_system_is_refused() {
    let prog = guest("exit_status");
    for dir in ["/proc/self", "/proc", "/sys", "/dev"] {
        if Path::new(dir).is_dir() {
            assert_refused(&["run", "--pm-dir", dir, "--", prog.to_str().unwrap()], &["--pm-dir", dir]);
        }
    }
    let report = real_report();
    let dir = scratch();
    let p = write_file(dir.path(), "r.json", serde_json::to_string(&report).unwrap().as_bytes());
    assert_refused(&["replay", "--pm-dir", "/proc/self", p.to_str().unwrap()], &["--pm-dir"]);
}

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path alive through the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

#[test]
fn special_files_are_refused_at_once() {
    let dir = scratch();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let fifo = fifo.to_str().unwrap();
    let prog = guest("exit_status");
    let prog = prog.to_str().unwrap();
    let pm_log = guest("pm_log");
    let pm_log = pm_log.to_str().unwrap();
    // As the program, the recovery program (read when the first crash image is recovered), a
    // configuration file, a suite.
    for special in ["/dev/zero", "/dev/null", fifo, "/dev/stdin"] {
        assert_refused(&["run", "--", special], &[special, "regular file"]);
        assert_refused(&["crash", "--quiet", "--recover", special, "--", pm_log, "/mnt/pmem0/log"], &[special]);
        assert_refused(&["run", "--config", special, "--", prog], &["config", special]);
        assert_refused(&["compare", "--suite", special], &[special]);
    }
    // As a report: a name with the right extension for a device, and a FIFO.
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.json")).unwrap();
    let zero = dir.path().join("zero.json");
    assert_refused(&["replay", zero.to_str().unwrap()], &["zero.json", "regular file"]);
    let fifo_report = dir.path().join("fifo.ron");
    mkfifo(&fifo_report);
    assert_refused(&["replay", fifo_report.to_str().unwrap()], &["fifo.ron", "regular file"]);
    // As a report's program.
    let mut report = real_report();
    report["run"]["program"] = fifo.into();
    let p = write_file(dir.path(), "r.json", serde_json::to_string(&report).unwrap().as_bytes());
    assert_refused(&["replay", p.to_str().unwrap()], &[fifo]);
}

#[test]
fn special_files_as_the_interpreter_are_refused_at_once() {
    // A dynamic guest whose PT_INTERP names a FIFO, then /dev/zero, through a short link
    // (the interpreter's path is read from the host as the guest names it).
    let dir = scratch();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let link = std::env::temp_dir().join(format!("fi{}", std::process::id()));
    let _ = std::fs::remove_file(&link);
    let from = b"/lib64/ld-linux-x86-64.so.2";
    let bytes = std::fs::read(guest("setjmp_longjmp.dyn")).unwrap();
    let at = bytes.windows(from.len()).position(|w| w == from).expect("the interpreter path is in the file");
    let name = link.to_str().unwrap().as_bytes();
    assert!(name.len() <= from.len(), "{} is too long for the interpreter's field", link.display());
    let mut patched = bytes.clone();
    patched[at..at + from.len()].fill(0);
    patched[at..at + name.len()].copy_from_slice(name);
    let p = write_file(dir.path(), "odd_interp", &patched);
    for target in [fifo.as_path(), Path::new("/dev/zero")] {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(target, &link).unwrap();
        assert_refused(&["run", "--", p.to_str().unwrap()], &["interpreter", "regular file"]);
    }
    std::fs::remove_file(&link).unwrap();
}

#[test]
fn big_endian_x86_64_is_named_as_such() {
    let mut bytes = std::fs::read(guest("exit_status")).unwrap();
    bytes[5] = 2; // EI_DATA: big-endian
    let dir = scratch();
    let p = write_file(dir.path(), "flipped", &bytes);
    let run = assert_run_rejects(&p, "big-endian");
    assert!(!run.stderr.contains("15872"), "{}", run.describe());
}

/// `real_report()` with `edit` applied, written to a scratch directory as `r.json`.
fn edited_report(edit: impl FnOnce(&mut serde_json::Value)) -> (tempfile::TempDir, std::path::PathBuf) {
    let mut report = real_report();
    edit(&mut report);
    let dir = scratch();
    let p = write_file(dir.path(), "r.json", serde_json::to_string(&report).unwrap().as_bytes());
    (dir, p)
}

#[test]
fn corrupt_report_fields_are_named() {
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        ("strategy", "bogus".into(), "run.strategy"),
        ("max_open_files", 0.into(), "run.max_open_files"),
        ("max_open_files", (-5).into(), "run.max_open_files"),
        ("pm_mount", "".into(), "run.pm_mount"),
        ("pm_mount", "mnt".into(), "run.pm_mount"),
        ("cpus", 4294967295u64.into(), "run.cpus"),
        ("cpus", 100000.into(), "run.cpus"),
        ("pct_depth", 4294967295u64.into(), "run.pct_depth"),
        ("max_threads", 0.into(), "run.max_threads"),
        ("max_memory", 0.into(), "run.max_memory"),
        ("trace_hash", "not-a-hash".into(), "run.trace_hash"),
        ("trace_hash", "0123456789ABCDEF0123456789ABCDEF".into(), "run.trace_hash"),
        ("program_hash", "00".into(), "run.program_hash"),
        ("args", serde_json::json!([]), "run.args"),
        ("env", serde_json::json!(["=x"]), "run.env"),
        ("recover", serde_json::json!([]), "run.recover"),
    ];
    for (field, value, mention) in cases {
        let (_dir, p) = edited_report(|r| r["run"][field] = value.clone());
        let run = Ferrite::replay(&p).go_within(QUICK);
        assert_clean_error(&run);
        let line = error_lines(&run.stderr)[0];
        assert!(
            line.contains("not a valid ferrite report") && line.contains(mention),
            "{field} = {value}\n{}",
            run.describe()
        );
    }
}

/// A crash report of pm_log with two failing images or more (crash testing's findings).
fn crash_report() -> (Run, serde_json::Value) {
    let run = pm_log_crash();
    let report = run.json("r.json");
    (run, report)
}

#[test]
fn corrupt_crash_reports_are_refused_or_diverge_without_a_panic() {
    let (run, report) = crash_report();
    let crash_finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f.get("crash_image").is_some())
        .unwrap_or_else(|| panic!("no crash finding\n{}", run.describe()))["id"]
        .as_u64()
        .unwrap()
        .to_string();
    let write =
        |r: &serde_json::Value| write_file(run.dir.path(), "edited.json", serde_json::to_string(r).unwrap().as_bytes());
    // No recovery command: a corrupt report, not an index out of bounds.
    let mut r = report.clone();
    r["crash"]["recover"] = serde_json::json!([]);
    let replay = Ferrite::replay(&write(&r)).opts(&["--finding", &crash_finding]).go_within(QUICK);
    assert_clean_error(&replay);
    assert!(error_lines(&replay.stderr)[0].contains("crash.recover"), "{}", replay.describe());
    let mut r = report.clone();
    r["crash"]["crash_point_mode"] = "everywhere".into();
    assert_clean_error(&Ferrite::replay(&write(&r)).opts(&["--finding", &crash_finding]).go_within(QUICK));
    // A crash point the workload never reaches: the replay diverges, and says which point in
    // full (no wrapped number).
    let mut r = report.clone();
    for f in r["findings"].as_array_mut().unwrap() {
        if let Some(image) = f.get_mut("crash_image") {
            image["point"] = 4294967295u64.into();
        }
    }
    let replay = Ferrite::replay(&write(&r)).opts(&["--finding", &crash_finding]).go_within(QUICK * 3);
    replay.assert_code(1);
    assert!(replay.stderr.contains("not 4294967296"), "{}", replay.describe());
}
