//! The emulator's hot path allocates nothing: memory hooks, the PM device, event dispatch and
//! thread switches reuse what they hold, so the heap allocations of a run do not grow with the
//! instructions it executes. Counted by ferrite's allocator (`ferrite run --host-stats`), not
//! timed.
//!
//! `pm_bench N` runs 4 threads of N PM updates each (a store and a `clwb`, an `sfence` every 8),
//! switching between them at every quantum. Ten times the updates must cost no more allocations
//! beyond a small slack (start-up, symbolising, and the report are the same in both runs), with
//! no pass or with any of the passes that watch PM (and, for hmtrace and oscs, every access).

mod common;

use common::*;

/// Host allocations of `ferrite run --analyses ANALYSES pm_bench OPS`, and its instructions.
fn allocations(analyses: &str, ops: u32) -> (u64, u64) {
    let dir = scratch();
    let stats = dir.path().join("host.json");
    let r = Ferrite::run(&guest("pm_bench"))
        .opts(&["--quiet", "--analyses", analyses, "--host-stats", stats.to_str().unwrap()])
        .args(&[ops.to_string().as_str(), "/mnt/pmem0/bench"])
        .go();
    r.assert_code(0);
    let s = read_json(&stats);
    (s["allocations"].as_u64().unwrap(), s["instructions"].as_u64().unwrap())
}

#[test]
fn allocations_do_not_grow_with_instructions() {
    // The passes keep per-store state only for stores not yet persisted or deduplicated
    // records, and pm_bench persists every store from a few sites: they must not allocate per
    // event either.
    for analyses in ["none", "unpersisted", "hawkset", "vardalith", "hmtrace", "oscs"] {
        let (small, small_insns) = allocations(analyses, 2_000);
        let (large, large_insns) = allocations(analyses, 20_000);
        assert!(large_insns > small_insns + 1_000_000, "{large_insns} vs {small_insns} instructions");
        assert!(
            large <= small + small / 50,
            "--analyses {analyses}: {small} allocations for {small_insns} instructions, {large} for {large_insns}"
        );
    }
}
