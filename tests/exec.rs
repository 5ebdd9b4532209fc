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

/// `sh -c 'kv_server --serve POOL ADDR & kv_client ADDR 20; wait'`: a PM server and its client as
/// two processes the shell started (`.dyn` in `server`: both dynamically linked).
fn kv_pair(server: &str, addr: &str) -> String {
    let client = if server.ends_with(".dyn") { "kv_client.dyn" } else { "kv_client" };
    format!("{} --serve /mnt/pmem0/kv {addr} & {} {addr} 20; wait", guest(server).display(), guest(client).display())
}

fn sorted_lines(s: &str) -> Vec<&str> {
    let mut v: Vec<&str> = s.lines().collect();
    v.sort();
    v
}

#[test]
fn a_server_and_its_client_in_two_processes_talk_over_tcp_and_unix_sockets() {
    let expected = ["kv: 40 of 40 requests answered", "kv_server: 40 requests served"];
    // Natively, with the pool in the scratch directory.
    let native_cmd = kv_pair("kv_server", "unix:kv.sock").replace("/mnt/pmem0/kv", "kv.pool");
    let nat = native(Path::new(SH), &["-c", &native_cmd], &[]);
    nat.assert_code(0);
    assert_eq!(sorted_lines(&nat.stdout_str()), expected, "{}", nat.describe());
    // The dynamically linked pair too: two processes each loading libc through ld.so.
    for (server, addr) in [("kv_server", "tcp:7711"), ("kv_server", "unix:kv.sock"), ("kv_server.dyn", "tcp:7711")] {
        let run = Ferrite::run(Path::new(SH))
            .opts(&["--analyses", "none"])
            .args(&["-c", &kv_pair(server, addr)])
            .go_within(std::time::Duration::from_secs(300));
        run.assert_code(0);
        assert_eq!(sorted_lines(&run.stdout_str()), expected, "{server} {addr}\n{}", run.describe());
    }
}

/// Blocks Unicorn translated in a run (`--host-stats`), and the run's standard output.
fn translated(program: &Path, args: &[&str]) -> (u64, String) {
    let run = Ferrite::run(program)
        .opts(&["--analyses", "none", "--host-stats", "h.json"])
        .args(args)
        .go_within(std::time::Duration::from_secs(300));
    run.assert_code(0);
    (get(&run.json("h.json"), "blocks_translated").as_u64().unwrap(), run.stdout_str())
}

/// Two different static programs (the kv server and its client, both linked at 0x400000) in two
/// processes switch thousands of times; each keeps its translations across the switches
/// (emu/src/machine/spaces.rs): ten times the requests translate (almost) nothing more, and the
/// pair with the shell that started them translates a small multiple of what the same requests
/// cost in one process. Counts, not times: the test does not depend on the machine's load.
#[test]
fn two_programs_in_two_processes_keep_their_translations_across_switches() {
    let pair = |n: u32| {
        let cmd = format!(
            "{} --serve /mnt/pmem0/kv unix:kv.sock & {} unix:kv.sock {n}; wait",
            guest("kv_server").display(),
            guest("kv_client").display()
        );
        let (blocks, out) = translated(Path::new(SH), &["-c", &cmd]);
        let answered = format!("kv: {} of {} requests answered", 2 * n, 2 * n);
        assert!(out.contains(&answered), "{out}");
        blocks
    };
    let (few, many) = (pair(20), pair(200));
    assert!(many <= few + few / 10, "{few} blocks translated for 40 requests, {many} for 400");
    let (one, out) = translated(&guest("kv_server"), &["/mnt/pmem0/kv", "200"]);
    assert!(out.contains("kv: 400 of 400 requests answered"), "{out}");
    assert!(many <= 5 * one, "{many} blocks translated in two processes, {one} in one");
}

#[test]
fn explore_finds_the_servers_race_through_its_clients_process_and_each_finding_replays() {
    let bug = u64::from(marker_line("kv_server.c", "/* BUG:"));
    let load = u64::from(marker_line("kv_server.c", "/* LOAD:"));
    let explore = |server: &str| {
        Ferrite::run(Path::new(SH))
            .opts(&["--explore", "8", "--analyses", "hawkset,vardalith", "--report", "r.json"])
            .args(&["-c", &kv_pair(server, "tcp:7711")])
            .go_within(std::time::Duration::from_secs(600))
    };
    let run = explore("kv_server");
    run.assert_code(66);
    let report = run.json("r.json");
    for analysis in ["hawkset", "vardalith"] {
        let f = findings_of(&report, analysis);
        assert_eq!(f.len(), 1, "{analysis}: {report:#}");
        let lines = finding_lines(f[0]);
        assert!(lines.contains(&bug) && lines.contains(&load), "{analysis} at {lines:?}, not {bug} and {load}");
        let id = get(f[0], "id").to_string();
        let replay = Ferrite::replay(&run.path("r.json"))
            .opts(&["--finding", id.as_str()])
            .go_within(std::time::Duration::from_secs(300));
        replay.assert_code(66);
        assert!(replay.stderr.contains(&format!("replay reproduced finding {id}")), "{}", replay.describe());
    }
    let twin = explore("kv_server_fixed");
    twin.assert_code(0);
    assert!(get(&twin.json("r.json"), "findings").as_array().unwrap().is_empty(), "{}", twin.describe());
}

/// `ferrite crash` of a server and its client as two processes the shell started: every crash
/// point stops the whole machine (both processes), and each crash image is recovered by the
/// server's own start-up, which opens the pool and serves one request of its own clients.
#[test]
fn crash_testing_a_server_and_its_client_recovers_each_image_with_the_servers_start_up() {
    let server = guest("kv_server_fixed");
    let cmd = format!(
        "{} --serve /mnt/pmem0/kv unix:kv.sock & {} unix:kv.sock 5; wait",
        server.display(),
        guest("kv_client").display()
    );
    let recover = format!("{} /mnt/pmem0/kv 1", server.display());
    let run = Ferrite::crash(Path::new(SH))
        .opts(&["--analyses", "none", "--recover", recover.as_str(), "--report", "r.json"])
        .args(&["-c", cmd.as_str()])
        .go_within(std::time::Duration::from_secs(600));
    run.assert_code(0);
    let report = run.json("r.json");
    let crash = get(&report, "crash");
    let n = |k: &str| get(crash, k).as_u64().unwrap_or_else(|| panic!("crash.{k}: {crash}"));
    // The server persists each set with a fence: those are the crash points, in its process.
    assert!(n("crash_points") >= 5, "{crash}");
    assert!(n("recoveries") >= 1 && n("recoveries") <= n("unique_images"), "{crash}");
    assert_eq!(n("failures"), 0, "the fixed server recovers from every image: {crash}");
    assert!(get(&report, "findings").as_array().unwrap().is_empty(), "{report:#}");
}

/// A program named without a `/` is found in the guest's `PATH`, as a shell finds it; argv[0]
/// stays as written, the report names the file that ran, and a name found nowhere is one
/// `error:` line.
#[test]
fn a_program_without_a_slash_is_found_in_path() {
    let dir = std::path::PathBuf::from(SH);
    let run = Ferrite::run(Path::new("sh"))
        .env("PATH", &format!("/nonexistent:{}", dir.parent().unwrap().display()))
        .opts(&["--report", "r.json"])
        .args(&["-c", "echo $0 ran"])
        .go();
    run.assert_code(0);
    assert_eq!(run.stdout_str(), "sh ran\n", "{}", run.describe());
    let r = run.json("r.json");
    assert_eq!(r["run"]["program"].as_str(), Some(SH), "{r:#}");
    let missing = Ferrite::run(Path::new("no-such-program-anywhere")).go();
    missing.assert_code(2);
    assert!(missing.stderr.contains("error: cannot read program `no-such-program-anywhere`"), "{}", missing.describe());
}

/// A `#!` script given as the program runs under its interpreter, with the interpreter's
/// argument and the script's path in front of its own arguments, as Linux starts one.
#[test]
fn a_script_given_as_the_program_runs_under_its_interpreter() {
    let dir = scratch();
    let script = dir.path().join("s.sh");
    std::fs::write(&script, "#!/bin/sh -e\necho \"$0 $1\"\nfalse\necho not reached\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let run = Ferrite::run(&script).args(&["one"]).go();
    run.assert_code(1);
    assert_eq!(run.stdout_str(), format!("{} one\n", script.display()), "{}", run.describe());
}
