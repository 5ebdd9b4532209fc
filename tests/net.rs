//! In-machine networking: pipes, sockets, poll/epoll and eventfds between the guest's threads,
//! with blocking calls as scheduling points ([`syscalls::thread::Wait::Io`]). Real guests from
//! guests/src on the real emulator; their output is compared with a native run where it can be.

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

/// Whether a location is `file:line` of a guest source with the given role.
fn is_at(loc: &Value, role: &str, file: &str, line: u32) -> bool {
    loc.get("role").and_then(Value::as_str) == Some(role)
        && loc.get("line").and_then(Value::as_u64) == Some(u64::from(line))
        && loc.get("file").and_then(Value::as_str).is_some_and(|f| f == file || f.ends_with(&format!("/{file}")))
}

fn trace_hash(report: &Value) -> String {
    get(report, "run.trace_hash").as_str().expect("trace_hash is a string").to_string()
}

#[test]
fn net_workout_matches_native() {
    // Pipe hand-off beyond the pipe's capacity, socketpair ping-pong, AF_UNIX path and abstract
    // listeners, TCP over 127.0.0.1 and ::1, UDP, poll/epoll/select/eventfd, EAGAIN paths.
    let prog = guest("net_workout");
    let nat = native(&prog, &[], &[]);
    let emu = emulated(&prog, &[], &[]);
    assert!(nat.stdout_str().contains("failures: 0\n"), "{}", nat.describe());
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
    assert!(emu.stdout_str().contains("pipe: 300000 bytes"), "{}", emu.describe());
}

#[test]
fn net_workout_is_right_under_every_strategy_and_seed() {
    // Other schedules interleave the server and client threads differently: the answers stay.
    let expected = native(&guest("net_workout"), &[], &[]).stdout_str();
    let combos: &[(&str, u64)] = &[("random", 1), ("random", 7), ("pct", 3), ("fifo", 1)];
    for (strategy, seed) in combos {
        let run = Ferrite::run(&guest("net_workout"))
            .opts(&["--strategy", strategy, "--seed", &seed.to_string()])
            .go_within(Duration::from_secs(120));
        run.assert_code(0);
        assert_eq!(run.stdout_str(), expected, "{strategy} seed {seed}\n{}", run.describe());
    }
}

#[test]
fn blocking_reads_nobody_satisfies_are_a_deadlock_at_both_reads() {
    let pipe_line = marker_line("net_deadlock.c", "/* BLOCKED PIPE */");
    let sock_line = marker_line("net_deadlock.c", "/* BLOCKED SOCKET */");
    // Natively the guest hangs forever: a missed deadlock must fail the test, not hang it.
    let run = Ferrite::run(&guest("net_deadlock")).opts(&["--report", "r.json"]).go_within(Duration::from_secs(60));
    run.assert_code(66);
    assert!(!run.stderr.contains("panicked"), "{}", run.describe());
    assert_eq!(run.stdout_str(), "reading what nobody writes\n");
    let report = run.json("r.json");
    assert_eq!(get(&report, "run.exit.deadlock"), &Value::Bool(true), "{}", get(&report, "run.exit"));
    let f = findings_of(&report, "deadlock");
    assert_eq!(f.len(), 1, "{report:#}");
    let locs = get(f[0], "locations").as_array().unwrap();
    assert!(locs.iter().any(|l| is_at(l, "blocked", "net_deadlock.c", pipe_line)), "{:#}", f[0]);
    assert!(locs.iter().any(|l| is_at(l, "blocked", "net_deadlock.c", sock_line)), "{:#}", f[0]);
}

#[test]
fn pingpong_is_deterministic_per_seed_and_schedules_differ_across_seeds() {
    let go = |seed: u64| {
        let run = Ferrite::run(&guest("net_pingpong"))
            .opts(&["--report", "r.json", "--seed", &seed.to_string()])
            .args(&["200"])
            .go();
        run.assert_code(0);
        assert_eq!(run.stdout_str(), "200 round trips\n");
        let r = run.json("r.json");
        (trace_hash(&r), get(&r, "run.switches").clone())
    };
    let a = go(1);
    assert_eq!(a, go(1), "the same seed gave another run");
    let others: Vec<_> = (2..6).map(go).collect();
    assert!(others.iter().any(|o| o.0 != a.0), "every seed gave the same schedule: {a:?} {others:?}");
    // The dynamically linked build through ld.so: the same round trips.
    let run = Ferrite::run(&guest("net_pingpong.dyn")).opts(&["--analyses", "none"]).args(&["200"]).go();
    run.assert_code(0);
    assert_eq!(run.stdout_str(), "200 round trips\n", "{}", run.describe());
}

/// `ferrite run` of a kv guest with its pool in a fresh PM directory: the run and its report.
fn kv_run(name: &str, opts: &[&str]) -> (Run, Value) {
    let pm = scratch();
    let run = Ferrite::run(&guest(name))
        .opts(&["--pm-dir".as_ref(), pm.path().as_os_str()])
        .opts(&["--report", "r.json"])
        .opts(opts)
        .args(&["/mnt/pmem0/kv", "20"])
        .go_within(Duration::from_secs(300));
    let report = run.json("r.json");
    (run, report)
}

#[test]
fn kv_server_answers_every_request_as_natively() {
    for name in ["kv_server", "kv_server_fixed", "kv_server.dyn"] {
        let dir = scratch();
        let pool = dir.path().join("kv").to_str().unwrap().to_string();
        let nat = native_in(dir, &guest(name), &[&pool, "20"], &[]);
        assert_eq!(nat.stdout_str(), "kv: 40 of 40 requests answered\n", "{}", nat.describe());
        let (emu, _) = kv_run(name, &["--analyses", "none"]);
        emu.assert_code(0);
        assert_same_stdout(&nat, &emu);
    }
}

#[test]
fn kv_server_race_is_found_through_the_network_path_replays_and_its_twin_is_silent() {
    let bug = u64::from(marker_line("kv_server.c", "/* BUG:"));
    let load = u64::from(marker_line("kv_server.c", "/* LOAD:"));
    let (run, report) = kv_run("kv_server", &["--explore", "8", "--analyses", "hawkset,vardalith"]);
    run.assert_code(66);
    assert_eq!(run.stdout_str().lines().next(), Some("kv: 40 of 40 requests answered"), "{}", run.describe());
    for analysis in ["hawkset", "vardalith"] {
        let f = findings_of(&report, analysis);
        assert_eq!(f.len(), 1, "{analysis}: {report:#}");
        let lines = finding_lines(f[0]);
        assert!(lines.contains(&bug) && lines.contains(&load), "{analysis} at {lines:?}, not {bug} and {load}");
        // The finding's schedule replays, with the finding.
        let id = get(f[0], "id").to_string();
        let replay =
            Ferrite::replay(&run.path("r.json")).opts(&["--finding", id.as_str()]).go_within(Duration::from_secs(120));
        replay.assert_code(66);
        assert!(replay.stderr.contains(&format!("replay reproduced finding {id}")), "{}", replay.describe());
    }
    let (twin, report) = kv_run("kv_server_fixed", &["--explore", "8", "--analyses", "hawkset,vardalith"]);
    twin.assert_code(0);
    assert!(get(&report, "findings").as_array().unwrap().is_empty(), "{report:#}");
}

/// Crash testing finds the same race by its harm: the clients record each acknowledged set
/// durably, and a crash between a record and the server's late persist loses an acknowledged
/// set, which the recovery (`kv_server --check`) names; the finding is the lost store at the
/// planted line and replays. The fixed twin recovers from every image.
#[test]
fn crash_testing_finds_an_acknowledged_set_lost_through_the_network_path() {
    let bug = u64::from(marker_line("kv_server.c", "/* BUG:"));
    let crash = |name: &str| {
        let pm = scratch();
        let recover = format!("{} --check /mnt/pmem0/kv", guest(name).display());
        let run = Ferrite::crash(&guest(name))
            .opts(&["--pm-dir".as_ref(), pm.path().as_os_str()])
            .opts(&["--explore", "8", "--analyses", "none", "--recover", recover.as_str(), "--report", "r.json"])
            .args(&["/mnt/pmem0/kv", "20"])
            .go_within(Duration::from_secs(600));
        let report = run.json("r.json");
        (run, report)
    };
    let (run, report) = crash("kv_server");
    run.assert_code(66);
    let f = findings_of(&report, "crash");
    assert!(!f.is_empty(), "{report:#}");
    assert!(f.iter().all(|f| get(f, "message").as_str().unwrap().contains("status 1")), "{report:#}");
    assert!(f.iter().any(|f| finding_lines(f).contains(&bug)), "no lost store at line {bug}: {report:#}");
    let id = get(f[0], "id").to_string();
    let replay =
        Ferrite::replay(&run.path("r.json")).opts(&["--finding", id.as_str()]).go_within(Duration::from_secs(300));
    replay.assert_code(66);
    assert!(replay.stderr.contains(&format!("replay reproduced finding {id}")), "{}", replay.describe());
    let (twin, report) = crash("kv_server_fixed");
    twin.assert_code(0);
    assert!(get(&report, "findings").as_array().unwrap().is_empty(), "{report:#}");
    assert_eq!(get(get(&report, "crash"), "failures").as_u64(), Some(0), "{report:#}");
}
