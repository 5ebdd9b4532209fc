//! Persistence-induced races: `hawkset` (timed effective locksets, predictive from one run) and
//! `vardalith` (overlapping store and load windows) on the guests of guests/README.md
//! ("Persistence-induced race guests"). Each buggy guest must be reported at its marked store
//! and load lines (hawkset whatever the seed and strategy), and each fixed twin must be silent.
//!
//! Passes: analyses/src/hawkset.rs, analyses/src/vardalith.rs; docs/analyses/{hawkset,vardalith}.md.

mod common;

use serde_json::Value;

use common::*;

/// Runs `guest` under `--analyses spec` with `seed`, extra ferrite options and guest arguments
/// after the pool path, checks the exit status (66 with findings, 0 without) and returns the
/// JSON report.
fn report_full(guest_name: &str, spec: &str, seed: u64, extra: &[&str], args: &[&str]) -> Value {
    let seed = seed.to_string();
    let mut opts = vec!["--analyses", spec, "--seed", &seed, "--report", "r.json"];
    opts.extend_from_slice(extra);
    let mut guest_args = vec!["/mnt/pmem0/pool"];
    guest_args.extend_from_slice(args);
    let run = Ferrite::run(&guest(guest_name)).opts(&opts).args(&guest_args).go();
    let report = run.json("r.json");
    let n = get(&report, "findings").as_array().map_or(0, Vec::len);
    run.assert_code(if n == 0 { 0 } else { 66 });
    report
}

fn report_with(guest_name: &str, spec: &str, seed: u64, extra: &[&str]) -> Value {
    report_full(guest_name, spec, seed, extra, &[])
}

fn report(guest_name: &str, spec: &str, seed: u64) -> Value {
    report_with(guest_name, spec, seed, &[])
}

/// The fence location of every `hawkset` finding on `guest` is at the line marked `marker`.
#[track_caller]
fn assert_fence(guest_name: &str, marker: &str) {
    let file = format!("{guest_name}.c");
    let line = marker_line(&file, marker);
    let r = report(guest_name, "hawkset", 0);
    let f = findings(&r, "hawkset");
    assert!(!f.is_empty() && f.iter().all(|f| has(f, "fence", &file, line)), "fence at {file}:{line}:\n{}", pretty(&r));
}

/// The findings of one analysis (`spec` may carry options: `hawkset:irh=0`).
fn findings<'a>(report: &'a Value, spec: &str) -> Vec<&'a Value> {
    let name = spec.split(':').next().unwrap_or(spec);
    get(report, "findings")
        .as_array()
        .expect("findings is an array")
        .iter()
        .filter(|f| f.get("analysis").and_then(Value::as_str) == Some(name))
        .collect()
}

/// Whether a location has `role` at `file:line`.
fn is_at(loc: &Value, role: &str, file: &str, line: u32) -> bool {
    loc.get("role").and_then(Value::as_str) == Some(role)
        && loc.get("line").and_then(Value::as_u64) == Some(u64::from(line))
        && loc.get("file").and_then(Value::as_str).is_some_and(|f| f == file || f.ends_with(&format!("/{file}")))
}

fn has(finding: &Value, role: &str, file: &str, line: u32) -> bool {
    get(finding, "locations").as_array().expect("locations").iter().any(|l| is_at(l, role, file, line))
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap()
}

/// `spec` reports, on `guest` with each seed, a race whose store is at the line marked
/// `store_marker` and one of whose loads is at the line marked `load_marker` of `guest.c`; every
/// finding of that analysis has its store at the marked line.
#[track_caller]
fn assert_race(guest_name: &str, spec: &str, store_marker: &str, load_marker: &str, seeds: &[u64]) {
    let file = format!("{guest_name}.c");
    let store = marker_line(&file, store_marker);
    let load = marker_line(&file, load_marker);
    for &seed in seeds {
        let r = report(guest_name, spec, seed);
        let f = findings(&r, spec);
        assert!(
            f.iter().any(|f| has(f, "store", &file, store) && has(f, "load", &file, load)),
            "{spec} on {guest_name} (seed {seed}) should report the store at {file}:{store} with the load at \
             {file}:{load}:\n{}",
            pretty(&r)
        );
        for f in &f {
            assert!(
                has(f, "store", &file, store),
                "{spec} on {guest_name} (seed {seed}): a finding whose store is not at {file}:{store}:\n{}",
                pretty(f)
            );
            assert_eq!(get(f, "kind").as_str(), Some("persistence-induced-race"));
        }
    }
}

/// `spec` reports nothing on `guest` with each seed.
#[track_caller]
fn assert_silent(guest_name: &str, spec: &str, seeds: &[u64]) {
    for &seed in seeds {
        let r = report(guest_name, spec, seed);
        let f = findings(&r, spec);
        assert!(f.is_empty(), "{spec} on {guest_name} (seed {seed}) should report nothing:\n{}", pretty(&r));
    }
}

const SEEDS: &[u64] = &[0, 1];

#[test]
fn a_store_persisted_after_unlocking_is_reported_by_both_passes() {
    assert_race("pi_unlock_persist", "hawkset", "/* BUG:", "/* LOAD:", &[0, 1, 2]);
    assert_race("pi_unlock_persist", "vardalith", "/* BUG:", "/* LOAD:", SEEDS);
    assert_race("pi_unlock_persist", "vardalith:mode=hb", "/* BUG:", "/* LOAD:", &[0]);
    // hawkset names the fence that persisted the store too.
    assert_fence("pi_unlock_persist", "/* PERSIST:");
}

#[test]
fn hawkset_reports_whatever_the_schedule() {
    for strategy in ["fifo", "pct"] {
        let r = report_with("pi_unlock_persist", "hawkset", 5, &["--strategy", strategy]);
        assert_eq!(findings(&r, "hawkset").len(), 1, "--strategy {strategy}:\n{}", pretty(&r));
    }
}

#[test]
fn persisting_inside_the_critical_section_is_silent() {
    for spec in ["hawkset", "vardalith", "vardalith:mode=hb"] {
        assert_silent("pi_unlock_persist_fixed", spec, SEEDS);
    }
}

#[test]
fn single_threaded_programs_are_silent() {
    for spec in ["hawkset", "vardalith", "hawkset:irh=0", "vardalith:mode=hb"] {
        assert_silent("pi_single_thread", spec, &[0]);
    }
    assert_silent("pm_log_fixed", "hawkset,vardalith", &[0]);
}

#[test]
fn unlock_and_relock_before_the_persist_is_reported() {
    // Untimed locksets would see {lock} at both ends; timed ones see two acquisitions.
    assert_race("hs_relock", "hawkset", "/* BUG:", "/* LOAD:", SEEDS);
    assert_race("hs_relock", "vardalith", "/* BUG:", "/* LOAD:", SEEDS);
    assert_fence("hs_relock", "/* PERSIST:");
    for spec in ["hawkset", "vardalith"] {
        assert_silent("hs_relock_fixed", spec, SEEDS);
    }
}

#[test]
fn a_store_before_pthread_create_persisted_after_it_is_reported() {
    assert_race("hs_create_persist", "hawkset", "/* BUG:", "/* LOAD:", SEEDS);
    assert_fence("hs_create_persist", "/* PERSIST:");
    for spec in ["hawkset", "vardalith"] {
        assert_silent("hs_create_persist_fixed", spec, SEEDS);
    }
}

#[test]
fn persisted_initialisation_is_removed_by_the_heuristic() {
    for spec in ["hawkset", "hawkset:irh=1", "vardalith"] {
        assert_silent("hs_irh_init", spec, SEEDS);
    }
    // The reader follows the node after a barrier, which orders it after the persist: with the
    // default `edges=sync` that ordering alone silences the pair; with the paper's create/join
    // edges only the IRH does.
    assert_silent("hs_irh_init", "hawkset:irh=0", SEEDS);
    assert_race("hs_irh_init", "hawkset:irh=0:edges=paper", "/* INIT:", "/* LOAD:", SEEDS);
}

#[test]
fn an_8_byte_store_races_with_a_4_byte_load_at_offset_4() {
    assert_race("pi_partial_overlap", "hawkset", "/* BUG:", "/* LOAD:", SEEDS);
    assert_race("pi_partial_overlap", "vardalith", "/* BUG:", "/* LOAD:", SEEDS);
    for spec in ["hawkset", "vardalith"] {
        assert_silent("pi_partial_overlap_fixed", spec, SEEDS);
    }
}

#[test]
fn a_table_pointer_swapped_during_resize_and_persisted_after_unlocking() {
    assert_race("pi_clht_resize", "hawkset", "/* BUG:", "/* LOAD:", &[0, 1, 2]);
    assert_fence("pi_clht_resize", "/* PERSIST:");
    for spec in ["hawkset", "vardalith", "vardalith:mode=hb"] {
        assert_silent("pi_clht_resize_fixed", spec, SEEDS);
    }
}

#[test]
fn a_persist_ordered_by_a_semaphore_is_a_false_positive_of_the_papers_edges() {
    // Vardalith's windows end at sem_post and start at sem_wait: no overlap, in any schedule.
    for spec in ["vardalith", "vardalith:mode=hb"] {
        assert_silent("pi_sem_persist", spec, &[0, 1, 2]);
    }
    // The post/wait edge orders the load after the persist (`edges=sync`, the default).
    assert_silent("pi_sem_persist", "hawkset", SEEDS);
    // HawkSet orders threads only by create and join (`edges=paper`), and no lock is held:
    // documented false positive (docs/analyses/hawkset.md).
    let file = "pi_sem_persist.c";
    let (store, load) = (marker_line(file, "/* STORE:"), marker_line(file, "/* LOAD:"));
    for seed in SEEDS {
        let r = report("pi_sem_persist", "hawkset:edges=paper", *seed);
        let f = findings(&r, "hawkset");
        assert!(
            f.len() == 1 && has(f[0], "store", file, store) && has(f[0], "load", file, load),
            "seed {seed}:\n{}",
            pretty(&r)
        );
    }
}

#[test]
fn bad_options_are_errors() {
    for spec in ["hawkset:irh=x", "hawkset:bogus=1", "vardalith:mode=sometimes", "unpersisted:irh=1"] {
        let run = Ferrite::run(&guest("pi_single_thread")).opts(&["--analyses", spec]).go();
        run.assert_code(2);
        let errors = error_lines(&run.stderr);
        assert_eq!(errors.len(), 1, "{}", run.describe());
        assert!(errors[0].contains("--analyses"), "{}", run.describe());
    }
}

#[test]
fn a_slot_on_the_buckets_next_line_shows_only_as_buckets_fill() {
    let file = "pi_turbo_bucket.c";
    let (store, load) = (marker_line(file, "/* BUG:"), marker_line(file, "/* LOAD:"));
    for spec in ["hawkset", "vardalith"] {
        for seed in SEEDS {
            // Three entries fit the header's line, which is persisted.
            let r = report_full("pi_turbo_bucket", spec, *seed, &[], &["3"]);
            assert!(findings(&r, spec).is_empty(), "{spec}, 3 entries, seed {seed}:\n{}", pretty(&r));
            // Six reach the next line, which nothing flushes.
            let r = report_full("pi_turbo_bucket", spec, *seed, &[], &["6"]);
            let f = findings(&r, spec);
            assert!(
                f.len() == 1 && has(f[0], "store", file, store) && has(f[0], "load", file, load),
                "{spec}, 6 entries, seed {seed}:\n{}",
                pretty(&r)
            );
            let r = report_full("pi_turbo_bucket_fixed", spec, *seed, &[], &["6"]);
            assert!(findings(&r, spec).is_empty(), "{spec} on the fixed twin, seed {seed}:\n{}", pretty(&r));
        }
    }
}

#[test]
fn a_cas_lock_nobody_named_is_inferred_from_its_word() {
    // The program is correct, and its lock is inline atomics on a DRAM word: without lock
    // inference both passes report it (HawkSet's own behaviour without a configuration); with
    // it (the default) they see the lock's critical sections.
    for spec in ["hawkset", "vardalith"] {
        assert_race("pi_cas_lock", &format!("{spec}:infer_locks=off"), "/* STORE:", "/* LOAD:", &[0]);
        assert_silent("pi_cas_lock", spec, &[0, 1]);
    }
}

/// Naming the CAS lock's functions as a custom acquire and release in `--config` (HawkSet's lock
/// configuration) makes both passes see the critical sections: the false positive goes away.
#[test]
fn a_cas_lock_named_in_the_config_is_a_lock() {
    let dir = common::scratch();
    let cfg = dir.path().join("locks.ron");
    std::fs::write(&cfg, "(locks: [(symbol: \"cas_lock\", kind: Acquire), (symbol: \"cas_unlock\", kind: Release)])")
        .unwrap();
    let run = common::Ferrite::run(&common::guest("pi_cas_lock"))
        .opts(&[
            "--analyses".to_string(),
            "hawkset,vardalith".into(),
            "--config".into(),
            cfg.display().to_string(),
            "--report".into(),
            "r.json".into(),
        ])
        .go();
    run.assert_code(0);
    assert_eq!(run.json("r.json")["findings"], serde_json::json!([]), "{}", run.describe());
}

/// `--irh 0` is the flag form of `irh=0` for every pass that has the heuristic: a store
/// persisted before another thread's first access is then reported.
#[test]
fn the_irh_flag_reaches_the_passes() {
    // hs_irh_nolock's writer stores and persists before main's first access in seed 2: the IRH
    // under HawkSet's rule drops the store (tests/precision.rs), for both passes.
    let prog = common::guest("hs_irh_nolock");
    for observed in ["vardalith:irh_order=observed", "hawkset:irh_order=observed"] {
        common::Ferrite::run(&prog).opts(&["--analyses", observed, "--seed", "2"]).go().assert_code(0);
    }
    common::Ferrite::run(&prog).opts(&["--analyses", "vardalith", "--seed", "2", "--irh", "0"]).go().assert_code(66);
    // A pass named with its own options keeps them.
    let observed = "hawkset:irh_order=observed";
    common::Ferrite::run(&prog).opts(&["--analyses", observed, "--seed", "2", "--irh", "0"]).go().assert_code(0);
}

/// `spec` reports, on `guest` with each seed, every race of `pairs` (a finding whose store is at
/// the line marked by the first marker and one of whose loads is at the line marked by the
/// second), and every finding of that analysis has its store at one of those store lines.
#[track_caller]
fn assert_races(guest_name: &str, spec: &str, pairs: &[(&str, &str)], seeds: &[u64]) {
    let file = format!("{guest_name}.c");
    let lines: Vec<(u32, u32)> = pairs.iter().map(|(s, l)| (marker_line(&file, s), marker_line(&file, l))).collect();
    for &seed in seeds {
        let r = report(guest_name, spec, seed);
        let f = findings(&r, spec);
        for &(store, load) in &lines {
            assert!(
                f.iter().any(|f| has(f, "store", &file, store) && has(f, "load", &file, load)),
                "{spec} on {guest_name} (seed {seed}) should report the store at {file}:{store} with the load at \
                 {file}:{load}:\n{}",
                pretty(&r)
            );
        }
        for f in &f {
            assert!(
                lines.iter().any(|&(store, _)| has(f, "store", &file, store)),
                "{spec} on {guest_name} (seed {seed}): a finding whose store is not a marked one:\n{}",
                pretty(f)
            );
            assert_eq!(get(f, "kind").as_str(), Some("persistence-induced-race"));
        }
    }
}

#[test]
fn a_split_sibling_link_persisted_after_unlocking_is_followed_by_inserts() {
    // FAST-FAIR: the inserter reads the new link under the leaf's lock and inserts into the
    // sibling it leads to before the splitter persists it.
    assert_race("pi_fastfair_split", "hawkset", "/* BUG:", "/* LOAD:", &[0, 1, 2]);
    assert_race("pi_fastfair_split", "vardalith", "/* BUG:", "/* LOAD:", SEEDS);
    assert_race("pi_fastfair_split", "vardalith:mode=hb", "/* BUG:", "/* LOAD:", &[0]);
    assert_fence("pi_fastfair_split", "/* PERSIST:");
    for spec in ["hawkset", "vardalith", "vardalith:mode=hb"] {
        assert_silent("pi_fastfair_split_fixed", spec, SEEDS);
    }
}

#[test]
fn lock_free_gets_read_a_key_bit_set_before_the_flush() {
    // WIPE/APEX: the get (no lock) loads the bitmap and the slot of a put whose slot and bitmap
    // are flushed after the node's lock is released: two races, the key bit and the value.
    let pairs = [("/* BUG:", "/* LOAD:"), ("/* SLOT:", "/* GET:")];
    assert_races("pi_wipe_get", "hawkset", &pairs, &[0, 1, 2]);
    assert_races("pi_wipe_get", "vardalith", &pairs, SEEDS);
    assert_races("pi_wipe_get", "vardalith:mode=hb", &pairs, &[0]);
    assert_fence("pi_wipe_get", "/* PERSIST:");
    // The twin persists the slot before setting its bit and the bitmap before unlocking; the gets
    // run after the put.
    for spec in ["hawkset", "vardalith", "vardalith:mode=hb"] {
        assert_silent("pi_wipe_get_fixed", spec, SEEDS);
    }
    // The gets hold no lock, so hawkset is silent on the twin only because its stores were
    // persisted before the reader first touched their bytes (the IRH) or ordered before its loads
    // by a post/wait edge: with neither, every store of the node races with the lock-free loads
    // (docs/analyses/hawkset.md, lock-free code).
    let r = report("pi_wipe_get_fixed", "hawkset:irh=0:edges=paper", 0);
    let file = "pi_wipe_get_fixed.c";
    let (store, load) = (marker_line(file, "/* STORE:"), marker_line(file, "/* LOAD:"));
    assert!(
        findings(&r, "hawkset").iter().any(|f| has(f, "store", file, store) && has(f, "load", file, load)),
        "hawkset:irh=0 on pi_wipe_get_fixed:\n{}",
        pretty(&r)
    );
}

/// Vardalith's sampling (`vardalith:sample=N`, the paper's §5.2): only every N-th PM access opens
/// a window (each is still checked against the open ones), so fewer races are found at a lower
/// cost; `sample=1` is the full pass and `sample=0` is refused.
#[test]
fn vardalith_sampling_tracks_fewer_windows() {
    let full = findings(&report("pi_clht_resize", "vardalith", 0), "vardalith").len();
    let sampled = findings(&report("pi_clht_resize", "vardalith:sample=10", 0), "vardalith").len();
    assert!(full > 0 && sampled < full, "full {full}, sampled {sampled}");
    let run = Ferrite::run(&guest("pi_clht_resize"))
        .opts(&["--analyses", "vardalith:sample=0"])
        .args(&["/mnt/pmem0/pool"])
        .go();
    run.assert_code(2);
    assert!(run.stderr.contains("sample=0: expected a number >= 1"), "{}", run.stderr);
}

/// The kernel reading PM for a system call is a load by the calling thread at the call
/// (docs/syscalls.md), whether it copies from a PM buffer (`writev`, `pwritev`, `sendmsg`,
/// `sendto`) or from a mapped PM file (`pread`, `sendfile`, `splice`: a DAX read copies the
/// media): `pm_syscall_loads` hands a value another thread stores and persists to the kernel
/// without waiting for it, and `hawkset` reports the store with a load whose backtrace reaches
/// the call (the line marked `LOAD: MODE`); the fixed twin, which joins the writer first, is
/// silent.
#[test]
fn kernel_reads_of_pm_are_loads_of_the_calling_thread() {
    let file = "pm_syscall_loads.c";
    let store = marker_line(file, "STORE: by the writer");
    for mode in ["writev", "pwritev", "sendmsg", "sendto", "pread", "sendfile", "splice"] {
        let load = marker_line(file, &format!("LOAD: {mode} "));
        let r = report_full("pm_syscall_loads", "hawkset", 1, &[], &[mode]);
        let reaches_call = |l: &Value| {
            l.get("role").and_then(Value::as_str) == Some("load")
                && get(l, "backtrace").as_array().is_some_and(|bt| {
                    bt.iter().any(|fr| {
                        fr.get("line").and_then(Value::as_u64) == Some(u64::from(load))
                            && fr.get("file").and_then(Value::as_str).is_some_and(|f| f.ends_with(file))
                    })
                })
        };
        let f = findings(&r, "hawkset");
        assert!(
            f.iter().any(|f| has(f, "store", file, store)
                && get(f, "locations").as_array().expect("locations").iter().any(reaches_call)),
            "{mode}: the store at {file}:{store} with a load from {file}:{load}:\n{}",
            pretty(&r)
        );
        let r = report_full("pm_syscall_loads_fixed", "hawkset", 1, &[], &[mode]);
        assert!(findings(&r, "hawkset").is_empty(), "{mode}, fixed:\n{}", pretty(&r));
    }
}
