//! A PMDK object placed in memory the allocator took back (`pmdk_realloc_init`): the writer
//! frees the node the reader read, allocates a new one of the size (libpmemobj hands out the
//! chunks just freed) and initialises it. The new node's bytes were shared in their first life;
//! the new node is fresh all the same (`fresh_allocs`, on by default): its initialisation,
//! persisted before the root points at it (the fixed twin), is removed by the IRH, and it is
//! reported when the node is published first (the buggy twin). P-CLHT's resizes allocate tables
//! and buckets where freed ones were.

mod common;

use common::*;
use serde_json::Value;

const POOL: &str = "/mnt/pmem0/reallocpool";

fn run(prog: &str, analyses: &str) -> (Run, Value) {
    let run = Ferrite::run(&guest(prog)).opts(&["--report", "r.json", "--analyses", analyses]).args(&[POOL]).go();
    let report = run.json("r.json");
    (run, report)
}

/// Whether `analysis` reports a store at `store` of `src` (with a load at `load`, if given).
fn reports(report: &Value, analysis: &str, src: &str, store: u32, load: Option<u32>) -> bool {
    findings_of(report, analysis).iter().any(|f| {
        let p = places(f);
        p.iter().any(|l| l.0 == "store" && l.2 == src && l.3 == u64::from(store))
            && load.is_none_or(|load| p.iter().any(|l| l.0 == "load" && l.2 == src && l.3 == u64::from(load)))
    })
}

#[test]
fn the_guests_reuse_the_freed_node_as_natively() {
    for prog in ["pmdk_realloc_init", "pmdk_realloc_init_fixed"] {
        let program = guest(prog);
        let dir = scratch();
        let pool = dir.path().join("reallocpool").display().to_string();
        let native = native(&program, &[pool.as_str()], &[]);
        native.assert_code(0);
        let emu = Ferrite::run(&program).opts(&["--analyses", "none"]).args(&[POOL]).go();
        assert_same_stdout(&native, &emu);
        emu.assert_code(0);
        // The allocator placed the new node where the old one was: the case this tests.
        assert_eq!(emu.stdout_str(), "reused, reader saw 2\n");
    }
}

#[test]
fn a_node_published_before_its_value_is_durable_is_reported() {
    let src = "pmdk_realloc_init.c";
    let store = marker_line(src, "/* BUG: the new node's value, persisted only after the node is published */");
    let load = marker_line(src, "/* LOAD: the new node's value */");
    for analyses in ["hawkset", "vardalith"] {
        let (r, report) = run("pmdk_realloc_init", analyses);
        r.assert_code(66);
        assert!(
            reports(&report, analyses, src, store, Some(load)),
            "{analyses}: {}",
            serde_json::to_string_pretty(&report["findings"]).unwrap()
        );
    }
}

#[test]
fn the_fresh_nodes_initialisation_is_not_taken_for_shared_data() {
    let src = "pmdk_realloc_init_fixed.c";
    let init = marker_line(src, "/* FIXED: durable before it is published */") - 1;
    let (_, report) = run("pmdk_realloc_init_fixed", "hawkset,vardalith");
    for a in ["hawkset", "vardalith"] {
        assert!(
            !reports(&report, a, src, init, None),
            "{a}: {}",
            serde_json::to_string_pretty(&report["findings"]).unwrap()
        );
    }
    // libpmemobj's own stores inside `pmemobj_alloc` into the reused chunks, persisted before
    // the call returns, are the allocator's initialisation too: nothing is left to report.
    for a in ["hawkset", "vardalith"] {
        assert!(
            findings_of(&report, a).is_empty(),
            "{a}: {}",
            serde_json::to_string_pretty(&report["findings"]).unwrap()
        );
    }
    // Without it (and without the free, which ends the old node's history too: `frees`), the
    // reader's reads of the old node publish the new one's bytes, and the initialisation races
    // with the reader's load although the root publishes it after its persist, under the mutex.
    let (_, report) = run("pmdk_realloc_init_fixed", "hawkset:fresh_allocs=off:frees=off");
    assert!(
        reports(&report, "hawkset", src, init, None),
        "{}",
        serde_json::to_string_pretty(&report["findings"]).unwrap()
    );
}
