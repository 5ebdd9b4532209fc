//! `ferrite replay --gdb`, driven by the real gdb in batch mode: a finding opens at its source
//! line with the report's frames; breakpoints, watchpoints, threads, `stepi`, and
//! `reverse-stepi`/`reverse-continue` move through the replayed run; a watchpoint on the PM
//! bytes of a lost store, reached backwards from the end, lands on the store that wrote them;
//! and stopping changes nothing of the run (the end is at the report's instruction count).

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

/// gdb, or `None` (the test then says why it is skipped) where it is not installed.
fn gdb_available() -> bool {
    Command::new("gdb").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// A ferrite gdb server for `report` (with `--finding` if given), and the address it listens on.
struct Server {
    child: Child,
    addr: String,
    /// The instruction it is stopped at, from its first line.
    at: u64,
}

impl Server {
    fn start(dir: &Path, report: &Path, finding: Option<u32>) -> Server {
        Server::start_with(dir, report, finding, &[])
    }

    /// [`Server::start`] with more options for `ferrite replay`.
    fn start_with(dir: &Path, report: &Path, finding: Option<u32>, more: &[&str]) -> Server {
        let mut cmd = ferrite();
        cmd.current_dir(dir).arg("replay").arg(report).args(["--gdb", "127.0.0.1:0"]).args(more);
        if let Some(f) = finding {
            cmd.args(["--finding", &f.to_string()]);
        }
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
        // ferrite: gdb server on 127.0.0.1:PORT, stopped at instruction N in thread T; ...
        let addr = line
            .split_once("gdb server on ")
            .and_then(|(_, r)| r.split_once(','))
            .map(|(a, _)| a.to_string())
            .unwrap_or_else(|| panic!("no server line: {line:?}"));
        let at = line
            .split_once("stopped at instruction ")
            .and_then(|(_, r)| r.split_once(' '))
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or_else(|| panic!("no instruction in {line:?}"));
        Server { child, addr, at }
    }

    /// Runs gdb on `program` against the server with `commands`, and returns its output.
    fn gdb(mut self, program: &Path, commands: &[&str]) -> String {
        let mut cmd = Command::new("gdb");
        cmd.args(["-q", "-nx", "-batch", "-ex", "set pagination off", "-ex", "set confirm off"]);
        cmd.arg("-ex").arg(format!("target remote {}", self.addr));
        for c in commands {
            cmd.arg("-ex").arg(c);
        }
        cmd.arg("-ex").arg("kill").arg(program);
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = self.child.kill();
                panic!("gdb did not finish within 120 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        let _ = self.child.kill();
        let _ = self.child.wait();
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    }
}

/// The instruction counts `monitor when` printed, in order.
fn whens(out: &str) -> Vec<u64> {
    out.lines()
        .filter_map(|l| l.strip_prefix("instruction "))
        .filter_map(|r| r.split_once(' ').and_then(|(n, _)| n.parse().ok()))
        .collect()
}

/// Runs `args` under ferrite with `--report r.json` in a fresh directory, which it returns once
/// the run ended with status `code`.
fn report(program: &Path, analyses: &str, args: &[&str], code: i32) -> tempfile::TempDir {
    let dir = scratch();
    let st = ferrite()
        .current_dir(dir.path())
        .args(["run", "--quiet", "--analyses", analyses, "--report", "r.json", "--"])
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(code), "{}", program.display());
    dir
}

#[test]
fn a_lost_store_opens_at_its_line_and_a_watchpoint_backwards_lands_on_it() {
    if !gdb_available() {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    let prog = guest("pm_log");
    let line = marker_line("pm_log.c", "BUG: entry stored but never persisted");
    let dir = report(&prog, "unpersisted", &["/mnt/pmem0/log"], 66);
    let r = read_json(&dir.path().join("r.json"));
    let end = get(&r, "run.instructions").as_u64().unwrap();
    let server = Server::start(dir.path(), Path::new("r.json"), Some(1));
    let start = server.at;
    let out = server.gdb(
        &prog,
        &[
            "bt",
            "monitor when",
            "set $a = (long *) e",
            // Forwards past the lost store to the end of the run, a breakpoint on the way in
            // `main` that is never hit again.
            "break exit",
            "continue",
            "delete",
            "continue",
            "monitor when",
            // Backwards to whatever wrote the entry's first word last.
            "watch *$a",
            "reverse-continue",
            "monitor when",
            // Past the store: its bytes are stored, not durable.
            "stepi",
            "eval \"monitor pm 0x%lx\", (long) $a",
            "monitor findings",
        ],
    );
    let at_line = format!("pm_log.c:{line}");
    let bt = out.lines().find(|l| l.starts_with("#0")).unwrap_or_else(|| panic!("no backtrace\n{out}"));
    assert!(bt.contains("append") && bt.contains(&at_line), "{bt}\n{out}");
    assert!(out.lines().any(|l| l.starts_with("#1") && l.contains("main")), "{out}");
    assert!(out.contains("No more reverse-execution history"), "{out}");
    let w = whens(&out);
    assert_eq!(w.len(), 3, "{out}");
    assert_eq!(w[0], start);
    // Stopping at a breakpoint changed nothing: the run ends where the report's did.
    assert_eq!(w[1], end, "{out}");
    // Backwards, the watchpoint stops before the store the finding is about: where it opened.
    assert_eq!(w[2], start, "{out}");
    assert!(out.contains("Hardware watchpoint") && out.contains("Old value"), "{out}");
    assert!(out.contains("stored, not durable"), "monitor pm:\n{out}");
    assert!(out.contains("1: unpersisted/unpersisted-store"), "monitor findings:\n{out}");
}

#[test]
fn threads_breakpoints_and_single_steps_go_both_ways() {
    if !gdb_available() {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    let prog = guest("hs_relock");
    let store = marker_line("hs_relock.c", "BUG: stored, then the lock is released");
    let load = marker_line("hs_relock.c", "LOAD: between the writer's unlock and relock");
    let dir = report(&prog, "hawkset", &["/mnt/pmem0/x"], 66);
    let server = Server::start(dir.path(), Path::new("r.json"), Some(1));
    let start = server.at;
    let out = server.gdb(
        &prog,
        &[
            "info threads",
            "bt 1",
            "stepi",
            "stepi",
            "monitor when",
            "reverse-stepi",
            "reverse-stepi",
            "monitor when",
            &format!("break hs_relock.c:{load}"),
            "continue",
            "bt 1",
            "monitor when",
            "reverse-continue",
            "monitor when",
        ],
    );
    // Three threads: main and the two workers, the writer stopped at its store.
    let threads = out.lines().filter(|l| l.contains("Thread 1.")).count();
    assert!(threads >= 3, "{out}");
    assert!(out.contains(&format!("hs_relock.c:{store}")), "{out}");
    let w = whens(&out);
    assert_eq!(w.len(), 4, "{out}");
    assert!(w[0] > start, "two steps forward: {w:?}");
    assert_eq!(w[1], start, "two steps back: {w:?}\n{out}");
    // The reader reaches the load after the writer's store, in another thread.
    assert!(out.contains(&format!("hs_relock.c:{load}")), "{out}");
    assert!(w[2] > start, "{w:?}");
    // Backwards from there, nothing stops before the start but that breakpoint, passed already.
    assert!(w[3] < w[2], "{w:?}\n{out}");
}

#[test]
fn a_fault_opens_at_the_faulting_instruction() {
    if !gdb_available() {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    let prog = guest("null_deref");
    let dir = report(&prog, "none", &[], 139);
    let server = Server::start(dir.path(), Path::new("r.json"), Some(1));
    let out = server.gdb(&prog, &["bt 1", "continue", "monitor when"]);
    // Stopped before the faulting instruction, which faults when the run goes on.
    let line = marker_line("null_deref.c", "FAULT");
    let bt = out.lines().find(|l| l.starts_with("#0")).unwrap_or_else(|| panic!("no backtrace\n{out}"));
    assert!(bt.contains(&format!("null_deref.c:{line}")), "{out}");
    assert!(out.contains("received signal SIGSEGV"), "{out}");
}

#[test]
fn a_long_run_goes_back_from_its_snapshots() {
    if !gdb_available() {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    // About 30 M instructions of 4 threads: several of the timeline's snapshot intervals.
    let prog = guest("thr_racy_counter_n");
    let dir = report(&prog, "hmtrace", &["4", "1200000"], 66);
    let end = get(&read_json(&dir.path().join("r.json")), "run.instructions").as_u64().unwrap();
    let server = Server::start(dir.path(), Path::new("r.json"), None);
    assert_eq!(server.at, 0);
    let mut cmds = vec!["break pthread_join"];
    cmds.extend(["continue", "monitor when"].repeat(4));
    cmds.extend([
        "delete",
        "continue",
        "monitor when",
        "reverse-stepi",
        "monitor when",
        "reverse-stepi",
        "monitor when",
        "stepi",
        "monitor when",
        "break pthread_join",
        "reverse-continue",
        "monitor when",
        "reverse-continue",
        "monitor when",
    ]);
    let out = server.gdb(&prog, &cmds);
    let w = whens(&out);
    assert_eq!(w.len(), 10, "{out}");
    let joins = &w[..4];
    assert!(joins.windows(2).all(|p| p[0] < p[1]), "{w:?}");
    assert_eq!(w[4], end, "{out}");
    assert!(w[6] < w[5] && w[5] < end, "two steps back: {w:?}");
    assert_eq!(w[7], w[5], "a step forward again: {w:?}");
    // Backwards from near the end, the joins again, last first: found from the snapshots.
    assert_eq!(w[8], joins[3], "{w:?}\n{out}");
    assert_eq!(w[9], joins[2], "{w:?}\n{out}");
    let last = out.lines().rfind(|l| l.starts_with("instruction ")).unwrap();
    assert!(last.contains("run from its start 1 times"), "{last}");
    assert!(!last.contains("back to a snapshot 0 times"), "{last}");
}

#[test]
fn a_crash_finding_opens_in_its_recovery() {
    if !gdb_available() {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    let prog = guest("pm_log");
    let dir = scratch();
    let recover = format!("{} /mnt/pmem0/log check", prog.display());
    let st = ferrite()
        .current_dir(dir.path())
        .args(["crash", "--quiet", "--analyses", "none", "--report", "r.json", "--recover", &recover, "--"])
        .arg(&prog)
        .arg("/mnt/pmem0/log")
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(66), "the crash campaign found nothing");
    let r = read_json(&dir.path().join("r.json"));
    let f = get(&r, "findings").as_array().unwrap().iter().find(|f| f["analysis"] == "crash").unwrap().clone();
    let server = Server::start(dir.path(), Path::new("r.json"), Some(f["id"].as_u64().unwrap() as u32));
    // Where check mode finds the corrupt entry, reached backwards from the recovery's failing exit.
    let src = std::fs::read_to_string(guest_source("pm_log.c")).unwrap();
    let corrupt = 1 + src.lines().position(|l| l.contains("printf(\"recovery: entry %d corrupt")).unwrap();
    let out = server.gdb(
        &prog,
        &[
            "monitor crash",
            "monitor when",
            &format!("break pm_log.c:{corrupt}"),
            "reverse-continue",
            "bt 2",
            "monitor when",
        ],
    );
    // It says which crash the image is of: the finding's crash point.
    assert!(out.contains("on the crash image of the crash at") && out.contains("pm.h:"), "{out}");
    let w = whens(&out);
    assert_eq!(w.len(), 2, "{out}");
    assert!(out.contains("the run has ended: Exited(Code(1))"), "the recovery fails: {out}");
    assert!(w[1] < w[0], "{w:?}");
    assert!(out.lines().any(|l| l.starts_with("#0") && l.contains(&format!("pm_log.c:{corrupt}"))), "{out}");
}

/// A crash finding made by the checker (`--check`): the recovery (`exit_status 0`) passes on the
/// image, the checker (`pm_log check`) fails on what it left. The checker's run is served,
/// stopped at its failing exit, with `monitor crash` naming the checker, the recovery that
/// passed and the crash point; going backwards reaches where it finds the corrupt entry.
#[test]
fn a_checkers_crash_finding_opens_in_the_checker() {
    if !gdb_available() {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    let prog = guest("pm_log");
    let dir = scratch();
    let recover = format!("{} 0", guest("exit_status").display());
    let check = format!("{} /mnt/pmem0/log check", prog.display());
    let st = ferrite()
        .current_dir(dir.path())
        .args(["crash", "--quiet", "--analyses", "none", "--report", "r.json", "--recover", &recover])
        .args(["--check", &check, "--"])
        .arg(&prog)
        .arg("/mnt/pmem0/log")
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(66), "the crash campaign found nothing");
    let r = read_json(&dir.path().join("r.json"));
    let f = get(&r, "findings").as_array().unwrap().iter().find(|f| f["analysis"] == "crash").unwrap().clone();
    assert!(f["message"].as_str().unwrap().contains("check exited with status 1"), "{f}");
    let server = Server::start(dir.path(), Path::new("r.json"), Some(f["id"].as_u64().unwrap() as u32));
    let src = std::fs::read_to_string(guest_source("pm_log.c")).unwrap();
    let corrupt = 1 + src.lines().position(|l| l.contains("printf(\"recovery: entry %d corrupt")).unwrap();
    let out = server.gdb(
        &prog,
        &[
            "monitor crash",
            "monitor when",
            &format!("break pm_log.c:{corrupt}"),
            "reverse-continue",
            "bt 2",
            "monitor when",
        ],
    );
    assert!(out.contains(&format!("checker `{check}` of finding")), "{out}");
    assert!(out.contains(&format!("run after recovery `{recover}` passed")), "{out}");
    assert!(out.contains("on the crash image of the crash at") && out.contains("pm.h:"), "{out}");
    let w = whens(&out);
    assert_eq!(w.len(), 2, "{out}");
    assert!(out.contains("the run has ended: Exited(Code(1))"), "the checker fails: {out}");
    assert!(w[1] < w[0], "{w:?}");
    assert!(out.lines().any(|l| l.starts_with("#0") && l.contains(&format!("pm_log.c:{corrupt}"))), "{out}");
}

/// `--workload`: a crash finding's workload run, stopped at its crash point (the fence of
/// `persist` in pm.h, where the crash comes before), with `monitor crash` naming it; stepping
/// back from there works as in any replay.
#[test]
fn a_crash_findings_workload_stops_at_its_crash_point() {
    if !gdb_available() {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    let prog = guest("pm_log");
    let dir = scratch();
    let recover = format!("{} /mnt/pmem0/log check", prog.display());
    let st = ferrite()
        .current_dir(dir.path())
        .args(["crash", "--quiet", "--analyses", "none", "--report", "r.json", "--recover", &recover, "--"])
        .arg(&prog)
        .arg("/mnt/pmem0/log")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(66), "the crash campaign found nothing");
    let r = read_json(&dir.path().join("r.json"));
    let f = get(&r, "findings").as_array().unwrap().iter().find(|f| f["analysis"] == "crash").unwrap().clone();
    let point = f["locations"].as_array().unwrap().iter().find(|l| l["role"] == "crash point").unwrap().clone();
    let id = f["id"].as_u64().unwrap() as u32;
    let server = Server::start_with(dir.path(), Path::new("r.json"), Some(id), &["--workload"]);
    let at = server.at;
    let out = server.gdb(&prog, &["p/x $pc", "bt 1", "monitor crash", "reverse-stepi", "monitor when"]);
    let pc = point["pc"].as_u64().unwrap();
    assert!(out.lines().any(|l| l.trim() == format!("$1 = {pc:#x}")), "stopped at the crash point's PC {pc:#x}\n{out}");
    let line = format!("pm.h:{}", point["line"].as_u64().unwrap());
    assert!(out.lines().any(|l| l.starts_with("#0") && l.contains(&line)), "{line}\n{out}");
    assert!(out.contains(&format!("stopped at instruction {at}, where it crashes: the crash at persist")), "{out}");
    // The recovery's failure names the same instruction as the crash's.
    assert!(out.contains(&format!("after a crash at instruction {at} ")), "{out}");
    assert_eq!(whens(&out), [at - 1], "{out}");
}

/// A dynamically linked program: the server hands gdb the program's auxiliary vector, from
/// which gdb finds the dynamic linker and the link map in guest memory, so libc's functions have
/// names and breakpoints on them work; and the thread's `fs_base`.
#[test]
fn a_dynamic_programs_libraries_are_known_to_gdb() {
    if !gdb_available() {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    let prog = guest("pm_log.dyn");
    let dir = report(&prog, "unpersisted", &["/mnt/pmem0/log"], 66);
    let server = Server::start(dir.path(), Path::new("r.json"), Some(1));
    let out = server.gdb(
        &prog,
        &[
            // The thread pointer: glibc's TCB begins with a pointer to itself.
            "p *(long *) $fs_base == $fs_base",
            "info sharedlibrary",
            "break exit",
            "continue",
            "bt 1",
        ],
    );
    assert!(out.lines().any(|l| l.trim() == "$1 = 1"), "fs_base is the thread's TCB:\n{out}");
    let libc = out.lines().find(|l| l.contains("libc.so")).unwrap_or_else(|| panic!("libc is not listed\n{out}"));
    assert!(libc.contains("Yes") && libc.trim_start().starts_with("0x00007f"), "{libc}\n{out}");
    let top = out.lines().find(|l| l.starts_with("#0")).unwrap_or_else(|| panic!("no backtrace\n{out}"));
    assert!(top.contains("exit"), "a breakpoint on libc's exit stops in it: {top}\n{out}");
}

/// Thread-local variables through `qGetTLSAddr`, in a dynamic and a static program: each
/// thread's `errno` (libc's, a module of its own when dynamic) and the program's own `__thread`
/// counter, in the thread gdb stopped in and in another. Without libc's debug information gdb
/// prints `errno` only when cast (it says "has unknown type", as for a native process); never
/// that it cannot find thread-local storage.
#[test]
fn thread_local_variables_and_errno_print_per_thread() {
    if !gdb_available() {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    for name in ["errno_tls.dyn", "errno_tls"] {
        let prog = guest(name);
        let dir = report(&prog, "none", &[], 0);
        let server = Server::start(dir.path(), Path::new("r.json"), None);
        let out = server.gdb(
            &prog,
            &[
                "break stop_here",
                "continue",
                "p errno",
                "p (int) errno",
                "p tls_counter",
                "thread 1",
                "p (int) errno",
                "p tls_counter",
            ],
        );
        assert!(out.contains("stop_here (seen=9)"), "{name}: the worker stops first\n{out}");
        assert!(!out.contains("Cannot find thread-local storage"), "{name}\n{out}");
        let values: Vec<&str> = out.lines().filter_map(|l| l.split_once(" = ").map(|(_, v)| v.trim())).collect();
        let plain = out.contains("'errno' has unknown type");
        let expected: &[&str] = if plain { &["9", "42", "2", "11"] } else { &["9", "9", "42", "2", "11"] };
        assert_eq!(values, expected, "{name}: errno and the counter in the worker, then in main\n{out}");
    }
}

/// Thread-local variables of libraries loaded by `dlopen` (guests/src/tls_dlopen.c): A is
/// loaded, B after it, A unloaded and loaded again, so A's TLS module id is lower than B's
/// although A follows B in the link map; each thread's values of both libraries' variables are
/// answered from the module ids the dynamic linker gave (`l_tls_modid`), not the link map's
/// order (which swapped them). Where the main thread's DTV still holds the block of the
/// unloaded A (before it first uses the new one), nothing is answered, as glibc's
/// `libthread_db` answers nothing there.
#[test]
fn thread_local_variables_of_dlopened_libraries_print_per_thread() {
    if !gdb_available() {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    let prog = guest("tls_dlopen.dyn");
    let dir = report(&prog, "none", &[], 0);
    let server = Server::start(dir.path(), Path::new("r.json"), None);
    let out = server.gdb(
        &prog,
        &[
            "set breakpoint pending on",
            "break stop_here",
            "break lib_a_set if v == 11",
            "continue",
            "p lib_a_value",
            "continue",
            "p lib_a_value",
            "p lib_b_value",
            "thread 1",
            "p lib_a_value",
            "p lib_b_value",
        ],
    );
    assert!(out.contains("lib_a_set (v=v@entry=11)"), "main stops as it sets A's new variable\n{out}");
    let refused = out.lines().filter(|l| l.starts_with("Cannot find thread-local storage")).collect::<Vec<_>>();
    assert_eq!(refused.len(), 1, "only the stale block is refused\n{out}");
    assert!(refused[0].contains("Thread 1.1000") && refused[0].contains("libtls_lib_a.so"), "{out}");
    assert!(out.contains("stop_here (seen=85)"), "the worker stops next\n{out}");
    let values: Vec<&str> = out.lines().filter_map(|l| l.split_once(" = ").map(|(_, v)| v.trim())).collect();
    assert_eq!(values, ["42", "43", "11", "12"], "A and B in the worker, then in main\n{out}");
}

/// Runs `prog ARGS` (past the timeline's first snapshot interval), then in gdb goes to the end,
/// steps back twice and forward once: the positions are the end and one and two instructions
/// before it, and going back restored a snapshot taken after 5 M instructions, not the start.
fn steps_back_at_the_end_restore_a_snapshot(prog: &Path, args: &[&str]) {
    let dir = report(prog, "none", args, 0);
    let run = read_json(&dir.path().join("r.json"));
    let end = get(&run, "run.instructions").as_u64().unwrap();
    assert!(end > 5_000_000, "{args:?}: {end} instructions: past the first snapshot interval");
    let server = Server::start(dir.path(), Path::new("r.json"), None);
    let cmds = [
        "continue",
        "monitor when",
        "reverse-stepi",
        "monitor when",
        "reverse-stepi",
        "monitor when",
        "stepi",
        "monitor when",
    ];
    let out = server.gdb(prog, &cmds);
    assert_eq!(whens(&out), [end, end - 1, end - 2, end - 1], "{args:?}\n{out}");
    let last = out.lines().rfind(|l| l.starts_with("instruction ")).unwrap();
    assert!(last.contains("run from its start 1 times"), "{args:?}: {last}");
    let at: u64 = last
        .split_once("the last at instruction ")
        .and_then(|(_, r)| r.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .unwrap_or_else(|| panic!("{args:?}: no snapshot gone back to: {last}"));
    assert!(at >= 5_000_000 && at < end, "{args:?}: went back to the snapshot at {at}: {last}");
}

/// Reverse execution on a run of two processes (guests/src/proc_pingpong.c: a parent and its
/// forked child answering each other over pipes, about 7 M instructions): going back from the
/// end restores the timeline's snapshot taken while both processes ran (at 5 M instructions),
/// not the run's start, and steps back and forth land where they should.
#[test]
fn reverse_steps_on_two_processes_go_back_to_a_snapshot_of_both() {
    if !gdb_available() {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    steps_back_at_the_end_restore_a_snapshot(&guest("proc_pingpong"), &["procs", "100000"]);
}

/// Reverse execution on two processes that share System V objects or a POSIX message queue
/// (guests/src/sysv_snap.c: a counter in a segment under a semaphore, and a second segment the
/// child attaches and detaches each time; a producer and a consumer over a queue): the
/// timeline's snapshots hold them (no longer refused), so going back from the end restores a
/// snapshot taken while both processes ran, and the steps land where they should.
#[test]
fn reverse_steps_over_sysv_ipc_and_message_queues_go_back_to_a_snapshot() {
    if !gdb_available() {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    for args in [["shm", "50000"], ["mq", "150000"]] {
        steps_back_at_the_end_restore_a_snapshot(&guest("sysv_snap"), &args);
    }
}
