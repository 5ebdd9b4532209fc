//! Processes in one machine (syscalls/src/procs.rs, emu/src/machine/spaces.rs): fork, vfork,
//! wait4's status words, pipes between parent and child, kill between processes and process
//! groups give what they give natively (guests/src/proc_fork.c, static and dynamic); a run with
//! several processes is a function of its seed, and different seeds interleave the processes
//! differently; a PM pool mapped MAP_SHARED before a fork is one device for both processes, so
//! hawkset and vardalith find a persistence race between a parent's store and a child's load
//! (guests/src/proc_pm_race.c; its fixed twin is silent), and `ferrite replay` reproduces it.
//! glibc's posix_spawn (`clone(CLONE_VM|CLONE_VFORK)`, a child running in its parent's address
//! space until it execs) under system(3), popen(3), posix_spawnp with file actions, a spawn of a
//! missing program, and `clone(CLONE_VM)` without CLONE_VFORK (guests/src/proc_spawn.c) give
//! what they give natively, with a stable trace hash and a report that replays; so does
//! `vfork(2)`, whose child's stores are its parent's memory. `clone(CLONE_VM)` children meet on a
//! private futex after the process whose space they share has ended
//! (guests/src/proc_futex_owner.c).

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use common::*;

/// `proc_fork MODE N` natively and under ferrite: the same output and status, and every check
/// of the guest passed.
#[track_caller]
fn equivalent(name: &str, mode: &str, n: &str) -> Run {
    let prog = guest(name);
    let nat = native(&prog, &[mode, n], &[]);
    let emu = emulated(&prog, &[mode, n], &[]);
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
    assert!(emu.stdout_str().contains("failures: 0\n"), "{}", emu.describe());
    emu
}

#[test]
fn fork_and_wait4_give_each_childs_exit_status() {
    let emu = equivalent("proc_fork", "wait", "6");
    let out = emu.stdout_str();
    assert!(out.contains("children reaped: 6\n"), "{out}");
    assert!(out.contains("parent's memory untouched by children: ok\n"), "{out}");
    assert!(out.contains("no child left: ECHILD: ok\n"), "{out}");
}

#[test]
fn parent_and_child_talk_through_pipes() {
    let emu = equivalent("proc_fork", "pipe", "50");
    let out = emu.stdout_str();
    assert!(out.contains("round trips: 50, answers 2550\n"), "{out}");
    assert!(out.contains("EOF after the child exits: ok\n"), "{out}");
}

#[test]
fn kill_between_processes_takes_the_default_action_or_is_ignored() {
    let emu = equivalent("proc_fork", "kill", "0");
    let out = emu.stdout_str();
    for line in ["killed by SIGTERM: ok", "still alive: ok", "killed by SIGKILL: ok", "reaped: ESRCH: ok"] {
        assert!(out.contains(line), "{line}:\n{out}");
    }
}

#[test]
fn vfork_process_groups_and_sessions() {
    let emu = equivalent("proc_fork", "vfork", "0");
    assert!(emu.stdout_str().contains("vfork child's status: ok\n"));
    let emu = equivalent("proc_fork", "group", "0");
    assert!(emu.stdout_str().contains("setsid in a child: ok\n"));
}

#[test]
fn a_dynamic_program_forks_too() {
    equivalent("proc_fork.dyn", "all", "4");
}

/// More processes alive at once than the engine keeps registered (emu/src/machine/spaces.rs,
/// `REGISTERED`), so some are unregistered when left and registered again when they next run, and
/// more processes one after another than are alive, each exec'ing a program while its parent
/// changes its memory (guests/src/proc_slots.c): the same as natively.
#[test]
fn many_processes_alive_at_once_and_one_after_another_each_keep_their_memory() {
    let prog = guest("proc_slots");
    let nat = native(&prog, &["20", "12"], &[]);
    let emu = emulated(&prog, &["20", "12"], &[]);
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
    let out = emu.stdout_str();
    assert!(out.contains("alive at once: 20 forked, 0 refused\n") && out.ends_with("all ok\n"), "{out}");
    assert!(out.contains("one after another: 12 of 12 ran their program\n"), "{out}");
}

fn trace_hash(name: &str, args: &[&str], seed: u64) -> String {
    let seed = seed.to_string();
    let run = Ferrite::run(&guest(name)).opts(&["--seed", &seed, "--report", "r.json"]).args(args).go();
    run.assert_code(0);
    get(&run.json("r.json"), "run.trace_hash").as_str().unwrap().to_string()
}

#[test]
fn processes_are_scheduled_by_the_seed() {
    let args = ["all", "4"];
    assert_eq!(trace_hash("proc_fork", &args, 3), trace_hash("proc_fork", &args, 3), "same seed, same run");
    let hashes: BTreeSet<String> = (0..4).map(|s| trace_hash("proc_fork", &args, s)).collect();
    assert!(hashes.len() > 1, "four seeds interleaved the processes the same way: {hashes:?}");
    // Processes and threads doing the same work: the same answers.
    for (name, mode) in [("proc_pingpong", "procs"), ("proc_pingpong", "threads"), ("proc_pingpong.dyn", "procs")] {
        let run = Ferrite::run(&guest(name)).args(&[mode, "300"]).go();
        run.assert_code(0);
        assert_eq!(run.stdout_str(), "sum 45150\n", "{name} {mode}");
    }
}

fn race_report(name: &str, seed: u64) -> Run {
    let seed = seed.to_string();
    Ferrite::run(&guest(name))
        .opts(&["--analyses", "hawkset,vardalith,unpersisted", "--seed", &seed, "--report", "r.json"])
        .args(&["/mnt/pmem0/pool"])
        .go()
}

fn at(f: &Value, role: &str, line: u32) -> bool {
    places(f).iter().any(|p| p.0 == role && p.2 == "proc_pm_race.c" && p.3 == u64::from(line))
}

#[test]
fn a_persistence_race_across_processes_is_found_and_replays() {
    let store = marker_line("proc_pm_race.c", "/* BUG:");
    let load = marker_line("proc_pm_race.c", "/* LOAD:");
    for seed in [0, 1, 2] {
        let run = race_report("proc_pm_race", seed);
        run.assert_code(66);
        let report = run.json("r.json");
        for pass in ["hawkset", "vardalith"] {
            let found = findings_of(&report, pass);
            assert!(
                found.iter().any(|f| at(f, "store", store) && at(f, "load", load)),
                "{pass} (seed {seed}) should report the parent's store at line {store} with the child's load at \
                 line {load}:\n{}",
                show_findings(&found)
            );
        }
        if seed == 1 {
            let replay = Ferrite::replay(&run.path("r.json")).opts(&["--finding", "1"]).go();
            replay.assert_code(66);
            assert!(replay.stderr.contains("replay reproduced finding 1"), "{}", replay.describe());
        }
    }
    for seed in [0, 1, 2] {
        let run = race_report("proc_pm_race_fixed", seed);
        run.assert_code(0);
        let report = run.json("r.json");
        assert!(get(&report, "findings").as_array().unwrap().is_empty(), "{}", run.describe());
    }
}

/// posix_spawn and its users (guests/src/proc_spawn.c), static and dynamic: the same output and
/// status as natively, whatever the seed; the same trace hash twice; a report that replays.
#[test]
fn posix_spawn_system_and_popen_run_as_natively() {
    for name in ["proc_spawn", "proc_spawn.dyn"] {
        let prog = guest(name);
        let nat = native(&prog, &[], &[]);
        nat.assert_code(0);
        let out = nat.stdout_str();
        for line in [
            "from system\nsystem: exited 3\n",
            "popen read: [two]\n",
            "SHOUTED THROUGH A PIPE\n",
            "sorted:\nline a\nline b\nline c\nsort: exited 0\n",
            "posix_spawnp missing: No such file or directory\n",
            "children left: none\n",
            "clone(CLONE_VM) child: exited 7\n",
            "vfork child: exited 5\nvfork child's store seen by the parent: 1234\n",
            "from a vfork child\nvfork+exec child: exited 6\n",
            "parent stack after its children: intact\n",
        ] {
            assert!(out.contains(line), "native run lacks `{line}`:\n{out}");
        }
        let emu = emulated(&prog, &[], &[]);
        assert_same_stdout(&nat, &emu);
        assert_same_status(&nat, &emu);
        assert!(!emu.stderr.contains("warning") && !emu.stderr.contains("unsupported"), "{}", emu.describe());
    }
    // Another seed interleaves the processes otherwise: the same output, the same hash twice.
    let run = |seed: &str| {
        let run = Ferrite::run(&guest("proc_spawn")).opts(&["--seed", seed, "--report", "r.json"]).go();
        run.assert_code(0);
        let hash = get(&run.json("r.json"), "run.trace_hash").as_str().unwrap().to_string();
        (run, hash)
    };
    let (first, hash) = run("5");
    let (_, again) = run("5");
    assert_eq!(hash, again, "same seed, same run");
    assert_eq!(first.stdout_str(), native(&guest("proc_spawn"), &[], &[]).stdout_str());
    let replay = Ferrite::replay(&first.path("r.json")).go();
    replay.assert_code(0);
    assert!(replay.stderr.contains("replay reproduced the run"), "{}", replay.describe());
    assert_eq!(replay.stdout_str(), first.stdout_str());
}

/// `make` decides by file times: a target it made is up to date for the next `make` of the same
/// run, and `touch`ing its prerequisite makes it again, as natively (with every time at one
/// virtual epoch the second `make` remade it; with host files newer than the guest's clock,
/// make warned of clock skew).
#[test]
fn make_sees_its_targets_up_to_date_until_a_prerequisite_changes() {
    let make = std::path::Path::new("/usr/bin/make");
    if !make.exists() {
        eprintln!("skipped: no /usr/bin/make");
        return;
    }
    let dir = scratch();
    std::fs::write(dir.path().join("Makefile"), "all: a\n\tcat a > all\n\techo remade all\na:\n\techo A > a\n")
        .unwrap();
    let run = Ferrite::run(std::path::Path::new("/bin/sh"))
        .opts(&["--env", "PATH=/usr/bin:/bin"])
        .args(&["-c", "make -s; make -s; echo second done; touch a; make -s"])
        .in_dir(dir)
        .go();
    run.assert_code(0);
    assert_eq!(run.stdout_str(), "remade all\nsecond done\nremade all\n", "{}", run.describe());
    assert!(!run.stderr.contains("arning"), "{}", run.describe());
}

/// Two `clone(CLONE_VM|SIGCHLD)` children of a process that ends while one of them waits on a
/// private futex: the other's wake finds the waiter (the futex is keyed by the address space,
/// not by whichever process owns it now), as natively, under several seeds.
#[test]
fn clone_vm_children_meet_on_a_futex_after_the_owner_ends() {
    let prog = guest("proc_futex_owner");
    let nat = native(&prog, &[], &[]);
    nat.assert_code(0);
    assert_eq!(nat.stdout_str(), "waiter woken: yes\nwaker: woke 1\n", "{}", nat.describe());
    for seed in ["0", "1", "2"] {
        let emu = Ferrite::run(&prog).opts(&["--seed", seed]).go();
        assert_same_stdout(&nat, &emu);
        assert_same_status(&nat, &emu);
    }
}

/// Debian's `make -j2` starts its recipes with `posix_spawn` (with `POSIX_SPAWN_RESETIDS`, so its
/// child sets its ids to the real ones) and runs two at once: both recipes run, the target built
/// from them is made, and the output is a function of the seed.
#[test]
fn make_runs_recipes_in_parallel() {
    let make = std::path::Path::new("/usr/bin/make");
    if !make.exists() {
        eprintln!("skipped: no /usr/bin/make");
        return;
    }
    let dir = scratch();
    std::fs::write(
        dir.path().join("Makefile"),
        "all: a b\n\tcat a b > all\na:\n\techo A > a; echo made a\nb:\n\techo B > b; echo made b\n",
    )
    .unwrap();
    let runs: Vec<Run> = (0..2)
        .map(|_| {
            let d = scratch();
            std::fs::copy(dir.path().join("Makefile"), d.path().join("Makefile")).unwrap();
            Ferrite::run(make).opts(&["--seed", "3"]).args(&["-s", "-j2"]).in_dir(d).go()
        })
        .collect();
    for r in &runs {
        r.assert_code(0);
        assert!(!r.stderr.contains("warning"), "{}", r.describe());
        assert_eq!(std::fs::read(r.path("all")).unwrap(), b"A\nB\n", "{}", r.describe());
        let out = r.stdout_str();
        let mut lines: Vec<&str> = out.lines().collect();
        lines.sort_unstable();
        assert_eq!(lines, ["made a", "made b"], "{}", r.describe());
    }
    assert_eq!(runs[0].stdout, runs[1].stdout, "the same seed, the same interleaving");
}

/// `/proc/self/stat` and `/proc/self/status` describe the process reading them (its pid, parent,
/// group and session), in the kernel's formats, and the tunables servers read show Linux's
/// defaults rather than the host's.
#[test]
fn proc_self_describes_each_process_and_the_tunables_are_linux_defaults() {
    let run = Ferrite::run(Path::new("/bin/sh"))
        .opts(&["--analyses", "none"])
        .args(&[
            "-c",
            "cat /proc/self/stat; grep -E '^(Pid|PPid|Threads):' /proc/self/status; \
             cat /proc/sys/vm/overcommit_memory /proc/sys/net/core/somaxconn \
             /sys/kernel/mm/transparent_hugepage/enabled",
        ])
        .go();
    run.assert_code(0);
    let out = run.stdout_str();
    let mut lines = out.lines();
    let stat: Vec<&str> = lines.next().unwrap_or_default().split(' ').collect();
    assert_eq!(stat.len(), 52, "{}", run.describe());
    // The shell is pid 1000, its first child 1001: pid, comm, state, ppid, pgrp, session.
    assert_eq!(&stat[..6], ["1001", "(cat)", "R", "1000", "1000", "1000"], "{}", run.describe());
    assert_eq!(stat[19], "1", "one thread\n{}", run.describe());
    assert!(stat[23].parse::<u64>().unwrap() > 0, "a resident size\n{}", run.describe());
    assert_eq!(stat[37], "17", "exit signal SIGCHLD\n{}", run.describe());
    let rest: Vec<&str> = lines.collect();
    assert_eq!(
        rest,
        ["Pid:\t1002", "PPid:\t1000", "Threads:\t1", "0", "4096", "always [madvise] never"],
        "{}",
        run.describe()
    );
}

/// A continued child's `SIGCHLD` (`CLD_CONTINUED`, status `SIGCONT`) is sent when the child
/// runs again, as Linux's child sends it from `get_signal`, while `waitpid(WCONTINUED)` reports
/// the continue at once (guests/src/jobctl_continue.c). Under the FIFO schedule the parent goes
/// on after its `kill(SIGCONT)` without the child having run, so nothing is pending yet; the
/// signal comes when the parent waits and the child runs: a busy child, and a child blocked in
/// a `read` (woken out of it to tell, then blocking again until its pipe closes). Under the
/// random schedule one seed gives one trace hash.
#[test]
fn a_continued_child_tells_its_parent_when_it_runs() {
    let run = Ferrite::run(&guest("jobctl_continue")).opts(&["--strategy", "fifo"]).go();
    run.assert_code(0);
    let out = run.stdout_str();
    assert_eq!(out.matches("  SIGCHLD pending right after SIGCONT: no\n").count(), 2, "{out}");
    assert_eq!(out.matches("  waitpid(WCONTINUED|WNOHANG) right after: continued\n").count(), 2, "{out}");
    assert_eq!(out.matches("  then SIGCHLD: taken, code 6, status 18\n").count(), 2, "{out}");
    assert!(out.ends_with("  it ended: 7\n"), "{out}");
    assert_eq!(trace_hash("jobctl_continue", &[], 5), trace_hash("jobctl_continue", &[], 5), "same seed, same run");
}

/// Advisory file locks exclude each other between processes (guests/src/proc_file_locks.c):
/// four children add to two counters under an fcntl record lock and under flock, and the
/// counters end at 160; F_GETLK names the parent's lock, conflicting F_SETLK, F_OFD_SETLK and
/// flock(LOCK_NB) fail, a close of any descriptor of the file drops the process's record
/// locks, F_SETLKW waits for the unlock: the same as natively. Before, every lock was granted
/// ("one process") and the counters lost updates, as SQLite's processes lost inserts.
#[test]
fn file_locks_exclude_each_other_between_processes() {
    for name in ["proc_file_locks", "proc_file_locks.dyn"] {
        let prog = guest(name);
        let nat = native(&prog, &[], &[]);
        let emu = emulated(&prog, &[], &[]);
        assert_same_stdout(&nat, &emu);
        assert_same_status(&nat, &emu);
        assert!(emu.stdout_str().starts_with("fcntl counter 160, flock counter 160\n"), "{}", emu.describe());
        assert!(emu.stdout_str().contains("F_SETLK over it: EAGAIN\n"), "{}", emu.describe());
    }
}

/// A child's SIGTERM to its parent, the first process, ends the run with the parent's death
/// (143, as natively; a `fault` finding at the child's `kill` call, named as sent by another
/// process) instead of leaving a zombie first process and a false deadlock finding.
#[test]
fn a_child_killing_the_first_process_ends_the_run() {
    let prog = guest("proc_kill_parent");
    let nat = native(&prog, &[], &[]);
    let emu = emulated(&prog, &[], &[]);
    assert_same_stdout(&nat, &emu);
    assert_same_status(&nat, &emu);
    assert!(!emu.stderr.contains("deadlock"), "{}", emu.describe());
    assert!(emu.stderr.contains("SIGTERM: the program was killed by another of its processes"), "{}", emu.describe());
}

/// kill(-1, sig) reaches every process but the caller (Linux's `kill_something_info`): the first
/// process's own kill(-1, SIGKILL) kills its child and not itself, ESRCH with no other process,
/// and a child's kill(-1, SIGKILL) ends the run with status 137. Under ferrite only: natively
/// kill(-1) would reach every process of the user.
#[test]
fn kill_minus_one_spares_the_caller() {
    let run = Ferrite::run(&guest("proc_kill_parent")).args(&["every"]).go();
    run.assert_code(137);
    assert_eq!(
        run.stdout_str(),
        "kill(-1, SIGKILL) = 0; the child: killed by 9\nkill(-1, SIGTERM) alone: -1 ESRCH\n",
        "{}",
        run.describe()
    );
    assert!(!run.stderr.contains("deadlock"), "{}", run.describe());
}

/// A file two processes map `MAP_SHARED`, truncated by one of them: the other's touch past the
/// new end is SIGBUS in the guest, a `fault` finding at its line (guests/src/proc_shared_truncate.c),
/// whichever process truncated. Before, only the truncating process's mappings were cut at the
/// new end, and the other's touch raised SIGBUS in ferrite itself, which died without a word
/// or a report (SQLite's WAL processes did it).
#[test]
fn a_file_truncated_under_another_process_mapping_is_its_sigbus() {
    for (mode, marker) in [("parent", "/* SIGBUS in the parent */"), ("child", "/* SIGBUS in the child */")] {
        let run = Ferrite::run(&guest("proc_shared_truncate")).opts(&["--report", "r.json"]).args(&[mode]).go();
        run.assert_code(135);
        let report = run.json("r.json");
        let faults = findings_of(&report, "fault");
        assert_eq!(faults.len(), 1, "{mode}\n{}", run.describe());
        let line = u64::from(marker_line("proc_shared_truncate.c", marker));
        assert!(finding_lines(faults[0]).contains(&line), "{mode}: line {line}\n{}", run.describe());
        assert!(run.stderr.contains("SIGBUS: access past the end of a mapped file"), "{mode}\n{}", run.describe());
    }
    // The parent's view natively: its child died of SIGBUS.
    let nat = native(&guest("proc_shared_truncate"), &["child"], &[]);
    assert_eq!(nat.stdout_str(), "the parent truncated the file: yes\nthe child: killed by 7\n", "{}", nat.describe());
}
