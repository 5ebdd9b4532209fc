//! The `hmtrace` pass (data races by software memory tags gated by locksets; docs/analyses/
//! hmtrace.md): an unsynchronised counter is reported at its marked lines; correct pthread
//! programs (mutexes, condition variables, barriers, rwlocks, semaphores, once/TLS, detached
//! threads with reused stacks), adjacent ints of two threads, an atomic release/acquire handoff
//! and a lock-protected atomicity violation are silent; every DataRaceBench-style kernel
//! (`guests/src/drb_*`) is classified as labelled, naming its `/* RACE: ... */` lines.
//!
//! Until the session hands the passes the program's symbols (`analyses::CodeInfo`), races
//! entirely inside libc (both accesses in code without source lines, e.g. glibc's benign
//! `aligned_heap_area` race in malloc) are reported by the pass; these tests set them apart
//! with [`program_findings`], exactly as `CodeInfo::library` will.

mod common;

use serde_json::Value;

use common::*;

/// `ferrite run --analyses A --report r.json --seed N -- guest`, checking ferrite did not panic.
fn run(name: &str, analyses: &str, seed: u64) -> (Run, Value) {
    let run = Ferrite::run(&guest(name))
        .opts(&["--analyses", analyses, "--report", "r.json", "--seed", &seed.to_string()])
        .go();
    assert!(!run.stderr.contains("panicked"), "ferrite panicked\n{}", run.describe());
    let report = run.json("r.json");
    (run, report)
}

/// Whether a location's own instruction (the first frame) has a source line: the access is
/// the program's, or a library copy attributed to it by the backtrace.
fn in_program(loc: &Value) -> bool {
    loc["backtrace"][0].get("line").and_then(Value::as_u64).is_some()
        || loc["backtrace"].as_array().is_some_and(|bt| bt.len() > 1 && is_copy(loc))
}

/// A memory or string function of libc (its accesses are its caller's).
fn is_copy(loc: &Value) -> bool {
    let f = loc["backtrace"][0].get("function").and_then(Value::as_str).unwrap_or("");
    ["memcpy", "memmove", "memset", "strcpy", "strlen"].iter().any(|c| f.contains(c))
}

/// The hmtrace findings of a report, less library-internal pairs (both accesses inside libc).
fn program_findings(report: &Value) -> Vec<&Value> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["analysis"] == "hmtrace")
        .filter(|f| f["locations"].as_array().unwrap().iter().any(in_program))
        .collect()
}

/// Findings are grouped by the program's sites: two races whose reads go through one function
/// compiled from a system header (`std::atomic<long>::load` at `-O0`) are two findings at the
/// program's lines, and a race seen in both orders is one finding with both orders among its
/// stack combinations.
#[test]
fn races_are_grouped_by_the_programs_sites_in_either_order() {
    let src = "hm_cxx_atomic_sites.cpp";
    let (r, report) = run("hm_cxx_atomic_sites", "hmtrace", 0);
    r.assert_code(66);
    let fs = program_findings(&report);
    let line = |l: &Value| l["line"].as_u64().unwrap_or(0);
    let mut pairs: Vec<(u64, u64)> = fs
        .iter()
        .map(|f| {
            let l = f["locations"].as_array().unwrap();
            let (a, b) = (line(&l[0]), line(&l[1]));
            (a.min(b), a.max(b))
        })
        .collect();
    pairs.sort_unstable();
    let at = |m: &str| u64::from(marker_line(src, m));
    assert_eq!(
        pairs,
        vec![(at("/* WRITE_A */"), at("/* READ_A */")), (at("/* WRITE_B */"), at("/* READ_B */"))],
        "{}",
        r.describe()
    );
    for f in &fs {
        let roles: Vec<&str> = f["group"]["stacks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["locations"][0]["role"].as_str().unwrap())
            .collect();
        assert!(roles.contains(&"earlier-read") && roles.contains(&"earlier-write"), "{roles:?}");
        assert_eq!(f["occurrences"], 2);
    }
}

#[test]
fn unsynchronised_counter_is_reported_at_its_lines() {
    let read = u64::from(marker_line("thr_racy_counter.c", "/* RACE: read */"));
    let write = u64::from(marker_line("thr_racy_counter.c", "/* RACE: write */"));
    let (r, report) = run("thr_racy_counter", "hmtrace", 0);
    r.assert_code(66);
    let fs = program_findings(&report);
    assert!(!fs.is_empty(), "no race reported\n{}", r.describe());
    for f in &fs {
        assert_eq!(f["kind"], "data-race", "{}", show_findings(&fs));
        for l in finding_lines(f) {
            assert!(l == read || l == write, "a race away from the RACE markers:\n{}", show_findings(&fs));
        }
    }
    let all: Vec<u64> = fs.iter().flat_map(|f| finding_lines(f)).collect();
    assert!(all.contains(&read) && all.contains(&write), "both marked lines should be named:\n{}", show_findings(&fs));
    let f = fs.iter().find(|f| finding_lines(f).contains(&read)).unwrap();
    let roles: Vec<&str> = f["locations"].as_array().unwrap().iter().map(|l| l["role"].as_str().unwrap()).collect();
    assert!(roles.iter().any(|r| r.ends_with("read")) && roles.iter().any(|r| r.ends_with("write")), "{roles:?}");
    assert!(f["message"].as_str().unwrap().contains("data race"), "{}", f["message"]);
}

#[test]
fn correct_pthread_programs_are_silent() {
    let guests = [
        "thr_mutex",
        "thr_condvar",
        "thr_barrier",
        "thr_rwlock",
        "thr_spin_sem",
        "thr_once_tls",
        "thr_detached",
        // Adjacent ints of four threads in one 16-byte granule.
        "drb_003_adjacent_no",
        // A release/acquire handoff through a C11 atomic.
        "drb_010_atomic_handoff_no",
        // Ping-pong through a futex word read and written with C11 atomics (plain moves): a
        // futex system call makes its word a sync location.
        "thr_futex",
        // The lock-protected atomicity violation (an OSCS bug, not a race).
        "os_balance",
    ];
    in_parallel(&guests, 4, |g| {
        for seed in [0, 1] {
            let (r, report) = run(g, "hmtrace", seed);
            let fs = program_findings(&report);
            assert!(fs.is_empty(), "{g} (seed {seed}) should be silent:\n{}\n{}", show_findings(&fs), r.describe());
        }
    });
}

/// C++ `std::atomic<T *>` publication with `memory_order_release` / `memory_order_acquire`
/// (plain moves at `-O2`, on a DRAM word no locked instruction touches) orders the record the
/// reader then reads: the program's code compiled from `<atomic>` / `<bits/atomic_base.h>` is
/// known from its line table (`CodeInfo::atomic`), statically and against libstdc++.so. (The base
/// reported the pointer's store and load, and the record's fields, as races.)
#[test]
fn cxx_atomic_release_acquire_publication_is_silent() {
    let guests = ["ext_atomic_pub", "ext_atomic_pub_fixed", "ext_atomic_pub.dyn"];
    in_parallel(&guests, 3, |g| {
        for seed in [0, 1, 2] {
            let (r, report) = run(g, "hmtrace", seed);
            let fs = program_findings(&report);
            assert!(fs.is_empty(), "{g} (seed {seed}) should be silent:\n{}\n{}", show_findings(&fs), r.describe());
        }
    });
}

#[test]
fn read_read_with_disjoint_locks_is_inconsistent_lock_usage_not_a_race() {
    let line = u64::from(marker_line("drb_026_ilu_no.c", "/* ILU: read under its own lock */"));
    let (_, report) = run("drb_026_ilu_no", "hmtrace:ilu=on", 0);
    let fs = program_findings(&report);
    assert!(fs.iter().all(|f| f["kind"] == "inconsistent-lock-usage"), "{}", show_findings(&fs));
    assert!(fs.iter().any(|f| finding_lines(f) == [line, line]), "{}", show_findings(&fs));
    // A diagnostic, not a race: off unless asked for.
    for spec in ["hmtrace", "hmtrace:ilu=off"] {
        let (_, report) = run("drb_026_ilu_no", spec, 0);
        assert!(program_findings(&report).is_empty(), "{spec}: {}", show_findings(&program_findings(&report)));
    }
}

/// The labelled kernels: `_yes` ones must report a data race at their RACE-marked lines and
/// nowhere else; `_no` ones must report no data race.
#[test]
fn dataracebench_kernels_are_classified_as_labelled() {
    let dir = repo().join("guests/src");
    let mut kernels: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("drb_") && n.ends_with(".c"))
        .collect();
    kernels.sort();
    assert!(kernels.len() >= 12, "the kernel set: {kernels:?}");
    let failures = std::sync::Mutex::new(Vec::new());
    in_parallel(&kernels, 4, |file| {
        let name = file.trim_end_matches(".c");
        let racy = name.ends_with("_yes");
        let src = std::fs::read_to_string(dir.join(file)).unwrap();
        let marked: Vec<u64> =
            src.lines().enumerate().filter(|(_, l)| l.contains("/* RACE:")).map(|(i, _)| i as u64 + 1).collect();
        assert_eq!(racy, !marked.is_empty(), "{file}: label and RACE markers disagree");
        let (_, report) = run(name, "hmtrace", 0);
        let races: Vec<&Value> = program_findings(&report).into_iter().filter(|f| f["kind"] == "data-race").collect();
        let ok = if racy {
            !races.is_empty() && races.iter().all(|f| finding_lines(f).iter().all(|l| marked.contains(l)))
        } else {
            races.is_empty()
        };
        if !ok {
            failures.lock().unwrap().push(format!("{name} (marked lines {marked:?}):\n{}", show_findings(&races)));
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "misclassified kernels:\n{}", failures.join("\n"));
}

#[test]
fn a_library_copy_is_attributed_to_its_caller() {
    let copy = u64::from(marker_line("drb_025_memcpy_yes.c", "/* RACE: memcpy into buf */"));
    let (_, report) = run("drb_025_memcpy_yes", "hmtrace", 0);
    let fs = program_findings(&report);
    let f = fs.iter().find(|f| finding_lines(f).contains(&copy)).unwrap_or_else(|| panic!("{}", show_findings(&fs)));
    let loc = f["locations"].as_array().unwrap().iter().find(|l| l["line"] == copy).unwrap();
    assert_eq!(loc["function"], "writer", "{}", show_findings(&fs));
    assert!(loc["backtrace"][0]["function"].as_str().unwrap().contains("mem"), "{}", show_findings(&fs));
}

#[test]
fn bad_options_are_errors() {
    let r = Ferrite::run(&guest("drb_005_mutex_no")).opts(&["--analyses", "hmtrace:colour=blue"]).go();
    r.assert_code(2);
    assert!(error_lines(&r.stderr).iter().any(|l| l.contains("hmtrace")), "{}", r.describe());
}

/// A program that creates and joins threads without end: the record contexts (thread, clock
/// slot, locks held) that no record names any more are freed, so the table follows the
/// contexts alive (at most twice what the last sweep kept, and at least 256 before the first)
/// instead of two or more per thread ever created (1,200 here without the sweep).
#[test]
fn contexts_of_joined_threads_are_freed() {
    let contexts = |rounds: &str| {
        let run = Ferrite::run(&guest("thr_churn"))
            .opts(&["--analyses", "hmtrace", "--report", "r.json"])
            .args(&[rounds])
            .go();
        run.assert_code(0);
        assert!(run.stdout_str().contains(&format!("rounds {rounds},")), "{}", run.describe());
        let report = run.json("r.json");
        assert!(program_findings(&report).is_empty(), "{}", show_findings(&program_findings(&report)));
        report["stats"]["hmtrace.contexts"].as_u64().expect("hmtrace.contexts counter")
    };
    let (few, many) = (contexts("20"), contexts("300"));
    assert!(few >= 40, "20 rounds of two threads: {few} contexts (each thread has its own)");
    assert!(many <= 512, "300 rounds of two threads (600 threads): {many} contexts at most at once");
}

/// A parent and its forked child: their private memory (a global, stack slots) is two copies
/// after the fork, never one location, while the page both map `MAP_SHARED` is one. The race on
/// the shared counter is reported; the private updates were races keyed by address alone
/// (`hm_fork_private`), and so were the stack slots of the PM programs that fork a writer
/// (`ext_fork_pool_fixed`, `ext_fork_msync_fixed`, `pmdk_fork_pool_fixed`).
#[test]
fn a_forked_childs_private_memory_is_its_own() {
    let src = "hm_fork_private.c";
    let shared = marker_line(src, "/* SHARED_RACE:");
    let (_, report) = run("hm_fork_private", "hmtrace", 0);
    let fs = program_findings(&report);
    assert!(!fs.is_empty(), "the shared counter's race:\n{report:#}");
    for f in &fs {
        let lines: Vec<u64> =
            f["locations"].as_array().unwrap().iter().filter_map(|l| l["backtrace"][0]["line"].as_u64()).collect();
        assert!(lines.iter().all(|&l| l == u64::from(shared)), "only the shared page races: {lines:?}\n{report:#}");
    }
    for (name, args) in [
        ("ext_fork_pool_fixed", ["/mnt/pmem0/forkpool"]),
        ("ext_fork_msync_fixed", ["/mnt/pmem0/forkpool"]),
        ("pmdk_fork_pool_fixed", ["/mnt/pmem0/forkpool"]),
    ] {
        let run = Ferrite::run(&guest(name)).opts(&["--analyses", "hmtrace", "--report", "r.json"]).args(&args).go();
        let report = run.json("r.json");
        assert!(program_findings(&report).is_empty(), "{name}: parent and child share only the pool:\n{report:#}");
    }
}
