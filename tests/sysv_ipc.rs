//! System V IPC between guest processes (issue 25): the `sysv_ipc` guest (shared memory
//! segments, semaphore sets and message queues, used by forked processes: a counter in a shared
//! segment under a semaphore, a producer and a consumer over a small queue, waiters woken by
//! `IPC_RMID` with EIDRM, `SEM_UNDO` at exit, EINTR under `SA_RESTART`) compared with its native
//! run under several schedules, static and dynamic, with one trace per seed; and two processes
//! each waiting on a semaphore only the other posts, reported as a deadlock where Linux hangs.
//! And POSIX message queues (`posix_mq`: names, attributes and limits, priorities, timeouts,
//! `mq_notify`, poll, a producer and a consumer process), compared with the host likewise.
//! Snapshots of runs holding them (`sysv_snap`: `--explore` and exhaustive exploration go on
//! from snapshots with the schedules running each from the start gives), and what `munmap`,
//! `mremap`, `MAP_FIXED` and exec do to attachments, compared with the host.

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

/// The `exploration` counters of `--host-stats`.
fn exploration(run: &Run) -> serde_json::Value {
    run.json("h.json")["exploration"].clone()
}

/// Two processes sharing a segment and a semaphore (and a second segment the child attaches
/// and detaches, so snapshots are taken while nobody holds it: its bytes are the kernel's to
/// save), and two over a POSIX message queue: `--explore 4` and exhaustive exploration go on
/// from snapshots (none refused) and run the same schedules (the chained trace hashes), with
/// the same report and output, as running every schedule from the start (`--no-snapshots`).
#[test]
fn explorations_of_sysv_ipc_and_message_queues_go_on_from_snapshots() {
    let prog = guest("sysv_snap");
    for mode in ["shm", "mq"] {
        let nat = native(&prog, &[mode, "30"], &[]);
        nat.assert_code(0);
        for extra in
            [&["--explore", "4"][..], &["--strategy", "exhaustive", "--max-preemptions", "1", "--explore", "10"]]
        {
            let go = |more: &[&str]| {
                Ferrite::run(&prog)
                    .opts(&["--quiet", "--report", "r.json", "--host-stats", "h.json"])
                    .opts(extra)
                    .opts(more)
                    .args(&[mode, "30"])
                    .go_within(Duration::from_secs(300))
            };
            let (with, without) = (go(&[]), go(&["--no-snapshots"]));
            let what = format!("{mode} {extra:?}");
            assert_same_stdout(&nat, &with);
            assert_eq!(with.stdout, without.stdout, "{what}: the first schedule's output");
            assert_eq!(with.code, without.code, "{what}");
            assert_eq!(without_timings(&with.json("r.json")), without_timings(&without.json("r.json")), "{what}");
            let (a, b) = (exploration(&with), exploration(&without));
            assert_eq!(a["trace_hashes"], b["trace_hashes"], "{what}: the schedules' trace hashes");
            assert_eq!(a["refused"], 0, "{what}: {a}");
            assert!(a["from_snapshot"].as_u64().unwrap() >= 2, "{what}: {a}");
        }
    }
}

/// `munmap` of a whole attachment detaches it, of part of one splits it (each piece counted
/// in `shm_nattch`, as Linux counts vmas); `mremap` moves one (`shmdt` then at its new start,
/// EINVAL at the old) or shrinks it; `MAP_FIXED` over one replaces it; a removed segment goes
/// with its last `munmap`; `shmdt` of an address inside one is EINVAL; exec detaches. Static
/// and dynamic, compared with the host, one trace per seed.
#[test]
fn unmapping_attachments_detaches_them_as_linux_does() {
    for name in ["sysv_snap", "sysv_snap.dyn"] {
        let prog = guest(name);
        let nat = native(&prog, &["munmap"], &[]);
        nat.assert_code(0);
        assert!(nat.stdout_str().contains("munmap of the middle page: ok, nattch 3\n"), "{}", nat.describe());
        let emu = Ferrite::run(&prog).args(&["munmap"]).go_within(Duration::from_secs(120));
        assert_same_stdout(&nat, &emu);
        assert_same_status(&nat, &emu);
    }
    let hash = || {
        let run = Ferrite::run(&guest("sysv_snap"))
            .opts(&["--seed", "3", "--report", "r.json"])
            .args(&["munmap"])
            .go_within(Duration::from_secs(120));
        run.assert_code(0);
        get(&run.json("r.json"), "run.trace_hash").as_str().expect("trace_hash is a string").to_string()
    };
    assert_eq!(hash(), hash(), "one seed, one trace");
}

/// `/proc/sysvipc/{shm,sem,msg}` list the machine's objects with Linux's columns (a removed
/// segment's `SHM_DEST` mode while attached, gone at its last detach), `ipcs` (util-linux, run
/// by the guest through `popen`) lists them from there, and `ipcs -l` shows the limits
/// `/proc/sys/kernel` gives, which are those enforced: the same as the host's lines but for
/// what differs between machines (ids, pids, owners, times).
#[test]
fn proc_sysvipc_and_ipcs_list_the_guests_objects() {
    if !std::path::Path::new("/usr/bin/ipcs").exists() {
        eprintln!("skipped: ipcs (util-linux) is not installed");
        return;
    }
    let prog = guest("sysv_snap");
    let nat = native(&prog, &["proc"], &[]);
    nat.assert_code(0);
    assert!(nat.stdout_str().contains("shm: key 0 1640 10000\n"), "{}", nat.describe());
    assert!(nat.stdout_str().contains("max ops per semop call = 500\n"), "{}", nat.describe());
    let emu = Ferrite::run(&prog).args(&["proc"]).go_within(Duration::from_secs(120));
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
}

/// Three processes wait in turn on one semaphore and the parent posts it once at a time:
/// Linux's `update_queue` completes the waiting calls in the order they came, so they are
/// served 0, 1, 2 natively and under every seed and strategy (each run's order was the
/// scheduler's before), and one seed gives one trace.
#[test]
fn semaphore_waiters_are_served_in_arrival_order() {
    let prog = guest("sysv_snap");
    let nat = native(&prog, &["fifo"], &[]);
    nat.assert_code(0);
    assert_eq!(nat.stdout_str(), "served in order: 0 1 2\n", "{}", nat.describe());
    let seeds = ["1", "2", "3", "4", "5", "6", "7", "8"];
    let runs = seeds.iter().map(|s| vec!["--seed", s]).chain([
        vec!["--strategy", "pct", "--seed", "5"],
        vec!["--strategy", "fifo"],
        vec!["--strategy", "exhaustive", "--max-preemptions", "1", "--explore", "6"],
    ]);
    for opts in runs {
        let emu = Ferrite::run(&prog).opts(&opts).args(&["fifo"]).go_within(Duration::from_secs(120));
        assert_same_stdout(&nat, &emu);
        assert_same_status(&nat, &emu);
    }
    let hash = || {
        let run = Ferrite::run(&prog)
            .opts(&["--seed", "4", "--report", "r.json"])
            .args(&["fifo"])
            .go_within(Duration::from_secs(120));
        run.assert_code(0);
        get(&run.json("r.json"), "run.trace_hash").as_str().expect("trace_hash is a string").to_string()
    };
    assert_eq!(hash(), hash(), "one seed, one trace");
}
