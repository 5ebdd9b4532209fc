//! PMDK transactions: pmemcheck's transaction check in `unpersisted` (a store inside
//! `TX_BEGIN`..`TX_END` to bytes not added to the transaction, reported at the program's line),
//! and crash testing of a libpmemobj program whose recovery is `pmemobj_open` itself: the
//! correct program passes every crash image tried, the variant that writes outside the
//! transaction fails recovery.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// Runs `prog POOL` natively (pool in a scratch directory) and under ferrite with `opts` (pool
/// on the PM mount); checks that stdout is the same and returns the ferrite run and its report.
fn run_both(prog: &str, pool: &str, opts: &[&str]) -> (Run, Value) {
    let program = guest(prog);
    let dir = scratch();
    let native_pool = dir.path().join(pool).display().to_string();
    let native = native(&program, &[native_pool.as_str()], &[]);
    native.assert_code(0);
    let mut all = vec!["--report", "r.json"];
    all.extend_from_slice(opts);
    let pm_pool = format!("/mnt/pmem0/{pool}");
    let run = Ferrite::run(&program).opts(&all).args(&[pm_pool.as_str()]).go();
    assert_same_stdout(&native, &run);
    let report = run.json("r.json");
    (run, report)
}

fn kinds(report: &Value) -> Vec<String> {
    report["findings"].as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap().to_string()).collect()
}

fn file_of(loc: &Value) -> Option<&str> {
    loc["file"].as_str().and_then(|f| f.rsplit('/').next())
}

#[test]
fn a_store_outside_the_transaction_is_reported_at_its_line() {
    let line = marker_line("pmdk_tx_outside.c", "/* BUG: store outside the transaction */");
    let begin = marker_line("pmdk_tx_outside.c", "/* TX: begins */");
    let (run, report) = run_both("pmdk_tx_outside", "txpool", &["--analyses", "unpersisted"]);
    run.assert_code(66);
    assert_eq!(run.stdout_str(), "a 3 b 3\n");
    // Only the transaction check: `b` shares its cache line with `a`, which the commit flushes.
    assert_eq!(kinds(&report), vec!["store-outside-transaction"], "{}", run.describe());
    let f = &report["findings"][0];
    assert_eq!(f["occurrences"].as_u64(), Some(3), "one store per round");
    let store = &f["locations"][0];
    assert_eq!(store["role"].as_str(), Some("store"));
    assert_eq!(file_of(store), Some("pmdk_tx_outside.c"));
    assert_eq!(store["line"].as_u64(), Some(u64::from(line)), "{}", run.describe());
    assert_eq!(store["function"].as_str(), Some("main"));
    // The transaction: libpmemobj's pmemobj_tx_begin, called from the program's TX_BEGIN.
    let tx = &f["locations"][1];
    assert_eq!(tx["role"].as_str(), Some("transaction"));
    let called_from = tx["backtrace"].as_array().unwrap().iter().find(|fr| fr["line"].is_u64()).unwrap();
    assert_eq!(called_from["line"].as_u64(), Some(u64::from(begin)), "{}", run.describe());
    assert_eq!(called_from["function"].as_str(), Some("main"));
}

#[test]
fn the_transaction_check_can_be_turned_off() {
    let (run, report) = run_both("pmdk_tx_outside", "txpool", &["--analyses", "unpersisted:tx=off"]);
    run.assert_code(0);
    assert_eq!(report["findings"], serde_json::json!([]), "{}", run.describe());
}

/// The twin adds both fields; libpmemobj's own stores inside its transactions (undo logs, heap
/// metadata, the lanes it excludes with `ADD_TO_GLOBAL_TX_IGNORE`) are not the program's: the
/// correct PMDK programs stay silent with the check on.
#[test]
fn correct_transactions_are_silent() {
    for (prog, pool) in [
        ("pmdk_tx_outside_fixed", "txpool"),
        ("pmdk_list", "objpool"),
        ("pmdk_basic", "pmemfile"),
        ("pmdk_mutex", "objpool"),
    ] {
        let (run, report) = run_both(prog, pool, &["--analyses", "unpersisted"]);
        run.assert_code(0);
        assert_eq!(report["findings"], serde_json::json!([]), "{prog}\n{}", run.describe());
    }
}

/// `ferrite crash` on a pool created beforehand: the workload opens it and runs its three
/// transactions, and every crash image is recovered by the program's `check` mode
/// (`pmemobj_open`, which rolls back an interrupted transaction, then `a == b`). Each recovery
/// runs libpmemobj's whole open (about 12 M instructions), so images are sampled: at most two
/// per crash point.
fn crash_test(prog: &str) -> (Run, Value, Duration) {
    let program = guest(prog);
    let dir = scratch();
    std::fs::create_dir(dir.path().join("pm")).unwrap();
    let made = Ferrite::run(&program)
        .opts(&["--analyses", "none", "--pm-dir", "pm"])
        .args(&["/mnt/pmem0/txpool"])
        .in_dir(dir)
        .go();
    made.assert_code(0);
    assert_eq!(made.stdout_str(), "a 3 b 3\n");
    let recover = format!("{} /mnt/pmem0/txpool check", program.display());
    let start = Instant::now();
    let run = Ferrite::crash(&program)
        .opts(&[
            "--analyses",
            "none",
            "--pm-dir",
            "pm",
            "--max-images",
            "2",
            "--jobs",
            "2",
            "--recover",
            recover.as_str(),
            "--report",
            "c.json",
        ])
        .args(&["/mnt/pmem0/txpool"])
        .in_dir(made.dir)
        .go();
    let took = start.elapsed();
    assert_eq!(run.stdout_str(), "a 6 b 6\n", "{}", run.describe());
    let report = run.json("c.json");
    (run, report, took)
}

#[test]
fn crash_testing_a_libpmemobj_program_passes_every_image_tried() {
    let (run, report, took) = crash_test("pmdk_tx_outside_fixed");
    run.assert_code(0);
    assert_eq!(report["findings"], serde_json::json!([]), "{}", run.describe());
    let c = get(&report, "crash");
    assert_eq!(c["failures"].as_u64(), Some(0));
    assert!(c["crash_points"].as_u64().unwrap() >= 20, "{c}");
    assert!(c["recoveries"].as_u64().unwrap() >= 30, "{c}");
    eprintln!("pmdk_tx_outside_fixed: {c} in {took:?}");
}

#[test]
fn crash_testing_catches_the_store_outside_the_transaction() {
    let (run, report, took) = crash_test("pmdk_tx_outside");
    run.assert_code(66);
    let crash: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["analysis"] == "crash").collect();
    assert!(!crash.is_empty(), "{}", run.describe());
    // With everything persisted, `b` is new while the interrupted transaction's undo log
    // rolls `a` back: the crash point lies in the program's TX_END.
    let f = crash[0];
    assert_eq!(f["kind"].as_str(), Some("recovery-failed"));
    let point = &f["locations"][0];
    assert_eq!(point["role"].as_str(), Some("crash point"));
    let in_main = point["backtrace"].as_array().unwrap().iter().find(|fr| fr["line"].is_u64()).unwrap();
    assert_eq!(file_of(in_main), Some("pmdk_tx_outside.c"), "{}", run.describe());
    assert_eq!(in_main["function"].as_str(), Some("main"));
    assert!(get(&report, "crash.failures").as_u64().unwrap() > 0);
    eprintln!("pmdk_tx_outside: {} in {took:?}", get(&report, "crash"));
}
