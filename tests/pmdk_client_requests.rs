//! PMDK's own annotations, through Valgrind's client-request protocol (`emu::client`): ferrite
//! answers like pmemcheck, so Debian's libpmem and libpmemobj declare the pool state they leave
//! unpersisted on purpose, and the `unpersisted` pass stays silent on correct PMDK programs
//! while a field stored outside any transaction and never persisted is still reported at its
//! line. Enabling the annotations changes nothing the guests print.

mod common;

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

#[test]
fn correct_pmdk_programs_have_no_unpersisted_findings() {
    // pmdk_list: 17 unpersisted stores (lock words, run-time header fields, heap state) and 14
    // flush and fence lints inside libpmem before PMDK's annotations were honoured.
    for (prog, pool) in [("pmdk_list", "objpool"), ("pmdk_basic", "pmemfile")] {
        let (run, report) = run_both(prog, pool, &["--analyses", "unpersisted"]);
        run.assert_code(0);
        assert_eq!(report["findings"], serde_json::json!([]), "{prog}\n{}", run.describe());
    }
}

#[test]
fn a_root_field_stored_without_persist_is_reported_at_its_line() {
    let line = marker_line("pmdk_unflushed.c", "/* BUG: no persist */");
    let (run, report) = run_both("pmdk_unflushed", "unflushed", &["--analyses", "unpersisted"]);
    run.assert_code(66);
    assert_eq!(run.stdout_str(), "count 1 flag 10\n");
    assert_eq!(kinds(&report), vec!["unpersisted-store"], "{}", run.describe());
    let at = &report["findings"][0]["locations"][0];
    assert_eq!(at["file"].as_str().unwrap_or("").rsplit('/').next(), Some("pmdk_unflushed.c"));
    assert_eq!(at["line"].as_u64(), Some(u64::from(line)), "{}", run.describe());
    assert_eq!(at["function"].as_str(), Some("main"));
}

#[test]
fn annotated_pm_keeps_durability_findings_and_can_have_its_lints_back() {
    // With `lints=all` the flush and fence lints inside libpmem come back (pmemcheck reports
    // neither by default), while the declared-clean and withdrawn state stays unreported.
    let (run, report) = run_both("pmdk_list", "objpool", &["--analyses", "unpersisted:lints=all"]);
    run.assert_code(66);
    let k = kinds(&report);
    assert!(k.iter().any(|k| k == "flush-clean-line"), "{k:?}");
    assert!(k.iter().all(|k| k == "flush-clean-line" || k == "redundant-fence"), "{k:?}");
}

#[test]
fn answers_do_not_depend_on_the_analyses() {
    // The requests are answered whatever the passes: same schedule, same trace.
    let prog = guest("pmdk_list");
    let trace = |analyses: &str| {
        let run = Ferrite::run(&prog)
            .opts(&["--analyses", analyses, "--report", "r.json"])
            .args(&["/mnt/pmem0/objpool"])
            .go();
        let r = run.json("r.json");
        (r["run"]["trace_hash"].clone(), r["run"]["instructions"].clone())
    };
    assert_eq!(trace("none"), trace("unpersisted,hawkset"));
}
