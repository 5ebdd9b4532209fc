//! libpmemobj's condition variables and lanes (docs/pmdk.md).
//!
//! `pmemobj_cond_wait(pop, cond, mutex)` releases the PMEMmutex at entry and reacquires it at
//! return, `pmemobj_cond_signal`/`_broadcast` post to the PMEMcond, as pthread's do; libpmemobj's
//! own accesses inside them (the pthread objects living in PM) are left out like those of its
//! locks. `pmdk_cond` (a producer/consumer on a PM queue, persisted inside its critical
//! sections) is therefore silent, and `pmdk_cond_publish` (a value persisted only after a wait
//! that released the mutex) is reported by hawkset at the program's lines.
//!
//! Lanes: every transaction and atomic allocation holds one of the pool's lanes, whose logs the
//! next holder reuses. With `PMEMOBJ_NLANES=1` the two workers of `pmdk_cond_lanes` share lane 0,
//! and the accesses to its logs are ordered by the lane: with lanes honoured (the default),
//! hawkset and vardalith report a strict subset of what they report with `lanes=off`.

mod common;

use std::collections::BTreeSet;

use common::*;
use serde_json::Value;

const POOL: &str = "/mnt/pmem0/objpool";

fn run(prog: &str, opts: &[&str], env: &[(&str, &str)]) -> (Run, Value) {
    let mut all = vec!["--report", "r.json"];
    all.extend_from_slice(opts);
    let mut f = Ferrite::run(&guest(prog)).opts(&all).args(&[POOL]);
    for (k, v) in env {
        f = f.env(k, v);
    }
    let run = f.go();
    let report = run.json("r.json");
    (run, report)
}

fn pretty(v: &[&Value]) -> String {
    serde_json::to_string_pretty(v).unwrap()
}

/// Whether some location of the finding is the program's own code (a source line).
fn own(f: &Value) -> bool {
    f["locations"].as_array().unwrap().iter().any(|l| l["backtrace"][0]["line"].is_u64())
}

#[test]
fn the_guests_print_as_natively() {
    for (prog, out) in [
        ("pmdk_cond", "consumed 50, sum 1275\n"),
        ("pmdk_cond_publish", "value 42, consumer saw 42\n"),
        ("pmdk_cond_lanes", "counts 20 20, done 2\n"),
    ] {
        let program = guest(prog);
        let dir = scratch();
        let pool = dir.path().join("objpool").display().to_string();
        let native = native(&program, &[pool.as_str()], &[]);
        native.assert_code(0);
        let (emu, _) = run(prog, &["--analyses", "none"], &[]);
        assert_same_stdout(&native, &emu);
        emu.assert_code(0);
        assert_eq!(emu.stdout_str(), out);
    }
}

/// The producer/consumer is silent. OSCS, like for pthread's condition variables, reports the
/// hand-over of a slot between two critical sections ordered only by the wait (its documented
/// false positive, docs/analyses/oscs.md); `condflag=on` recognises the slots as condition flags
/// now that the pmemobj calls are condition waits and signals.
#[test]
fn the_producer_consumer_is_silent() {
    for seed in ["0", "1"] {
        let (r, report) = run(
            "pmdk_cond",
            &["--analyses", "hawkset,vardalith,hmtrace,pmrace,unpersisted,oscs:condflag=on", "--seed", seed],
            &[],
        );
        let all: Vec<&Value> = report["findings"].as_array().unwrap().iter().collect();
        assert!(all.is_empty(), "seed {seed}: {}", pretty(&all));
        r.assert_code(0);
    }
}

/// The value is stored under the mutex and persisted after a `pmemobj_cond_wait` that released
/// it: hawkset's timed lockset has no lock at the store's window end, and the consumer's load
/// under the mutex races with it, in every schedule.
#[test]
fn hawkset_reports_a_value_persisted_after_a_condition_wait() {
    let src = "pmdk_cond_publish.c";
    let store = marker_line(src, "/* BUG: published, then the wait releases the mutex before the persist */");
    let persist = marker_line(src, "/* PERSIST: after the wait */");
    let load = marker_line(src, "/* LOAD: while the producer waits, before its persist */");
    let (r, report) = run("pmdk_cond_publish", &["--analyses", "hawkset", "--explore", "4"], &[]);
    r.assert_code(66);
    let found = findings_of(&report, "hawkset");
    assert_eq!(found.len(), 1, "{}", pretty(&found));
    let p = places(found[0]);
    let at = |role: &str, function: &str, line: u32| {
        (role.to_string(), function.to_string(), src.to_string(), u64::from(line))
    };
    assert_eq!(p[0], at("store", "producer", store), "{p:?}");
    // The fence is libpmemobj's, inside pmemobj_persist; the location names the program's call.
    assert_eq!(p[1], at("fence", "producer", persist), "{p:?}");
    assert!(p[2..].iter().all(|l| *l == at("load", "consumer", load)), "{p:?}");
}

/// The (store site, load site) pairs of each finding, by PC.
fn pairs(found: &[&Value]) -> BTreeSet<Vec<u64>> {
    found
        .iter()
        .map(|f| f["locations"].as_array().unwrap().iter().map(|l| l["pc"].as_u64().unwrap()).collect())
        .collect()
}

/// Two workers in transactions and atomic allocations share lane 0 (`PMEMOBJ_NLANES=1`): the
/// lanes' logs are written by one and read by the other. Honouring the lanes removes what the
/// detectors reported on that memory, and nothing else; no finding involves the program's own
/// accesses. The passes count the lane holds they saw.
#[test]
fn lanes_order_their_logs_between_threads() {
    let env = [("PMEMOBJ_NLANES", "1")];
    for pass in ["vardalith", "hawkset"] {
        let (_, on) = run("pmdk_cond_lanes", &["--analyses", pass], &env);
        let (_, off) = run("pmdk_cond_lanes", &["--analyses", &format!("{pass}:lanes=off")], &env);
        let (on_f, off_f) = (findings_of(&on, pass), findings_of(&off, pass));
        assert!(!on_f.iter().chain(&off_f).any(|f| own(f)), "{}", pretty(&on_f));
        let (on_p, off_p) = (pairs(&on_f), pairs(&off_f));
        assert!(on_p.is_subset(&off_p) && on_p.len() < off_p.len(), "{pass}: with lanes {on_p:x?}, without {off_p:x?}");
        // 2 workers x 20 rounds x (a transaction, an allocation, a free), and the root object.
        let holds = on["stats"][format!("{pass}.lane_holds")].as_u64().unwrap_or(0);
        assert!(holds >= 120, "{pass}: {} lane holds", holds);
    }
    let (_, on) = run("pmdk_cond_lanes", &["--analyses", "vardalith"], &env);
    assert!(on["stats"]["vardalith.lane_ordered"].as_u64().unwrap_or(0) > 0, "{}", on["stats"]);
}

/// libpmemobj declares to pmemcheck the pool state it never persists on purpose (the pool
/// header's run-time fields and lock words withdrawn with `REMOVE_PMEM_MAPPING`, chunk footers
/// declared clean with `SET_CLEAN`). Without the declarations (`annotations=off`), hawkset and
/// vardalith report races on that state between library code only (no store of the program's
/// own); honouring them (the default) they are silent, and count the accesses they left out.
#[test]
fn pmdk_declarations_are_what_silences_its_run_time_state() {
    let env = [("PMEMOBJ_NLANES", "1")];
    for pass in ["hawkset", "vardalith"] {
        let (_, off) = run("pmdk_cond_lanes", &["--analyses", &format!("{pass}:annotations=off")], &env);
        let found = findings_of(&off, pass);
        assert!(!found.is_empty() && !found.iter().any(|f| own(f)), "{pass}: {}", pretty(&found));
        let (r, on) = run("pmdk_cond_lanes", &["--analyses", pass], &env);
        assert!(findings_of(&on, pass).is_empty(), "{pass}: {}", r.describe());
        assert!(on["stats"][format!("{pass}.withdrawn_accesses")].as_u64().unwrap_or(0) > 0, "{}", on["stats"]);
    }
}
