//! The `unpersisted` pass (pmemcheck's checks) on PM guests: each bug at its source line, each
//! fixed twin silent, and the kernel's own accesses to PM counted (read() into PM is a store,
//! msync and pwrite make data durable). A store persisted by another thread's flush and fence
//! is durable under the hardware rule the pass uses.

mod common;

use common::*;
use serde_json::Value;

fn pm_run(prog: &str, args: &[&str]) -> (Run, Value) {
    let run = Ferrite::run(&guest(prog)).opts(&["--analyses", "unpersisted", "--report", "r.json"]).args(args).go();
    let report = run.json("r.json");
    (run, report)
}

fn kinds_at(report: &Value) -> Vec<(String, String, u64)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let file = f["locations"][0]["file"].as_str().unwrap_or("").rsplit('/').next().unwrap_or("").to_string();
            (f["kind"].as_str().unwrap().to_string(), file, f["locations"][0]["line"].as_u64().unwrap_or(0))
        })
        .collect()
}

#[test]
fn log_entry_never_persisted_is_reported_at_its_store() {
    let line = u64::from(marker_line("pm_log.c", "/* BUG: entry stored but never persisted */"));
    let (run, report) = pm_run("pm_log", &["/mnt/pmem0/log"]);
    run.assert_code(66);
    assert_eq!(kinds_at(&report), vec![("unpersisted-store".to_string(), "pm_log.c".to_string(), line)]);
    // 5 entries of 64 bytes, stored as 16-byte moves split into 8-byte accesses.
    assert_eq!(report["findings"][0]["occurrences"].as_u64(), Some(40));
}

#[test]
fn fixed_log_and_instruction_workout_are_clean() {
    for (prog, args) in [("pm_log_fixed", vec!["/mnt/pmem0/log"]), ("pm_insns", vec![])] {
        let (run, report) = pm_run(prog, &args);
        run.assert_code(0);
        assert_eq!(report["findings"], serde_json::json!([]), "{prog}\n{}", run.describe());
    }
}

#[test]
fn flush_without_fence_and_redundant_flush() {
    let store = u64::from(marker_line("pm_unflushed_fence.c", "/* STORE: unfenced line */"));
    let flush = u64::from(marker_line("pm_unflushed_fence.c", "/* BUG: flush without fence */"));
    let (run, report) = pm_run("pm_unflushed_fence", &[]);
    run.assert_code(66);
    let got = kinds_at(&report);
    assert!(got.contains(&("unpersisted-store".into(), "pm_unflushed_fence.c".into(), store)), "{got:?}");
    assert!(got.contains(&("flush-without-fence".into(), "pm_unflushed_fence.c".into(), flush)), "{got:?}");

    let redundant = u64::from(marker_line("pm_redundant_flush.c", "/* BUG: redundant flush */"));
    let (run, report) = pm_run("pm_redundant_flush", &[]);
    run.assert_code(66);
    let got = kinds_at(&report);
    assert!(got.contains(&("flush-clean-line".into(), "pm_redundant_flush.c".into(), redundant)), "{got:?}");
    assert!(!got.iter().any(|k| k.0 == "unpersisted-store"), "{got:?}");
}

#[test]
fn kernel_accesses_to_pm_count() {
    let (run, report) = pm_run("pm_kernel_io", &["msync"]);
    run.assert_code(0);
    assert_eq!(report["findings"], serde_json::json!([]), "msync makes the stores durable");

    let read_line = u64::from(marker_line("pm_kernel_io.c", "/* KERNEL STORE */"));
    let (run, report) = pm_run("pm_kernel_io", &["read"]);
    run.assert_code(66);
    let f = &report["findings"][0];
    assert_eq!(get(f, "kind"), "unpersisted-store");
    let frames = f["locations"][0]["backtrace"].as_array().unwrap();
    assert!(
        frames.iter().any(|fr| fr["line"].as_u64() == Some(read_line)),
        "the read() call's line is in the store's backtrace: {f}"
    );

    let not_covered = u64::from(marker_line("pm_kernel_io.c", "/* NOT COVERED */"));
    let (run, report) = pm_run("pm_kernel_io", &["pwrite"]);
    run.assert_code(66);
    assert_eq!(kinds_at(&report), vec![("unpersisted-store".to_string(), "pm_kernel_io.c".to_string(), not_covered)]);
}

#[test]
fn another_threads_flush_and_fence_persist_under_the_hardware_rule() {
    let (run, report) = pm_run("pm_cross_thread_persist", &[]);
    run.assert_code(0);
    assert_eq!(report["findings"], serde_json::json!([]), "{}", run.describe());
    assert!(get(&report, "run.threads").as_u64().unwrap() >= 2);
}

#[test]
fn another_threads_persist_is_not_durable_under_the_writer_rule() {
    let store = u64::from(marker_line("pm_cross_thread_persist.c", "/* STORE: by thread A */"));
    let run = Ferrite::run(&guest("pm_cross_thread_persist"))
        .opts(&["--analyses", "unpersisted:rule=own", "--report", "r.json"])
        .go();
    run.assert_code(66);
    let report = run.json("r.json");
    assert_eq!(
        kinds_at(&report),
        vec![("unpersisted-store".to_string(), "pm_cross_thread_persist.c".to_string(), store)]
    );
}

#[test]
fn pool_on_the_host_holds_the_final_contents() {
    let pm = scratch();
    let run = Ferrite::run(&guest("pm_log_fixed"))
        .opts(&["--pm-dir".to_string(), pm.path().display().to_string()])
        .args(&["/mnt/pmem0/log"])
        .go();
    run.assert_code(0);
    let check = Ferrite::run(&guest("pm_log_fixed"))
        .opts(&["--pm-dir".to_string(), pm.path().display().to_string()])
        .args(&["/mnt/pmem0/log", "check"])
        .go();
    check.assert_code(0);
    assert_eq!(check.stdout_str(), "recovery ok: 5 entries\n");
}

#[test]
fn persistence_model_options_change_the_verdict() {
    // Under eADR the caches are persistent: the log's entries survive without flushes.
    let run = Ferrite::run(&guest("pm_log"))
        .opts(&["--analyses", "unpersisted", "--persistency", "eadr", "--report", "r.json"])
        .args(&["/mnt/pmem0/log"])
        .go();
    run.assert_code(0);
    assert_eq!(run.json("r.json")["run"]["pm"]["persistency"], "eadr");
    // The model options are part of the run's definition, recorded for replay.
    let run = Ferrite::run(&guest("pm_log_fixed"))
        .opts(&["--atomicity", "word8", "--flush-model", "strict", "--report", "r.json"])
        .args(&["/mnt/pmem0/log"])
        .go();
    run.assert_code(0);
    let pm = &run.json("r.json")["run"]["pm"];
    assert_eq!((pm["atomicity"].as_str(), pm["flush_model"].as_str()), (Some("word8"), Some("strict")));
}

#[test]
fn a_bad_config_file_is_one_error_line() {
    let dir = scratch();
    let cfg = dir.path().join("bad.ron");
    std::fs::write(&cfg, "(locks: [(symbol: \"x\", kind: Bogus)])").unwrap();
    let run = Ferrite::run(&guest("exit_status")).opts(&["--config".to_string(), cfg.display().to_string()]).go();
    run.assert_code(2);
    assert_eq!(error_lines(&run.stderr).len(), 1, "{}", run.describe());
}

#[test]
fn device_dax_namespace_is_pm() {
    let pm = scratch();
    std::fs::write(pm.path().join("dax0.0"), vec![0u8; 4096]).unwrap();
    let run = Ferrite::run(&guest("pm_devdax"))
        .opts(&["--analyses".to_string(), "unpersisted".into(), "--pm-dir".into(), pm.path().display().to_string()])
        .go();
    run.assert_code(0);
    assert_eq!(run.stdout_str(), "devdax value da\n");
    // The store reached the namespace's file through the shared mapping.
    assert_eq!(std::fs::read(pm.path().join("dax0.0")).unwrap()[0], 0xda);
}

/// A store that runs off the end of a PM mapping into an unmapped page faults; x86 faults are
/// precise, so nothing of it happens: no PM store is reported and the pool keeps its old bytes,
/// although Unicorn had written the first half before the fault.
#[test]
fn a_faulting_store_leaves_no_trace() {
    let line = u64::from(marker_line("pm_torn_fault.c", "/* TORN STORE */"));
    let pm = scratch();
    let run = Ferrite::run(&guest("pm_torn_fault"))
        .opts(&[
            "--analyses".to_string(),
            "unpersisted".into(),
            "--pm-dir".into(),
            pm.path().display().to_string(),
            "--report".into(),
            "r.json".into(),
        ])
        .go();
    run.assert_code(139);
    let report = run.json("r.json");
    assert_eq!(kinds_at(&report), vec![("SIGSEGV".to_string(), "pm_torn_fault.c".to_string(), line)]);
    assert!(std::fs::read(pm.path().join("pool")).unwrap().iter().all(|b| *b == 0));
}

/// Code the program writes into writable, executable memory and rewrites in place with its own
/// stores (a JIT's code cache): each version's flushes are what it has, not what the code at the
/// same address and of the same length had before. The version without a flush loses its store;
/// the two with one do not.
#[test]
fn code_rewritten_by_the_program_is_decoded_again() {
    let line = u64::from(marker_line("jit_rewrite_flush.c", "/* BUG: this call's store is never made durable */"));
    let (run, report) = pm_run("jit_rewrite_flush", &["/mnt/pmem0/jit"]);
    run.assert_code(66);
    assert_eq!(kinds_at(&report), vec![("unpersisted-store".to_string(), "jit_rewrite_flush.c".to_string(), line)]);
    assert_eq!(run.stdout_str(), "1 1 1\n", "{}", run.describe());
}

/// The machine removes the code hooks of flushes, fences and locked instructions that stopped
/// running (Unicorn walks every code hook at each hooked instruction it executes), and hooks them
/// again when they run again. `flush_after_idle` persists a line with a routine, computes for 80 M
/// instructions (the routine's hooks and libc's are swept), then stores again: the fixed twin's
/// second persist, through the same routine, must be seen (else its store were reported), and
/// the buggy one's missing persist still is.
#[test]
fn a_flush_whose_hook_was_swept_is_seen_when_it_runs_again() {
    let line = u64::from(marker_line("flush_after_idle.c", "/* BUG: never persisted"));
    let (run, report) = pm_run("flush_after_idle", &["/mnt/pmem0/p"]);
    run.assert_code(66);
    assert_eq!(kinds_at(&report), vec![("unpersisted-store".to_string(), "flush_after_idle.c".to_string(), line)]);
    let run = Ferrite::run(&guest("flush_after_idle_fixed"))
        .opts(&["--analyses", "unpersisted", "--report", "r.json", "--host-stats", "hs.json"])
        .args(&["/mnt/pmem0/p"])
        .go();
    run.assert_code(0);
    assert!(kinds_at(&run.json("r.json")).is_empty(), "{}", run.describe());
    let stats = run.json("hs.json");
    assert!(stats["hooks_swept"].as_u64().unwrap_or(0) >= 10, "{stats}");
}
