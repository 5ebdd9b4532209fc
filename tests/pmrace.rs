//! PMRace (`--analyses pmrace`): inter-thread inconsistencies found by taint from an unpersisted
//! load to a PM store, synchronisation inconsistencies, and post-failure validation with the
//! guests' own recovery (`--recover`). Each buggy guest of guests/README.md ("PMRace guests")
//! must be reported at its marked lines, each fixed twin must be silent, and validation must
//! discard what recovery repairs.
//!
//! Pass: analyses/src/pmrace.rs, taint engine: emu/src/taint.rs, validation: src/validate.rs;
//! docs/analyses/pmrace.md.

mod common;

use serde_json::Value;

use common::*;

/// `ferrite run --analyses pmrace` on `name POOL` with `extra` options (and `--recover "name POOL
/// recover"` when `recover`); checks the status (66 with findings, 0 without).
fn pmrace(name: &str, extra: &[&str], recover: bool) -> Value {
    let cmd = format!("{} /mnt/pmem0/pool recover", guest(name).display());
    let mut opts = vec!["--analyses", "pmrace", "--report", "r.json"];
    if recover {
        opts.extend(["--recover", cmd.as_str()]);
    }
    opts.extend_from_slice(extra);
    let run = Ferrite::run(&guest(name)).opts(&opts).args(&["/mnt/pmem0/pool"]).go();
    let report = run.json("r.json");
    let n = findings(&report).len();
    run.assert_code(if n == 0 { 0 } else { 66 });
    report
}

fn findings(r: &Value) -> Vec<&Value> {
    get(r, "findings")
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f.get("analysis").and_then(Value::as_str) == Some("pmrace"))
        .collect()
}

fn stat(r: &Value, name: &str) -> u64 {
    r.get("stats").and_then(|s| s.get(format!("pmrace.{name}"))).and_then(Value::as_u64).unwrap_or(0)
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap()
}

/// Whether `f` has a location with `role` at the line of `guest.c` marked `marker`.
fn at(f: &Value, role: &str, name: &str, marker: &str) -> bool {
    let file = format!("{name}.c");
    let line = marker_line(&file, marker);
    get(f, "locations").as_array().expect("locations").iter().any(|l| {
        l.get("role").and_then(Value::as_str) == Some(role)
            && l.get("line").and_then(Value::as_u64) == Some(u64::from(line))
            && l.get("file").and_then(Value::as_str).is_some_and(|f| f.ends_with(&file))
    })
}

/// The report has an inter-thread inconsistency of `name` at its `PR: load`, `PR: side effect`
/// (or `side`) and `PR: source store` lines.
#[track_caller]
fn assert_inconsistency(r: &Value, name: &str, side: &str) -> Value {
    let hit = findings(r).into_iter().find(|f| {
        f.get("kind").and_then(Value::as_str) == Some("inter-thread-inconsistency")
            && at(f, "unpersisted load", name, "/* PR: load */")
            && at(f, "durable side effect", name, side)
            && at(f, "source store", name, "/* PR: source store */")
    });
    hit.cloned().unwrap_or_else(|| panic!("no inconsistency of {name} at its marked lines:\n{}", pretty(r)))
}

#[track_caller]
fn assert_silent(r: &Value) {
    assert!(findings(r).is_empty(), "expected no pmrace findings:\n{}", pretty(r));
}

#[test]
fn a_reader_copying_an_unpersisted_value_into_pm_is_an_inconsistency_its_twin_is_not() {
    let r = pmrace("pr_copy", &["--explore", "50"], false);
    let f = assert_inconsistency(&r, "pr_copy", "/* PR: side effect */");
    let msg = get(&f, "message").as_str().unwrap();
    assert!(msg.contains("a value derived from them"), "content flow: {msg}");
    assert!(stat(&r, "inter_candidates") >= 1 && stat(&r, "inter_inconsistencies") >= 1, "{}", pretty(&r));
    assert_silent(&pmrace("pr_copy_fixed", &["--explore", "50"], false));
}

#[test]
fn validation_confirms_a_bug_whose_recovery_reads_the_side_effect() {
    let r = pmrace("pr_copy", &[], true);
    let f = assert_inconsistency(&r, "pr_copy", "/* PR: side effect */");
    let msg = get(&f, "message").as_str().unwrap();
    assert!(msg.contains("validated: recovery reads the inconsistent bytes"), "{msg}");
    let roles: Vec<&str> =
        get(&f, "locations").as_array().unwrap().iter().filter_map(|l| l.get("role")?.as_str()).collect();
    assert!(roles.contains(&"recovery read"), "the recovery's load is a location: {roles:?}");
    assert_eq!(stat(&r, "validated_bugs"), 1, "{}", pretty(&r));
}

#[test]
fn a_recovery_that_rewrites_the_side_effect_makes_it_a_validated_false_positive() {
    let r = pmrace("pr_recovery_rewrites", &[], true);
    assert_silent(&r);
    assert_eq!(stat(&r, "inter_inconsistencies"), 1, "{}", pretty(&r));
    assert_eq!(stat(&r, "validated_false_positives"), 1, "{}", pretty(&r));
    let discarded = get(&r, "discarded").as_array().expect("the report lists what validation discarded");
    assert_eq!(discarded.len(), 1);
    let msg = get(&discarded[0], "message").as_str().unwrap();
    assert!(msg.contains("discarded: recovery overwrites all 8 inconsistent bytes before reading them"), "{msg}");
    // Without a recovery command nothing is validated, and the finding stays.
    let r = pmrace("pr_recovery_rewrites", &[], false);
    let f = assert_inconsistency(&r, "pr_recovery_rewrites", "/* PR: side effect */");
    assert!(get(&f, "message").as_str().unwrap().contains("not validated: no --recover"));
}

#[test]
fn address_flow_with_a_constant_stored_value_is_reported() {
    let r = pmrace("pr_addrflow", &[], false);
    let f = assert_inconsistency(&r, "pr_addrflow", "/* PR: side effect */");
    assert!(get(&f, "message").as_str().unwrap().contains("through an address derived from them"));
    assert_silent(&pmrace("pr_addrflow_fixed", &[], false));
}

#[test]
fn an_sse_memcpy_through_a_dram_buffer_carries_the_taint() {
    let r = pmrace("pr_sse_copy", &[], false);
    assert_inconsistency(&r, "pr_sse_copy", "/* PR: side effect */");
    assert_silent(&pmrace("pr_sse_copy_fixed", &[], false));
}

#[test]
fn a_pure_control_dependence_is_a_candidate_but_no_inconsistency() {
    let r = pmrace("pr_control", &[], false);
    assert_silent(&r);
    assert!(stat(&r, "inter_candidates") >= 1, "the unpersisted load is a candidate:\n{}", pretty(&r));
    assert_eq!(stat(&r, "inter_inconsistencies"), 0);
}

#[test]
fn clwb_without_sfence_is_a_candidate_except_in_compat_mode() {
    let r = pmrace("pr_clwb_nofence", &[], false);
    assert_inconsistency(&r, "pr_clwb_nofence", "/* PR: side effect */");
    let r = pmrace("pr_clwb_nofence", &["--pmrace-compat"], false);
    assert_silent(&r);
    assert_eq!(stat(&r, "inter_candidates"), 0, "a flush alone is persisted by PMRace's rule");
    assert_silent(&pmrace("pr_clwb_nofence_fixed", &[], false));
}

#[test]
fn published_bug_shapes_memcached_incr_and_cceh_doubling() {
    let r = pmrace("pr_mc_incr", &["--explore", "8"], false);
    assert_inconsistency(&r, "pr_mc_incr", "/* PR: side effect */");
    assert_silent(&pmrace("pr_mc_incr_fixed", &["--explore", "8"], false));
    let r = pmrace("pr_cceh", &["--explore", "8"], false);
    let f = assert_inconsistency(&r, "pr_cceh", "/* PR: side effect */");
    assert!(get(&f, "message").as_str().unwrap().contains("address"), "{}", pretty(&f));
    assert_inconsistency(&r, "pr_cceh", "/* PR: content side effect */");
    assert_silent(&pmrace("pr_cceh_fixed", &["--explore", "8"], false));
}

#[test]
fn a_pm_spinlock_persisted_while_held_is_a_sync_inconsistency_unless_recovery_resets_it() {
    let r = pmrace("pr_spinlock_pm", &[], true);
    let f = findings(&r)
        .into_iter()
        .find(|f| {
            f.get("kind").and_then(Value::as_str) == Some("sync-inconsistency")
                && at(f, "acquire", "pr_spinlock_pm", "/* PR: lock cas */")
        })
        .unwrap_or_else(|| panic!("sync inconsistency at the CAS:\n{}", pretty(&r)))
        .clone();
    assert!(get(&f, "message").as_str().unwrap().contains("validated: recovery exited with status 3"));
    let r = pmrace("pr_spinlock_pm_fixed", &[], true);
    assert_silent(&r);
    // How often the lock is persisted while held depends on the schedule; every time, recovery
    // resets it, so each is a validated false positive.
    assert!(stat(&r, "sync_inconsistencies") >= 1);
    assert_eq!(stat(&r, "validated_false_positives"), stat(&r, "sync_inconsistencies"));
    let d = get(&r, "discarded").as_array().unwrap();
    assert!(get(&d[0], "message").as_str().unwrap().contains("recovery resets it to its initial value 0x0"));
}

/// A lock-free stack's head, moved away from empty by the pushers' CAS and back to empty by the
/// popper's, is no lock: a lock is given back by the thread that took it. Both twins reported the
/// head's persisting as "durable while held" before (session 42).
#[test]
fn a_lock_free_head_emptied_by_another_thread_is_no_lock() {
    for name in ["pmdk_treiber", "pmdk_treiber_fixed"] {
        for seed in ["0", "1"] {
            let r = pmrace(name, &["--seed", seed], false);
            assert!(
                !findings(&r).iter().any(|f| f.get("kind").and_then(Value::as_str) == Some("sync-inconsistency")),
                "{name} seed {seed}:\n{}",
                pretty(&r)
            );
            assert_eq!(stat(&r, "sync_inconsistencies"), 0, "{name} seed {seed}");
        }
    }
}

#[test]
fn a_pmemobj_mutex_in_pm_is_not_reported() {
    let r = pmrace("pmdk_mutex", &[], false);
    assert_silent(&r);
    assert_eq!(stat(&r, "sync_inconsistencies"), 0);
}

#[test]
fn an_annotated_sync_variable_is_checked_without_a_lock_pattern() {
    // pr_copy's x (offset 0 of the pool) declared a synchronisation variable with initial value
    // 0: the writer persists it away from 0.
    let dir = scratch();
    std::fs::write(dir.path().join("sync.ron"), "(sync_vars: [(offset: 0, size: 8, init: 0)])").unwrap();
    let run = Ferrite::run(&guest("pr_copy"))
        .opts(&["--analyses", "pmrace", "--config", "sync.ron", "--report", "r.json"])
        .args(&["/mnt/pmem0/pool"])
        .in_dir(dir)
        .go();
    run.assert_code(66);
    let r = run.json("r.json");
    assert!(
        findings(&r).iter().any(|f| {
            f.get("kind").and_then(Value::as_str) == Some("sync-inconsistency")
                && at(f, "acquire", "pr_copy", "/* PR: source store */")
        }),
        "{}",
        pretty(&r)
    );
    assert_eq!(get(&r, "run.settings.sync_vars").as_array().map(Vec::len), Some(1), "recorded for replay");
}

#[test]
fn taint_tracking_does_not_change_the_schedule() {
    let hash = |analyses: &str| {
        let run = Ferrite::run(&guest("pr_copy"))
            .opts(&["--analyses", analyses, "--seed", "3", "--report", "r.json"])
            .args(&["/mnt/pmem0/pool"])
            .go();
        let r = run.json("r.json");
        (get(&r, "run.trace_hash").as_str().unwrap().to_string(), get(&r, "run.switches").as_u64())
    };
    assert_eq!(hash("none"), hash("pmrace"));
    assert_eq!(hash("pmrace"), hash("pmrace"));
}

/// The taint engine's hooks on every instruction and access go into the engine (one translation
/// flush, counted by `--host-stats`) only at the first load the pass may name a source: never in
/// a program that reads no unpersisted PM (`pm_bench` persists each store before reading it
/// back, `cpu_bound` has no PM), once in `pr_copy`, whose reader loads the writer's unpersisted
/// value, and its finding is the same as with the hooks in from the start (the other tests here).
#[test]
fn taint_hooks_go_in_at_the_first_possible_source_only() {
    let flushes = |analyses: &str, program: &str, args: &[&str]| {
        let dir = scratch();
        let stats = dir.path().join("host.json");
        let run = Ferrite::run(&guest(program))
            .opts(&["--quiet", "--analyses", analyses, "--seed", "3", "--host-stats", stats.to_str().unwrap()])
            .args(args)
            .go();
        let stats = read_json(&stats);
        (stats["cache_flushes"].as_u64().unwrap(), run.code)
    };
    for (program, args) in [
        ("pm_bench", &["20000", "/mnt/pmem0/bench"][..]),
        ("cpu_bound", &["0.01"][..]),
        ("pr_copy", &["/mnt/pmem0/pool"][..]),
    ] {
        let (none, _) = flushes("none", program, args);
        let (taint, code) = flushes("pmrace", program, args);
        let sources = usize::from(program == "pr_copy");
        assert_eq!(
            taint,
            none + sources as u64,
            "{program}: {none} translation flushes without pmrace, {taint} with it"
        );
        assert_eq!(code, if sources > 0 { 66 } else { 0 }, "{program}");
    }
}

#[test]
fn an_unknown_pmrace_option_is_an_error() {
    let run = Ferrite::run(&guest("pr_copy")).opts(&["--analyses", "pmrace:bogus=1"]).args(&["/mnt/pmem0/pool"]).go();
    run.assert_code(2);
    assert!(
        run.stderr.starts_with("error: ") && run.stderr.contains("pmrace: unknown option `bogus=1`"),
        "{}",
        run.stderr
    );
}

/// `--strategy pmrace`: a profiling run finds the PM word both threads use; targeted runs hold
/// the lock-free reader at its load until the writer stores, and let it read before the writer's
/// flush. With seed 1 the plain schedule misses the window; the exploration finds it within 4
/// runs, records the interleaving in the finding, and `replay --finding` rebuilds that run.
#[test]
fn targeted_interleaving_finds_what_the_random_schedule_misses_and_replays() {
    let plain = pmrace("pr_lockfree", &["--seed", "1"], false);
    assert_silent(&plain);
    let run = Ferrite::run(&guest("pr_lockfree"))
        .opts(&["--analyses", "pmrace", "--strategy", "pmrace", "--explore", "4", "--seed", "1", "--report", "r.json"])
        .args(&["/mnt/pmem0/pool"])
        .go();
    run.assert_code(66);
    assert!(run.stderr.contains("ferrite: pmrace exploration: 4 run(s) from seed 1"), "{}", run.stderr);
    let r = run.json("r.json");
    assert_eq!(get(&r, "run.strategy").as_str(), Some("pmrace"));
    let f = assert_inconsistency(&r, "pr_lockfree", "/* PR: side effect */");
    let hold = get(&f, "interleaving");
    assert!(get(hold, "loads").as_array().is_some_and(|l| !l.is_empty()), "{}", pretty(&f));
    let id = get(&f, "id").as_u64().unwrap().to_string();
    let replay = Ferrite::replay(&run.path("r.json")).opts(&["--finding", id.as_str()]).in_dir(run.dir).go();
    assert!(replay.stderr.contains(&format!("replay reproduced finding {id}")), "{}", replay.describe());
}

/// `--strategy pmrace` with snapshots (issue 23): every run shares the program seed, so the runs
/// after the profiling run go on from its checkpoint at its first `clone` (with the taint
/// engine's and the passes' state, the alias profile, and a crash-image store of their own for
/// validation), unless their hold names a load made before it. The report is the one running
/// every run from the start gives (`--no-snapshots`), and so are the runs' chained trace hashes;
/// `--host-stats` shows the runs that went on from the snapshot; a finding of such a run replays
/// on its own (program seed, its schedule seed and its interleaving).
#[test]
fn targeted_runs_from_a_snapshot_report_what_runs_from_the_start_do() {
    let recover = format!("{} /mnt/pmem0/pool recover", guest("pr_lockfree").display());
    let go = |extra: &[&str]| {
        Ferrite::run(&guest("pr_lockfree"))
            .opts(&["--analyses", "pmrace", "--strategy", "pmrace", "--explore", "4", "--seed", "1"])
            .opts(&["--recover", recover.as_str(), "--report", "r.json", "--host-stats", "h.json"])
            .opts(extra)
            .args(&["/mnt/pmem0/pool"])
            .go()
    };
    let (with, without) = (go(&[]), go(&["--no-snapshots"]));
    with.assert_code(66);
    without.assert_code(66);
    let r = with.json("r.json");
    assert_eq!(without_timings(&r), without_timings(&without.json("r.json")));
    let (a, b) = (&with.json("h.json")["exploration"], &without.json("h.json")["exploration"]);
    assert_eq!(a["trace_hashes"], b["trace_hashes"], "the runs' trace hashes");
    assert_eq!((a["from_start"].as_u64(), a["from_snapshot"].as_u64()), (Some(1), Some(3)), "{a}");
    assert_eq!((b["from_start"].as_u64(), b["from_snapshot"].as_u64()), (Some(4), Some(0)), "{b}");
    assert_eq!(a["instructions_from_start"], b["instructions"], "{a}\n{b}");
    assert!(a["instructions"].as_u64() < b["instructions"].as_u64(), "{a}");
    assert!(with.stderr.contains("3 pmrace run(s) went on from a snapshot"), "{}", with.stderr);
    // The finding came from a targeted run, restored from the snapshot, and was validated there.
    assert_eq!(get(&r, "run.schedule_seed").as_u64(), Some(1), "{}", pretty(&r));
    let f = assert_inconsistency(&r, "pr_lockfree", "/* PR: side effect */");
    assert_ne!(get(&f, "seed").as_u64(), Some(1), "{}", pretty(&f));
    assert!(get(&f, "interleaving").is_object(), "{}", pretty(&f));
    assert!(get(&f, "message").as_str().unwrap_or_default().contains("validated"), "{}", pretty(&f));
    let id = get(&f, "id").as_u64().unwrap().to_string();
    let replay = Ferrite::replay(&with.path("r.json")).opts(&["--finding", id.as_str()]).in_dir(with.dir).go();
    assert!(replay.stderr.contains(&format!("replay reproduced finding {id}")), "{}", replay.describe());
}

/// A pthread mutex placed in PM is a synchronisation variable too (its lock word moves by
/// `lock cmpxchg` and comes back): persisted while held, it is reported at the lock call and
/// confirmed by a recovery that finds it stuck; the twin's recovery reinitialises it (as PMDK
/// does for its locks), so validation discards it.
#[test]
fn a_pthread_mutex_in_pm_persisted_while_held_is_a_sync_inconsistency() {
    let r = pmrace("pr_pthread_mutex_pm", &[], true);
    let f = findings(&r)
        .into_iter()
        .find(|f| {
            f.get("kind").and_then(Value::as_str) == Some("sync-inconsistency")
                && at(f, "acquire", "pr_pthread_mutex_pm", "/* PR: pthread lock in PM */")
        })
        .unwrap_or_else(|| panic!("sync inconsistency at the lock call:\n{}", pretty(&r)))
        .clone();
    assert!(get(&f, "message").as_str().unwrap().contains("validated: recovery exited with status 3"));
    let r = pmrace("pr_pthread_mutex_pm_fixed", &[], true);
    assert_silent(&r);
    assert_eq!(stat(&r, "validated_false_positives"), 1, "{}", pretty(&r));
}

/// Active delay injection (`--delay N`, Vardalith's after TSVD): the writer entering its unlock
/// with an unfenced PM store waits N instructions, so the lock-free reader loads the value while
/// it is not durable. Seed 1 misses the window without delays (see above) and hits it with them;
/// the delay is recorded in the report, counted, and replayed.
#[test]
fn delay_injection_widens_the_window_deterministically() {
    let r = pmrace("pr_lockfree", &["--seed", "1", "--delay", "20000"], false);
    assert_inconsistency(&r, "pr_lockfree", "/* PR: side effect */");
    assert!(r["stats"]["scheduler.delays"].as_u64() >= Some(1), "{}", pretty(&r));
    assert_eq!(get(&r, "run.delay.length").as_u64(), Some(20000));
    let again = pmrace("pr_lockfree", &["--seed", "1", "--delay", "20000"], false);
    assert_eq!(get(&r, "run.trace_hash"), get(&again, "run.trace_hash"));
}

/// A delay ends on time when the only thread that can run spins without a system call: the
/// loader of `ext_spin_hash` is delayed entering `pthread_spin_unlock` with its batch unfenced,
/// while the mirror thread spins in `pthread_spin_lock` for the same bucket. The hold's end is an
/// instruction count that only a scheduling point looked at, and a spinning thread makes none:
/// before session 44 the run hung until `--max-instructions`.
#[test]
fn a_delay_ends_while_the_only_runnable_thread_spins() {
    let r = pmrace("ext_spin_hash", &["--delay", "500", "--max-instructions", "100000000"], false);
    let all = get(&r, "findings").as_array().expect("findings");
    assert!(all.iter().all(|f| f.get("analysis").and_then(Value::as_str) == Some("pmrace")), "{}", pretty(&r));
    assert!(r["stats"]["scheduler.delays"].as_u64() >= Some(1), "{}", pretty(&r));
}

/// PMRace's transaction rule: bytes a PMDK transaction added (TX_ADD, seen through PMDK's
/// client requests) are not candidates, the undo log restores them; the same copy from a plain,
/// later-persisted store is an inconsistency.
#[test]
fn bytes_added_to_a_pmdk_transaction_are_not_candidates() {
    let run = |mode: &[&str]| {
        let mut args = vec!["/mnt/pmem0/txpool"];
        args.extend_from_slice(mode);
        let run = Ferrite::run(&guest("pmdk_tx_reader"))
            .opts(&["--analyses", "pmrace", "--report", "r.json"])
            .args(&args)
            .go();
        assert_eq!(run.stdout_str(), "x 7, y 7\n");
        run.json("r.json")
    };
    let r = run(&[]);
    assert_silent(&r);
    assert_eq!(stat(&r, "candidate_loads"), 0, "{}", pretty(&r));
    let r = run(&["plain"]);
    assert!(
        findings(&r).iter().any(|f| at(f, "durable side effect", "pmdk_tx_reader", "/* PR: side effect */")
            && at(f, "source store", "pmdk_tx_reader", "/* PR: plain store */")),
        "{}",
        pretty(&r)
    );
}

/// Validation runs the recovery on a crash image, a hypothetical run: what it writes in the
/// working directory goes to a private overlay, never to the user's directory (here the
/// recovery command is a program that creates `log.bin` where it runs).
#[test]
fn validation_recoveries_never_write_the_users_directory() {
    let writer = format!("{}", guest("file_mmap_log").display());
    let run = Ferrite::run(&guest("pr_copy"))
        .opts(&["--analyses", "pmrace", "--report", "r.json", "--recover", writer.as_str()])
        .args(&["/mnt/pmem0/pool"])
        .go();
    let r = run.json("r.json");
    let ran = stat(&r, "validated_bugs") + stat(&r, "validated_false_positives");
    assert!(ran > 0, "no validation recovery ran: {}", pretty(&r));
    assert!(!run.path("log.bin").exists(), "a validation recovery wrote the user's directory: {}", run.describe());
}

/// `ferrite run --analyses pmrace --strategy pmrace --explore 16` with the guest's recovery.
fn targeted(name: &str) -> (Value, String) {
    let cmd = format!("{} /mnt/pmem0/pool recover", guest(name).display());
    let run = Ferrite::run(&guest(name))
        .opts(&["--analyses", "pmrace", "--strategy", "pmrace", "--explore", "16", "--recover", cmd.as_str()])
        .opts(&["--report", "r.json"])
        .args(&["/mnt/pmem0/pool"])
        .go();
    let r = run.json("r.json");
    run.assert_code(if findings(&r).is_empty() { 0 } else { 66 });
    (r, run.stderr)
}

/// The published races PMRace found by address flow (ASPLOS'22 Table 2 #1 and #8): a put that
/// loads a CLHT-like table's swapped root before its persist inserts into the new table; an
/// insert that follows a FAST_FAIR-like split's sibling link before its persist inserts into the
/// new leaf. The insert is several loads away from the unpersisted pointer (table → bucket,
/// link → leaf), so the taint must flow from a pointer to what is loaded through it. The
/// targeted exploration holds readers at the loads of the publishing store's fields (the object
/// lives at a new address in every run); validation with the program's recovery confirms each.
/// The fixed twins publish only once the pointer is durable and are silent: the PM bucket locks
/// persisted while held are reset by recovery (validated false positives), lock operations
/// through the pointer are not side effects.
#[test]
fn published_resize_and_split_races_are_found_by_targeted_exploration_and_validated() {
    for name in ["pr_clht", "pr_fastfair"] {
        let (r, stderr) = targeted(name);
        assert!(stderr.contains("publication site(s)") && !stderr.contains("and 0 publication site(s)"), "{stderr}");
        let f = assert_inconsistency(&r, name, "/* PR: side effect */");
        let msg = get(&f, "message").as_str().unwrap_or_default();
        assert!(msg.contains("; validated: "), "{name}: not confirmed by recovery:\n{}", pretty(&f));
        assert!(stat(&r, "validated_bugs") >= 1, "{}", pretty(&r));
        let others: Vec<_> =
            findings(&r).into_iter().filter(|f| !at(f, "source store", name, "/* PR: source store */")).collect();
        assert!(others.is_empty(), "{name}: findings other than the published race:\n{others:#?}");
    }
    let (r, _) = targeted("pr_clht");
    assert!(stat(&r, "sync_side_effects") >= 1, "bucket locks taken through the root are not data:\n{}", pretty(&r));
    for name in ["pr_clht_fixed", "pr_fastfair_fixed"] {
        let (r, _) = targeted(name);
        assert_silent(&r);
    }
}

/// The shapes that hid PMRace's published races on the real P-CLHT and FAST_FAIR from the
/// targeted exploration (docs/analyses/pmrace.md, "The real programs"), in guests written here:
/// - `pr_ntroot`: the root is swapped by a non-inlined `movnti` + `mfence` helper that also stores
///   every key and overflow link (P-CLHT's `movnt64`): the profile must take non-temporal stores
///   as publications, hold per field, and let only a store of a PM reference signal;
/// - `pr_rootsplit`: a split publishes a new root, and every worker loads the root before a start
///   barrier: holding them there may release one privileged thread per run, not all of them.
///
/// Both races are found at their marked lines and confirmed by the guest's recovery (the source
/// store of `pr_ntroot` is the helper's, called by the resize); the fixed twins, whose new
/// nodes stay locked until the root is durable, are silent. Before these changes neither race
/// was found (`--explore 16`, seed 0).
#[test]
fn root_publications_by_a_non_temporal_helper_and_behind_a_start_barrier_are_found() {
    for name in ["pr_ntroot", "pr_rootsplit"] {
        let (r, stderr) = targeted(name);
        assert!(!stderr.contains("and 0 publication site(s)"), "{stderr}");
        let f = assert_inconsistency(&r, name, "/* PR: side effect */");
        let msg = get(&f, "message").as_str().unwrap_or_default();
        assert!(msg.contains("; validated: "), "{name}: not confirmed by recovery:\n{}", pretty(&f));
        let others: Vec<_> =
            findings(&r).into_iter().filter(|f| !at(f, "source store", name, "/* PR: source store */")).collect();
        assert!(others.is_empty(), "{name}: findings other than the published race:\n{others:#?}");
        if name == "pr_ntroot" {
            let source = get(&f, "locations")
                .as_array()
                .and_then(|l| l.iter().find(|l| l.get("role").and_then(Value::as_str) == Some("source store")))
                .cloned()
                .expect("a source store");
            let caller = get(&source, "backtrace").as_array().and_then(|b| b.get(1)).cloned().unwrap_or_default();
            assert_eq!(caller.get("function").and_then(Value::as_str), Some("resize"), "{}", pretty(&source));
        }
    }
    for name in ["pr_ntroot_fixed", "pr_rootsplit_fixed"] {
        let (r, _) = targeted(name);
        assert_silent(&r);
    }
}

/// Once the taint hook is in, it acts for the flushes, fences and locked instructions that had
/// code hooks of their own (which it replaces: Unicorn walks every code hook for each
/// instruction). A racy hash table whose readers load unpersisted buckets early, run with and
/// without pmrace: the taint hooks went in (one more translation flush), and the PM device saw
/// the same flushes and fences in the same order and the scheduler the same points (the trace
/// hash folds in every PM store, flush and fence), with the same findings of `unpersisted`.
#[test]
fn the_taint_hook_acts_for_flushes_fences_and_locked_instructions() {
    let run = |analyses: &str| {
        let dir = scratch();
        let stats = dir.path().join("host.json");
        let run = Ferrite::run(&guest("pi_clht_resize"))
            .opts(&[
                "--analyses",
                analyses,
                "--seed",
                "1",
                "--report",
                "r.json",
                "--host-stats",
                stats.to_str().unwrap(),
            ])
            .args(&["/mnt/pmem0/pool", "300", "4"])
            .go();
        let r = run.json("r.json");
        let unpersisted: Vec<Value> = get(&r, "findings")
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f.get("analysis").and_then(Value::as_str) == Some("unpersisted"))
            .map(|f| f.get("message").cloned().unwrap_or(Value::Null))
            .collect();
        let stats = read_json(&stats);
        (
            get(&r, "run.trace_hash").as_str().unwrap().to_string(),
            get(&r, "run.switches").as_u64(),
            unpersisted,
            stats["cache_flushes"].as_u64().unwrap(),
            findings(&r).len(),
        )
    };
    let plain = run("unpersisted");
    let taint = run("unpersisted,pmrace");
    assert!(taint.4 > 0, "pmrace finds the race, so its taint hooks went in");
    assert_eq!(taint.3, plain.3 + 1, "one translation flush for the taint hooks");
    assert_eq!((&taint.0, taint.1, &taint.2), (&plain.0, plain.1, &plain.2));
}

/// A version lock in PM (P-ART's shape: taken by a CAS, released by an increment, so no lock
/// pmrace infers), declared in `--config`: the lock functions' own accesses to the lock word are
/// synchronisation. Another thread's unpersisted release, loaded by the next `node_lock`, whose
/// stamp is derived from it, is no inconsistency: the fixed twin is silent. The data race of
/// `pr_version_lock` (a value persisted after the unlock, copied by the next holder) is still
/// found at its lines. (Before, both reported the lock word: docs/analyses/pmrace.md.)
#[test]
fn a_configured_lock_functions_own_lock_word_is_no_source() {
    let config = repo().join("guests/configs/pr_version_lock.ron").display().to_string();
    for seed in ["0", "1"] {
        let extra = ["--config", config.as_str(), "--seed", seed];
        let r = pmrace("pr_version_lock", &extra, true);
        let fs = findings(&r);
        assert_eq!(fs.len(), 1, "{}", pretty(&r));
        assert!(at(fs[0], "source store", "pr_version_lock", "/* PR: source store"), "{}", pretty(&r));
        assert!(at(fs[0], "unpersisted load", "pr_version_lock", "/* PR: load"), "{}", pretty(&r));
        let r = pmrace("pr_version_lock_fixed", &extra, true);
        assert!(findings(&r).is_empty(), "{}", pretty(&r));
        let acquired = r.get("stats").and_then(|s| s.get("locks.node_lock.acquired")).and_then(Value::as_u64);
        assert_eq!(acquired, Some(2), "the configuration names the lock: {}", pretty(&r));
    }
}

/// A server never exits: its run ends when every thread waits for work that never comes (or at
/// the instruction budget). An inconsistency was judged when its side effect was stored, so it
/// stands at the stop, and its finding replays; the fixed twin has the stop alone.
#[test]
fn inconsistencies_stand_when_a_server_that_never_exits_stops() {
    for (name, budget) in [("pr_server_forever", None), ("pr_server_forever", Some("2000000"))] {
        let mut opts = vec!["--analyses", "pmrace", "--report", "r.json"];
        if let Some(b) = budget {
            // Blocked for ever reads as a deadlock; a budget is the other way a run stops.
            opts.extend(["--max-instructions", b]);
        }
        let run = Ferrite::run(&guest(name)).opts(&opts).args(&["/mnt/pmem0/pool"]).go();
        run.assert_code(66);
        let r = run.json("r.json");
        let stops: Vec<&str> = get(&r, "findings")
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f.get("analysis").and_then(Value::as_str))
            .filter(|a| *a != "pmrace")
            .collect();
        assert_eq!(stops.len(), 1, "one stop finding (deadlock or hang) for {budget:?}:\n{}", pretty(&r));
        let f = assert_inconsistency(&r, name, "/* PR: side effect */");
        let id = get(&f, "id").to_string();
        let replay = Ferrite::replay(&run.path("r.json")).opts(&["--finding", &id]).go();
        replay.assert_code(66);
        assert!(replay.stderr.contains("replay reproduced finding"), "{}", replay.describe());
    }
    let run = Ferrite::run(&guest("pr_server_forever_fixed"))
        .opts(&["--analyses", "pmrace", "--report", "r.json"])
        .args(&["/mnt/pmem0/pool"])
        .go();
    assert_silent(&run.json("r.json"));
}
