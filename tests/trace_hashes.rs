//! Trace hashes and findings of representative guests, recorded before the architecture refactor
//! (issue 21) from the main build and written down here: a single-threaded program, threads
//! under a fixed seed (with hmtrace, and hawkset and vardalith on PM), a PM program with every PM
//! pass, a dynamically linked one, a crash-testing run, and pmrace with post-failure validation
//! (a confirmed finding and a discarded one). A change in how any of them executes (another
//! instruction count, system call, schedule or PM event) changes its trace hash; a change in what
//! the passes, crash testing or validation report changes its findings.
//!
//! The guests are built for this test with `-ffile-prefix-map` (the Makefile's `EXTRA_FLAGS`)
//! into a temporary directory whose path has a fixed length, so that neither their bytes nor the
//! initial stack (`AT_EXECFN` is the program's path) depend on where the repository is.
//!
//! A change that is meant to change executions (thread-switch points, a system call's result)
//! updates the table in the same commit. To print the current values in the table's syntax:
//!
//! ```sh
//! FERRITE_RECORD=1 cargo test --test trace_hashes -- --nocapture
//! ```

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use common::*;
use serde_json::Value;

/// One recorded run: `ferrite SUB OPTS -- GUEST ARGS`; `{dir}` in an option stands for the
/// directory of the guests built here.
struct Case {
    name: &'static str,
    sub: &'static str,
    opts: &'static [&'static str],
    guest: &'static str,
    args: &'static [&'static str],
    /// The exit status.
    code: i32,
}

const CASES: &[Case] = &[
    Case {
        name: "single-threaded",
        sub: "run",
        opts: &["--seed", "7"],
        guest: "libc_workout",
        args: &["alpha", "beta"],
        code: 3,
    },
    Case {
        name: "threads-hmtrace",
        sub: "run",
        opts: &["--seed", "7", "--analyses", "hmtrace"],
        guest: "thr_racy_counter",
        args: &[],
        code: 66,
    },
    Case {
        name: "threads-pm-races",
        sub: "run",
        opts: &["--seed", "3", "--analyses", "hawkset,vardalith"],
        guest: "pi_unlock_persist",
        args: &["/mnt/pmem0/pool"],
        code: 66,
    },
    Case {
        name: "pm-all",
        sub: "run",
        opts: &["--analyses", "all"],
        guest: "pm_log",
        args: &["/mnt/pmem0/log"],
        code: 66,
    },
    // The loader finds libc through LD_LIBRARY_PATH, so it never reads the host's ld.so.cache,
    // which changes whenever the host installs a library.
    Case {
        name: "dynamic",
        sub: "run",
        opts: &["--env", "LD_LIBRARY_PATH=/lib/x86_64-linux-gnu"],
        guest: "pm_log.dyn",
        args: &["/mnt/pmem0/log"],
        code: 66,
    },
    Case {
        name: "crash",
        sub: "crash",
        opts: &["--jobs", "1", "--recover", "{dir}/pm_log /mnt/pmem0/log check"],
        guest: "pm_log",
        args: &["/mnt/pmem0/log"],
        code: 66,
    },
    Case {
        name: "pmrace-confirmed",
        sub: "run",
        opts: &["--analyses", "pmrace", "--recover", "{dir}/pr_copy /mnt/pmem0/pool recover"],
        guest: "pr_copy",
        args: &["/mnt/pmem0/pool"],
        code: 66,
    },
    Case {
        name: "pmrace-discarded",
        sub: "run",
        opts: &["--analyses", "pmrace", "--recover", "{dir}/pr_recovery_rewrites /mnt/pmem0/pool recover"],
        guest: "pr_recovery_rewrites",
        args: &["/mnt/pmem0/pool"],
        code: 0,
    },
];

/// What each case must give: its name, trace hash, and the summary of its report
/// ([`summary`]). Recorded from main at b27c308, before the refactor.
const EXPECTED: &[(&str, &str, &[&str])] = &[
    (
        "single-threaded",
        "d8e57e15aca14aa0b12be2c5029b951d",
        &[
            "exit {\"code\":3}",
            "stat hawkset.clipped_loads=0",
            "stat hawkset.deferred_records=0",
            "stat hawkset.dropped_loads=0",
            "stat hawkset.freed_bytes=0",
            "stat hawkset.frees=0",
            "stat hawkset.inferred_acquisitions=0",
            "stat hawkset.inferred_releases=0",
            "stat hawkset.irh_held=0",
            "stat hawkset.irh_unordered_publications=0",
            "stat hawkset.lane_holds=0",
            "stat hawkset.load_records=0",
            "stat hawkset.reads_from_clocks=0",
            "stat hawkset.record_contexts=0",
            "stat hawkset.store_records=0",
            "stat hawkset.store_releases=0",
            "stat hawkset.sync_accesses=0",
            "stat hawkset.withdrawn_accesses=0",
            "stat vardalith.clipped_loads=0",
            "stat vardalith.dropped_loads=0",
            "stat vardalith.freed_bytes=0",
            "stat vardalith.frees=0",
            "stat vardalith.inferred_acquisitions=0",
            "stat vardalith.inferred_releases=0",
            "stat vardalith.irh_held=0",
            "stat vardalith.irh_unordered_publications=0",
            "stat vardalith.lane_holds=0",
            "stat vardalith.lane_ordered=0",
            "stat vardalith.rf_ordered=0",
            "stat vardalith.store_releases=0",
            "stat vardalith.sync_accesses=0",
            "stat vardalith.withdrawn_accesses=0",
        ],
    ),
    (
        "threads-hmtrace",
        "930caa8e18c79dbd41a007a9cfbb2178",
        &[
            "exit {\"code\":0}",
            "hmtrace/data-race x968: earlier-read@thr_racy_counter.c:20 later-write@thr_racy_counter.c:22 | data race: read by thread 1001 and write by thread 1002 of 8 byte(s) at 0x4bb340, not ordered by happens-before and with no lock held",
            "hmtrace/data-race x967: earlier-write@thr_racy_counter.c:22 later-write@thr_racy_counter.c:22 | data race: write by thread 1002 and write by thread 1001 of 8 byte(s) at 0x4bb340, not ordered by happens-before and with no lock held",
            "stat hmtrace.contexts=5",
        ],
    ),
    (
        "threads-pm-races",
        "bb3f5355caa9f3b3a8e0432487d1b8ab",
        &[
            "exit {\"code\":0}",
            "hawkset/persistence-induced-race x1: store@pi_unlock_persist.c:29 fence@pi_unlock_persist.c:33 load@pi_unlock_persist.c:42 | persistence-induced race: a PM store persisted by a fence outside the locks its readers hold; loads in other threads, holding no common lock and not ordered by create/join, can read it before it is durable",
            "vardalith/persistence-induced-race x1: store@pi_unlock_persist.c:29 load@pi_unlock_persist.c:42 | persistence-induced race: the store's window (from the acquire before it to the first release after its own persist) overlapped another thread's load window on the same PM bytes, so some interleaving lets the load read the store before it is durable",
            "stat hawkset.clipped_loads=0",
            "stat hawkset.deferred_records=0",
            "stat hawkset.dropped_loads=0",
            "stat hawkset.freed_bytes=0",
            "stat hawkset.frees=0",
            "stat hawkset.inferred_acquisitions=0",
            "stat hawkset.inferred_releases=0",
            "stat hawkset.irh_held=0",
            "stat hawkset.irh_unordered_publications=0",
            "stat hawkset.lane_holds=0",
            "stat hawkset.load_records=2",
            "stat hawkset.reads_from_clocks=0",
            "stat hawkset.record_contexts=4",
            "stat hawkset.store_records=1",
            "stat hawkset.store_releases=0",
            "stat hawkset.sync_accesses=0",
            "stat hawkset.withdrawn_accesses=0",
            "stat vardalith.clipped_loads=0",
            "stat vardalith.dropped_loads=0",
            "stat vardalith.freed_bytes=0",
            "stat vardalith.frees=0",
            "stat vardalith.inferred_acquisitions=0",
            "stat vardalith.inferred_releases=0",
            "stat vardalith.irh_held=0",
            "stat vardalith.irh_unordered_publications=0",
            "stat vardalith.lane_holds=0",
            "stat vardalith.lane_ordered=0",
            "stat vardalith.rf_ordered=0",
            "stat vardalith.store_releases=0",
            "stat vardalith.sync_accesses=0",
            "stat vardalith.withdrawn_accesses=0",
        ],
    ),
    (
        "pm-all",
        "2682c938c2edfaa851d914a8e29c8d98",
        &[
            "exit {\"code\":0}",
            "unpersisted/unpersisted-store x40: store@pm_log.c:62 | store to PM never made durable (no flush and fence of its line) before the program ended",
            "stat hawkset.clipped_loads=5",
            "stat hawkset.deferred_records=0",
            "stat hawkset.dropped_loads=25",
            "stat hawkset.freed_bytes=0",
            "stat hawkset.frees=0",
            "stat hawkset.inferred_acquisitions=0",
            "stat hawkset.inferred_releases=0",
            "stat hawkset.irh_held=0",
            "stat hawkset.irh_unordered_publications=0",
            "stat hawkset.lane_holds=0",
            "stat hawkset.load_records=49",
            "stat hawkset.reads_from_clocks=0",
            "stat hawkset.record_contexts=18",
            "stat hawkset.store_records=40",
            "stat hawkset.store_releases=0",
            "stat hawkset.sync_accesses=0",
            "stat hawkset.withdrawn_accesses=0",
            "stat vardalith.clipped_loads=5",
            "stat vardalith.dropped_loads=25",
            "stat vardalith.freed_bytes=0",
            "stat vardalith.frees=0",
            "stat vardalith.inferred_acquisitions=0",
            "stat vardalith.inferred_releases=0",
            "stat vardalith.irh_held=0",
            "stat vardalith.irh_unordered_publications=0",
            "stat vardalith.lane_holds=0",
            "stat vardalith.lane_ordered=0",
            "stat vardalith.rf_ordered=0",
            "stat vardalith.store_releases=0",
            "stat vardalith.sync_accesses=0",
            "stat vardalith.withdrawn_accesses=0",
        ],
    ),
    (
        "dynamic",
        "5e6f92ee0e04839398bfdacb7b9f7d10",
        &[
            "exit {\"code\":0}",
            "unpersisted/unpersisted-store x40: store@pm_log.c:62 | store to PM never made durable (no flush and fence of its line) before the program ended",
            "stat hawkset.clipped_loads=0",
            "stat hawkset.deferred_records=0",
            "stat hawkset.dropped_loads=0",
            "stat hawkset.freed_bytes=0",
            "stat hawkset.frees=0",
            "stat hawkset.inferred_acquisitions=0",
            "stat hawkset.inferred_releases=0",
            "stat hawkset.irh_held=0",
            "stat hawkset.irh_unordered_publications=0",
            "stat hawkset.lane_holds=0",
            "stat hawkset.load_records=74",
            "stat hawkset.reads_from_clocks=0",
            "stat hawkset.record_contexts=20",
            "stat hawkset.store_records=40",
            "stat hawkset.store_releases=0",
            "stat hawkset.sync_accesses=0",
            "stat hawkset.withdrawn_accesses=0",
            "stat vardalith.clipped_loads=0",
            "stat vardalith.dropped_loads=0",
            "stat vardalith.freed_bytes=0",
            "stat vardalith.frees=0",
            "stat vardalith.inferred_acquisitions=0",
            "stat vardalith.inferred_releases=0",
            "stat vardalith.irh_held=0",
            "stat vardalith.irh_unordered_publications=0",
            "stat vardalith.lane_holds=0",
            "stat vardalith.lane_ordered=0",
            "stat vardalith.rf_ordered=0",
            "stat vardalith.store_releases=0",
            "stat vardalith.sync_accesses=0",
            "stat vardalith.withdrawn_accesses=0",
        ],
    ),
    (
        "crash",
        "2682c938c2edfaa851d914a8e29c8d98",
        &[
            "exit {\"code\":0}",
            "unpersisted/unpersisted-store x40: store@pm_log.c:62 | store to PM never made durable (no flush and fence of its line) before the program ended",
            "crash/recovery-failed x122: crash point@pm.h:62 lost store@pm_log.c:62 | recovery failed (recovery exited with status 1) after a crash at instruction 9453 in persist (pm.h:62) that left one line unpersisted: log+0x40 without its last 8 version(s)",
            "crash/recovery-failed x1: crash point@:0 lost store@pm_log.c:62 | recovery failed (recovery exited with status 1) after a crash at instruction 24481 in _exit (pm_log+0x43bda9) that left one line unpersisted: log+0x40 without its last 8 version(s)",
            "stat hawkset.clipped_loads=5",
            "stat hawkset.deferred_records=0",
            "stat hawkset.dropped_loads=25",
            "stat hawkset.freed_bytes=0",
            "stat hawkset.frees=0",
            "stat hawkset.inferred_acquisitions=0",
            "stat hawkset.inferred_releases=0",
            "stat hawkset.irh_held=0",
            "stat hawkset.irh_unordered_publications=0",
            "stat hawkset.lane_holds=0",
            "stat hawkset.load_records=49",
            "stat hawkset.reads_from_clocks=0",
            "stat hawkset.record_contexts=18",
            "stat hawkset.store_records=40",
            "stat hawkset.store_releases=0",
            "stat hawkset.sync_accesses=0",
            "stat hawkset.withdrawn_accesses=0",
            "stat vardalith.clipped_loads=5",
            "stat vardalith.dropped_loads=25",
            "stat vardalith.freed_bytes=0",
            "stat vardalith.frees=0",
            "stat vardalith.inferred_acquisitions=0",
            "stat vardalith.inferred_releases=0",
            "stat vardalith.irh_held=0",
            "stat vardalith.irh_unordered_publications=0",
            "stat vardalith.lane_holds=0",
            "stat vardalith.lane_ordered=0",
            "stat vardalith.rf_ordered=0",
            "stat vardalith.store_releases=0",
            "stat vardalith.sync_accesses=0",
            "stat vardalith.withdrawn_accesses=0",
            "crash points=7 images=627 unique=140 recoveries=387 failures=123",
        ],
    ),
    (
        "pmrace-confirmed",
        "a3e73b7f7e9f323216703695e8920509",
        &[
            "exit {\"code\":0}",
            "pmrace/inter-thread-inconsistency x5: unpersisted load@pr_copy.c:51 source store@pr_copy.c:36 durable side effect@pr_copy.c:52 recovery read@pr_copy.c:63 | the load read PM bytes another thread stored that were not yet durable, and the thread then stored a value derived from them to PM: a crash after that store is durable and before the source is loses the cause but keeps its effect; a crash image where the side effect is durable and its source is not was captured; validated: recovery reads the inconsistent bytes before overwriting them",
            "stat pmrace.candidate_loads=5",
            "stat pmrace.images=1",
            "stat pmrace.inter_candidates=1",
            "stat pmrace.inter_inconsistencies=1",
            "stat pmrace.intra_candidates=0",
            "stat pmrace.intra_inconsistencies=0",
            "stat pmrace.source_durable_first=0",
            "stat pmrace.sync_inconsistencies=0",
            "stat pmrace.sync_side_effects=0",
            "stat pmrace.validated_bugs=1",
        ],
    ),
    (
        "pmrace-discarded",
        "1bee80bd144a06f81bfe90e9b0f8d086",
        &[
            "exit {\"code\":0}",
            "discarded pmrace/inter-thread-inconsistency x5: unpersisted load@pr_recovery_rewrites.c:48 source store@pr_recovery_rewrites.c:33 durable side effect@pr_recovery_rewrites.c:49 | the load read PM bytes another thread stored that were not yet durable, and the thread then stored a value derived from them to PM: a crash after that store is durable and before the source is loses the cause but keeps its effect; a crash image where the side effect is durable and its source is not was captured; discarded: recovery overwrites all 8 inconsistent bytes before reading them",
            "stat pmrace.candidate_loads=5",
            "stat pmrace.images=1",
            "stat pmrace.inter_candidates=1",
            "stat pmrace.inter_inconsistencies=1",
            "stat pmrace.intra_candidates=0",
            "stat pmrace.intra_inconsistencies=0",
            "stat pmrace.source_durable_first=0",
            "stat pmrace.sync_inconsistencies=0",
            "stat pmrace.sync_side_effects=0",
            "stat pmrace.validated_false_positives=1",
        ],
    ),
];

/// The guests of [`CASES`], built once into a fresh directory of fixed-length path.
fn guests() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new().prefix("ferrite-th-").tempdir().expect("a temporary directory");
        let src = repo().join("guests");
        let mut targets: Vec<PathBuf> = CASES.iter().map(|c| dir.path().join(c.guest)).collect();
        targets.sort();
        targets.dedup();
        let out = Command::new("make")
            .arg("-C")
            .arg(&src)
            .arg(format!("BUILD={}", dir.path().display()))
            .arg(format!("EXTRA_FLAGS=-ffile-prefix-map={}=.", src.display()))
            .args(&targets)
            .stdin(Stdio::null())
            .output()
            .expect("make runs");
        assert!(
            out.status.success(),
            "building the guests failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
    .path()
}

/// A report as lines: exit, then each finding (analysis/kind, occurrences, each location's role
/// at its file name and line, and the message), each discarded finding, the counters, and the crash summary.
fn summary(r: &Value) -> Vec<String> {
    let finding = |f: &Value| {
        let places: Vec<String> =
            places(f).iter().map(|(role, _, file, line)| format!("{role}@{file}:{line}")).collect();
        format!(
            "{}/{} x{}: {} | {}",
            f["analysis"].as_str().unwrap(),
            f["kind"].as_str().unwrap(),
            f["occurrences"],
            places.join(" "),
            f["message"].as_str().unwrap()
        )
    };
    let mut out = vec![format!("exit {}", r["run"]["exit"])];
    for f in r["findings"].as_array().unwrap() {
        out.push(finding(f));
    }
    for f in r["discarded"].as_array().into_iter().flatten() {
        out.push(format!("discarded {}", finding(f)));
    }
    if let Some(stats) = r["stats"].as_object() {
        for (k, v) in stats {
            out.push(format!("stat {k}={v}"));
        }
    }
    if let Some(c) = r["crash"].as_object() {
        let n = |k: &str| c[k].to_string();
        out.push(format!(
            "crash points={} images={} unique={} recoveries={} failures={}",
            n("crash_points"),
            n("images"),
            n("unique_images"),
            n("recoveries"),
            n("failures")
        ));
    }
    out
}

/// Runs a case; its trace hash and summary.
fn run(c: &Case) -> (String, Vec<String>) {
    let dir = guests();
    let guest = dir.join(c.guest);
    let opts: Vec<String> = c.opts.iter().map(|o| o.replace("{dir}", &dir.display().to_string())).collect();
    let f = if c.sub == "crash" { Ferrite::crash(&guest) } else { Ferrite::run(&guest) };
    let run = f.opts(&["--quiet", "--report", "r.json"]).opts(&opts).args(c.args).go();
    run.assert_code(c.code);
    let r = run.json("r.json");
    (r["run"]["trace_hash"].as_str().unwrap().to_string(), summary(&r))
}

#[test]
fn executions_and_findings_are_as_recorded() {
    let got: Vec<(&str, String, Vec<String>)> = CASES
        .iter()
        .map(|c| {
            let (hash, lines) = run(c);
            (c.name, hash, lines)
        })
        .collect();
    if std::env::var_os("FERRITE_RECORD").is_some() {
        println!("const EXPECTED: &[(&str, &str, &[&str])] = &[");
        for (name, hash, lines) in &got {
            println!("    (\n        {name:?},\n        {hash:?},\n        &[");
            for l in lines {
                println!("            {l:?},");
            }
            println!("        ],\n    ),");
        }
        println!("];");
        return;
    }
    let mut wrong = Vec::new();
    for (name, hash, lines) in &got {
        let Some((_, want_hash, want)) = EXPECTED.iter().find(|e| e.0 == *name) else {
            wrong.push(format!("{name}: nothing recorded"));
            continue;
        };
        if hash != want_hash {
            wrong.push(format!("{name}: trace hash {hash}, recorded {want_hash}"));
        }
        if lines.iter().map(String::as_str).ne(want.iter().copied()) {
            wrong.push(format!("{name}: report\n  {}\nrecorded\n  {}", lines.join("\n  "), want.join("\n  ")));
        }
    }
    assert!(wrong.is_empty(), "runs differ from the recorded ones:\n{}", wrong.join("\n"));
}
