//! Precision of the race passes (issue 19): what `hawkset` and `vardalith` leave out and how they
//! group what they report, on guests made for each false-positive source of real PM indexes.
//! Each buggy guest must still be reported at its marked store and load lines, and its fixed
//! twin must be silent — and reported again when the rule that silences it is switched off, so
//! that the test fails if the guest stops exercising the rule.
//!
//! - a lock word in PM under a custom CAS lock (`pi_pm_caslock`, with its `--config`), a pthread
//!   mutex placed in PM (`pi_pm_mutex`): `sync_words` (and `infer_locks`, which sees them too);
//! - an inline CAS lock on a PM word that no configuration can name (`pi_inline_caslock`):
//!   `infer_locks`; the same with the lock words in DRAM, taken by CAS or exchange
//!   (`pi_dram_caslock`, `pi_cas_lock`);
//! - `strcmp` over keys in PM, whose vector loads read past the terminator (`pi_pm_strcmp`):
//!   `strings`;
//! - a try-lock that reports success through an out-parameter, as P-ART's (`pi_outparam_lock`):
//!   `--config`'s `result_arg`, and the per-function acquisition counts that show a wrong
//!   translation;
//! - the two simplest two-thread shapes under the IRH (`hs_irh_writer`, `hs_irh_nolock`);
//! - nodes persisted and then published by a plain pointer store, as P-ART publishes them
//!   (`hs_rf_publish`): the IRH's reads-from edges, per byte and transitive;
//! - C++ `std::atomic` accesses, whose code is libstdc++'s header inlined into the program
//!   (`pi_cxx_atomic`): reported at the program's lines;
//! - a PM counter bumped by locked read-modify-writes (`hs_rmw_counter`): the read half of a
//!   `lock xadd` is no racing load (`rmw_loads`);
//! - a store its writer never persisted but another thread's flush and fence made durable
//!   (`vd_helper_persist`): its `vardalith` window ends at the writer's next release;
//! - OpenMP over PM (`ext_omp_fill`): a fence inside a barrier call (the arrival's locked add)
//!   persists before the barrier's release (`unlock_fence`);
//! - lazy initialisation by `pthread_once` and C11 `call_once` (`ext_once_init`,
//!   `ext_once_c11`): every return from the once call happens after the routine, so geometry it
//!   persisted there is no race with the loads after the call;
//! - grouping by site with the call stacks kept, and `ferrite triage`.
//!
//! Code: analyses/src/{screen,sync,inferred_locks,group,hawkset,vardalith,irh}.rs, emu/src/sync.rs, src/cmd/triage.rs;
//! docs/analyses/hawkset.md, docs/report-format.md, docs/cli.md.

mod common;

use serde_json::Value;

use common::*;

fn config(name: &str) -> String {
    repo().join("guests/configs").join(format!("{name}.ron")).display().to_string()
}

/// Runs `guest_name` under `--analyses spec` with `seed` and extra options; checks the exit
/// status (66 with findings, 0 without) and returns the run and its JSON report.
fn run(guest_name: &str, spec: &str, seed: u64, extra: &[&str]) -> (Run, Value) {
    let seed = seed.to_string();
    let mut opts = vec!["--analyses", spec, "--seed", &seed, "--report", "r.json"];
    opts.extend_from_slice(extra);
    let run = Ferrite::run(&guest(guest_name)).opts(&opts).args(&["/mnt/pmem0/pool"]).go();
    let report = run.json("r.json");
    run.assert_code(if findings(&report).is_empty() { 0 } else { 66 });
    (run, report)
}

fn findings(report: &Value) -> Vec<&Value> {
    get(report, "findings").as_array().expect("findings").iter().collect()
}

fn is_at(loc: &Value, role: &str, file: &str, line: u32) -> bool {
    loc.get("role").and_then(Value::as_str) == Some(role)
        && loc.get("line").and_then(Value::as_u64) == Some(u64::from(line))
        && loc.get("file").and_then(Value::as_str).is_some_and(|f| f.ends_with(&format!("/{file}")) || f == file)
}

/// Some finding has its store at the `/* STORE:` line and a load at a `/* LOAD:` line of
/// `guest_name.c`.
fn reports_marked_race(report: &Value, guest_name: &str) -> bool {
    let file = format!("{guest_name}.c");
    let store = marker_line(&file, "/* STORE:");
    let text = std::fs::read_to_string(guest_source(&file)).unwrap();
    let loads: Vec<u32> =
        text.lines().enumerate().filter(|(_, l)| l.contains("/* LOAD:")).map(|(i, _)| i as u32 + 1).collect();
    findings(report).iter().any(|f| {
        let locs = get(f, "locations").as_array().unwrap();
        locs.iter().any(|l| is_at(l, "store", &file, store))
            && locs.iter().any(|l| loads.iter().any(|&n| is_at(l, "load", &file, n)))
    })
}

/// `guest` is reported at its marked lines by both passes; its fixed twin is silent, and
/// reported again with `off` (the option that silences it) on the pass's spec.
#[track_caller]
fn assert_twins(guest_name: &str, extra: &[&str], off: &str) {
    for pass in ["hawkset", "vardalith"] {
        let (_, r) = run(guest_name, pass, 0, extra);
        assert!(reports_marked_race(&r, guest_name), "{pass} on {guest_name}:\n{r:#}");
        let fixed = format!("{guest_name}_fixed");
        let (_, r) = run(&fixed, pass, 0, extra);
        assert!(findings(&r).is_empty(), "{pass} on {fixed} must be silent:\n{r:#}");
        let (_, r) = run(&fixed, &format!("{pass}:{off}"), 0, extra);
        assert!(!findings(&r).is_empty(), "{pass}:{off} on {fixed} reports what the rule leaves out");
    }
}

#[test]
fn a_custom_cas_locks_own_accesses_to_its_pm_lock_word_are_not_races() {
    let c = config("pi_pm_caslock");
    // The lock is also inferred from its word's accesses: both rules off bring the races back.
    assert_twins("pi_pm_caslock", &["--config", &c], "sync_words=off:infer_locks=off");
    // The lock word's accesses were there and were left out.
    let (_, r) = run("pi_pm_caslock_fixed", "hawkset", 0, &["--config", &c]);
    assert!(get(&r, "stats").get("hawkset.sync_accesses").and_then(Value::as_u64).unwrap_or(0) > 0, "{r:#}");
}

#[test]
fn an_inline_cas_lock_on_a_pm_word_is_inferred() {
    assert_twins("pi_inline_caslock", &[], "infer_locks=off");
    // Every acquisition was seen, and released: 4 threads × 24 critical sections.
    for pass in ["hawkset", "vardalith"] {
        let (_, r) = run("pi_inline_caslock_fixed", pass, 0, &[]);
        let stats = get(&r, "stats");
        for what in ["acquisitions", "releases"] {
            let n = stats.get(format!("{pass}.inferred_{what}")).and_then(Value::as_u64);
            assert_eq!(n, Some(96), "{pass} {what}:\n{r:#}");
        }
    }
}

#[test]
fn an_inline_spinlock_on_a_dram_word_is_inferred() {
    assert_twins("pi_dram_caslock", &[], "infer_locks=off");
    // CAS-taken and exchange-taken words alike, each critical section seen once.
    for pass in ["hawkset", "vardalith"] {
        let (_, r) = run("pi_dram_caslock_fixed", pass, 0, &[]);
        let stats = get(&r, "stats");
        for what in ["acquisitions", "releases"] {
            let n = stats.get(format!("{pass}.inferred_{what}")).and_then(Value::as_u64);
            assert_eq!(n, Some(96), "{pass} {what}:\n{r:#}");
        }
    }
    // A correct program whose spinlock lives in a DRAM global (and is no function of libc's).
    for pass in ["hawkset", "vardalith"] {
        for seed in [0, 1, 2] {
            let (_, r) = run("pi_cas_lock", pass, seed, &[]);
            assert!(findings(&r).is_empty(), "{pass} on pi_cas_lock (seed {seed}) must be silent:\n{r:#}");
        }
    }
}

/// A counter bumped by `fetch_add` in several threads and persisted after: the other threads'
/// `fetch_add`s read it before the persist, but their own stores carry what they read (HawkSet's
/// code records a locked instruction as a fence and a store, never as a load). A plain load of
/// it is still a race.
#[test]
fn an_atomic_read_modify_write_is_no_racing_load() {
    assert_twins("hs_rmw_counter", &[], "rmw_loads=on");
}

/// A PM segment two threads fill and one of them persists whole (P-CLHT's resize helpers copy
/// into the new table, which the resizing thread persists): `vardalith`'s window of a helper
/// store, made durable by the builder's flush and fence, ends at the helper's next release. It
/// stayed open to the end and overlapped the reader's loads, all ordered after the builder's
/// persist (the fixed twin was reported). Where the builder persists only after the reader
/// starts, the helper's store still races with the reader's load.
#[test]
fn a_store_another_thread_persisted_ends_its_window_at_the_writers_next_release() {
    for seed in [0, 1, 2] {
        let (_, r) = run("vd_helper_persist", "vardalith", seed, &[]);
        assert!(reports_marked_race(&r, "vd_helper_persist"), "seed {seed}:\n{r:#}");
        let (_, r) = run("vd_helper_persist_fixed", "vardalith", seed, &[]);
        assert!(findings(&r).is_empty(), "seed {seed}: the fixed twin must be silent:\n{r:#}");
    }
}

/// OpenMP over PM (`ext_omp_fill`): every thread flushes its cells and arrives at
/// `#pragma omp for`'s implicit barrier, whose arrival (libgomp's locked add) is the fence that
/// persists them, before the `single` block checksums the cells and persists a valid header.
/// A fence inside a barrier call is made at the barrier's release (`unlock_fence`): the fixed
/// twin was reported by both passes in every seed (the fence came after the arrival's post). The
/// `nowait` twin, whose single block runs while other threads still store, stays reported.
#[test]
fn a_fence_inside_a_barrier_persists_before_the_threads_leave_it() {
    let file = "ext_omp_fill.c";
    let (store, load) = (marker_line(file, "/* CELL_STORE */"), marker_line(file, "/* CELL_LOAD */"));
    for pass in ["hawkset", "vardalith"] {
        for seed in [0, 1, 2] {
            let (_, r) = run("ext_omp_fill", pass, seed, &[]);
            let found = findings(&r).iter().any(|f| {
                let locs = get(f, "locations").as_array().unwrap();
                locs.iter().any(|l| is_at(l, "store", file, store)) && locs.iter().any(|l| is_at(l, "load", file, load))
            });
            assert!(found, "{pass} on ext_omp_fill (seed {seed}):\n{r:#}");
            let (_, r) = run("ext_omp_fill_fixed", pass, seed, &[]);
            assert!(findings(&r).is_empty(), "{pass} on ext_omp_fill_fixed (seed {seed}) must be silent:\n{r:#}");
        }
        let (_, r) = run("ext_omp_fill_fixed", &format!("{pass}:unlock_fence=off"), 0, &[]);
        assert!(
            !findings(&r).is_empty(),
            "{pass}:unlock_fence=off on ext_omp_fill_fixed reports what the rule leaves out"
        );
    }
}

#[test]
fn a_once_routines_persist_happens_before_every_return_from_the_once_call() {
    let file = "ext_once_init.c";
    let (store, load) = (marker_line(file, "/* GEO_STORE: nbuckets */"), marker_line(file, "/* GEO_LOAD */"));
    for pass in ["hawkset", "vardalith"] {
        for seed in [0, 1, 2] {
            let (_, r) = run("ext_once_init", pass, seed, &[]);
            let found = findings(&r).iter().any(|f| {
                let locs = get(f, "locations").as_array().unwrap();
                locs.iter().any(|l| is_at(l, "store", file, store)) && locs.iter().any(|l| is_at(l, "load", file, load))
            });
            assert!(found, "{pass} on ext_once_init (seed {seed}):\n{r:#}");
            // pthread_once (-O2), and C11 call_once (-O0, static and dynamic: glibc's call_once
            // jumps to pthread_once).
            for fixed in ["ext_once_init_fixed", "ext_once_c11_fixed", "ext_once_c11_fixed.dyn"] {
                let (_, r) = run(fixed, pass, seed, &[]);
                assert!(findings(&r).is_empty(), "{pass} on {fixed} (seed {seed}) must be silent:\n{r:#}");
            }
        }
    }
    // The edge itself, not only the IRH's causal order (which follows it too): silent without
    // the IRH, and reported with HawkSet's own edges (creation and join) alone.
    for pass in ["hawkset:irh=0", "vardalith:irh=0"] {
        let (_, r) = run("ext_once_init_fixed", pass, 0, &[]);
        assert!(findings(&r).is_empty(), "{pass} on ext_once_init_fixed must be silent:\n{r:#}");
    }
    let (_, r) = run("ext_once_init_fixed", "hawkset:edges=paper:irh=0", 0, &[]);
    assert!(
        !findings(&r).is_empty(),
        "hawkset:edges=paper:irh=0 on ext_once_init_fixed reports what the once edge orders"
    );
}

#[test]
fn a_pthread_mutex_in_pm_is_synchronisation() {
    assert_twins("pi_pm_mutex", &[], "sync_words=off:infer_locks=off");
}

#[test]
fn strcmp_vector_loads_count_only_the_bytes_it_compares() {
    assert_twins("pi_pm_strcmp", &[], "strings=off");
    let (_, r) = run("pi_pm_strcmp_fixed", "hawkset", 0, &[]);
    assert!(get(&r, "stats").get("hawkset.clipped_loads").and_then(Value::as_u64).unwrap_or(0) > 0, "{r:#}");
}

#[test]
fn an_out_parameter_try_lock_acquires_only_when_it_says_so() {
    let good = config("pi_outparam_lock");
    for pass in ["hawkset", "vardalith"] {
        let (_, r) = run("pi_outparam_lock", pass, 0, &["--config", &good]);
        assert!(reports_marked_race(&r, "pi_outparam_lock"), "{pass}:\n{r:#}");
        let (_, r) = run("pi_outparam_lock_fixed", pass, 0, &["--config", &good]);
        assert!(findings(&r).is_empty(), "{pass} on the fixed twin:\n{r:#}");
    }
    // Without the configuration the node locks are invisible: the fixed twin is reported.
    let (_, r) = run("pi_outparam_lock_fixed", "hawkset", 0, &[]);
    assert!(!findings(&r).is_empty());
    // The report counts each declared function's calls and acquisitions: with the out-parameter
    // some attempts fail; the return-value translation (`Acquire`) acquires on every call, more
    // than the unlocks release.
    let stat = |r: &Value, k: &str| get(r, "stats").get(k).and_then(Value::as_u64).unwrap_or(u64::MAX);
    let (_, r) = run("pi_outparam_lock", "hawkset", 0, &["--config", &good]);
    let (calls, ok, failed) = (
        stat(&r, "locks.write_lock_or_restart.calls"),
        stat(&r, "locks.write_lock_or_restart.acquired"),
        stat(&r, "locks.write_lock_or_restart.failed"),
    );
    assert!(calls > 0 && failed > 0 && ok + failed == calls, "{:#}", get(&r, "stats"));
    assert_eq!(ok, stat(&r, "locks.write_unlock.calls"), "every acquisition is released once");
    let (_, r) = run("pi_outparam_lock", "hawkset", 0, &["--config", &config("pi_outparam_lock_acquire")]);
    let acquired = stat(&r, "locks.write_lock_or_restart.acquired");
    assert_eq!(acquired, stat(&r, "locks.write_lock_or_restart.calls"));
    assert!(acquired > stat(&r, "locks.write_unlock.calls"));
}

#[test]
fn hawksets_own_configuration_format_is_read_and_several_files_add_up() {
    let cfg = |n: &str| repo().join("guests/configs").join(n).display().to_string();
    let (try_lock, release) = (cfg("pi_outparam_lock_try.cfg"), cfg("pi_outparam_lock_release.cfg"));
    let yaml: [&str; 4] = ["--config", &try_lock, "--config", &release];
    let (_, r) = run("pi_outparam_lock", "hawkset", 0, &yaml);
    assert!(reports_marked_race(&r, "pi_outparam_lock"), "{r:#}");
    let (_, fixed) = run("pi_outparam_lock_fixed", "hawkset", 0, &yaml);
    assert!(findings(&fixed).is_empty(), "{fixed:#}");
    // The same lock entries as the RON translation, so the same run.
    let (_, ron) = run("pi_outparam_lock_fixed", "hawkset", 0, &["--config", &config("pi_outparam_lock")]);
    assert_eq!(get(get(&fixed, "run"), "custom_locks"), get(get(&ron, "run"), "custom_locks"));
    assert_eq!(get(&fixed, "stats"), get(&ron, "stats"));
    // One file alone is half a lock: acquisitions never released hide the races.
    let (_, r) = run("pi_outparam_lock", "hawkset", 0, &["--config", &try_lock]);
    assert!(!reports_marked_race(&r, "pi_outparam_lock"), "{r:#}");
    // A malformed file is one error line and status 2, before anything runs.
    let dir = scratch();
    for (text, says) in [
        ("try_adquire:\n  f:\n    mutex_id_arg: 0\n", "needs a success_value or a failure_value"),
        ("release:\n  f:\n    mutex_id: 0\n", "unknown setting `mutex_id`"),
        ("adq_rel:\n  - f\n", "`adq_rel`"),
        ("adquire: [f\n", "not valid YAML"),
    ] {
        let path = dir.path().join("bad.cfg");
        std::fs::write(&path, text).unwrap();
        let p = path.display().to_string();
        let run = Ferrite::run(&guest("pi_outparam_lock")).opts(&["--analyses", "hawkset", "--config", &p]).go();
        run.assert_code(2);
        let err = &run.stderr;
        assert!(err.starts_with("error: ") && err.lines().count() == 1 && err.contains(says), "{err}");
    }
}

#[test]
fn a_configured_lock_the_program_lacks_is_a_warning() {
    let dir = scratch();
    let path = dir.path().join("locks.ron");
    std::fs::write(&path, "(locks: [(symbol: \"no_such_lock\", kind: TryAcquire(failure: 0), lock_arg: 1)])").unwrap();
    let p = path.display().to_string();
    let (run, r) = run("pi_pm_mutex_fixed", "hawkset", 0, &["--config", &p]);
    assert!(run.stderr.contains("warning: --config names lock function `no_such_lock`"), "{}", run.stderr);
    assert_eq!(get(&r, "stats").get("locks.no_such_lock.calls").and_then(Value::as_u64), Some(0));
    // A bad declaration is an error.
    std::fs::write(&path, "(locks: [(symbol: \"x\", kind: Acquire, result_arg: 1)])").unwrap();
    let bad = Ferrite::run(&guest("pi_pm_mutex_fixed"))
        .opts(&["--analyses", "hawkset", "--config", &p])
        .args(&["/mnt/pmem0/pool"])
        .go();
    bad.assert_code(2);
    assert!(bad.stderr.contains("result_arg is for TryAcquire"), "{}", bad.stderr);
}

/// The two simplest two-thread shapes are reported in every schedule at the default `irh=1`:
/// a store persisted before the reader's first access is dropped only when that persist happens
/// before the access (`irh_order=causal`), which nothing here makes so. HawkSet's own rule
/// (`irh_order=observed`) drops it in the schedules where the writer happens to finish first.
/// `irh=0` reports them too, and their fixed twins are never reported.
#[test]
fn the_irh_keeps_the_simplest_shapes() {
    for g in ["hs_irh_writer", "hs_irh_nolock"] {
        let mut observed = 0;
        for seed in 0..3 {
            for spec in ["hawkset", "hawkset:irh=0"] {
                let (_, r) = run(g, spec, seed, &[]);
                assert!(reports_marked_race(&r, g), "{g} {spec} seed {seed}:\n{r:#}");
            }
            let (_, r) = run(g, "hawkset:irh_order=observed", seed, &[]);
            observed += usize::from(reports_marked_race(&r, g));
            let fixed = format!("{g}_fixed");
            for spec in ["hawkset", "hawkset:irh=0"] {
                let (_, r) = run(&fixed, spec, seed, &[]);
                assert!(findings(&r).is_empty(), "{fixed} {spec} seed {seed}:\n{r:#}");
            }
        }
        assert!(observed >= 2, "{g}: reported with HawkSet's rule in {observed} of 3 seeds");
    }
}

/// vardalith holds a store its writer persisted before publishing it, as hawkset does: the race
/// without any lock (main reads after `pthread_create`) is reported in every seed, and the fixed
/// twin in none. (`hs_irh_writer` stays a miss of the window mode: there the windows never
/// overlap, docs/analyses/vardalith.md.)
#[test]
fn vardalith_holds_what_its_irh_would_drop() {
    let g = "hs_irh_nolock";
    for seed in 0..3 {
        for spec in ["vardalith", "vardalith:mode=hb"] {
            let (_, r) = run(g, spec, seed, &[]);
            assert!(reports_marked_race(&r, g), "{g} {spec} seed {seed}:\n{r:#}");
            let fixed = format!("{g}_fixed");
            let (_, r) = run(&fixed, spec, seed, &[]);
            assert!(findings(&r).is_empty(), "{fixed} {spec} seed {seed}:\n{r:#}");
        }
    }
}

/// A node persisted before its pointer is stored is initialisation, which the IRH removes when
/// the reader is ordered after the persist by what it read: the bytes it loaded (slot 0, though
/// another thread stored to slot 1 of the same line later) and, through a relay, what their
/// writer had itself read (a load acquires the storing thread's whole clock). `hs_rf_publish`'s
/// value, published before it is persisted, is reported at its lines; in both guests the pointer
/// stores stay races (a reader can load a pointer before it is durable), and the fixed twin
/// reports nothing else. Without the IRH the initialisation is reported: the guest exercises it.
/// (Before the edges were per byte and transitive, the fixed twin reported its `INIT` line too,
/// from both shapes, in every seed: docs/analyses/hawkset.md.)
#[test]
fn reads_from_edges_follow_the_bytes_read_and_carry_the_writers_clock() {
    let file = "hs_rf_publish.c";
    let (init, publish) = (marker_line(file, "/* INIT:"), marker_line(file, "/* PUBLISH:"));
    let stores = |r: &Value| -> Vec<u64> {
        let mut v: Vec<u64> = findings(r)
            .iter()
            .flat_map(|f| get(f, "locations").as_array().unwrap().iter())
            .filter(|l| l.get("role").and_then(Value::as_str) == Some("store"))
            .filter_map(|l| l.get("line").and_then(Value::as_u64))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    for pass in ["hawkset", "vardalith"] {
        for seed in 0..3 {
            // vardalith sees only windows that overlapped in the run: not in seed 2's.
            if pass == "hawkset" || seed == 0 {
                let (_, r) = run("hs_rf_publish", pass, seed, &[]);
                assert!(reports_marked_race(&r, "hs_rf_publish"), "{pass} seed {seed}:\n{r:#}");
            }
            let (_, r) = run("hs_rf_publish_fixed", pass, seed, &[]);
            assert_eq!(stores(&r), [u64::from(publish)], "{pass} seed {seed}: only the pointers race:\n{r:#}");
        }
    }
    let (_, r) = run("hs_rf_publish_fixed", "hawkset:irh=0", 0, &[]);
    assert!(stores(&r).contains(&u64::from(init)), "irh=0 reports the initialisation:\n{r:#}");
}

/// `vardalith:reads_from=on` (with the IRH off, so the initialisation is checked at all): the
/// fixed twin's node stores, persisted before the pointers to them, stay in windows that never
/// close (their writers release nothing after the persist) and overlap main's loads, a race by
/// the paper's definition, whose synchronisation is calls only; main reached each node through a
/// pointer stored after the persist, so a reads-from edge orders the loads after it and the
/// option leaves them out. The pointers still race, and the buggy twin's value, published before
/// its persist, is still reported.
#[test]
fn vardalith_reads_from_edges_order_loads_after_the_persist() {
    let file = "hs_rf_publish.c";
    let (init, publish) = (marker_line(file, "/* INIT:"), marker_line(file, "/* PUBLISH:"));
    let stores = |r: &Value| -> Vec<u64> {
        let mut v: Vec<u64> = findings(r)
            .iter()
            .flat_map(|f| get(f, "locations").as_array().unwrap().iter())
            .filter(|l| l.get("role").and_then(Value::as_str) == Some("store"))
            .filter_map(|l| l.get("line").and_then(Value::as_u64))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    for seed in 0..3 {
        let (_, r) = run("hs_rf_publish_fixed", "vardalith:irh=0", seed, &[]);
        assert!(stores(&r).contains(&u64::from(init)), "seed {seed}: without the edges:\n{r:#}");
        let (_, r) = run("hs_rf_publish_fixed", "vardalith:irh=0:reads_from=on", seed, &[]);
        assert_eq!(stores(&r), [u64::from(publish)], "seed {seed}: only the pointers race:\n{r:#}");
    }
    let (_, r) = run("hs_rf_publish", "vardalith:irh=0:reads_from=on", 0, &[]);
    assert!(reports_marked_race(&r, "hs_rf_publish"), "{r:#}");
}

/// A race made of C++ `std::atomic` stores and loads (libstdc++'s `<bits/atomic_base.h>` inlined
/// into the program) is reported at the program's lines, where the atomics are used, by both
/// passes; the fixed twin is silent. (Before, its store and load were summarised in
/// `atomic_base.h`, for every atomic of every program: docs/analyses/hawkset.md.)
#[test]
fn cxx_atomics_are_reported_at_the_programs_lines() {
    let file = "pi_cxx_atomic.cpp";
    let (store, load) = (marker_line(file, "/* STORE:"), marker_line(file, "/* LOAD:"));
    for pass in ["hawkset", "vardalith"] {
        let (_, r) = run("pi_cxx_atomic", pass, 0, &[]);
        let fs = findings(&r);
        assert_eq!(fs.len(), 1, "{pass}:\n{r:#}");
        let locs = get(fs[0], "locations").as_array().unwrap();
        assert!(locs.iter().any(|l| is_at(l, "store", file, store)), "{pass}:\n{r:#}");
        assert!(locs.iter().any(|l| is_at(l, "load", file, load)), "{pass}:\n{r:#}");
        let (_, r) = run("pi_cxx_atomic_fixed", pass, 0, &[]);
        assert!(findings(&r).is_empty(), "{pass} on the fixed twin:\n{r:#}");
    }
}

/// One finding per store site (HawkSet's count: the window ends are listed in it): the call
/// stacks it folds are in `group`, and `ferrite triage` ranks the findings.
#[test]
fn findings_are_grouped_by_site_and_triaged() {
    let (run, r) = run("pub_clht", "hawkset", 0, &["--config", &config("pub_clht")]);
    let fs = findings(&r);
    assert!(!fs.is_empty());
    let mut keys = std::collections::BTreeSet::new();
    let mut multi = 0;
    for f in &fs {
        let g = get(f, "group");
        let n = get(g, "key_locations").as_u64().unwrap() as usize;
        let key: Vec<u64> =
            get(f, "locations").as_array().unwrap()[..n].iter().map(|l| get(l, "pc").as_u64().unwrap()).collect();
        let class = g.get("class").and_then(Value::as_str).unwrap_or("").to_string();
        assert!(keys.insert((key, class)), "two findings for one site key:\n{r:#}");
        let stacks = get(g, "stacks").as_array().unwrap();
        let total: u64 = stacks.iter().map(|s| get(s, "occurrences").as_u64().unwrap()).sum();
        assert_eq!(total, get(f, "occurrences").as_u64().unwrap(), "the stacks' counts add up");
        multi += usize::from(stacks.len() > 1);
    }
    assert!(multi > 0, "some site is reached through several call stacks");
    assert!(run.stderr.contains("call stacks)"), "the summary line says how many stacks");
    // Triage: every finding once, tiers in order, pointer stores first.
    let t = triage(&run.path("r.json"));
    t.assert_code(0);
    let out = t.stdout_str();
    let tiers: Vec<u32> =
        out.lines().filter_map(|l| l.split("(tier ").nth(1)).map(|rest| rest[..1].parse().unwrap()).collect();
    assert_eq!(tiers.len(), fs.len(), "{out}");
    assert!(tiers.windows(2).all(|w| w[0] <= w[1]), "{out}");
    assert_eq!(tiers[0], 0, "the table pointer is a pointer store:\n{out}");
    assert_eq!(out.matches("     why: ").count(), fs.len());
}

/// `ferrite triage REPORT`.
fn triage(report: &std::path::Path) -> Run {
    let r = report.display().to_string();
    let out = ferrite().args(["triage", &r]).output().expect("ferrite runs");
    Run {
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: shell_status(out.status),
        dir: scratch(),
        cmdline: format!("ferrite triage {r}"),
    }
}

// ---- Issue 19's bullets on programs written for the proof (src/pv_*.c, built -O2) ----

/// Runs `guest_name` with arguments `args` (after the pool) as [`run`] does.
fn run_args(guest_name: &str, spec: &str, seed: u64, extra: &[&str], args: &[&str]) -> (Run, Value) {
    let seed = seed.to_string();
    let mut opts = vec!["--analyses", spec, "--seed", &seed, "--report", "r.json"];
    opts.extend_from_slice(extra);
    let mut argv = vec!["/mnt/pmem0/pool"];
    argv.extend_from_slice(args);
    let run = Ferrite::run(&guest(guest_name)).opts(&opts).args(&argv).go();
    let report = run.json("r.json");
    run.assert_code(if findings(&report).is_empty() { 0 } else { 66 });
    (run, report)
}

fn stat(report: &Value, key: &str) -> u64 {
    get(report, "stats").get(key).and_then(Value::as_u64).unwrap_or_else(|| panic!("no stat {key}:\n{report:#}"))
}

/// Whether a finding has a store at marker `store` and a load at marker `load` of `file`.
fn reports_pair(report: &Value, file: &str, store: &str, load: &str) -> bool {
    let (s, l) = (marker_line(file, store), marker_line(file, load));
    findings(report).iter().any(|f| {
        let locs = get(f, "locations").as_array().unwrap();
        locs.iter().any(|x| is_at(x, "store", file, s)) && locs.iter().any(|x| is_at(x, "load", file, l))
    })
}

/// A ticket lock whose two counters live in PM, declared with its lock argument (1, after a
/// context) and a try-lock whose success is an `int` out-parameter (argument 2, 1 = taken);
/// keys compared lock-free with `strncmp`/`memcmp`, whose vector loads reach the slot's value.
#[test]
fn a_ticket_lock_in_pm_declared_with_lock_and_result_arguments() {
    let c = config("pv_ticket_kv");
    assert_twins("pv_ticket_kv", &["--config", &c], "strings=off");
    // Undeclared, the counters race with every other thread's attempt (no CAS from 0 to infer).
    let (_, r) = run("pv_ticket_kv_fixed", "hawkset", 0, &[]);
    assert!(
        findings(&r)
            .iter()
            .any(|f| get(f, "locations")[0].get("function").and_then(Value::as_str) == Some("ticket_release")),
        "{r:#}"
    );
    // The translation is right: every release pairs with an acquisition, and a try-lock's calls
    // are its acquisitions and its failures.
    let (_, r) = run("pv_ticket_kv_fixed", "hawkset", 0, &["--config", &c]);
    assert!(stat(&r, "hawkset.sync_accesses") > 0);
    assert_eq!(
        stat(&r, "locks.ticket_release.calls"),
        stat(&r, "locks.ticket_acquire.acquired") + stat(&r, "locks.ticket_try.acquired")
    );
    assert_eq!(
        stat(&r, "locks.ticket_try.calls"),
        stat(&r, "locks.ticket_try.acquired") + stat(&r, "locks.ticket_try.failed")
    );
}

/// A home-made reader-writer lock in PM declared in HawkSet's format with `type: shared` for
/// the read side: a store made under the read lock races with another reader's load (two shared
/// holders do not protect each other), which `type: unique` would hide from hawkset. The
/// configuration also names a function the program lacks: a warning, and 0 calls.
#[test]
fn a_reader_writer_lock_declared_shared_in_hawksets_format() {
    let cfg = repo().join("guests/configs/pv_rwcache.cfg").display().to_string();
    let file = "pv_rwcache.c";
    for pass in ["hawkset", "vardalith"] {
        let (buggy, r) = run("pv_rwcache", pass, 0, &["--config", &cfg]);
        assert!(buggy.stderr.contains("warning: --config names lock function `rw_upgrade`"), "{}", buggy.stderr);
        assert!(reports_pair(&r, file, "/* STORE:", "/* LOAD:"), "{pass}:\n{r:#}");
        assert!(reports_pair(&r, file, "/* HITS_STORE:", "/* HITS_LOAD:"), "{pass}:\n{r:#}");
        let (_, r) = run("pv_rwcache_fixed", pass, 0, &["--config", &cfg]);
        assert!(findings(&r).is_empty(), "{pass} on pv_rwcache_fixed:\n{r:#}");
        assert_eq!(stat(&r, "locks.rw_upgrade.calls"), 0);
        assert!(stat(&r, "locks.rw_rdlock.acquired") > 0 && stat(&r, "locks.rw_wrlock.acquired") > 0);
    }
    let dir = scratch();
    let unique = dir.path().join("unique.cfg");
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(text.contains("    type: shared"));
    std::fs::write(&unique, text.replace("    type: shared", "    type: unique")).unwrap();
    let (_, r) = run("pv_rwcache", "hawkset", 0, &["--config", &unique.display().to_string()]);
    assert!(reports_pair(&r, file, "/* STORE:", "/* LOAD:"), "{r:#}");
    assert!(!reports_pair(&r, file, "/* HITS_STORE:", "/* HITS_LOAD:"), "unique read locks protect each other:\n{r:#}");
}

/// A recursive pthread mutex in PM after the data it guards, taken by trylock and relocked.
#[test]
fn a_recursive_pthread_mutex_in_pm_is_synchronisation() {
    assert_twins("pv_pm_session", &[], "sync_words=off:infer_locks=off");
}

/// One helper reached through two callers: one finding per store site, its call stacks kept and
/// counted on the summary line; `ferrite triage` puts the published pointer first, then the
/// value, then the counter.
#[test]
fn a_ledger_is_grouped_by_store_site_and_its_pointer_is_triaged_first() {
    let file = "pv_ledger.c";
    let (run, r) = run("pv_ledger", "hawkset", 0, &[]);
    for (s, l) in
        [("/* HEAD_STORE", "/* HEAD_LOAD"), ("/* TOTAL_STORE", "/* TOTAL_LOAD"), ("/* COUNT_STORE", "/* COUNT_LOAD")]
    {
        assert!(reports_pair(&r, file, s, l), "{s}:\n{r:#}");
    }
    assert_eq!(findings(&r).len(), 3, "one finding per store site:\n{r:#}");
    for f in findings(&r) {
        let callers: std::collections::BTreeSet<&str> = get(get(f, "group"), "stacks")
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| get(s, "locations").as_array().unwrap().iter())
            .filter(|l| l.get("role").and_then(Value::as_str) == Some("store"))
            .flat_map(|l| get(l, "backtrace").as_array().unwrap().iter())
            .filter_map(|fr| fr.get("function").and_then(Value::as_str))
            .filter(|f| f.starts_with("add_"))
            .collect();
        assert_eq!(callers.len(), 2, "both callers of post() are kept:\n{f:#}");
    }
    assert!(run.stderr.contains("call stacks)"), "{}", run.stderr);
    let (_, fixed) = run_args("pv_ledger_fixed", "hawkset,vardalith", 0, &[], &[]);
    assert!(findings(&fixed).is_empty(), "{fixed:#}");
    let t = triage(&run.path("r.json"));
    t.assert_code(0);
    let out = t.stdout_str();
    let firsts: Vec<&str> = out.lines().filter(|l| l.contains("(tier ")).collect();
    let head = marker_line(file, "/* HEAD_STORE");
    let total = marker_line(file, "/* TOTAL_STORE");
    let count = marker_line(file, "/* COUNT_STORE");
    assert_eq!(firsts.len(), 3, "{out}");
    for (line, (tier, at)) in firsts.iter().zip([(0, head), (1, total), (2, count)]) {
        assert!(line.contains(&format!("(tier {tier})")) && line.contains(&format!("store {file}:{at} ")), "{out}");
    }
}

/// HawkSet's two simplest shapes on a new program (a spinlock; no lock at all): hawkset reports
/// both in every seed at the default `irh=1`. vardalith's window mode misses the locked shape
/// exactly where Definition 1 finds no race in the run (`mode=hb` agrees): where main's critical
/// section comes first. Where the writer goes first, its store region, with no release after
/// its persist, stays open past the thread's exit until main joins it, as the paper's regions
/// (whose releases are unlocks and thread creation) do.
#[test]
fn the_irh_shapes_on_a_spinlock_and_without_a_lock() {
    let file = "pv_irh_pair.c";
    for mode in ["lock", "free"] {
        let mut windows = Vec::new();
        let mut hb = Vec::new();
        for seed in 0..3 {
            let (_, r) = run_args("pv_irh_pair", "hawkset", seed, &[], &[mode]);
            assert!(reports_pair(&r, file, "/* STORE:", "/* LOAD:"), "{mode} seed {seed}:\n{r:#}");
            let (_, r) = run_args("pv_irh_pair", "vardalith", seed, &[], &[mode]);
            windows.push(reports_pair(&r, file, "/* STORE:", "/* LOAD:"));
            let (_, r) = run_args("pv_irh_pair", "vardalith:mode=hb", seed, &[], &[mode]);
            hb.push(reports_pair(&r, file, "/* STORE:", "/* LOAD:"));
            let (_, r) = run_args("pv_irh_pair_fixed", "hawkset,vardalith", seed, &[], &[mode]);
            assert!(findings(&r).is_empty(), "{mode} fixed seed {seed}:\n{r:#}");
        }
        assert_eq!(windows, hb, "{mode}: window mode misses only what Definition 1 excludes");
        assert!(windows.iter().any(|&w| w), "{mode}: {windows:?}");
        if mode == "free" {
            assert!(windows.iter().all(|&w| w), "{windows:?}");
        }
    }
    // The same on hs_irh_writer: found where, and only where, the run holds a PIR.
    let mut windows = Vec::new();
    let mut hb = Vec::new();
    for seed in 0..3 {
        let (_, r) = run("hs_irh_writer", "vardalith", seed, &[]);
        windows.push(reports_marked_race(&r, "hs_irh_writer"));
        let (_, r) = run("hs_irh_writer", "vardalith:mode=hb", seed, &[]);
        hb.push(reports_marked_race(&r, "hs_irh_writer"));
    }
    assert_eq!(windows, hb);
    assert!(windows.iter().any(|&w| w));
}

/// A PM node passed along by 4 threads, each of its lives in memory its predecessor freed
/// (`pmdk_free_reuse`): the `uses` counter one life bumps and never persists, and a later
/// life's read of the same bytes by another thread, are no race (a free ends the bytes'
/// history: `frees=on`); a value persisted after the turn is passed is one, inside one life,
/// and stays reported at its lines.
/// A window the free ends, of a store made under a lock its thread still holds unconfirmed (a
/// CAS lock on a PM word, inferred), is kept back until the lock is decided; it still belongs to
/// the life the free ends and races with that life's read (it was lost: P-CLHT's `table_tmp`).
#[test]
fn a_window_ended_by_a_free_under_a_held_inferred_lock_keeps_its_race() {
    for pass in ["hawkset", "vardalith"] {
        let (_, r) = run("pmdk_free_held", pass, 0, &[]);
        assert!(reports_marked_race(&r, "pmdk_free_held"), "{pass}:\n{r:#}");
        let (_, r) = run("pmdk_free_held_fixed", pass, 0, &[]);
        assert!(findings(&r).is_empty(), "{pass} must be silent:\n{r:#}");
    }
}

#[test]
fn a_free_ends_the_history_of_the_objects_bytes() {
    let file = "pmdk_free_reuse.c";
    let uses = marker_line(file, "/* USES:");
    let at = |r: &Value, line: u32| {
        findings(r)
            .iter()
            .any(|f| get(f, "locations").as_array().unwrap().iter().any(|l| is_at(l, "store", file, line)))
    };
    for pass in ["hawkset", "vardalith"] {
        let (out, r) = run("pmdk_free_reuse", pass, 0, &[]);
        // The allocator placed nodes where freed ones were: the case this tests.
        assert!(out.stdout_str().starts_with("reused 7 of 8"), "{}", out.stdout_str());
        assert!(reports_marked_race(&r, "pmdk_free_reuse"), "{pass}:\n{r:#}");
        assert!(!at(&r, uses), "{pass}: a store paired with a load of a later life:\n{r:#}");
        assert_eq!(get(&r, "stats")[format!("{pass}.frees")].as_u64(), Some(8), "{:#}", get(&r, "stats"));
        let (_, r) = run("pmdk_free_reuse_fixed", pass, 0, &[]);
        assert!(findings(&r).is_empty(), "{pass} must be silent:\n{r:#}");
        // Without the frees, the store of one life pairs with the read of a later one.
        let (_, r) = run("pmdk_free_reuse_fixed", &format!("{pass}:frees=off"), 0, &[]);
        assert!(at(&r, uses), "{pass}:frees=off:\n{r:#}");
    }
}

/// The lines of `file` (a guest source) that contain `marker`.
fn marker_lines(file: &str, marker: &str) -> Vec<u32> {
    let text = std::fs::read_to_string(guest_source(file)).unwrap();
    text.lines().enumerate().filter(|(_, l)| l.contains(marker)).map(|(i, _)| i as u32 + 1).collect()
}

/// Some finding has a store at a line of `stores` and a load at a line of `loads`, of `file`.
fn reports_pair_at(report: &Value, file: &str, stores: &[u32], loads: &[u32]) -> bool {
    findings(report).iter().any(|f| {
        let locs = get(f, "locations").as_array().unwrap();
        locs.iter().any(|l| stores.iter().any(|&n| is_at(l, "store", file, n)))
            && locs.iter().any(|l| loads.iter().any(|&n| is_at(l, "load", file, n)))
    })
}

/// A pool that main formats before it starts its threads (a `memset` of the mapping, libpmem's
/// `pmem_memset_persist`) is touched by no other thread then: under the causal IRH main's
/// formatting publishes nothing (every other thread's access comes after a creation it made
/// later). A WAL entry its worker persists before committing it under the commit mutex
/// (`ext_wal_fixed`), and a Treiber stack's node persisted before the CAS that publishes it
/// (`pmdk_treiber_fixed`), are then initialisation; before, main's formatting counted as the
/// first thread's touch and both were reported in every seed. The buggy twins (persisted after
/// the commit, after the CAS) are still reported at their lines, and HawkSet's own rule
/// (`irh_order=observed`) still reports the fixed ones: the guests exercise the rule.
#[test]
fn a_pool_formatted_before_the_threads_start_publishes_nothing() {
    let wal = "ext_wal.c";
    let (stores, loads) = (marker_lines(wal, "/* ENTRY_STORE:"), marker_lines(wal, "/* ENTRY_LOAD */"));
    let treiber = "pmdk_treiber.c";
    let node_stores = marker_lines(treiber, "/* NODE_STORE:");
    let node_loads = marker_lines(treiber, "/* NODE_LOAD:");
    for pass in ["hawkset", "vardalith"] {
        for seed in 0..2 {
            let (_, r) = run("ext_wal", pass, seed, &[]);
            assert!(reports_pair_at(&r, wal, &stores, &loads), "{pass} on ext_wal seed {seed}:\n{r:#}");
            let (_, r) = run("ext_wal_fixed", pass, seed, &[]);
            assert!(findings(&r).is_empty(), "{pass} on ext_wal_fixed seed {seed}:\n{r:#}");
            let (_, r) = run("pmdk_treiber", pass, seed, &[]);
            assert!(
                reports_pair_at(&r, treiber, &node_stores, &node_loads),
                "{pass} on pmdk_treiber seed {seed}:\n{r:#}"
            );
            // The head's CAS is still a race (persisted after it), the nodes are not.
            let (_, r) = run("pmdk_treiber_fixed", pass, seed, &[]);
            assert!(!findings(&r).is_empty(), "{pass} on pmdk_treiber_fixed seed {seed}: the head");
            let node_lines: Vec<u32> = node_stores.iter().chain(&node_loads).copied().collect();
            assert!(
                !findings(&r).iter().any(|f| get(f, "locations").as_array().unwrap().iter().any(|l| node_lines
                    .iter()
                    .any(|&n| is_at(l, "store", treiber, n) || is_at(l, "load", treiber, n)))),
                "{pass} on pmdk_treiber_fixed seed {seed} names a node line:\n{r:#}"
            );
        }
    }
    let (_, r) = run("ext_wal_fixed", "hawkset:irh_order=observed", 0, &[]);
    assert!(reports_pair_at(&r, wal, &stores, &loads), "HawkSet's rule counts main's formatting:\n{r:#}");
    let (_, r) = run("pmdk_treiber_fixed", "hawkset:irh_order=observed", 0, &[]);
    assert!(reports_pair_at(&r, treiber, &node_stores, &node_loads), "HawkSet's rule counts main's formatting:\n{r:#}");
}

/// A `--config` try-lock whose release is a macro (a plain store of 0 to its word, P-CLHT's
/// `LOCK_RLS`), which no configuration entry can name: the store releases it. Held until the
/// threads' exits instead, the bucket locks both threads once took were in every later lockset
/// of theirs, and the helper's never-persisted flag, spun on by the resizer, looked protected
/// (P-CLHT's `helper_done`, `clht_lb_res.c:699` against `:753`, with HawkSet's `pclht.cfg`).
#[test]
fn a_configured_lock_released_by_a_plain_store_is_released() {
    let c = config("hs_macro_release");
    for pass in ["hawkset", "vardalith"] {
        let (_, r) = run("hs_macro_release", pass, 0, &["--config", &c]);
        assert!(reports_marked_race(&r, "hs_macro_release"), "{pass}:\n{r:#}");
        // Every update's unlock and the fixed twin's flag unlock: 8 + 8 + 1 (the fixed twin
        // adds the resizer's spins).
        assert!(stat(&r, &format!("{pass}.store_releases")) >= 16, "{pass}:\n{:#}", get(&r, "stats"));
        let (_, r) = run("hs_macro_release_fixed", pass, 0, &["--config", &c]);
        assert!(findings(&r).is_empty(), "{pass} must be silent:\n{r:#}");
        // The bucket locks still protect without the inferred ones: released at the store.
        let (_, r) = run("hs_macro_release_fixed", &format!("{pass}:infer_locks=off"), 0, &["--config", &c]);
        assert!(findings(&r).is_empty(), "{pass}:infer_locks=off must be silent:\n{r:#}");
    }
}

/// The same release for the passes that order threads. hmtrace held every acquisition of such a
/// lock until the thread exited, so the helper's flag store and the resizer's spin on it, both
/// outside the bucket locks, looked protected by the locks the two threads had once taken (a data
/// race missed); oscs saw no critical section end, so the fixed twin's flag, written in the
/// helper's critical section and read in the resizer's, was no order-sensitive pair. The release
/// store itself is the lock's, in neither pass a write of a critical section.
#[test]
fn the_ordering_passes_release_a_configured_lock_at_its_store() {
    let c = config("hs_macro_release");
    let file = "hs_macro_release.c";
    let (store, load, fixed_load) =
        (marker_line(file, "/* STORE:"), marker_line(file, "/* LOAD:"), marker_line(file, "/* FIX: the flag, read"));
    let at = |f: &Value, line: u32| {
        get(f, "locations").as_array().unwrap().iter().any(|l| {
            l.get("line").and_then(Value::as_u64) == Some(u64::from(line))
                && l.get("file").and_then(Value::as_str).is_some_and(|f| f.ends_with(file))
        })
    };
    let (_, r) = run("hs_macro_release", "hmtrace", 0, &["--config", &c]);
    assert!(findings(&r).iter().any(|f| at(f, store) && at(f, load)), "hmtrace: the flag's race:\n{r:#}");
    let (_, r) = run("hs_macro_release_fixed", "hmtrace", 0, &["--config", &c]);
    assert!(!findings(&r).iter().any(|f| at(f, store)), "hmtrace: the flag is locked in the twin:\n{r:#}");
    let (_, r) = run("hs_macro_release_fixed", "oscs", 0, &["--config", &c]);
    assert!(findings(&r).iter().any(|f| at(f, store) && at(f, fixed_load)), "oscs: the flag's sections:\n{r:#}");
    let unlock = marker_line(file, "BUCKET_UNLOCK(&b->lock);");
    for name in ["hs_macro_release", "hs_macro_release_fixed"] {
        let (_, r) = run(name, "oscs", 0, &["--config", &c]);
        assert!(
            !findings(&r).iter().any(|f| at(f, unlock)),
            "oscs on {name}: the unlock's store is the lock's:\n{r:#}"
        );
    }
}

/// APEX's per-thread log slot: claimed by a CAS of its word from 0, given back by a store of 0,
/// never held by a second thread. The pattern of a lock, but no lock between threads: its
/// word's accesses are data, and the owner's never-persisted stores race with the other
/// threads' scans (they were left out as synchronisation). The fixed twin (a registry mutex,
/// persisted before each unlock) is silent, and a real inline lock (`pi_inline_caslock`, held
/// by all its threads) still keeps its word's accesses out.
#[test]
fn a_word_only_one_thread_ever_holds_is_no_lock_between_threads() {
    for pass in ["hawkset", "vardalith"] {
        let (_, r) = run("hs_slot_claim", pass, 0, &[]);
        assert!(reports_marked_race(&r, "hs_slot_claim"), "{pass}:\n{r:#}");
        let (_, r) = run("hs_slot_claim_fixed", pass, 0, &[]);
        assert!(findings(&r).is_empty(), "{pass} must be silent:\n{r:#}");
        let (_, r) = run("pi_inline_caslock_fixed", pass, 0, &[]);
        assert!(findings(&r).is_empty(), "{pass} must be silent:\n{r:#}");
    }
}

/// A PM record persisted and then published through a C++ `std::atomic<Record *>` in DRAM
/// (`memory_order_release` and `_acquire`: plain `mov`s at -O2, which no PM hook sees): the
/// atomic's store and the loads that read it order the threads, so the record's initialisation
/// is no race in the fixed twin, static or against libstdc++.so. The buggy twin persists the
/// record after publishing it and is reported at the record's stores and the reader's load.
#[test]
fn a_cxx_atomic_in_dram_publishes_what_was_persisted_before_it() {
    let file = "ext_atomic_pub.cpp";
    let stores = marker_lines(file, "// REC_STORE:");
    let loads = marker_lines(file, "// REC_LOAD");
    for pass in ["hawkset", "vardalith"] {
        for seed in 0..2 {
            for suffix in ["", ".dyn"] {
                let (_, r) = run(&format!("ext_atomic_pub{suffix}"), pass, seed, &[]);
                assert!(
                    reports_pair_at(&r, file, &stores, &loads),
                    "{pass} on ext_atomic_pub{suffix} seed {seed}:\n{r:#}"
                );
                let (_, r) = run(&format!("ext_atomic_pub_fixed{suffix}"), pass, seed, &[]);
                assert!(findings(&r).is_empty(), "{pass} on ext_atomic_pub_fixed{suffix} seed {seed}:\n{r:#}");
            }
        }
    }
}

/// A child process persists what it wrote with a system call (`msync(MS_SYNC)`, `fsync` of the
/// pool file) and exits; its parent reads the records after `waitpid`. The call's durability
/// reaches the passes as it happens ([`emu::events::EventKind::Persist`]), so the windows end
/// before the exit the parent waits for: the fixed twin is silent. Before, they were noticed
/// only at the child's exit, after the exit's hand-off to the waiting parent, and both passes
/// reported the parent's loads in every seed. The buggy twin persists only the first page:
/// vardalith still reports the second page's record (a store never persisted has a window open
/// to the end, Vardalith's Figure 1, whatever orders the load after it), never the first one's.
/// hawkset reports neither: the wait that reaps the child joins the thread that ended it
/// ([`emu::events::EventKind::ProcessReaped`]), and HawkSet's races are between accesses no
/// create or join orders — as for a thread and `pthread_join`, where it was silent already.
#[test]
fn a_child_that_persists_by_system_call_before_it_exits_is_ordered_before_its_waiting_parent() {
    let src = "proc_msync_handoff.c";
    let (stores, loads) = (marker_lines(src, "/* STORE:"), marker_lines(src, "/* LOAD:"));
    let first = marker_lines(src, "/* FIRST:");
    for pass in ["hawkset", "vardalith"] {
        for seed in 0..2 {
            let (_, r) = run_args("proc_msync_handoff", pass, seed, &[], &["msync"]);
            if pass == "hawkset" {
                assert!(findings(&r).is_empty(), "{pass} seed {seed}: a reaped child's store is reported:\n{r:#}");
            } else {
                assert!(reports_pair_at(&r, src, &stores, &loads), "{pass} seed {seed}:\n{r:#}");
            }
            let firsts = findings(&r)
                .into_iter()
                .filter(|f| get(f, "locations").as_array().unwrap().iter().any(|l| is_at(l, "store", src, first[0])))
                .count();
            assert_eq!(firsts, 0, "{pass} seed {seed}: the msync'ed page's record is reported:\n{r:#}");
            for how in ["msync", "fsync"] {
                let (_, r) = run_args("proc_msync_handoff_fixed", pass, seed, &[], &[how]);
                assert!(findings(&r).is_empty(), "{pass} seed {seed} {how}:\n{r:#}");
            }
        }
    }
}

/// The same between threads: a writer that stores under a mutex and persists with `msync`
/// before it unlocks is done with the record before main takes the lock and reads it (the fixed
/// twin, silent; both passes reported it before, since the call's durability was noticed only
/// at the writer's next fence or exit, after the unlock). `msync` after the unlock is the race,
/// at its lines.
#[test]
fn an_msync_before_the_unlock_ends_the_window_under_the_lock() {
    let src = "pm_msync_unlock.c";
    let (stores, loads) = (marker_lines(src, "/* STORE:"), marker_lines(src, "/* LOAD:"));
    for pass in ["hawkset", "vardalith"] {
        for seed in 0..2 {
            let (_, r) = run("pm_msync_unlock", pass, seed, &[]);
            assert!(reports_pair_at(&r, src, &stores, &loads), "{pass} seed {seed}:\n{r:#}");
            let (_, r) = run("pm_msync_unlock_fixed", pass, seed, &[]);
            assert!(findings(&r).is_empty(), "{pass} seed {seed}:\n{r:#}");
        }
    }
}

/// The same publication in C: a PM record persisted and then published through a C11
/// `_Atomic(struct record *)` global in DRAM (`atomic_store_explicit` release,
/// `atomic_load_explicit` acquire: plain `mov`s at -O2, and at -O0 the pointer spilled to the
/// frame and reloaded), which no line table marks: the machine knows the object from DWARF's
/// `DW_TAG_atomic_type`, and its accesses order the threads. The fixed twin is no race at -O2
/// and -O0, static or against the shared libc; the buggy twin is reported at the record's stores
/// and the reader's load. gcc's `__atomic_store_n`/`__atomic_load_n` on a plain global leave no
/// trace in the binary: that twin (ext_builtin_pub_fixed) is still reported, as documented in
/// docs/analyses/hawkset.md.
#[test]
fn a_c11_atomic_in_dram_publishes_what_was_persisted_before_it() {
    let file = "ext_catomic_pub.c";
    let stores = marker_lines(file, "// REC_STORE:");
    let loads = marker_lines(file, "// REC_LOAD");
    for pass in ["hawkset", "vardalith"] {
        for seed in 0..2 {
            for name in ["ext_catomic_pub", "ext_catomic_pub.dyn", "ext_catomic_pub_o0", "ext_catomic_pub_o0.dyn"] {
                let (_, r) = run(name, pass, seed, &[]);
                assert!(reports_pair_at(&r, file, &stores, &loads), "{pass} on {name} seed {seed}:\n{r:#}");
                let fixed = name.replacen("pub", "pub_fixed", 1).replacen("pub_fixed_o0", "pub_o0_fixed", 1);
                let (_, r) = run(&fixed, pass, seed, &[]);
                assert!(findings(&r).is_empty(), "{pass} on {fixed} seed {seed}:\n{r:#}");
            }
        }
        // What cannot be seen: the builtins on a plain global.
        let (_, r) = run("ext_builtin_pub_fixed", pass, 0, &[]);
        assert!(reports_pair_at(&r, file, &stores, &loads), "{pass} on ext_builtin_pub_fixed:\n{r:#}");
    }
}
