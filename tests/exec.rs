//! `execve` and shells (syscalls/src/execve.rs, the signals between processes in
//! syscalls/src/signal.rs, per-process images in driver/src/symbols.rs): a program execs as on
//! Linux, natively and under ferrite the same (guests/src/proc_exec.c: errors, what is kept and
//! lost, vfork, `#!` scripts, a threaded exec, SIGCHLD and handlers for another process's
//! signals); Debian's dash (dynamic) runs pipelines, background jobs and `wait` with the exit
//! statuses it gets natively, as a function of the seed; and a persistence race between two
//! processes of a program the shell started is reported at that program's source lines and
//! replays.

mod common;

use std::path::Path;

use serde_json::Value;

use common::*;

const SH: &str = "/bin/sh";

#[test]
fn execve_keeps_and_loses_what_linux_says() {
    let prog = guest("proc_exec");
    let nat = native(&prog, &[], &[]);
    for seed in ["0", "1", "2"] {
        let emu = Ferrite::run(&prog).opts(&["--seed", seed]).go();
        assert_same_stdout(&nat, &emu);
        assert_same_status(&nat, &emu);
        assert!(emu.stdout_str().contains("failures: 0\n"), "{}", emu.describe());
    }
}

/// A shell command line with pipelines, background jobs, `wait` and exit statuses.
fn script() -> String {
    let exit_status = guest("exit_status");
    let g = exit_status.display();
    format!(
        "echo one two | tr o 0 | cat; {g} 4 & {g} 6 & wait $!; echo waited=$?; wait; echo all; \
         {g} 3 >/dev/null; echo last=$?; false | true; echo pipe=$?; exit 5"
    )
}

#[test]
fn a_dynamic_shell_runs_pipelines_and_background_jobs_as_natively() {
    let cmd = script();
    let nat = native(Path::new(SH), &["-c", &cmd], &[]);
    nat.assert_code(5);
    // Background jobs print in the order their processes run: compare lines as sets.
    let sorted = |s: String| {
        let mut v: Vec<String> = s.lines().map(str::to_string).collect();
        v.sort();
        v
    };
    let mut hashes = std::collections::BTreeSet::new();
    for seed in ["0", "1", "2", "3"] {
        let emu = Ferrite::run(Path::new(SH)).opts(&["--seed", seed, "--report", "r.json"]).args(&["-c", &cmd]).go();
        emu.assert_code(5);
        assert_eq!(sorted(emu.stdout_str()), sorted(nat.stdout_str()), "{}", emu.describe());
        assert!(emu.stdout_str().starts_with("0ne tw0\n"), "{}", emu.describe());
        hashes.insert(get(&emu.json("r.json"), "run.trace_hash").as_str().unwrap().to_string());
    }
    let again = Ferrite::run(Path::new(SH)).opts(&["--seed", "3", "--report", "r.json"]).args(&["-c", &cmd]).go();
    let h = get(&again.json("r.json"), "run.trace_hash").as_str().unwrap().to_string();
    assert!(hashes.contains(&h), "seed 3 twice, two trace hashes: {h} not in {hashes:?}");
    assert!(hashes.len() > 1, "four seeds ran the shell's processes the same way: {hashes:?}");
}

#[test]
fn a_shell_reports_what_it_cannot_run_as_natively() {
    let cmd = "/nonexistent; echo $?; /etc/passwd; echo $?; / ; echo $?";
    let nat = native(Path::new(SH), &["-c", cmd], &[]);
    let emu = Ferrite::run(Path::new(SH)).args(&["-c", cmd]).go();
    assert_same_stdout(&nat, &emu);
    assert_eq!(emu.stdout_str(), "127\n126\n126\n");
}

fn at(f: &Value, role: &str, line: u32) -> bool {
    places(f).iter().any(|p| p.0 == role && p.2 == "proc_pm_race.c" && p.3 == u64::from(line))
}

#[test]
fn a_race_in_a_program_the_shell_started_names_its_lines_and_replays() {
    let store = marker_line("proc_pm_race.c", "/* BUG:");
    let load = marker_line("proc_pm_race.c", "/* LOAD:");
    // Another static program at the same addresses runs first, in its own process: its code
    // must not name the racy program's.
    let other = guest("exit_status");
    let run_with = |name: &str| {
        let cmd = format!("{} 0 >/dev/null; {} /mnt/pmem0/pool", other.display(), guest(name).display());
        Ferrite::run(Path::new(SH))
            .opts(&["--analyses", "hawkset,vardalith", "--seed", "1", "--report", "r.json"])
            .args(&["-c", &cmd])
            .go()
    };
    let run = run_with("proc_pm_race");
    run.assert_code(66);
    let report = run.json("r.json");
    for pass in ["hawkset", "vardalith"] {
        let found = findings_of(&report, pass);
        assert!(
            found.iter().any(|f| at(f, "store", store) && at(f, "load", load)),
            "{pass} should report the store at line {store} with the load at line {load}:\n{}",
            show_findings(&found)
        );
    }
    let replay = Ferrite::replay(&run.path("r.json")).opts(&["--finding", "1"]).go();
    replay.assert_code(66);
    assert!(replay.stderr.contains("replay reproduced finding 1"), "{}", replay.describe());
    let fixed = run_with("proc_pm_race_fixed");
    fixed.assert_code(0);
    assert!(get(&fixed.json("r.json"), "findings").as_array().unwrap().is_empty(), "{}", fixed.describe());
}
