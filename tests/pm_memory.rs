//! The PM device's host memory follows the lines with undurable data, not the pool, and a line
//! with one unpersisted store costs no heap allocation of its own (issue 18). Counted by
//! ferrite's allocator (`ferrite run --host-stats`), so the test is exact and does not depend on
//! what else the machine runs; bytes per line are measured in docs/performance.md ("Memory").
//!
//! `pm_touch_lines POOL SIZE STRIDE MODE` stores one word into every STRIDE-th line of a
//! SIZE-byte PM file. The device used to give every unpersisted line two vectors (its version
//! log and its latest stores): 64x the lines cost 2 allocations per extra line. Compact records
//! live in chunks of 4096, so the same runs now differ by a few chunk and table allocations.

mod common;

use common::*;

/// Host allocations of `ferrite run --analyses none pm_touch_lines POOL SIZE STRIDE MODE`, and
/// the guest's output.
fn allocations(size: &str, stride: &str, mode: &str) -> (u64, String) {
    let dir = scratch();
    let stats = dir.path().join("host.json");
    let r = Ferrite::run(&guest("pm_touch_lines"))
        .opts(&["--quiet", "--analyses", "none", "--host-stats", stats.to_str().unwrap()])
        .args(&["/mnt/pmem0/touch", size, stride, mode])
        .go();
    r.assert_code(0);
    (read_json(&stats)["allocations"].as_u64().unwrap(), r.stdout_str())
}

#[test]
fn touched_lines_cost_no_allocation_each() {
    for mode in ["store", "persist", "flush"] {
        // 1,024 lines, then 65,536 lines.
        let (small, out_small) = allocations("64K", "1", mode);
        let (large, out_large) = allocations("4M", "1", mode);
        assert!(out_small.contains("touched 1024 lines"), "{out_small}");
        assert!(out_large.contains("touched 65536 lines"), "{out_large}");
        let extra = large.saturating_sub(small);
        assert!(extra < 65_536 / 100, "{mode}: {small} allocations for 1,024 lines, {large} for 65,536");
    }
}

#[test]
fn pool_size_costs_nothing() {
    // One line of a 1 GiB pool against one line of a 64 KiB pool: the untouched lines are free.
    let (small, _) = allocations("64K", "100000000", "store");
    let (large, out) = allocations("1G", "100000000", "store");
    assert!(out.contains("touched 1 lines"), "{out}");
    assert!(large <= small + 50, "{small} allocations with a 64 KiB pool, {large} with 1 GiB");
}
