//! System V IPC between guest processes (issue 25): the `sysv_ipc` guest (shared memory
//! segments, semaphore sets and message queues, used by forked processes: a counter in a shared
//! segment under a semaphore, a producer and a consumer over a small queue, waiters woken by
//! `IPC_RMID` with EIDRM, `SEM_UNDO` at exit, EINTR under `SA_RESTART`) compared with its native
//! run under several schedules, static and dynamic, with one trace per seed; and two processes
//! each waiting on a semaphore only the other posts, reported as a deadlock where Linux hangs.
//! And POSIX message queues (`posix_mq`: names, attributes and limits, priorities, timeouts,
//! `mq_notify`, poll, a producer and a consumer process), compared with the host likewise.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn sysv_ipc_matches_native_under_every_strategy() {
    let prog = guest("sysv_ipc");
    let nat = native(&prog, &[], &[]);
    nat.assert_code(0);
    let out = nat.stdout_str();
    // Guard against comparing two equally broken runs.
    assert!(out.contains("counter: 1000\n"), "{}", nat.describe());
    assert!(out.contains("consumer: 200 messages, sum 20100\n"), "{}", nat.describe());
    assert!(out.contains("child's semop when the set is removed: Identifier removed\n"), "{}", nat.describe());
    for opts in [&["--seed", "1"][..], &["--seed", "2"], &["--strategy", "pct", "--seed", "3"], &["--strategy", "fifo"]]
    {
        let emu = Ferrite::run(&prog).opts(opts).go_within(Duration::from_secs(120));
        assert_same_stdout(&nat, &emu);
        assert_same_status(&nat, &emu);
        assert!(!emu.stderr.contains("unsupported"), "{}", emu.describe());
    }
    let dyn_prog = guest("sysv_ipc.dyn");
    let nat = native(&dyn_prog, &[], &[]);
    let emu = Ferrite::run(&dyn_prog).go_within(Duration::from_secs(120));
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
}

#[test]
fn sysv_ipc_runs_are_deterministic() {
    let hash = || {
        let run = Ferrite::run(&guest("sysv_ipc"))
            .opts(&["--seed", "7", "--report", "r.json"])
            .go_within(Duration::from_secs(120));
        run.assert_code(0);
        get(&run.json("r.json"), "run.trace_hash").as_str().expect("trace_hash is a string").to_string()
    };
    assert_eq!(hash(), hash(), "one seed, one trace");
}

#[test]
fn two_processes_waiting_on_each_others_semaphore_are_a_deadlock() {
    let child = marker_line("sysv_deadlock.c", "/* DEADLOCK CHILD */");
    let parent = marker_line("sysv_deadlock.c", "/* DEADLOCK PARENT */");
    // Natively the guest hangs forever: a missed deadlock must fail the test, not hang it.
    let run = Ferrite::run(&guest("sysv_deadlock")).opts(&["--report", "r.json"]).go_within(Duration::from_secs(60));
    run.assert_code(66);
    assert_eq!(run.stdout, b"each process waits for the other's post\n", "{}", run.describe());
    let report = run.json("r.json");
    assert_eq!(get(&report, "run.exit.deadlock"), &serde_json::Value::Bool(true), "{}", get(&report, "run.exit"));
    let findings = get(&report, "findings").as_array().expect("findings");
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(get(&findings[0], "analysis"), "deadlock");
    // Each blocked location's backtrace passes through its own semop call line.
    let lines: Vec<u64> = get(&findings[0], "locations")
        .as_array()
        .expect("locations")
        .iter()
        .flat_map(|l| l["backtrace"].as_array().cloned().unwrap_or_default())
        .filter(|f| f["file"].as_str().is_some_and(|p| p.ends_with("sysv_deadlock.c")))
        .filter_map(|f| f["line"].as_u64())
        .collect();
    for line in [child, parent] {
        assert!(lines.contains(&u64::from(line)), "no blocked frame at sysv_deadlock.c:{line}: {lines:?}");
    }
}

#[test]
fn posix_message_queues_match_native() {
    for name in ["posix_mq", "posix_mq.dyn"] {
        let prog = guest(name);
        let nat = native(&prog, &[], &[]);
        nat.assert_code(0);
        let out = nat.stdout_str();
        assert!(out.contains("consumer: 100 messages, sum 5050\n"), "{}", nat.describe());
        assert!(out.contains("notified 1 time(s), value 42, SI_MESGQ 1\n"), "{}", nat.describe());
        for opts in [&["--seed", "1"][..], &["--strategy", "pct", "--seed", "4"]] {
            let emu = Ferrite::run(&prog).opts(opts).go_within(Duration::from_secs(120));
            assert_same_stdout(&nat, &emu);
            assert_same_status(&nat, &emu);
            assert!(!emu.stderr.contains("unsupported"), "{}", emu.describe());
        }
    }
}
