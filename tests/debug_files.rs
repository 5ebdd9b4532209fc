//! Separate debug files: a shared library stripped the way distributions strip theirs gets its
//! function names and source lines back from its debug file, found as gdb finds it (through
//! `.gnu_debuglink` next to the library, in its `.debug` directory or under a debug-file
//! directory, or by build ID under `--debug-dir`), and only when the file matches (CRC-32, build
//! ID). The library (`guests/src/dbglib/`) is built and stripped here with gcc and objcopy; its
//! program stores through NULL inside it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;
use tempfile::TempDir;

const LIB: &str = "libdbgdemo.so";
const DEBUG: &str = "libdbgdemo.so.debug";

/// Runs a build tool, failing the test with its output if it fails.
fn tool(program: &str, args: &[&str], dir: &Path) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "`{program} {}` failed ({}):\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The library and its program, built in a fresh directory.
struct Built {
    dir: TempDir,
}

impl Built {
    /// Builds `libdbgdemo.so` (with debug information and a build ID) and the program linked
    /// against it.
    fn new() -> Built {
        let dir = tempfile::Builder::new().prefix("ferrite-dbglib-").tempdir().expect("temporary directory");
        let src = guest_source("dbglib");
        let lib_src = src.join("dbgdemo.c");
        let main_src = src.join("dbgmain.c");
        let d = dir.path();
        tool("gcc", &["-g", "-O0", "-fPIC", "-shared", "-Wl,--build-id", "-o", LIB, lib_src.to_str().unwrap()], d);
        tool("gcc", &["-g", "-O0", "-o", "dbgmain", main_src.to_str().unwrap(), "-L.", "-ldbgdemo"], d);
        Built { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `objcopy --only-keep-debug` of the library into `to` (relative to the build directory).
    fn keep_debug(&self, to: &str) {
        if let Some(parent) = self.path(to).parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        tool("objcopy", &["--only-keep-debug", LIB, to], self.dir.path());
    }

    /// Strips the library as distributions do, with a debug link to `link` if given.
    fn strip(&self, link: Option<&str>) {
        let mut args = vec!["--strip-debug".to_string(), "--strip-unneeded".to_string()];
        if let Some(l) = link {
            args.push(format!("--add-gnu-debuglink={l}"));
        }
        args.push(LIB.to_string());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        tool("objcopy", &args, self.dir.path());
    }

    /// A different build of the library (other code, other build ID): its debug file into `to`.
    fn other_debug_file(&self, to: &str) {
        let lib_src = guest_source("dbglib/dbgdemo.c");
        let other = self.dir.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        tool(
            "gcc",
            &[
                "-g",
                "-O2",
                "-fPIC",
                "-shared",
                "-Wl,--build-id=0x0123456789abcdef0123456789abcdef01234567",
                "-o",
                LIB,
                lib_src.to_str().unwrap(),
            ],
            &other,
        );
        let to = self.path(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        tool("objcopy", &["--only-keep-debug", LIB, to.to_str().unwrap()], &other);
    }

    /// The library's build ID in hex, as `readelf -n` prints it.
    fn build_id(&self) -> String {
        let out = Command::new("readelf").args(["-n", LIB]).current_dir(self.dir.path()).output().expect("readelf");
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: "))
            .unwrap_or_else(|| panic!("{LIB} has no build ID:\n{text}"))
            .trim()
            .to_string()
    }

    /// `ferrite run` of the program with `opts`, the library found through LD_LIBRARY_PATH.
    fn run(&self, opts: &[&str]) -> Run {
        let mut all = vec!["--report", "r.json"];
        all.extend_from_slice(opts);
        let run = Ferrite::run(&self.path("dbgmain"))
            .env("LD_LIBRARY_PATH", self.dir.path().to_str().unwrap())
            .opts(&all)
            .go();
        run.assert_code(139);
        assert!(error_lines(&run.stderr).is_empty(), "{}", run.describe());
        assert!(run.stdout_str().contains("calling the library"), "{}", run.describe());
        run
    }
}

/// The fault's location: summarised at the program's own call, with the library's frames first
/// in the backtrace.
fn fault_location(run: &Run) -> Value {
    let report = run.json("r.json");
    let findings = get(&report, "findings").as_array().unwrap();
    assert_eq!(findings.len(), 1, "{}", serde_json::to_string_pretty(&report).unwrap());
    let f = &findings[0];
    assert_eq!(get(f, "analysis"), "fault");
    assert_eq!(get(f, "kind"), "SIGSEGV");
    let loc = get(f, "locations.0").clone();
    // The summary stays at the program's own line: lines from a debug file describe library
    // frames, they do not make the library the program's code.
    let call = marker_line("dbglib/dbgmain.c", "/* MAIN CALL */");
    assert_eq!(loc["line"].as_u64(), Some(u64::from(call)), "{loc:#}");
    assert!(loc["file"].as_str().is_some_and(|f| f.ends_with("dbgmain.c")), "{loc:#}");
    loc
}

/// Asserts the library's frames have their names and lines from the debug file.
#[track_caller]
fn assert_library_lines(run: &Run) {
    let loc = fault_location(run);
    let bt = loc["backtrace"].as_array().unwrap();
    let fault = marker_line("dbglib/dbgdemo.c", "/* LIB FAULT */");
    let call = marker_line("dbglib/dbgdemo.c", "/* LIB CALL */");
    // poke is a local function: only the debug file's .symtab and DWARF know it.
    assert_eq!(bt[0]["function"], "poke", "{loc:#}");
    assert!(bt[0]["file"].as_str().is_some_and(|f| f.ends_with("dbgdemo.c")), "{loc:#}");
    assert_eq!(bt[0]["line"].as_u64(), Some(u64::from(fault)), "{loc:#}");
    assert_eq!(bt[1]["function"], "dbg_fault", "{loc:#}");
    assert_eq!(bt[1]["line"].as_u64(), Some(u64::from(call)), "{loc:#}");
    assert!(run.stderr.contains(&format!("poke (dbgdemo.c:{fault})")), "{}", run.describe());
}

/// Asserts the library's frames have no lines, and its exported function still has its name.
#[track_caller]
fn assert_no_library_lines(run: &Run) {
    let loc = fault_location(run);
    let bt = loc["backtrace"].as_array().unwrap();
    let in_lib: Vec<&Value> = bt.iter().take_while(|f| f["function"] != "main").collect();
    assert!(in_lib.len() >= 2, "{loc:#}");
    for f in &in_lib {
        assert!(f.get("line").is_none() && f.get("file").is_none(), "a library frame has a line: {loc:#}");
    }
    // Named from the stripped library's .dynsym.
    assert_eq!(in_lib[1]["function"], "dbg_fault", "{loc:#}");
    assert!(!run.stderr.contains("dbgdemo.c"), "{}", run.describe());
}

#[test]
fn debug_link_is_followed_where_gdb_looks() {
    let b = Built::new();
    b.keep_debug(DEBUG);
    b.strip(Some(DEBUG));
    // Next to the library (with the default debug-file directory, which does not have it).
    assert_library_lines(&b.run(&[]));

    // In the library's .debug directory.
    std::fs::create_dir_all(b.path(".debug")).unwrap();
    std::fs::rename(b.path(DEBUG), b.path(&format!(".debug/{DEBUG}"))).unwrap();
    assert_library_lines(&b.run(&[]));

    // Under a debug-file directory, followed by the library's own directory.
    let global = scratch();
    let lib_dir = std::fs::canonicalize(b.dir.path()).unwrap();
    let target = global.path().join(lib_dir.strip_prefix("/").unwrap()).join(DEBUG);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::rename(b.path(&format!(".debug/{DEBUG}")), &target).unwrap();
    assert_no_library_lines(&b.run(&[]));
    assert_library_lines(&b.run(&["--debug-dir", global.path().to_str().unwrap()]));
}

#[test]
fn build_id_file_under_debug_dir_is_found() {
    let b = Built::new();
    let id = b.build_id();
    let (first, rest) = id.split_at(2);
    let debug_dir = scratch();
    let rel = format!(".build-id/{first}/{rest}.debug");
    b.keep_debug(debug_dir.path().join(&rel).to_str().unwrap());
    b.strip(None);
    // A list: the first directory does not exist.
    let dirs = format!("/nonexistent-ferrite-debug:{}", debug_dir.path().display());
    assert_library_lines(&b.run(&["--debug-dir", &dirs]));
    // Repeated options add up.
    assert_library_lines(&b.run(&["--debug-dir", "/nonexistent-ferrite-debug", "--debug-dir", &dirs]));
    // The default directory does not have it.
    assert_no_library_lines(&b.run(&[]));
}

#[test]
fn debug_files_that_do_not_match_are_not_used() {
    // A debug link whose file is another build's: its CRC-32 differs. objcopy records the CRC of
    // the file named at strip time: give it the right one first, then replace it.
    let b = Built::new();
    b.keep_debug(DEBUG);
    b.strip(Some(DEBUG));
    b.other_debug_file(DEBUG);
    assert_no_library_lines(&b.run(&[]));

    // A build-ID path holding another build's debug file: its build ID differs.
    let b = Built::new();
    let id = b.build_id();
    let (first, rest) = id.split_at(2);
    let debug_dir = scratch();
    b.other_debug_file(debug_dir.path().join(format!(".build-id/{first}/{rest}.debug")).to_str().unwrap());
    b.strip(None);
    assert_no_library_lines(&b.run(&["--debug-dir", debug_dir.path().to_str().unwrap()]));

    // A debug file that is not an ELF file at all, with the right CRC-32 and at the build-ID path.
    let b = Built::new();
    std::fs::write(b.path(DEBUG), b"not an ELF file").unwrap();
    b.strip(Some(DEBUG));
    let id = b.build_id();
    let (first, rest) = id.split_at(2);
    let debug_dir = scratch();
    let at = debug_dir.path().join(format!(".build-id/{first}/{rest}.debug"));
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::write(&at, b"\x7fELF garbage").unwrap();
    assert_no_library_lines(&b.run(&["--debug-dir", debug_dir.path().to_str().unwrap()]));
}

#[test]
fn stripped_library_without_debug_file_is_still_reported() {
    let b = Built::new();
    b.strip(None);
    assert_no_library_lines(&b.run(&[]));
    // No debug-file directory at all.
    assert_no_library_lines(&b.run(&["--debug-dir"]));
}
