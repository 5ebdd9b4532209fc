//! An unpersisted pointer published under a pmemobj mutex (`pmdk_mutex_publish`): the writer
//! stores a node's PMEMoid into the root under `pmemobj_mutex_lock` and persists it only after
//! `pmemobj_mutex_unlock`; the reader follows it under the mutex and records in the root
//! (persisted) that it holds the node. HawkSet (pmemobj locks are locks to it, their internals
//! are not accesses) reports the store and the load at the program's lines; PMRace reports the
//! reader's record as a durable side effect of the unpersisted pointer and confirms it on a crash
//! image; Vardalith reports the marked pair too. The fixed twin persists before unlocking.

mod common;

use common::*;
use serde_json::Value;

const POOL: &str = "/mnt/pmem0/objpool";

fn run(prog: &str, opts: &[&str]) -> (Run, Value) {
    let program = guest(prog);
    let recover = format!("{} {POOL} recover", program.display());
    let mut all = vec!["--report", "r.json", "--recover", recover.as_str()];
    all.extend_from_slice(opts);
    let run = Ferrite::run(&program).opts(&all).args(&[POOL]).go();
    let report = run.json("r.json");
    (run, report)
}

fn at(role: &str, function: &str, file: &str, line: u32) -> (String, String, String, u64) {
    (role.into(), function.into(), file.into(), u64::from(line))
}

#[test]
fn the_guests_print_as_natively() {
    for prog in ["pmdk_mutex_publish", "pmdk_mutex_publish_fixed"] {
        let program = guest(prog);
        let dir = scratch();
        let pool = dir.path().join("objpool").display().to_string();
        let native = native(&program, &[pool.as_str()], &[]);
        native.assert_code(0);
        let emu = Ferrite::run(&program).opts(&["--analyses", "none"]).args(&[POOL]).go();
        assert_same_stdout(&native, &emu);
        emu.assert_code(0);
        assert_eq!(emu.stdout_str(), "node 42, reader saw 42\n");
    }
}

#[test]
fn hawkset_reports_the_store_and_the_load_in_every_schedule() {
    let src = "pmdk_mutex_publish.c";
    let store = marker_line(src, "/* BUG: published under the mutex, persisted after unlocking */");
    let persist = marker_line(src, "/* PERSIST: after the unlock */");
    let load = marker_line(src, "/* LOAD: under the mutex, before the writer's persist */");
    let (r, report) = run("pmdk_mutex_publish", &["--analyses", "hawkset", "--explore", "8"]);
    r.assert_code(66);
    // The labelled pair; other findings may name libpmemobj's own stores (allocation
    // headers written by libpmem and overwritten by the program before the library's fence).
    let found = findings_of(&report, "hawkset");
    let f = found
        .iter()
        .copied()
        .find(|f| {
            f["locations"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["role"] == "store" && l["line"].as_u64() == Some(u64::from(store)))
        })
        .unwrap_or_else(|| panic!("{}", serde_json::to_string_pretty(&report["findings"]).unwrap()));
    assert_eq!(f["kind"].as_str(), Some("persistence-induced-race"));
    let p = places(f);
    assert_eq!(p[0], at("store", "writer", src, store), "{p:?}");
    // The fence is libpmemobj's, inside pmemobj_persist; the location names the program's call.
    assert_eq!(p[1], at("fence", "writer", src, persist), "{p:?}");
    assert!(f["locations"][1]["backtrace"][0]["line"].is_null());
    assert!(p[2..].iter().all(|l| *l == at("load", "reader", src, load)), "{p:?}");
}

#[test]
fn pmrace_reports_the_readers_record_as_a_side_effect_and_recovery_confirms_it() {
    let src = "pmdk_mutex_publish.c";
    let store = marker_line(src, "/* BUG: published under the mutex, persisted after unlocking */");
    let load = marker_line(src, "/* LOAD: under the mutex, before the writer's persist */");
    let effect = marker_line(src, "/* EFFECT: the reader's durable record of the node it holds */");
    let (r, report) = run("pmdk_mutex_publish", &["--analyses", "pmrace"]);
    r.assert_code(66);
    let found = findings_of(&report, "pmrace");
    let all = serde_json::to_string_pretty(&report["findings"]).unwrap();
    // One per load instruction of the 16-byte PMEMoid (the same line).
    assert!(!found.is_empty() && found.len() <= 2, "{all}");
    for f in &found {
        assert_eq!(f["kind"].as_str(), Some("inter-thread-inconsistency"));
        let p = places(f);
        assert_eq!(p[0], at("unpersisted load", "reader", src, load), "{p:?}");
        assert_eq!(p[1], at("source store", "writer", src, store), "{p:?}");
        assert_eq!(p[2], at("durable side effect", "reader", src, effect), "{p:?}");
    }
    // Validated: the recovery (pmemobj_open, then the reader's record against the root's
    // pointer) read the inconsistent image and failed.
    assert!(found.iter().any(|f| places(f).iter().any(|l| l.0 == "recovery read" && l.2 == src)), "{all}");
}

#[test]
fn vardalith_reports_the_marked_pair() {
    let src = "pmdk_mutex_publish.c";
    let store = marker_line(src, "/* BUG: published under the mutex, persisted after unlocking */");
    let load = marker_line(src, "/* LOAD: under the mutex, before the writer's persist */");
    let (_, report) = run("pmdk_mutex_publish", &["--analyses", "vardalith"]);
    let pair = [at("store", "writer", src, store), at("load", "reader", src, load)];
    let found = findings_of(&report, "vardalith");
    assert!(
        found.len() == 1 && places(found[0]) == pair,
        "{}",
        serde_json::to_string_pretty(&report["findings"]).unwrap()
    );
}

/// The twin persists before unlocking: every pass is silent, in every schedule tried.
/// libpmemobj's own run-time state in the pool (the pool header's run-time fields, lock words,
/// chunk footers), which it never persists on purpose, is declared to pmemcheck; hawkset and
/// vardalith honour the declarations (`annotations=on`, docs/pmdk.md).
#[test]
fn the_fixed_twin_is_silent() {
    let (r, report) =
        run("pmdk_mutex_publish_fixed", &["--analyses", "hawkset,vardalith,pmrace,unpersisted", "--explore", "2"]);
    let all = report["findings"].as_array().unwrap();
    assert!(all.is_empty(), "{}", r.describe());
    r.assert_code(0);
}
